"""One job's log lines, a poll at a time: the fresh read, then the late check's share, in one rate budget.

The parts each live alone: the bucket and backoff (launcher.jobs.ratelimit), the fresh read and its
eventId dedup (launcher.jobs.fresh_read), the late-line check (launcher.jobs.late_check), and how events
become ordered, filtered lines (launcher.jobs.shaping). `LogReader` wires them for one job and slows the
polls while CloudWatch throttles. Each event is read about 1.4 times in all, instead of re-reading
everything once more. A poll's late check may spend what the fresh read left of the poll's calls at
the rate (`rate x interval`), so a burst of late lines is worked through while the job still runs.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from launcher.jobs.fresh_read import FreshRead, LateKeys
from launcher.jobs.late_check import MARGIN_MS, LateCheck
from launcher.jobs.logrecords import HORIZON_S, LateCheckMode, LogLine, LogNote, Notes, Stats
from launcher.jobs.ratelimit import LogsCalls, RateLimiter
from launcher.jobs.shaping import Shaper


class LogReader:
    """One job's log events, a poll at a time: a fresh read, a check for late lines, dedup, filters.

    The fresh read covers lines at most `overlap_s` late; the late check (`late_after_s`, default the
    overlap) finds the rest up to `horizon_s` late as they arrive, and counts those later still at the
    end. `drain_timeout_s` bounds the end-of-job check (None: until done). Notes go to `on_note`.
    """

    def __init__(self, job: str, client: Any, limiter: RateLimiter, *, since_ms: int | None = None,
                 hosts: Iterable[int] | None = None, grep: str | None = None, overlap_s: float = 2.0,
                 late_after_s: float | None = None, horizon_s: float = HORIZON_S, sweep_span_s: float = 30.0,
                 poll_s: float = 5.0, max_pages: int = 50, page_size: int | None = None,
                 max_backoffs: int = 8, insights: bool = True, drain_timeout_s: float | None = None,
                 on_note: Callable[[LogNote], None] = lambda _n: None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None):
        self.job, self.limiter = job, limiter
        overlap = int(overlap_s * 1000)
        late_ms = overlap if late_after_s is None else int(late_after_s * 1000)
        self._horizon = int(horizon_s * 1000)
        self._clock = clock
        self._poll_s = poll_s
        self.stats = Stats(late_check=LateCheckMode.INSIGHTS if insights else LateCheckMode.SWEEP)
        self.notes = Notes(on_note, clock)
        self.calls = LogsCalls(job, client, limiter, self.stats, self.notes, max_backoffs=max_backoffs, clock=clock,
                               sleep=sleep, rng=rng)
        shaper = Shaper(job, self.stats, self.notes, hosts=hosts, grep=grep, overlap_ms=overlap)
        late_keys = LateKeys()
        self.fresh = FreshRead(job + "/", self.calls, shaper, self.stats, late_keys, since_ms=since_ms,
                               overlap_ms=overlap, late_ms=late_ms, max_pages=max_pages, page_size=page_size)
        self.late = LateCheck(job, self.calls, shaper, self.stats, self.notes, late_keys, since_ms=since_ms,
                              late_ms=late_ms, horizon_ms=self._horizon, sweep_span_ms=int(sweep_span_s * 1000),
                              poll_s=poll_s, insights=insights, drain_timeout_s=drain_timeout_s,
                              page_size=page_size, cw_now=self._cw_now, clock=clock, sleep=sleep)
        self.slowdown = 1.0  # poll interval multiplier, raised while throttled

    def _cw_now(self) -> int:
        """CloudWatch's clock now, less a margin: arrivals up to it can be queried."""
        return int(self._clock() * 1000) - self.fresh.ahead_ms - MARGIN_MS

    @property
    def page_size(self) -> int | None:
        """Events a FilterLogEvents page may hold (None: CloudWatch's own limit), for both reads."""
        return self.fresh.page_size

    @page_size.setter
    def page_size(self, value: int | None) -> None:
        self.fresh.page_size = self.late.page_size = value

    @property
    def max_pages(self) -> int:
        """Pages a poll's fresh read takes before it leaves the rest for the next poll."""
        return self.fresh.max_pages

    @max_pages.setter
    def max_pages(self, value: int) -> None:
        self.fresh.max_pages = value

    def poll(self, drain: bool = False) -> list[LogLine]:
        """New lines since the last poll, in order; `drain` pages to the end however long."""
        return [line for page in self.pages(drain) for line in page]

    def pages(self, drain: bool = False) -> Iterator[list[LogLine]]:
        """One poll, a page of ordered lines at a time (memory stays that of a page, whatever the volume)."""
        self.stats.polls += 1
        now_ms = int(self._clock() * 1000)
        self.late.begin(now_ms)
        before = self.stats.throttled + self.stats.retried
        pages = yield from self.fresh.read(drain)
        if self.fresh.first_sent is not None:
            self.late.start_at(self.fresh.first_sent - self.fresh.ahead_ms - MARGIN_MS)
        if drain and self.stats.polls == 1:
            return  # what exists now, read once: nothing can have arrived late since
        # the calls the rate allows in a poll, and the few the bucket holds at its start
        budget = max(pages + 2, int(self.limiter.rate * self._poll_s + self.limiter.burst) - pages)
        yield from self.late.check(now_ms, self.fresh.start, budget, wait=not drain)
        if self.stats.throttled + self.stats.retried > before:
            self.slowdown = min(self.slowdown * 2, 8.0)
        else:
            self.slowdown = max(1.0, self.slowdown / 2)

    def ended(self, job_end_ms: int) -> None:
        """The job ended then: late lines found that arrived later are counted (`stats.late_after_end`)."""
        self.late.ended(job_end_ms)

    def finish_pages(self, job_start_ms: int | None = None) -> Iterator[list[LogLine]]:
        """After the job has ended (and a draining poll): check every arrival not yet checked, then count the
        lines later than the horizon (from `job_start_ms`, the job's start).

        Keeps going while late lines arrive, with progress notes; stops at `drain_timeout_s` if set and
        says how many slices were left unchecked.
        """
        yield from self.late.finish(self.fresh.start, self.fresh.newest, job_start_ms)
