"""Duration strings such as `1d`, `12h30m`, `10m` or a number of seconds.

One parser serves the spec (max_run, max_wait: whole seconds) and the commands that look back in
time (`--since`); it lives outside the spec package so those commands do not load pydantic.
"""
from __future__ import annotations

import math
import re

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_NUMBER = r"\d+(?:\.\d+)?"
_PART = re.compile(rf"({_NUMBER})([dhms])")
_WHOLE = re.compile(rf"^(?:{_NUMBER}[dhms])+$")
FORMS = "use e.g. 1d, 12h, 90m, 1h30m or a number of seconds"
# Seconds between two polls of a job's status or log, for every command and API that follows a job (`wait`,
# `logs`, `submit --wait`, a sweep's queue) unless told otherwise: one default, so no command waits six times
# longer than another to see the same end. A poll is one Search per 100 jobs (`wait`), or one log read.
POLL_S = 5.0


def seconds(value: int | float | str) -> float:
    """Seconds in `value`; ValueError when it is not a positive duration."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a duration; {FORMS}")
    if isinstance(value, (int, float)):
        total = float(value)
    else:
        text = value.strip().replace(" ", "")
        if re.fullmatch(_NUMBER, text):
            total = float(text)
        elif _WHOLE.match(text):
            total = sum(float(n) * _UNITS[u] for n, u in _PART.findall(text))
        else:
            raise ValueError(f"{value!r} is not a duration; {FORMS}")
    if total <= 0:
        raise ValueError("a duration must be positive")
    if not math.isfinite(total):
        raise ValueError("a duration must be finite")
    return total


def parse_duration(value: int | str) -> int:
    """Whole seconds, as SageMaker's max_run and max_wait take them."""
    total = seconds(value)
    if total != int(total):
        raise ValueError(f"{value!r} is not a whole number of seconds")
    return int(total)



def spoken(seconds: float) -> str:
    """A duration as people say it: 45 s, 12m 5s, 6h 55m, 3d 4h."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s}s"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h}h {m}m"
    d, h = divmod(h, 24)
    return f"{d:,}d {h}h"


def compact(seconds: int) -> str:
    """Whole seconds as a spec writes them and parse_duration reads them back: 1d6h15m, 45m, 90s."""
    s = int(seconds)
    out = ""
    for unit in ("d", "h", "m", "s"):
        n, s = divmod(s, _UNITS[unit])
        if n:
            out += f"{n}{unit}"
    return out or "0s"
