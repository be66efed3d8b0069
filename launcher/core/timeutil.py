"""Small time helpers for the commands that follow jobs."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import overload

from launcher.core.durations import seconds
from launcher.core.errors import UsageError


def parse_since(text: str, flag: str = "--since") -> float:
    """Seconds in `10m`, `1h30m`, `2d` or a plain number of seconds."""
    try:
        return seconds(text)
    except ValueError as exc:
        raise UsageError(f"{flag} {text!r}: {exc}") from None


@overload
def epoch(value: datetime) -> float: ...
@overload
def epoch(value: datetime | None) -> float | None: ...
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
