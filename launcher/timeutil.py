"""Small time helpers for the commands that follow jobs (kept apart from the spec, which loads pydantic)."""
from __future__ import annotations

import re
from datetime import datetime, timezone

from launcher.errors import UsageError

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_SINCE = re.compile(r"^(?:\d+(?:\.\d+)?[dhms])+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")


def parse_since(text: str, flag: str = "--since") -> float:
    """Seconds in `10m`, `1h30m`, `2d` or a plain number of seconds."""
    value = text.strip().replace(" ", "")
    try:
        seconds = float(value) if _SINCE.match(value) is None else sum(
            float(n) * _UNITS[u] for n, u in _PART.findall(value))
    except ValueError:
        raise UsageError(f"{flag} {text!r}: use a duration such as 30s, 10m, 1h or 2d") from None
    if seconds <= 0:
        raise UsageError(f"{flag} {text!r}: the duration must be positive")
    return seconds


def epoch(value: datetime | None) -> float | None:
    """Seconds since the epoch of a boto3 datetime (naive values are UTC)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


def iso(seconds: float) -> str:
    """An ISO 8601 UTC timestamp with milliseconds, for json output."""
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def clock_time(value: datetime | float | None) -> str:
    """`2026-11-30 09:15:07` in UTC, for people."""
    if value is None:
        return "-"
    seconds = value if isinstance(value, (int, float)) else epoch(value)
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
