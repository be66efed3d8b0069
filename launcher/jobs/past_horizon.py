"""The count of a job's lines that reached CloudWatch later than the late-line horizon (not printed).

The end-of-job check (launcher.jobs.late_check) reads arrivals in windows; the lines later than the
horizon are counted by one Logs Insights aggregate per stretch of arrivals the check has reached, started
beside its last windows rather than after them, and read as soon as each is done. Stretches never overlap,
so the counts add up; the latest lag is the largest of theirs. A count that fails or runs out of time makes
the total unknown, and nothing is said rather than too few.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from launcher.jobs.logrecords import NoteKind, Notes, Stats
from launcher.jobs.ratelimit import Unsupported

LAG = "toMillis(@ingestionTime) - toMillis(@timestamp)"


class PastHorizonCount:
    """Aggregate queries over stretches of arrivals (lo, hi]: how many lines arrived more than `horizon_ms` late."""

    def __init__(self, job: str, stream_regex: str, horizon_ms: int, since_ms: int | None,
                 start_query: Callable[[int, int, str, int], str | None],
                 results: Callable[[str], dict[str, Any]], clock: Callable[[], float]):
        self.job, self._stream, self._horizon, self._since = job, stream_regex, horizon_ms, since_ms
        self._start_query, self._results, self._clock = start_query, results, clock
        self.counted_to: int | None = None  # arrivals up to this are in a count started
        self._pending: list[tuple[str, float, float]] = []  # (query id, when started, when to read it next)
        self.count, self.worst_s = 0, 0.0
        self.unknown = False  # a count failed or was given up: the total is not known

    def start(self, first: int, upper: int, job_start_ms: int | None) -> None:
        """Count the arrivals from the last count's end (or `first`) up to `upper`, timestamps from the job's start."""
        lo, hi = self.counted_to if self.counted_to is not None else first, upper
        ts_hi = hi - self._horizon
        ts_lo = job_start_ms if job_start_ms is not None else first - self._horizon
        if self._since is not None:
            ts_lo = max(ts_lo, self._since)
        if hi <= lo or ts_hi <= ts_lo:
            return  # counted already, or no line of the job can have arrived that late yet
        query = (f"filter @logStream like /^{self._stream}/ and {LAG} > {self._horizon}"
                 f" and toMillis(@ingestionTime) > {lo} and toMillis(@ingestionTime) <= {hi}"
                 f" | stats count(*) as n, max({LAG}) as worst")
        try:
            query_id = self._start_query(ts_lo, ts_hi, query, 1)
        except Unsupported:
            self.unknown = True
            return
        if query_id is None:
            return  # too many queries running in the account: the next count takes this stretch too
        self.counted_to = hi
        if query_id:  # "" when there is no log group: nothing to count
            self._pending.append((query_id, self._clock(), 0.0))

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def read(self, wait_s: float) -> None:
        """Read each count started at least `wait_s` ago (and not read in the last `wait_s`) once; keep those
        still running."""
        keep = []
        for query_id, started, due in self._pending:
            now = self._clock()
            if now - started < wait_s or now < due:
                keep.append((query_id, started, due))
                continue
            try:
                reply = self._results(query_id)
            except Unsupported:
                self.unknown = True
                break
            status = reply.get("status")
            if status in ("Running", "Scheduled"):
                keep.append((query_id, started, self._clock() + wait_s))
            elif status == "Complete":
                self._add(reply.get("results") or [])
            else:
                self.unknown = True
                break
        self._pending = [] if self.unknown else keep

    def give_up_older_than(self, seconds: float) -> None:
        if any(self._clock() - started > seconds for _, started, _ in self._pending):
            self.unknown, self._pending = True, []

    def _add(self, results: list[Any]) -> None:
        values: dict[Any, Any] = {}
        for row in results:
            values.update({f.get("field"): f.get("value") for f in row if isinstance(f, dict)})
        try:
            count, worst = int(float(values.get("n") or 0)), float(values.get("worst") or 0) / 1000
        except (TypeError, ValueError):
            self.unknown = True
            return
        self.count += count
        self.worst_s = max(self.worst_s, worst) if count else self.worst_s

    def say(self, stats: Stats, notes: Notes) -> None:
        """Put the total in `stats` and warn about it, once every count is in (nothing when one is missing)."""
        if self.unknown or self._pending or not self.count:
            return
        stats.past_horizon += self.count
        stats.past_horizon_max_s = max(stats.past_horizon_max_s, self.worst_s)
        horizon_s = self._horizon / 1000
        notes.say(NoteKind.PAST_HORIZON, f"warning: {self.count} line(s) of {self.job} reached CloudWatch more than "
                  f"{horizon_s:.0f}s after their timestamps (up to {self.worst_s:.0f}s) and were not printed; a longer "
                  "late-line horizon prints them", job=self.job, count=self.count, worst_s=self.worst_s,
                  horizon_s=horizon_s, suggest_s=60.0 * math.ceil((self.worst_s + 1) / 60))
