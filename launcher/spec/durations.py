"""Duration strings such as `1d`, `12h30m` or `3600` (seconds), for max_run and max_wait."""
from __future__ import annotations

import re

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+)([dhms])")
_WHOLE = re.compile(r"^(?:\d+[dhms])+$")


def parse_duration(value: int | str) -> int:
    """Seconds in `value`; raises ValueError with the accepted forms when it is not a duration."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 1d, 12h, 90m or a number of seconds")
    if isinstance(value, int):
        seconds = value
    else:
        text = value.strip().replace(" ", "")
        if text.isdigit():
            seconds = int(text)
        elif _WHOLE.match(text):
            seconds = sum(int(n) * _UNITS[u] for n, u in _PART.findall(text))
        else:
            raise ValueError(f"{value!r} is not a duration; use e.g. 1d, 12h, 90m, 1h30m or seconds")
    if seconds <= 0:
        raise ValueError("a duration must be positive")
    return seconds


def format_duration(seconds: int) -> str:
    parts = []
    for unit, size in _UNITS.items():
        n, seconds = divmod(seconds, size)
        if n:
            parts.append(f"{n}{unit}")
    return "".join(parts) or "0s"
