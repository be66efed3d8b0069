"""One job's log lines, a poll at a time: the fresh read, then the late check's share, in one rate budget.

The parts each live alone: the bucket and backoff (launcher.jobs.ratelimit), the fresh read and its
eventId dedup (launcher.jobs.fresh_read), the late-line check (launcher.jobs.late_check), and how events
become ordered, filtered lines (launcher.jobs.shaping). `LogReader` wires them for one job and slows the
polls while CloudWatch throttles. Each event is read about 1.4 times in all, instead of re-reading
everything once more.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from launcher.jobs.fresh_read import FreshRead, LateKeys
from launcher.jobs.late_check import LateCheck
from launcher.jobs.logrecords import HORIZON_S, LateCheckMode, LogLine, LogNote, Notes, Stats
from launcher.jobs.ratelimit import LogsCalls, RateLimiter
from launcher.jobs.shaping import Shaper


class LogReader:
    """One job's log events, a poll at a time: a fresh read, a check for late lines, dedup, filters.

    The fresh read covers lines at most `overlap_s` late; the late check (`late_after_s`, default the
    overlap) finds the rest once their slice is `horizon_s` old. Notes go to `on_note`.
    """

    def __init__(self, job: str, client: Any, limiter: RateLimiter, *, since_ms: int | None = None,
                 hosts: Iterable[int] | None = None, grep: str | None = None, overlap_s: float = 2.0,
                 late_after_s: float | None = None, horizon_s: float = HORIZON_S, sweep_span_s: float = 30.0,
                 query_span_s: float = 60.0, max_pages: int = 50, page_size: int | None = None,
                 max_backoffs: int = 8, insights: bool = True, final_check_s: float | None = None,
                 on_note: Callable[[LogNote], None] = lambda _n: None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None):
        self.job, self.limiter = job, limiter
        overlap = int(overlap_s * 1000)
        late_ms = overlap if late_after_s is None else int(late_after_s * 1000)
        self._horizon = int(horizon_s * 1000)
        self._clock = clock
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
                              query_span_ms=int(query_span_s * 1000), insights=insights, final_check_s=final_check_s,
                              page_size=page_size, clock=clock, sleep=sleep)
        self.slowdown = 1.0  # poll interval multiplier, raised while throttled

    @property
    def horizon_s(self) -> float:
        return self._horizon / 1000

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

    @property
    def check_from(self) -> int | None:
        """Every line with a timestamp below this has been handed over once, late ones included."""
        return self.late.check_from

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
        yield from self.late.check(now_ms, self.fresh.start, pages + 2)
        if self.stats.throttled + self.stats.retried > before:
            self.slowdown = min(self.slowdown * 2, 8.0)
        else:
            self.slowdown = max(1.0, self.slowdown / 2)

    def finish(self) -> list[LogLine]:
        return [line for page in self.finish_pages() for line in page]

    def finish_pages(self) -> Iterator[list[LogLine]]:
        """After the job has ended (and a draining poll): check every slice not yet checked, to now.

        Gives up after `final_check_s` and says in a note which timestamps could not be checked.
        """
        yield from self.late.finish(self.fresh.start)
