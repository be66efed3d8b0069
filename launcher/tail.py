"""Follow a training job's logs from all its hosts, within CloudWatch's account-wide read quotas.

Why this shape: one FilterLogEvents read per poll over the stream prefix `<job>/` costs the same for 1
host and for 256 and finds late streams on its own, where GetLogEvents per host does not scale (its
quota is 10 to 25 calls a second per account and region, FilterLogEvents' 5 to 25:
https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/cloudwatch_limits_cwl.html). A page holds at
most 10,000 events or 1 MB and may be partial or empty while a nextToken says there is more
(https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_FilterLogEvents.html).
Lines can reach CloudWatch well after their own timestamp; `LogReader` says how they are still found.
Every Logs read passes one token bucket; throttling backs off with jitter and says so.
"""
from __future__ import annotations

import json
import os
import random
import re
import sys
import threading
import time
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from launcher.aws import Clients, explain
from launcher.errors import EXIT_INTERRUPTED, EXIT_OK
from launcher.jobs import describe, exit_code_for
from launcher.names import LOG_GROUP, TERMINAL
from launcher.sanitize import clean
from launcher.timeutil import clock_time, epoch, iso

THROTTLE_CODES = frozenset({"ThrottlingException", "Throttling", "TooManyRequestsException",
                            "RequestLimitExceeded"})
# A server error or a dropped connection that outlives botocore's own retries: the tailer tries the read a
# few more times, spaced out, before giving up (a few seconds of CloudWatch trouble must not end a follow).
TRANSIENT_CODES = frozenset({"InternalFailure", "InternalServerError", "ServiceUnavailable",
                             "ServiceUnavailableException"})
MAX_TRANSIENT_RETRIES = 3
COLOURS = (36, 33, 32, 35, 34, 31)  # by host number: cyan, yellow, green, magenta, blue, red

__all__ = ["FollowResult", "Line", "LogReader", "RateLimiter", "follow", "shared_limiter"]


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


@dataclass(frozen=True)
class Line:
    timestamp: int  # milliseconds since the epoch, as CloudWatch keeps them
    host: int | None  # N of algo-N; None for a stream that does not follow SageMaker's naming
    stream: str
    message: str
    event_id: str
    late: bool = False  # printed after a line with a newer timestamp (it reached CloudWatch late)

    @property
    def label(self) -> str:
        return f"algo-{self.host}" if self.host is not None else self.stream.split("/", 1)[-1]


@dataclass
class Stats:
    polls: int = 0
    calls: int = 0  # FilterLogEvents calls that succeeded (pages), fresh and sweep
    sweep_calls: int = 0  # of which the late-line sweep's
    retried: int = 0  # botocore's own retries inside those calls
    throttled: int = 0  # calls that still failed with throttling and were backed off here
    events: int = 0  # events received, before dedup and filters (fetched)
    duplicates: int = 0  # received again (overlap, sweep), dropped by eventId
    foreign: int = 0  # from a stream outside `<job>/` (prefix collisions; moto ignores the prefix)
    printed: int = 0
    late: int = 0  # printed out of timestamp order: they reached CloudWatch after newer lines
    max_late_s: float = 0.0  # the longest ingestion lag seen (ingestionTime - timestamp)
    max_seen: int = 0  # the most eventIds the dedup memory held
    skipped_s: float = 0.0  # seconds of timestamps the sweep gave up on (reads too slow for the volume)


HORIZON_S = 300.0  # a line that reaches CloudWatch up to this long after its own timestamp still prints
BUCKET_MS = 2_000  # eventIds are remembered, and forgotten, by 2 s of event timestamp


