"""What the log follower hands its caller: lines, status changes and notes as typed records, and its counters.

The follower never prints. A caller (the CLI's printer, a pipeline, a test) gets these records through
callbacks and decides how they look; every string in them from AWS has passed through `sanitize.clean`.
The shared units of the reader's memory (BUCKET_MS), lateness (HORIZON_S) and polling (POLL_JITTER) live here
too, so the fresh read, the late check and the poll loop agree on them without importing each other.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from types import MappingProxyType
from typing import Any

from launcher.core.sanitize import clean
from launcher.core.timeutil import epoch

BUCKET_MS = 2_000  # ids and keys are remembered, and forgotten, by 2 s of event timestamp
HORIZON_S = 300.0  # a line that reaches CloudWatch up to this long after its own timestamp prints (later: counted)
HINT_EVERY_S = 30.0  # a note of one kind goes out at most this often (unless it must)
POLL_JITTER = 0.1  # polls start `interval` x (1 +- this) apart, so many followers do not poll in step


@dataclass(frozen=True, slots=True)
class LogLine:
    """One log line of a job, every string already passed through `sanitize.clean` (safe to print)."""

    timestamp: int  # milliseconds since the epoch, as CloudWatch keeps them
    host: int | None  # N of algo-N; None for a stream that does not follow SageMaker's naming
    stream: str
    message: str
    event_id: str  # CloudWatch's eventId; for a late line found by Logs Insights, its @ptr
    late: bool = False  # printed after a line with a newer timestamp (it reached CloudWatch late)

    @property
    def label(self) -> str:
        return f"algo-{self.host}" if self.host is not None else self.stream.split("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class StatusChange:
    """A SecondaryStatus transition of the job, seen once (strings sanitised)."""

    status: str
    message: str
    time: float | None  # its StartTime in seconds since the epoch; None when AWS did not say

    @classmethod
    def from_transition(cls, transition: Mapping[str, Any]) -> StatusChange:
        start = transition.get("StartTime")
        when = epoch(start) if isinstance(start, datetime) else None
        if isinstance(start, (int, float)):
            when = float(start)
        return cls(clean(transition["Status"]), clean(transition.get("StatusMessage", "")), when)


class NoteKind(str, Enum):
    """What a note is about, so a caller can word, count or silence one kind."""

    THROTTLED = "throttled"  # CloudWatch refused a read for the quota; backing off
    RETRIED = "retried"  # botocore retried reads itself; polling more slowly
    READ_FAILED = "read_failed"  # a server error or a dropped connection; retrying
    INSIGHTS_BUSY = "insights_busy"  # the account runs its 30 Logs Insights queries already
    INSIGHTS_MISSING = "insights_missing"  # late lines are found by re-reading instead
    QUERY_ENDED = "query_ended"  # a Logs Insights query failed; its slice is re-read
    CHECK_BEHIND = "check_behind"  # the late check cannot keep up; very late lines may be missed
    FINAL_REREAD = "final_reread"  # the end-of-job check re-reads the last minutes without Insights
    FINAL_UNCHECKED = "final_unchecked"  # the end-of-job check stopped at its drain timeout before it was done
    FINAL_PROGRESS = "final_progress"  # the end-of-job check is still at work (late lines still arriving)
    PAST_HORIZON = "past_horizon"  # lines later than the horizon, not printed: how many, how late
    ARRIVING_AFTER_END = "arriving_after_end"  # late lines kept arriving after the job ended; later ones will not print
    OUT_OF_ORDER = "out_of_order"  # late lines came out after newer ones
    NO_SUCH_HOST = "no_such_host"  # a host asked for that the job does not have
    NO_LINES_YET = "no_lines_yet"  # the job has written nothing yet
    WAITING = "waiting"  # an AWS call has had no answer for a few seconds
    QUEUED = "queued"  # the job waits in an AWS Batch queue (or between Batch's attempts)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class LogNote:
    """Something the follower wants said while it reads; `args` are the figures `message` was made of."""

    kind: NoteKind
    message: str
    args: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    def __str__(self) -> str:
        return self.message


def waiting_notes(on_note: Callable[[LogNote], None]) -> Callable[[str], None]:
    """A `Clients.notify` that hands the client factory's "waiting for ..." notices on as WAITING notes."""
    return lambda message: on_note(LogNote(NoteKind.WAITING, message))


class Notes:
    """Hands notes to the caller's callback, each kind at most once per HINT_EVERY_S unless it must go out."""

    def __init__(self, on_note: Callable[[LogNote], None], clock: Callable[[], float] = time.time):
        self._on_note, self._clock = on_note, clock
        self._last: dict[NoteKind, float] = {}

    def say(self, kind: NoteKind, message: str, **args: Any) -> None:
        self._on_note(LogNote(kind, message, MappingProxyType(args)))

    def hint(self, kind: NoteKind, message: str, force: bool = False, **args: Any) -> bool:
        """Say `message` unless a note of this kind went out in the last 30 s; True if said."""
        now = self._clock()
        if force or now - self._last.get(kind, float("-inf")) >= HINT_EVERY_S:
            self._last[kind] = now
            self.say(kind, message, **args)
            return True
        return False


class LateCheckMode(str, Enum):
    """How lines that reached CloudWatch late are found."""

    INSIGHTS = "insights"  # one Logs Insights query per slice returns exactly the late lines
    SWEEP = "sweep"  # Insights is missing or refused: each slice is read again with FilterLogEvents

    def __str__(self) -> str:
        return self.value


@dataclass
class Stats:
    """What one follow did: calls, events and lines, for the tests, the bench and a curious caller."""

    polls: int = 0
    calls: int = 0  # FilterLogEvents calls that succeeded (pages), fresh and sweep
    sweep_calls: int = 0  # of which the fallback late-line sweep's
    query_calls: int = 0  # Logs Insights calls (StartQuery, GetQueryResults) that succeeded
    queries: int = 0  # Logs Insights queries started
    retried: int = 0  # botocore's own retries inside those calls
    throttled: int = 0  # calls that still failed with throttling and were backed off here
    events: int = 0  # events received by FilterLogEvents, before dedup and filters (fetched)
    late_rows: int = 0  # rows received from Logs Insights (fetched too)
    duplicates: int = 0  # received again (overlap, late check), dropped
    foreign: int = 0  # from a stream outside `<job>/` (prefix collisions; moto ignores the prefix)
    printed: int = 0
    late: int = 0  # printed out of timestamp order: they reached CloudWatch after newer lines
    max_late_s: float = 0.0  # the longest ingestion lag seen (ingestionTime - timestamp)
    max_seen: int = 0  # the most eventIds plus late-line keys the dedup memory held
    skipped_s: float = 0.0  # seconds of timestamps the late check gave up on (reads too slow for the volume)
    unchecked_s: float = 0.0  # seconds (of arrivals, or of timestamps for a sweep) the end-of-job check left
    unchecked_slices: int = 0  # the slices of those it left unchecked (a drain timeout passed)
    past_horizon: int = 0  # lines that reached CloudWatch later than the horizon (counted, not printed)
    past_horizon_max_s: float = 0.0  # the latest of them
    checked_until: float | None = None  # every late line that reached CloudWatch by then (its clock, epoch s) printed
    late_after_end: int = 0  # late lines printed that reached CloudWatch after the job ended
    late_check: LateCheckMode = LateCheckMode.INSIGHTS  # SWEEP where Logs Insights is missing

    @property
    def fetched(self) -> int:
        return self.events + self.late_rows
