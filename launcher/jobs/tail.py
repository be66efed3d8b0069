"""Follow a training job's logs from all its hosts, within CloudWatch's account-wide read quotas.

Why this shape: one FilterLogEvents read per poll over the stream prefix `<job>/` costs the same for 1
host and for 256 and finds late streams on its own, where GetLogEvents per host does not scale (its
quota is 10 to 25 calls a second per account and region, FilterLogEvents' 5 to 25:
https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/cloudwatch_limits_cwl.html). A page holds at
most 10,000 events or 1 MB and may be partial or empty while a nextToken says there is more
(https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_FilterLogEvents.html).
Lines can reach CloudWatch well after their own timestamp; `LogReader` says how they are still found,
reading each event about 1.4 times instead of re-reading everything once more.
Every Logs call passes one token bucket; throttling backs off with jitter and says so.

`iter_lines` is the core (typed, sanitised `LogLine`s, nothing printed); `follow` is the CLI's thin
printer over it (`launcher.cli.logprint`).
"""
from __future__ import annotations

import logging
import os
import random
import re
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from launcher.core.aws import Clients, explain
from launcher.core.errors import EXIT_INTERRUPTED, EXIT_OK
from launcher.core.names import LOG_GROUP, TERMINAL
from launcher.core.sanitize import clean
from launcher.core.timeutil import epoch
from launcher.jobs.status import describe, exit_code_for

THROTTLE_CODES = frozenset({"ThrottlingException", "Throttling", "TooManyRequestsException",
                            "RequestLimitExceeded"})
# A server error or a dropped connection that outlives botocore's own retries: the tailer tries the read a
# few more times, spaced out, before giving up (a few seconds of CloudWatch trouble must not end a follow).
TRANSIENT_CODES = frozenset({"InternalFailure", "InternalServerError", "ServiceUnavailable",
                             "ServiceUnavailableException"})
MAX_TRANSIENT_RETRIES = 3
# Logs Insights: a query returns at most `limit` rows (10,000 by default, the API allows more); queries
# run for a few seconds, 30 at once per account (https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/
# APIReference/API_StartQuery.html, https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/CWL_QuerySyntax-Limit.html).
LATE_LIMIT = 10_000
LATE_LIMIT_FINAL = 20_000  # the end-of-job check asks for more rows a query (the API allows 100,000): fewer calls
QUERY_WAIT_S = 1.0  # between two GetQueryResults of one query while the job's end waits on it
QUERY_GIVE_UP_S = 300.0  # a query still running after this is read the slow way instead
FINAL_CHECK_S = 60.0  # the end-of-job check for late lines gives up (and says so) after this

_log = logging.getLogger("launcher.logs")

__all__ = ["FollowResult", "LogLine", "LogLines", "LogReader", "RateLimiter", "follow", "iter_lines",
           "shared_limiter"]