class _SeenIds:
    """The eventIds read so far, by 2 s bucket of event timestamp, forgotten a whole bucket at a time.

    Buckets the fresh query still re-reads are sets; older ones are frozen into sorted arrays of 64-bit
    hashes (8 bytes an id), so five minutes of 10,000 lines a second (3M ids) hold about 25 MB. Two
    distinct ids of one bucket sharing a 64-bit hash (odds about 1e-9 for 100k ids) would drop a line.
    """

    def __init__(self) -> None:
        self._hot: dict[int, set[int]] = {}
        self._frozen: dict[int, array] = {}
        self.size = 0

    def add(self, event_id: str, ts: int) -> bool:
        """Remember `event_id`; False when it was remembered already."""
        bucket, key = ts // BUCKET_MS, hash(event_id)
        frozen = self._frozen.get(bucket)
        if frozen is not None:
            i = bisect_left(frozen, key)
            if i < len(frozen) and frozen[i] == key:
                return False
        hot = self._hot.get(bucket)
        if hot is None:
            hot = self._hot[bucket] = set()
        elif key in hot:
            return False
        hot.add(key)
        self.size += 1
        return True

    def freeze_below(self, ts: int) -> None:
        """Compact every bucket that ends at or below `ts` (the fresh query no longer reads it)."""
        for bucket in [b for b in self._hot if (b + 1) * BUCKET_MS <= ts]:
            keys = self._hot.pop(bucket)
            frozen = self._frozen.get(bucket)
            if frozen is None or len(keys) > 256:
                if frozen is not None:
                    keys.update(frozen)
                self._frozen[bucket] = array("q", sorted(keys))
            else:  # a few late ids joining a big frozen bucket: insert them, no 100k int objects made
                for key in sorted(keys):
                    frozen.insert(bisect_left(frozen, key), key)

    def forget_below(self, ts: int) -> None:
        """Drop every bucket that ends at or below `ts` (no read will return those events again)."""
        for store in (self._hot, self._frozen):
            for bucket in [b for b in store if (b + 1) * BUCKET_MS <= ts]:
                self.size -= len(store.pop(bucket))


class LogReader:
    """One job's log events, a poll at a time: a fresh read, a late-line sweep, dedup, host and grep filters.

    FilterLogEvents selects by event timestamp, never by ingestion time, so a line that reaches
    CloudWatch L seconds after its timestamp is only found by a read of its timestamp made after it
    arrived. Two reads share the work:
    - the fresh read, every poll, from the newest timestamp seen less `overlap_s` (2 s: most lines
      arrive within that), so each event is read about 1 + overlap/interval times;
    - the sweep, which reads each slice of timestamps once more when it is `horizon_s` (5 min) old,
      30 s at a time, so a line up to 5 minutes late prints once, whether or not lateness was seen before.
      It pages at most as fast as the fresh read (its budget is the fresh read's pages plus 2), so it
      never starves it; `finish()` sweeps what is left when the job has ended.
    Every event is therefore read about twice: with timestamp-range reads, no scheme can do less and
    still find a line of any lateness up to the horizon (each slice must be read after its last line
    can arrive). eventIds are remembered until their slice is swept, and no longer.
    """

    def __init__(self, job: str, client: Any, limiter: RateLimiter, *, since_ms: int | None = None,
                 hosts: Iterable[int] | None = None, grep: str | None = None, overlap_s: float = 2.0,
                 horizon_s: float = HORIZON_S, sweep_span_s: float = 30.0, max_pages: int = 50,
                 page_size: int | None = None, max_backoffs: int = 8,
                 notify: Callable[[str], None] = lambda _m: None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None):
        self.job, self.client, self.limiter = job, client, limiter
        self.prefix = job + "/"
        self._host_re = re.compile(rf"^{re.escape(job)}/algo-(\d+)-\d+$")
        self._hosts = frozenset(hosts) if hosts else None
        self._grep = re.compile(grep) if grep else None
        self._since = since_ms
        self._overlap = int(overlap_s * 1000)
        self._horizon = int(horizon_s * 1000)
        self._span = int(sweep_span_s * 1000)
        self.max_pages, self.page_size, self.max_backoffs = max_pages, page_size, max_backoffs
        self._notify, self._clock, self._sleep = notify, clock, sleep
        self._rng = rng or random.Random()
        self._high: int | None = None  # the newest timestamp the fresh read has seen
        self._fresh_from: int | None = since_ms  # startTime of the next fresh read; never moves back
        self._fresh_resume: dict[str, Any] | None = None
        self._sweep_from: int | None = None  # every timestamp below it has been read after the horizon
        self._sweep_to = 0  # the end (exclusive) of the sweep under way
        self._sweep_resume: dict[str, Any] | None = None
        self._ids = _SeenIds()
        self._printed_high: int | None = None
        self._late_note = [0, 0.0]  # late lines not yet reported on stderr, and the worst lateness
        self._stream_hosts: dict[str, int | None] = {}
        self._last_hint: dict[str, float] = {}
        self.slowdown = 1.0  # poll interval multiplier, raised while throttled
        self.stats = Stats()

    @property
    def horizon_s(self) -> float:
        return self._horizon / 1000

    def poll(self, drain: bool = False, emit: Callable[[list[Line]], None] | None = None) -> list[Line]:
        """New lines since the last poll; `drain` pages to the end however long.

        With `emit`, each page's lines go to it as soon as they are read (memory stays that of a page,
        whatever the volume) and nothing is returned; without, the poll's lines come back in order.
        """
        self.stats.polls += 1
        now_ms = int(self._clock() * 1000)
        if self._sweep_from is None:  # older lines than the horizon have all arrived: the first read is final
            self._sweep_from = now_ms - self._horizon if self._since is None else max(now_ms - self._horizon,
                                                                                     self._since)
        before = self.stats.throttled + self.stats.retried
        kept: list[Line] = []
        sink = self._sink(emit, kept)
        pages = self._fresh(now_ms, drain, sink)
        self._sweep(now_ms, pages + 2, False, sink)
        if self.stats.throttled + self.stats.retried > before:
            self.slowdown = min(self.slowdown * 2, 8.0)
        else:
            self.slowdown = max(1.0, self.slowdown / 2)
        return self._order(kept) if emit is None else []

    def finish(self, emit: Callable[[list[Line]], None] | None = None) -> list[Line]:
        """After the job has ended (and a draining poll): sweep every slice not yet swept, to the end."""
        if self._sweep_from is None or self._fresh_from is None:
            return []
        kept: list[Line] = []
        sink = self._sink(emit, kept)
        pages = self._ids.size / 7_000  # a page holds 10,000 events or 1 MB, about 7,000 progress lines
        if pages / self.limiter.rate > 5:
            self._notify(f"reading the last {self.horizon_s / 60:.0f} minutes of {self.job} once more for lines "
                         f"that reached CloudWatch late: about {pages:.0f} reads, {pages / self.limiter.rate:.0f}s at "
                         f"--rate {self.limiter.rate:g}")
        while self._sweep_resume is not None or self._sweep_from < self._fresh_from:
            self._sweep(int(self._clock() * 1000), None, True, sink)
        return self._order(kept) if emit is None else []

    def _sink(self, emit: Callable[[list[Line]], None] | None, kept: list[Line]) -> Callable[[list[Line]], None]:
        return kept.extend if emit is None else (lambda lines: emit(self._order(lines)))

    def _page(self, page: dict[str, Any], fresh: bool, sink: Callable[[list[Line]], None]) -> None:
        out: list[Line] = []
        for event in page.get("events", ()):
            self._accept(event, out, fresh)
        if out:
            sink(out)

    def _fresh(self, now_ms: int, drain: bool, sink: Callable[[list[Line]], None]) -> int:
        params = self._fresh_resume or self._query(self._fresh_from, None)
        self._fresh_resume = None
        pages = 0
        while True:
            page = self._call(params)
            pages += 1
            self._page(page, True, sink)
            token = page.get("nextToken")
            if not token:
                break
            params = {**params, "nextToken": token}
            if pages >= self.max_pages and not drain:
                self._fresh_resume = params  # the rest next poll, the same query continued
                break
        if self._fresh_resume is None and self._high is not None:
            # A host whose clock runs ahead of ours must not lift the floor over the other hosts' lines.
            floor = min(self._high, now_ms) - self._overlap
            self._fresh_from = floor if self._fresh_from is None else max(self._fresh_from, floor)
            self._ids.freeze_below(self._fresh_from)
        self._ids.forget_below(self._sweep_from or 0)
        return pages

    def _sweep(self, now_ms: int, budget: int | None, final: bool, sink: Callable[[list[Line]], None]) -> None:
        """Re-read the oldest unswept slice once its lines can no longer arrive (or the job has ended)."""
        if self._sweep_resume is None:
            if self._fresh_from is None or self._sweep_from is None:
                return
            due = self._fresh_from if final else min(now_ms - self._horizon, self._fresh_from)
            if not final and due - self._sweep_from > self._horizon:  # reads cannot keep up with the volume
                skip_to = due - self._horizon
                self.stats.skipped_s += (skip_to - self._sweep_from) / 1000
                self._hint("sweep", f"the late-line sweep is {(due - self._sweep_from) / 1000:.0f}s behind "
                           f"(reads limited by --rate); lines more than {self.horizon_s:.0f}s late may be missed",
                           force=True)
                self._sweep_from = skip_to
            to = due if final else due - due % BUCKET_MS
            if to <= self._sweep_from or (not final and to - self._sweep_from < self._span):
                return
            self._sweep_to = to
            self._sweep_resume = self._query(self._sweep_from, to - 1)  # endTime: nothing later returned
        params = self._sweep_resume
        pages = 0
        while budget is None or pages < budget:
            page = self._call(params)
            pages += 1
            self.stats.sweep_calls += 1
            self._page(page, False, sink)
            token = page.get("nextToken")
            if not token:
                self._sweep_resume = None
                self._sweep_from = self._sweep_to
                self._ids.forget_below(self._sweep_from)
                return
            params = {**params, "nextToken": token}
        self._sweep_resume = params

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

    def _accept(self, event: dict[str, Any], out: list[Line], fresh: bool) -> None:
        self.stats.events += 1
        stream = event.get("logStreamName", "")
        if not stream.startswith(self.prefix):  # `job-a` must not show `job-ab`
            self.stats.foreign += 1
            return
        event_id, ts = str(event["eventId"]), int(event["timestamp"])
        if fresh and (self._high is None or ts > self._high):
            self._high = ts
        if not self._ids.add(event_id, ts):
            self.stats.duplicates += 1
            return
        if self._ids.size > self.stats.max_seen:
            self.stats.max_seen = self._ids.size
        lag = (int(event.get("ingestionTime", ts)) - ts) / 1000
        if lag > self.stats.max_late_s:
            self.stats.max_late_s = lag
        host = self._host(stream)
        if self._hosts is not None and host not in self._hosts:
            return
        message = str(event.get("message", "")).rstrip("\n")
        if self._grep is not None and not self._grep.search(message):
            return
        out.append(Line(ts, host, stream, message, event_id))

    def _order(self, lines: list[Line]) -> list[Line]:
        """Sort a poll's lines; mark (and note on stderr, now and then) those older than one printed before."""
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

    def _host(self, stream: str) -> int | None:
        if stream not in self._stream_hosts:
            m = self._host_re.match(stream)
            self._stream_hosts[stream] = int(m.group(1)) if m else None
        return self._stream_hosts[stream]

    def _call(self, params: dict[str, Any]) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError, ConnectionClosedError

        attempt = failures = 0
        while True:
            self.limiter.acquire()
            try:
                page = self.client.filter_log_events(**params)
            except ClientError as exc:
                meta = exc.response.get("ResponseMetadata", {})
                self.stats.retried += int(meta.get("RetryAttempts", 0) or 0)
                code = exc.response.get("Error", {}).get("Code", "")
                if code == "ResourceNotFoundException":  # the group appears with a job's first stream
                    return {"events": []}
                if code in THROTTLE_CODES and attempt < self.max_backoffs:
                    self.stats.throttled += 1
                    delay = min(60.0, 2.0 * 2 ** attempt) * self._rng.uniform(0.5, 1.0)
                    attempt += 1
                    self._hint("throttle", f"CloudWatch Logs is throttling reads (a quota shared by the whole "
                               f"account and region); retrying in {delay:.1f}s", force=True)
                    self._sleep(delay)
                    continue
                status = meta.get("HTTPStatusCode")
                transient = code in TRANSIENT_CODES or (isinstance(status, int) and status >= 500)
                if transient and failures < MAX_TRANSIENT_RETRIES:
                    failures += 1
                    self._back_off_after_failure(clean(code or status, limit=60), failures)
                    continue
                raise explain(exc, f"reading the logs of {self.job}") from None
            except ConnectionClosedError as exc:
                if failures < MAX_TRANSIENT_RETRIES:
                    failures += 1
                    self._back_off_after_failure("connection dropped", failures)
                    continue
                raise explain(exc, f"reading the logs of {self.job}") from None
            except BotoCoreError as exc:
                raise explain(exc, f"reading the logs of {self.job}") from None
            self.stats.calls += 1
            retried = int(page.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)
            if retried:
                self.stats.retried += retried
                self._hint("retry", f"CloudWatch Logs throttled or failed {retried} read(s), retried; "
                           "polling more slowly")
            return page

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