class RateLimiter:
    """A token bucket: on average `rate` calls a second, in bursts of at most `burst`.

    CloudWatch Logs quotas are per account and region (FilterLogEvents: 5 to 25 TPS) and shared with
    colleagues and the console, so every Logs read in this process takes a token from one bucket.
    """

    def __init__(self, rate: float = 2.0, burst: float | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self.burst = burst if burst is not None else max(1.0, rate)
        self._clock, self._sleep = clock, sleep
        self._tokens = 1.0
        self._last = clock()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Take one token, sleeping until there is one; returns the seconds waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            wait = 0.0 if self._tokens >= 1.0 else (1.0 - self._tokens) / self.rate
            self._tokens -= 1.0
        if wait > 0:
            self._sleep(wait)
        return wait


_SHARED: RateLimiter | None = None


def shared_limiter(rate: float = 2.0) -> RateLimiter:
    """The process-wide bucket for Logs reads (its rate follows the latest caller's choice)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = RateLimiter(rate)
    elif _SHARED.rate != rate:
        _SHARED.rate, _SHARED.burst = rate, max(1.0, rate)
    return _SHARED


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


Line = LogLine  # the name before the public API


@dataclass
class Stats:
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
    unchecked_s: float = 0.0  # seconds of timestamps the end-of-job check could not finish
    late_check: str = "insights"  # how late lines are found: "insights", or "sweep" where Insights is missing

    @property
    def fetched(self) -> int:
        return self.events + self.late_rows


BUCKET_MS = 2_000  # ids and keys are remembered, and forgotten, by 2 s of event timestamp
HORIZON_S = 300.0  # a line that reaches CloudWatch up to this long after its own timestamp still prints


class _SeenIds:
    """eventIds the fresh read returned, by 2 s bucket of timestamp; only the overlap window's are kept.

    An id is held as its 64-bit hash (a 56-digit eventId string is 105 bytes): at 10,000 lines a second
    the window holds some 75,000. Two ids of one 2 s bucket sharing a hash (odds about 1e-11) would
    drop a line.
    """

    def __init__(self) -> None:
        self._buckets: dict[int, set[int]] = {}
        self.size = 0

    def add(self, event_id: str, ts: int) -> bool:
        """Remember `event_id`; False when it was remembered already."""
        key = hash(event_id)
        bucket = self._buckets.get(ts // BUCKET_MS)
        if bucket is None:
            bucket = self._buckets[ts // BUCKET_MS] = set()
        elif key in bucket:
            return False
        bucket.add(key)
        self.size += 1
        return True

    def forget_below(self, ts: int) -> None:
        """Drop every bucket that ends at or below `ts` (no fresh read returns those events again)."""
        for b in [b for b in self._buckets if (b + 1) * BUCKET_MS <= ts]:
            self.size -= len(self._buckets.pop(b))


class _LateKeys:
    """Lines the fresh read printed although they arrived later than the late threshold, until checked.

    Logs Insights rows carry no eventId, so a late line is known by (stream, timestamp, message); a
    count per key keeps two identical lines of one millisecond apart. Only the late few are kept
    (about 3% of lines with a 2 s threshold), for the 5-minute horizon.
    """

    def __init__(self) -> None:
        self._buckets: dict[int, dict[int, int]] = {}
        self._counts: dict[int, int] = {}  # lines remembered per bucket
        self.size = 0

    def count(self, bucket: int) -> int:
        return self._counts.get(bucket, 0)

    @staticmethod
    def key(stream: str, ts: int, message: str) -> int:
        return hash((stream, ts, message))

    def add(self, key: int, ts: int) -> None:
        b = ts // BUCKET_MS
        bucket = self._buckets.setdefault(b, {})
        bucket[key] = bucket.get(key, 0) + 1
        self._counts[b] = self._counts.get(b, 0) + 1
        self.size += 1

    def take(self, key: int, ts: int) -> bool:
        """True (and forget one) when the fresh read printed this line already."""
        bucket = self._buckets.get(ts // BUCKET_MS, {})
        n = bucket.get(key, 0)
        if not n:
            return False
        if n == 1:
            del bucket[key]
        else:
            bucket[key] = n - 1
        self.size -= 1
        return True

    def forget_below(self, ts: int) -> None:
        for b in [b for b in self._buckets if (b + 1) * BUCKET_MS <= ts]:
            self.size -= sum(self._buckets.pop(b).values())
            self._counts.pop(b, None)


class _Slice:
    """A range of timestamps [start, end) the late check reads once every line of it can have arrived."""

    __slots__ = ("start", "end", "query_id", "started", "params", "sweep", "done", "keys", "limit")

    def __init__(self, start: int, end: int, sweep: bool = False, keys: int = 0, limit: int = LATE_LIMIT):
        self.start, self.end, self.sweep = start, end, sweep
        self.keys, self.limit = keys, limit  # late lines the fresh read printed in it; rows a query returns
        self.query_id: str | None = None
        self.started = 0.0
        self.params: dict[str, Any] | None = None  # a sweep's FilterLogEvents call under way
        self.done = False


class _Unsupported(Exception):
    """Logs Insights is missing, refused, or answered in a way this reader cannot trust."""


def _regex_literal(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "\\" + ch for ch in text)


class LogReader:
    """One job's log events, a poll at a time: a fresh read, a check for late lines, dedup, filters.

    FilterLogEvents selects by event timestamp, never by ingestion time, so a line that reaches
    CloudWatch L seconds after its timestamp is only found by a read of its timestamp made after it
    arrived. Two parts share the work:
    - the fresh read, every poll, from `overlap_s` (2 s) below when the read before sent the pages
      that could have missed a line (see `_floor`). So a line whose lag is at most `overlap_s` is
      always read by it: the first page sent after the line arrived that covers its timestamp, or the
      next read, returns it. Each event is read about 1 + overlap/interval times (1.3 to 1.45 at a 5 s
      poll, the more the longer a read's pages take at --rate). It assumes a line can be read as soon as
      CloudWatch has ingested it (its ingestionTime); a read-after-write delay would need more overlap.
    - the late check, for the lines that arrived more than `late_after_s` (= overlap) after their
      timestamp: once a slice of timestamps is `horizon_s` (5 min) old, one Logs Insights query returns
      exactly those lines of the slice (`toMillis(@ingestionTime) - toMillis(@timestamp) > threshold`),
      about 3% of them with a long-tailed lag, where re-reading the slice would fetch every line again.
      Lines the fresh read printed already are known by (stream, timestamp, message), since Insights
      rows carry no eventId; only those late lines are remembered, until their slice is checked.
    Where Logs Insights is missing (a plain moto server), refused (no logs:StartQuery) or fails, the
    slice is re-read with FilterLogEvents instead (a "sweep": every event once more); nothing is lost,
    the reads cost more, and stderr says so once. `finish()` checks what is left when the job has ended.
    """

    def __init__(self, job: str, client: Any, limiter: RateLimiter, *, since_ms: int | None = None,
                 hosts: Iterable[int] | None = None, grep: str | None = None, overlap_s: float = 2.0,
                 late_after_s: float | None = None, horizon_s: float = HORIZON_S, sweep_span_s: float = 30.0,
                 query_span_s: float = 60.0, max_pages: int = 50, page_size: int | None = None,
                 max_backoffs: int = 8, insights: bool = True, final_check_s: float | None = None,
                 notify: Callable[[str], None] = lambda _m: None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None):
        self.job, self.client, self.limiter = job, client, limiter
        self.prefix = job + "/"
        self._host_re = re.compile(rf"^{re.escape(job)}/algo-(\d+)-\d+$")
        self._hosts = frozenset(hosts) if hosts else None
        self._grep = re.compile(grep) if grep else None
        self._since = since_ms
        self._overlap = int(overlap_s * 1000)
        self._late_ms = self._overlap if late_after_s is None else int(late_after_s * 1000)
        self._horizon = int(horizon_s * 1000)
        self._sweep_span = int(sweep_span_s * 1000)
        self._span = int(query_span_s * 1000)
        self.max_pages, self.page_size, self.max_backoffs = max_pages, page_size, max_backoffs
        self._final_check_s = FINAL_CHECK_S if final_check_s is None else final_check_s
        self._notify, self._clock, self._sleep = notify, clock, sleep
        self._rng = rng or random.Random()
        self._high: int | None = None  # the newest timestamp the fresh read has seen
        self._fresh_from: int | None = since_ms  # startTime of the next fresh read; never moves back
        self._fresh_resume: dict[str, Any] | None = None
        self._fresh_pages: list[tuple[int | None, int | None, int, bool]] = []  # (lo, hi, called, last)
        self._ahead = 1 << 62  # how far our clock may run ahead of CloudWatch's, from ingestion times seen
        self._call_ms = 0  # our clock when the latest call was sent (after its wait for a token)
        self._plan_from: int | None = None  # timestamps below it are planned into late-check slices
        self._slices: list[_Slice] = []
        self._insights: bool | None = None if insights else False  # None: not tried yet
        self._rows_per_key = 1.5  # rows a query returns per late line the fresh read printed (measured)
        self._ids = _SeenIds()
        self._late_keys = _LateKeys()
        self._printed_high: int | None = None
        self._late_note = [0, 0.0]  # late lines not yet reported on stderr, and the worst lateness
        self._streams: dict[str, tuple[int | None, str]] = {}
        self._last_hint: dict[str, float] = {}
        self.slowdown = 1.0  # poll interval multiplier, raised while throttled
        self.stats = Stats(late_check="insights" if insights else "sweep")

    @property
    def horizon_s(self) -> float:
        return self._horizon / 1000

    @property
    def check_from(self) -> int | None:
        """Every line with a timestamp below this has been printed once, late ones included."""
        return self._slices[0].start if self._slices else self._plan_from

    # -- polling -------------------------------------------------------------------------------------

    def poll(self, drain: bool = False) -> list[LogLine]:
        """New lines since the last poll, in order; `drain` pages to the end however long."""
        return [line for page in self.pages(drain) for line in page]

    def pages(self, drain: bool = False) -> Iterator[list[LogLine]]:
        """One poll, a page of ordered lines at a time (memory stays that of a page, whatever the volume)."""
        self.stats.polls += 1
        now_ms = int(self._clock() * 1000)
        if self._plan_from is None:  # older lines than the horizon have all arrived: the first read is final
            self._plan_from = now_ms - self._horizon if self._since is None else max(now_ms - self._horizon,
                                                                                    self._since)
        before = self.stats.throttled + self.stats.retried
        pages = yield from self._fresh(now_ms, drain)
        yield from self._late(now_ms, pages + 2, None)
        if self.stats.throttled + self.stats.retried > before:
            self.slowdown = min(self.slowdown * 2, 8.0)
        else:
            self.slowdown = max(1.0, self.slowdown / 2)

    def finish(self) -> list[LogLine]:
        return [line for page in self.finish_pages() for line in page]

    def finish_pages(self) -> Iterator[list[LogLine]]:
        """After the job has ended (and a draining poll): check every slice not yet checked, to now.

        Gives up after `final_check_s` and says on stderr which timestamps could not be checked.
        """
        if self._plan_from is None or self._fresh_from is None:
            return
        end = int(self._clock() * 1000) + 1
        deadline = self._clock() + self._final_check_s
        if self._insights is False:
            span_s = (end - (self.check_from or end)) / 1000
            self._notify(f"reading the last {span_s:.0f}s of {self.job} once more for lines that reached "
                         f"CloudWatch late, without Logs Insights")
        while self._slices or self._plan_from < end:
            calls = self.stats.calls + self.stats.query_calls
            yield from self._late(end, None, end)
            if not self._slices and self._plan_from >= end:
                return
            if self._clock() >= deadline:
                first = self.check_from or end
                self.stats.unchecked_s += (end - first) / 1000
                self._notify(f"warning: could not finish checking {self.job} for lines that reached CloudWatch "
                             f"late ({(end - first) / 1000:.0f}s of timestamps left after "
                             f"{self._final_check_s:.0f}s); `smp-launch logs {self.job}` again later shows them")
                return
            pending = [s for s in self._slices if not s.done]
            if self.stats.calls + self.stats.query_calls == calls or all(
                    s.query_id is not None and not s.sweep for s in pending):
                self._sleep(QUERY_WAIT_S)  # queries are running: give them a moment

    # -- the fresh read ------------------------------------------------------------------------------

    def _fresh(self, now_ms: int, drain: bool) -> Generator[list[LogLine], None, int]:
        params = self._fresh_resume
        if params is None:
            params = self._query(self._fresh_from, None)
            self._fresh_pages, self._ahead = [], 1 << 62
        self._fresh_resume = None
        lo = params.get("startTime") if not self._fresh_pages else self._fresh_pages[-1][1]
        pages = 0
        while True:
            page = self._call("filter_log_events", params)
            called = self._call_ms
            pages += 1
            events = page.get("events", ())
            out: list[LogLine] = []
            for event in events:
                self._accept(event, out)
                ingested = event.get("ingestionTime")
                if ingested is not None and called - int(ingested) < self._ahead:
                    self._ahead = max(0, called - int(ingested))
            token = page.get("nextToken")
            hi = max(int(e["timestamp"]) for e in events) if events else lo
            self._fresh_pages.append((lo, hi, called, not token or not events))
            lo = hi
            if out:
                yield self._order(out)
            if not token:
                break
            params = {**params, "nextToken": token}
            if pages >= self.max_pages and not drain:
                self._fresh_resume = params  # the rest next poll, the same query continued
                break
        if self._fresh_resume is None and self._high is not None:
            floor = self._floor()
            self._fresh_from = floor if self._fresh_from is None else max(self._fresh_from, floor)
            self._ids.forget_below(self._fresh_from)
        return pages

    def _floor(self) -> int:
        """Where the next fresh read starts: no line at most `overlap` late that this read missed is below it.

        A page sent at time R returns every line of its timestamps that had arrived by R; a line it
        missed arrived after R, so with a lag of at most `overlap` its timestamp is above R - overlap.
        R is our clock less how far it may run ahead of CloudWatch's (the least gap seen between a call
        and the ingestionTime of a line it returned), so a fast local clock loses nothing. A page whose
        timestamps all lie below that bound cannot have missed such a line; the last page (open-ended)
        and empty pages always count. So each poll re-reads about `overlap` seconds, not the time its
        pages took at --rate.
        """
        floor: int | None = None
        known = self._ahead < (1 << 62)  # no ingestionTime seen: fall back to the newest timestamp
        for lo, hi, called, last in self._fresh_pages:
            sent = called - self._ahead if known else min(called, self._high if self._high is not None else called)
            bound = sent - self._overlap
            if lo is not None:
                bound = max(lo, bound)
            if last or hi is None or bound <= hi:
                floor = bound if floor is None else min(floor, bound)
        self._fresh_pages = []
        return floor if floor is not None else (self._fresh_from or 0)

    def _query(self, start: int | None, end: int | None) -> dict[str, Any]:
        params: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamNamePrefix": self.prefix,
                                  "interleaved": True}  # AWS always interleaves; moto only when asked
        if start is not None:
            params["startTime"] = start
        if end is not None:
            params["endTime"] = end
        if self.page_size:
            params["limit"] = self.page_size
        return params

    def _accept(self, event: dict[str, Any], out: list[LogLine]) -> None:
        self.stats.events += 1
        stream = event.get("logStreamName", "")
        if not stream.startswith(self.prefix):  # `job-a` must not show `job-ab`
            self.stats.foreign += 1
            return
        event_id, ts = str(event["eventId"]), int(event["timestamp"])
        if self._high is None or ts > self._high:
            self._high = ts
        if not self._ids.add(event_id, ts):
            self.stats.duplicates += 1
            return
        lag = int(event.get("ingestionTime", ts)) - ts
        raw = str(event.get("message", "")).rstrip("\n")
        if lag > self._late_ms:  # the late check will return it too: remember it was printed
            self._late_keys.add(_LateKeys.key(stream, ts, raw), ts)
            if lag > self.stats.max_late_s * 1000:
                self.stats.max_late_s = lag / 1000
        held = self._ids.size + self._late_keys.size
        if held > self.stats.max_seen:
            self.stats.max_seen = held
        self._emit(stream, ts, raw, event_id, out)

    def _emit(self, stream: str, ts: int, raw: str, event_id: str, out: list[LogLine]) -> None:
        host, name = self._stream(stream)
        if self._hosts is not None and host not in self._hosts:
            return
        if self._grep is not None and not self._grep.search(raw):
            return
        # isprintable() holds for no string `clean` would change (controls, bidi marks, surrogates): skip it
        out.append(LogLine(ts, host, name, raw if raw.isprintable() else clean(raw),
                           event_id if event_id.isprintable() else clean(event_id)))

    # -- the late check ------------------------------------------------------------------------------

    def _late(self, now_ms: int, budget: int | None, final_end: int | None) -> Iterator[list[LogLine]]:
        """Check the slices whose lines have all arrived (all up to `final_end` once the job has ended)."""
        if self._plan_from is None or self._fresh_from is None:
            return
        if final_end is None:
            due = min(now_ms - self._horizon, self._fresh_from)
            due -= due % BUCKET_MS
            if due - self._plan_from > self._horizon:  # reads cannot keep up with the volume
                skip_to = due - self._horizon
                self.stats.skipped_s += (skip_to - self._plan_from) / 1000
                self._hint("sweep", f"the late-line check is {(due - self._plan_from) / 1000:.0f}s behind (reads "
                           f"limited by --rate); lines more than {self.horizon_s:.0f}s late may be missed", force=True)
                self._plan_from = skip_to
        else:
            due = final_end
        most = 8 if final_end is not None else 2
        limit = LATE_LIMIT if final_end is None else LATE_LIMIT_FINAL
        while self._plan_from < due and len(self._slices) < most:
            planned = self._slice_end(due, final_end is not None, limit)
            if planned is None:
                break
            end, keys = planned
            self._slices.append(_Slice(self._plan_from, end, sweep=self._insights is False, keys=keys, limit=limit))
            self._plan_from = end
        spent = 0
        for sl in list(self._slices):
            if budget is not None and spent >= budget:
                break
            if sl.done:  # checked already, waiting for an older slice to finish before it is dropped
                continue
            if sl.sweep:
                spent += yield from self._sweep(sl, None if budget is None else budget - spent)
            else:
                spent += yield from self._check(sl, final_end is not None)
        while self._slices and self._slices[0].done:
            self._slices.pop(0)
        if self.check_from is not None:
            self._late_keys.forget_below(self.check_from)

    def _slice_end(self, due: int, final: bool, limit: int) -> tuple[int, int] | None:
        """Where the next slice from `_plan_from` ends (and its late lines), or None to wait for more.

        A sweep reads `sweep_span_s` at a time. A query's slice is sized from the late lines the fresh
        read printed in it, times the rows a query has returned per such line (the ones it missed come
        too), for about 80% of the row limit: a query is rarely cut at the limit, and the end-of-job
        check needs few. While following a slice spans at most `query_span_s`; at the end, what is left.
        """
        start = self._plan_from
        assert start is not None, "_late plans slices only after the first read set _plan_from"
        if self._insights is False:
            end = min(due, start + self._sweep_span)
            return (end, 0) if final or end - start >= self._sweep_span else None
        budget = 0.8 * limit / self._rows_per_key
        keys, end = 0, start
        while end < due:
            if not final and end - start >= self._span:
                return end, keys
            more = self._late_keys.count(end // BUCKET_MS)
            if keys + more > budget and end > start:
                return end, keys
            keys += more
            end = min(due, (end // BUCKET_MS + 1) * BUCKET_MS)
        return (end, keys) if final else None

    def _check(self, sl: _Slice, final: bool) -> Generator[list[LogLine], None, int]:
        """One Logs Insights call for a slice: start its query, or read its results when it is done."""
        try:
            if sl.query_id is None:
                return self._start(sl)
            if not final and self._clock() - sl.started < QUERY_WAIT_S:
                return 0
            reply = self._call("get_query_results", {"queryId": sl.query_id}, insights=True)
        except _Unsupported as why:
            self._give_up_insights(str(why))
            sl.sweep = True
            return 1
        status = reply.get("status")
        if status in ("Scheduled", "Running", "Unknown"):
            if self._clock() - sl.started > QUERY_GIVE_UP_S:
                sl.sweep = True
            return 1
        if status != "Complete":  # Failed, Cancelled, Timeout: read this slice the slow way
            self._hint("query", f"a Logs Insights query for late lines ended {clean(status, limit=20)}; "
                       "re-reading its minute instead")
            sl.sweep = True
            return 1
        try:
            rows = self._rows(reply.get("results") or [])
        except _Unsupported as why:
            self._give_up_insights(str(why))
            sl.sweep = True
            return 1
        matched = int((reply.get("statistics") or {}).get("recordsMatched") or 0)
        if len(rows) >= sl.limit or matched > len(rows):  # cut at the row limit: ask again in halves
            self._rows_per_key = min(4.0, self._rows_per_key * 1.5)
            self._split(sl)
            return 1
        self._insights = True
        if sl.keys >= 100:
            self._rows_per_key = max(1.0, min(4.0, (self._rows_per_key + len(rows) / sl.keys) / 2))
        out: list[LogLine] = []
        for ts, ingested, stream, message, ptr in rows:
            if sl.start <= ts < sl.end:  # the query's range is whole seconds; the slice's is not
                self._accept_late(stream, ts, ingested, message, ptr, out)
        sl.done = True
        if out:
            yield self._order(out)
        return 1

    def _start(self, sl: _Slice) -> int:
        threshold = self._late_ms
        query = (f"fields @logStream, @message, toMillis(@timestamp) as ts, toMillis(@ingestionTime) as ingested"
                 f" | filter @logStream like /^{_regex_literal(self.prefix)}/"
                 f" and toMillis(@ingestionTime) - toMillis(@timestamp) > {threshold}"
                 f" | limit {sl.limit}")
        reply = self._call("start_query", {"logGroupName": LOG_GROUP, "startTime": sl.start // 1000,
                                           "endTime": -(-(sl.end - 1) // 1000), "queryString": query,
                                           "limit": sl.limit}, insights=True)
        if reply.get("_missing_group"):
            sl.done = True  # no log group yet: nothing was written, nothing is late
            return 1
        if reply.get("_busy"):
            return 1  # too many queries running in the account: start it on a later poll
        query_id = reply.get("queryId")
        if not query_id:
            raise _Unsupported("StartQuery returned no queryId")
        sl.query_id, sl.started = str(query_id), self._clock()
        self.stats.queries += 1
        return 1

    def _rows(self, results: list[Any]) -> list[tuple[int, int, str, str, str]]:
        rows = []
        for result in results:
            fields: dict[Any, Any] = {f.get("field"): f.get("value") for f in result if isinstance(f, dict)}
            try:
                ts, ingested = int(float(fields["ts"])), int(float(fields["ingested"]))
            except (KeyError, TypeError, ValueError):
                raise _Unsupported("its results lack the computed fields") from None
            rows.append((ts, ingested, str(fields.get("@logStream") or ""),
                         str(fields.get("@message") or "").rstrip("\n"), str(fields.get("@ptr") or "")))
        self.stats.late_rows += len(rows)
        return rows

    def _split(self, sl: _Slice) -> None:
        i = self._slices.index(sl)
        mid = (sl.start + sl.end) // 2
        mid -= mid % BUCKET_MS
        if mid <= sl.start:
            sl.sweep, sl.query_id = True, None  # one bucket with 10,000 late lines: read it all
            return
        self._slices[i:i + 1] = [_Slice(sl.start, mid, limit=sl.limit), _Slice(mid, sl.end, limit=sl.limit)]

    def _give_up_insights(self, why: str) -> None:
        first = self._insights is not False
        self._insights = False
        self.stats.late_check = "sweep"
        for other in self._slices:
            if other.query_id is None:
                other.sweep = True
        if first:
            self._notify(f"note: Logs Insights is not available for the late-line check ({why}); re-reading "
                         "each minute of logs once more instead (about twice the reads; allow logs:StartQuery "
                         "and logs:GetQueryResults to avoid it)")

    def _sweep(self, sl: _Slice, budget: int | None) -> Generator[list[LogLine], None, int]:
        """Re-read a slice with FilterLogEvents; keep only lines later than the fresh read could see."""
        params = sl.params or self._query(sl.start, sl.end - 1)  # endTime inclusive: nothing later returned
        pages = 0
        while budget is None or pages < budget:
            page = self._call("filter_log_events", params)
            pages += 1
            self.stats.sweep_calls += 1
            out: list[LogLine] = []
            for event in page.get("events", ()):
                self.stats.events += 1
                ts = int(event["timestamp"])
                self._accept_late(event.get("logStreamName", ""), ts, int(event.get("ingestionTime", ts)),
                                  str(event.get("message", "")).rstrip("\n"), str(event["eventId"]), out)
            if out:
                yield self._order(out)
            token = page.get("nextToken")
            if not token:
                sl.done, sl.params = True, None
                return pages
            params = {**params, "nextToken": token}
        sl.params = params
        return pages

    def _accept_late(self, stream: str, ts: int, ingested: int, raw: str, event_id: str,
                     out: list[LogLine]) -> None:
        if not stream.startswith(self.prefix):
            self.stats.foreign += 1
            return
        if ingested - ts <= self._late_ms or self._late_keys.take(_LateKeys.key(stream, ts, raw), ts):
            self.stats.duplicates += 1  # the fresh read printed it
            return
        if ingested - ts > self.stats.max_late_s * 1000:
            self.stats.max_late_s = (ingested - ts) / 1000
        self._emit(stream, ts, raw, event_id, out)

    # -- order, hosts, calls -------------------------------------------------------------------------

    def _order(self, lines: list[LogLine]) -> list[LogLine]:
        """Sort a page's lines; mark (and note on stderr, now and then) those older than one printed before."""
        lines.sort(key=lambda ln: (ln.timestamp, ln.host or 0, ln.stream, len(ln.event_id), ln.event_id))
        high = self._printed_high
        if lines and high is not None and lines[0].timestamp < high:
            lines = [ln if ln.timestamp >= high else replace(ln, late=True) for ln in lines]
            self.stats.late += sum(ln.late for ln in lines)
            # Reordering within the overlap is ordinary cross-host jitter; beyond it, say so.
            noted = [ln for ln in lines if ln.timestamp < high - self._overlap]
            if noted:
                self._late_note[0] += len(noted)
                self._late_note[1] = max(self._late_note[1], (high - noted[0].timestamp) / 1000)
        if lines:
            self._printed_high = lines[-1].timestamp if high is None else max(high, lines[-1].timestamp)
        if self._late_note[0] and self._hint("late", f"{self._late_note[0]} line(s) reached CloudWatch late and "
                                             f"printed out of order (up to {self._late_note[1]:.1f}s behind "
                                             "lines already printed)"):
            self._late_note = [0, 0.0]
        self.stats.printed += len(lines)
        return lines

    def _stream(self, stream: str) -> tuple[int | None, str]:
        known = self._streams.get(stream)
        if known is None:
            m = self._host_re.match(stream)
            known = self._streams[stream] = (int(m.group(1)) if m else None, clean(stream))
        return known

    def _call(self, op: str, params: dict[str, Any], insights: bool = False) -> dict[str, Any]:
        """One Logs call through the rate limiter, with backoff on throttling and on passing server trouble.

        An Insights call that cannot be made (missing operation, refused, malformed) raises `_Unsupported`
        so the late check falls back to re-reading; a FilterLogEvents failure ends in one clear line.
        """
        from botocore.exceptions import BotoCoreError, ClientError, ConnectionClosedError

        method = getattr(self.client, op, None)
        if method is None:
            raise _Unsupported(f"this client has no {op}")
        action = f"reading the logs of {self.job}"
        attempt = failures = 0
        while True:
            self.limiter.acquire()
            self._call_ms = int(self._clock() * 1000)
            try:
                reply = method(**params)
            except ClientError as exc:
                meta = exc.response.get("ResponseMetadata", {})
                self.stats.retried += int(meta.get("RetryAttempts", 0) or 0)
                code = exc.response.get("Error", {}).get("Code", "")
                if code == "ResourceNotFoundException":  # the group appears with a job's first stream
                    if op == "filter_log_events":
                        return {"events": []}
                    if op == "start_query":
                        return {"_missing_group": True}
                if code in THROTTLE_CODES and attempt < self.max_backoffs:
                    self.stats.throttled += 1
                    delay = min(60.0, 2.0 * 2 ** attempt) * self._rng.uniform(0.5, 1.0)
                    attempt += 1
                    self._hint("throttle", f"CloudWatch Logs is throttling reads (a quota shared by the whole "
                               f"account and region); retrying in {delay:.1f}s", force=True)
                    self._sleep(delay)
                    continue
                if insights and code == "LimitExceededException":
                    self._hint("busy", "30 Logs Insights queries are already running in this account and region; "
                               "the late-line check waits for a free one")
                    return {"_busy": True}
                status = meta.get("HTTPStatusCode")
                transient = code in TRANSIENT_CODES or (isinstance(status, int) and status >= 500)
                if transient and failures < MAX_TRANSIENT_RETRIES:
                    failures += 1
                    self._back_off_after_failure(clean(code or status, limit=60), failures)
                    continue
                if insights:
                    raise _Unsupported(clean(code or status, limit=60)) from None
                raise explain(exc, action) from None
            except ConnectionClosedError as exc:
                if failures < MAX_TRANSIENT_RETRIES:
                    failures += 1
                    self._back_off_after_failure("connection dropped", failures)
                    continue
                if insights:
                    raise _Unsupported("connection dropped") from None
                raise explain(exc, action) from None
            except BotoCoreError as exc:
                if insights:
                    raise _Unsupported(clean(type(exc).__name__, limit=60)) from None
                raise explain(exc, action) from None
            if insights:
                self.stats.query_calls += 1
            else:
                self.stats.calls += 1
            retried = int(reply.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)
            if retried:
                self.stats.retried += retried
                self._hint("retry", f"CloudWatch Logs throttled or failed {retried} read(s), retried; "
                           "polling more slowly")
            return reply

    def _back_off_after_failure(self, what: str, failures: int) -> None:
        delay = min(8.0, 2.0 ** failures) * self._rng.uniform(0.5, 1.0)
        self.stats.retried += 1
        self._hint("failure", f"CloudWatch Logs failed a read ({what}); retrying in {delay:.1f}s", force=True)
        self._sleep(delay)

    def _hint(self, kind: str, message: str, force: bool = False) -> bool:
        """Say `message` on stderr unless a note of this kind went out in the last 30 s; True if said."""
        now = self._clock()
        if force or now - self._last_hint.get(kind, float("-inf")) >= 30.0:
            self._last_hint[kind] = now
            self._notify(message)
            return True
        return False


class _Status:
    """DescribeTrainingJob on its own timer; hands each SecondaryStatus transition on once."""

    def __init__(self, job: str, clients: Clients, on_status: Callable[[dict[str, Any]], None] | None):
        self.job, self.clients, self.on_status = job, clients, on_status
        self._seen: set[tuple[str, Any]] = set()
        self.desc: dict[str, Any] = {}

    def check(self) -> dict[str, Any]:
        self.desc = describe(self.clients, self.job)
        for t in self.desc.get("SecondaryStatusTransitions", []):
            key = (t["Status"], t.get("StartTime"))
            if key not in self._seen:
                self._seen.add(key)
                if self.on_status is not None:
                    self.on_status(t)
        return self.desc

    @property
    def status(self) -> str | None:
        return self.desc.get("TrainingJobStatus")

    @property
    def host_count(self) -> int | None:
        """The job's instances (a heterogeneous cluster's groups summed); None when not told."""
        rc = self.desc.get("ResourceConfig") or {}
        groups = rc.get("InstanceGroups") or []
        count = sum(int(g.get("InstanceCount", 0)) for g in groups) if groups else rc.get("InstanceCount")
        return int(count) if count else None


def _warn_missing_hosts(hosts: Iterable[int] | None, watcher: _Status, notify: Callable[[str], None]) -> None:
    """`--host 9` on a 4-host job prints nothing at all: say so rather than look like a silent host."""
    count = watcher.host_count
    if not hosts or count is None:
        return
    beyond = sorted(h for h in hosts if h > count)
    if beyond:
        shown = ", ".join(f"algo-{h}" for h in beyond[:5]) + (", ..." if len(beyond) > 5 else "")
        notify(f"warning: {watcher.job} has {count} host(s), algo-1 to algo-{count}; nothing will print for {shown}")


@dataclass(frozen=True)
class Polling:
    """How the logs are polled: the CLI's `--rate` and `--interval`, the design's windows, and the clock it
    all runs on (tests and the bench drive a virtual one)."""

    rate: float = 2.0  # Logs calls a second, shared by every read (the account's quota is shared too)
    interval: float = 5.0  # seconds between polls
    status_interval: float | None = None  # seconds between DescribeTrainingJob reads (default: interval)
    settle: float | None = None  # seconds after the job's end before the last read (default: min(5, 4 polls))
    overlap: float = 2.0  # seconds each read goes back below the previous one's end
    horizon: float = HORIZON_S  # how late a line may be and still print (the late check's age)
    insights: bool = True  # late lines through Logs Insights (False: re-read slices with FilterLogEvents)
    limiter: RateLimiter | None = None  # a bucket to share; default: the process's one at `rate`
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random | None = None


class LogLines(Iterator[LogLine]):
    """A job's log lines as they come; once exhausted, `status`, `exit_code`, `failure_reason`, `stats`.

    Nothing here prints: notes (throttling, late lines printed out of order, an unfinished final check)
    go to `notify`, status transitions to `on_status`, and `on_idle` runs before each wait between
    polls (a printer flushes there). Following ends when the job does, after its last lines.
    """

    def __init__(self, job: str, clients: Clients, *, follow: bool, since: float | None, hosts: Iterable[int] | None,
                 grep: str | None, polling: Polling, notify: Callable[[str], None],
                 on_status: Callable[[dict[str, Any]], None] | None, on_idle: Callable[[], None] | None):
        p = polling
        self.job = job
        self._clients, self._follow, self._notify = clients, follow, notify
        self._hosts = frozenset(hosts) if hosts else None
        self._interval = p.interval
        self._status_interval = p.status_interval or p.interval
        self._settle = min(5.0, 4 * p.interval) if p.settle is None else p.settle
        self._on_idle = on_idle or (lambda: None)
        self._clock, self._sleep = p.clock, p.sleep
        self._rng = p.rng or random.Random()
        since_ms = None if since is None else int((p.clock() - since) * 1000)
        self.reader = LogReader(job, clients.logs, p.limiter or shared_limiter(p.rate), since_ms=since_ms,
                                hosts=self._hosts, grep=grep, overlap_s=p.overlap, horizon_s=p.horizon,
                                max_backoffs=8 if follow else 4, insights=p.insights, notify=notify, clock=p.clock,
                                sleep=p.sleep, rng=p.rng)
        self.watcher = _Status(job, clients, on_status)
        self.stats = self.reader.stats
        self.failure_reason: str | None = None
        self.billable: Any = None
        self.exit_code = EXIT_OK
        self._gen = self._run()

    @property
    def status(self) -> str | None:
        return self.watcher.status

    def __iter__(self) -> LogLines:
        return self

    def __next__(self) -> LogLine:
        return next(self._gen)

    def close(self) -> None:
        self._gen.close()

    def _run(self) -> Generator[LogLine, None, None]:
        reader, watcher = self.reader, self.watcher
        try:
            if not self._follow:
                if self._hosts:
                    watcher.desc = describe(self._clients, self.job)  # the host count only, no transitions
                    _warn_missing_hosts(self._hosts, watcher, self._notify)
                for page in reader.pages(drain=True):
                    yield from page
                if reader.stats.events == reader.stats.foreign:  # nothing of this job's (not merely filtered out)
                    desc = watcher.check()
                    self._notify(f"no log lines yet for {self.job} ({desc['TrainingJobStatus']}, "
                                 f"{desc.get('SecondaryStatus')})")
                return
            watcher.check()
            _warn_missing_hosts(self._hosts, watcher, self._notify)
            next_status = self._clock() + self._status_interval
            while watcher.status not in TERMINAL:
                started = self._clock()
                for page in reader.pages():
                    yield from page
                self._on_idle()
                # Polls start `interval` apart: time spent reading (pages, waits for tokens) is not added to it.
                self._sleep(max(0.0, self._interval * reader.slowdown * self._rng.uniform(0.9, 1.1)
                                - (self._clock() - started)))
                if self._clock() >= next_status:
                    watcher.check()
                    next_status = self._clock() + self._status_interval
            # Lines still on their way get `settle` seconds from the job's end time (not from when we
            # noticed it); then one draining read and the final late check, and nothing waits for more.
            noticed = self._clock()
            ended = min(noticed, epoch(watcher.desc.get("TrainingEndTime")) or noticed)
            if ended + self._settle > noticed:
                self._on_idle()
                self._sleep(ended + self._settle - noticed)
            for page in reader.pages(drain=True):
                yield from page
            for page in reader.finish_pages():
                yield from page
            self.failure_reason = watcher.desc.get("FailureReason")
            self.billable = watcher.desc.get("BillableTimeInSeconds")
            self.exit_code = exit_code_for(watcher.status or "")
        finally:
            self._on_idle()


def iter_lines(job: str, clients: Clients, *, follow: bool = False, since: float | None = None,
               hosts: Iterable[int] | None = None, grep: str | None = None, polling: Polling | None = None,
               notify: Callable[[str], None] | None = None, on_status: Callable[[dict[str, Any]], None] | None = None,
               on_idle: Callable[[], None] | None = None) -> LogLines:
    """A job's log lines from every host, typed and sanitised: what exists now, or (`follow`) until it ends.

    `since` is seconds back from now; `hosts` keeps those algo-N; `grep` is a regular expression on the
    message. Notes go to `notify` (default: the `launcher.logs` logger). Errors raise `LauncherError`s.
    """
    return LogLines(job, clients, follow=follow, since=since, hosts=hosts, grep=grep, polling=polling or Polling(),
                    notify=notify or _log.warning, on_status=on_status, on_idle=on_idle)


@dataclass
class FollowResult:
    job: str
    status: str | None
    exit_code: int
    failure_reason: str | None = None
    interrupted: bool = False
    stats: Stats = field(default_factory=Stats)


def follow(job: str, clients: Clients, *, follow: bool = True, since: float | None = None,
           hosts: Iterable[int] | None = None, grep: str | None = None, as_json: bool = False,
           polling: Polling | None = None, out: TextIO | None = None, err: TextIO | None = None,
           color: bool | None = None) -> FollowResult:
    """Print a job's log lines from every host until it ends (or once, with `follow=False`).

    Returns the job's status and the documented exit code: 0 Completed, 1 Failed, 5 Stopped,
    130 when interrupted (the job keeps running). `submit --wait` calls this with the job it just
    started. The status is read every poll (`status_interval`), so the command returns within about a
    poll plus `settle` plus the final late-line check of the job's end.
    """
    from launcher.cli.logprint import Printer

    out = out or sys.stdout
    err = err or sys.stderr
    if color is None:
        color = bool(getattr(out, "isatty", lambda: False)()) and not as_json and "NO_COLOR" not in os.environ
    printer = Printer(out, err, as_json, color)
    lines = iter_lines(job, clients, follow=follow, since=since, hosts=hosts, grep=grep, polling=polling,
                       notify=printer.note, on_status=printer.status, on_idle=printer.flush)
    result = FollowResult(job, None, EXIT_OK, stats=lines.stats)
    write = printer.line
    try:
        for line in lines:
            write(line)
    except KeyboardInterrupt:
        result.status, result.interrupted, result.exit_code = lines.status, True, EXIT_INTERRUPTED
        printer.flush()
        printer.note(f"stopped following {job}; the job keeps running "
                     f"(`smp-launch stop {job}` stops it, `smp-launch logs {job}` follows again)")
        return result
    result.status = lines.status
    if not follow:
        return result
    result.failure_reason, result.exit_code = lines.failure_reason, lines.exit_code
    printer.end(job, result.status, result.exit_code, result.failure_reason, lines.billable)
    return result