@dataclass
class FollowResult:
    job: str
    status: str | None
    exit_code: int
    failure_reason: str | None = None
    interrupted: bool = False
    stats: Stats = field(default_factory=Stats)


class _Printer:
    """Log lines to `out`, as text (`[algo-N] message`, coloured on a terminal) or as JSON lines.

    Everything from AWS goes through `clean`: a log line cannot move the cursor, retitle the window,
    write the clipboard or reorder text, and a lone surrogate cannot crash a strict UTF-8 stdout.
    """

    def __init__(self, out: TextIO, err: TextIO, as_json: bool, color: bool):
        self.out, self.err, self.as_json, self.color = out, err, as_json, color

    def lines(self, lines: list[Line]) -> None:
        if not lines:
            return
        if self.as_json:
            text = "".join(self._record(ln) + "\n" for ln in lines)
        else:
            text = "".join(f"{self._label(ln)} {clean(ln.message)}\n" for ln in lines)
        self.out.write(text)  # one write a page: a pipe or a terminal gets whole lines, quickly
        self.out.flush()

    @staticmethod
    def _record(line: Line) -> str:
        record = {"type": "log", "timestamp": iso(line.timestamp / 1000), "host": clean(line.label),
                  "stream": clean(line.stream), "message": clean(line.message), "event_id": clean(line.event_id)}
        if line.late:
            record["late"] = True
        return json.dumps(record)

    def _label(self, line: Line) -> str:
        label = f"[{clean(line.label)}]"
        if self.color and line.host is not None:
            return f"\x1b[{COLOURS[(line.host - 1) % len(COLOURS)]}m{label}\x1b[0m"
        return label

    def status(self, transition: dict[str, Any]) -> None:
        if self.as_json:
            self.out.write(json.dumps({"type": "status", "status": clean(transition["Status"]),
                                       "time": iso(epoch(transition.get("StartTime")) or 0),
                                       "message": clean(transition.get("StatusMessage", ""))}) + "\n")
            self.out.flush()
        else:
            self.note(f"{clock_time(transition.get('StartTime'))} {clean(transition['Status'])} - "
                      f"{clean(transition.get('StatusMessage', ''))}".rstrip(" -"))

    def end(self, result: FollowResult, billable: Any) -> None:
        if self.as_json:
            self.out.write(json.dumps({"type": "end", "job": result.job, "status": result.status,
                                       "exit_code": result.exit_code,
                                       "failure_reason": None if result.failure_reason is None
                                       else clean(result.failure_reason),
                                       "billable_seconds": billable}) + "\n")
            self.out.flush()
            return
        if result.status == "Failed":
            self.note(f"{result.job} Failed: {clean(result.failure_reason or 'no FailureReason given')}")
        else:
            extra = f" (billable seconds: {billable})" if billable is not None else ""
            self.note(f"{result.job} {result.status}{extra}")

    def note(self, message: str) -> None:
        self.err.write(message + "\n")
        self.err.flush()


class _Status:
    """DescribeTrainingJob on its own timer; prints each SecondaryStatus transition once."""

    def __init__(self, job: str, clients: Clients, printer: _Printer):
        self.job, self.clients, self.printer = job, clients, printer
        self._printed: set[tuple[str, Any]] = set()
        self.desc: dict[str, Any] = {}

    def check(self) -> dict[str, Any]:
        self.desc = describe(self.clients, self.job)
        for t in self.desc.get("SecondaryStatusTransitions", []):
            key = (t["Status"], t.get("StartTime"))
            if key not in self._printed:
                self._printed.add(key)
                self.printer.status(t)
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


def _warn_missing_hosts(hosts: Iterable[int] | None, watcher: _Status, printer: _Printer) -> None:
    """`--host 9` on a 4-host job prints nothing at all: say so rather than look like a silent host."""
    count = watcher.host_count
    if not hosts or count is None:
        return
    beyond = sorted(h for h in hosts if h > count)
    if beyond:
        shown = ", ".join(f"algo-{h}" for h in beyond[:5]) + (", ..." if len(beyond) > 5 else "")
        printer.note(f"warning: {watcher.job} has {count} host(s), algo-1 to algo-{count}; "
                     f"nothing will print for {shown}")


def follow(job: str, clients: Clients, *, follow: bool = True, since: float | None = None,
           hosts: Iterable[int] | None = None, grep: str | None = None, as_json: bool = False,
           rate: float = 2.0, interval: float = 5.0, status_interval: float | None = None,
           settle: float | None = None, overlap: float = 2.0, horizon: float = HORIZON_S,
           out: TextIO | None = None, err: TextIO | None = None, color: bool | None = None,
           limiter: RateLimiter | None = None, clock: Callable[[], float] = time.time,
           sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None) -> FollowResult:
    """Print a job's log lines from every host until it ends (or once, with `follow=False`).

    Returns the job's status and the documented exit code: 0 Completed, 1 Failed, 5 Stopped,
    130 when interrupted (the job keeps running). `since` is seconds back from now. `submit --wait`
    calls this with the job it just started. The status is read every poll (`status_interval`), so
    the command returns within about a poll plus `settle` of the job's end.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    if color is None:
        color = bool(getattr(out, "isatty", lambda: False)()) and not as_json and "NO_COLOR" not in os.environ
    printer = _Printer(out, err, as_json, color)
    since_ms = None if since is None else int((clock() - since) * 1000)
    host_set = frozenset(hosts) if hosts else None
    reader = LogReader(job, clients.logs, limiter or shared_limiter(rate), since_ms=since_ms, hosts=host_set,
                       grep=grep, overlap_s=overlap, horizon_s=horizon, max_backoffs=8 if follow else 4,
                       notify=printer.note, clock=clock, sleep=sleep, rng=rng)
    watcher = _Status(job, clients, printer)
    result = FollowResult(job, None, EXIT_OK, stats=reader.stats)
    try:
        if not follow:
            if host_set:
                watcher.desc = describe(clients, job)  # the host count only: transitions are not printed here
                _warn_missing_hosts(host_set, watcher, printer)
            reader.poll(drain=True, emit=printer.lines)
            if reader.stats.events == reader.stats.foreign:  # nothing of this job's (not merely filtered out)
                desc = watcher.check()
                printer.note(f"no log lines yet for {job} ({desc['TrainingJobStatus']}, {desc.get('SecondaryStatus')})")
            result.status = watcher.status
            return result
        _follow_loop(reader, watcher, printer, interval, status_interval or interval,
                     min(5.0, 4 * interval) if settle is None else settle, clock, sleep, rng, host_set)
    except KeyboardInterrupt:
        result.status, result.interrupted, result.exit_code = watcher.status, True, EXIT_INTERRUPTED
        printer.note(f"stopped following {job}; the job keeps running "
                     f"(`smp-launch stop {job}` stops it, `smp-launch logs {job}` follows again)")
        return result
    result.status = watcher.status
    result.failure_reason = watcher.desc.get("FailureReason")
    result.exit_code = exit_code_for(result.status or "")
    printer.end(result, watcher.desc.get("BillableTimeInSeconds"))
    return result


def _follow_loop(reader: LogReader, watcher: _Status, printer: _Printer, interval: float,
                 status_interval: float, settle: float, clock: Callable[[], float],
                 sleep: Callable[[float], None], rng: random.Random | None,
                 hosts: Iterable[int] | None = None) -> None:
    """Poll until the job is terminal, then read its last lines once and return.

    After the end, lines still on their way are given `settle` seconds from the job's end time (not
    from when we noticed it); then one draining read and the final sweep pick up everything that has
    arrived, late lines included, and nothing waits for lines that will never come.
    """
    rng = rng or random.Random()
    watcher.check()
    _warn_missing_hosts(hosts, watcher, printer)
    next_status = clock() + status_interval
    while True:
        if watcher.status in TERMINAL:
            noticed = clock()
            ended = min(noticed, epoch(watcher.desc.get("TrainingEndTime")) or noticed)
            if ended + settle > noticed:
                sleep(ended + settle - noticed)
            reader.poll(drain=True, emit=printer.lines)
            reader.finish(emit=printer.lines)
            return
        started = clock()
        reader.poll(emit=printer.lines)
        # Polls start `interval` apart: time spent reading (pages, waits for tokens) is not added to it.
        sleep(max(0.0, interval * reader.slowdown * rng.uniform(0.9, 1.1) - (clock() - started)))
        if clock() >= next_status:
            watcher.check()
            next_status = clock() + status_interval
