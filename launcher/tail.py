"""Follow a training job's logs from all its hosts, within CloudWatch's account-wide read quotas.

Why this shape (../shared/reference/cloudwatch_logs_and_moto.md, section 5): one FilterLogEvents pass
per poll over the prefix `<job>/` costs the same for 1 host and for 256 and finds late streams on its
own; the SDK's GetLogEvents per host does not scale and hangs above 50 hosts. Each poll re-reads an
overlap window so late-ingested, back-dated events are seen, and eventIds drop what was printed
already. Every Logs read passes one token bucket; throttling backs off with jitter and says so.
"""
from __future__ import annotations

import heapq
import json
import os
import random
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from launcher.aws import Clients, explain
from launcher.errors import EXIT_INTERRUPTED, EXIT_OK
from launcher.jobs import TERMINAL, describe, exit_code_for
from launcher.timeutil import clock_time, epoch, iso

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
THROTTLE_CODES = frozenset({"ThrottlingException", "Throttling", "TooManyRequestsException",
                            "RequestLimitExceeded"})
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

    @property
    def label(self) -> str:
        return f"algo-{self.host}" if self.host is not None else self.stream.split("/", 1)[-1]


@dataclass
class Stats:
    polls: int = 0
    calls: int = 0  # FilterLogEvents calls that succeeded (pages)
    retried: int = 0  # botocore's own retries inside those calls
    throttled: int = 0  # calls that still failed with throttling and were backed off here
    events: int = 0  # events received, before dedup and filters
    duplicates: int = 0  # received again in the overlap window, dropped by eventId
    foreign: int = 0  # from a stream outside `<job>/` (prefix collisions; moto ignores the prefix)
    printed: int = 0
    max_seen: int = 0  # the largest the dedup memory grew


class LogReader:
    """One job's log events, a poll at a time: paging, prefix re-check, dedup, host and grep filters."""

    def __init__(self, job: str, client: Any, limiter: RateLimiter, *, since_ms: int | None = None,
                 hosts: Iterable[int] | None = None, grep: str | None = None, overlap_s: float = 10.0,
                 max_overlap_s: float = 300.0, max_pages: int = 5, page_size: int | None = None,
                 max_backoffs: int = 8,
                 notify: Callable[[str], None] = lambda _m: None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None):
        self.job, self.client, self.limiter = job, client, limiter
        self.prefix = job + "/"
        self._host_re = re.compile(rf"^{re.escape(job)}/algo-(\d+)-\d+$")
        self._hosts = frozenset(hosts) if hosts else None
        self._grep = re.compile(grep) if grep else None
        self._since = since_ms
        self._base_overlap = self._overlap = int(overlap_s * 1000)
        self._max_overlap = int(max_overlap_s * 1000)
        self.max_pages, self.page_size, self.max_backoffs = max_pages, page_size, max_backoffs
        self._notify, self._clock, self._sleep = notify, clock, sleep
        self._rng = rng or random.Random()
        self._high: int | None = None  # the newest timestamp seen
        self._floor: int | None = since_ms  # startTime of the next query; never moves back
        self._seen: dict[str, int] = {}
        self._expiry: list[tuple[int, str]] = []  # (timestamp, eventId), to forget ids below the floor
        self._resume: dict[str, Any] | None = None
        self._stream_hosts: dict[str, int | None] = {}
        self._last_hint = float("-inf")
        self.slowdown = 1.0  # poll interval multiplier, raised while throttled
        self.stats = Stats()

    def poll(self, drain: bool = False) -> list[Line]:
        """New lines since the last poll, in timestamp order; `drain` pages to the end however long."""
        self.stats.polls += 1
        params = self._resume or self._query()
        self._resume = None
        fresh: list[Line] = []
        throttled_before = self.stats.throttled + self.stats.retried
        pages = 0
        while True:
            page = self._call(params)
            pages += 1
            for event in page.get("events", []):
                self._accept(event, fresh)
            token = page.get("nextToken")
            if not token:
                break
            params = {**params, "nextToken": token}
            if pages >= self.max_pages and not drain:
                self._resume = params  # the rest next poll, the same query continued
                break
        if self._resume is None:
            self._advance_floor()
        if self.stats.throttled + self.stats.retried > throttled_before:
            self.slowdown = min(self.slowdown * 2, 8.0)
        else:
            self.slowdown = max(1.0, self.slowdown / 2)
        fresh.sort(key=lambda ln: (ln.timestamp, ln.host or 0, ln.stream, len(ln.event_id), ln.event_id))
        self.stats.printed += len(fresh)
        return fresh

    def _query(self) -> dict[str, Any]:
        params: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamNamePrefix": self.prefix,
                                  "interleaved": True}  # AWS always interleaves; moto only when asked
        if self._floor is not None:
            params["startTime"] = self._floor
        if self.page_size:
            params["limit"] = self.page_size
        return params

    @property
    def overlap_s(self) -> float:
        """How far back each poll re-reads: the base overlap, widened by the ingestion lag seen."""
        return self._overlap / 1000

    def _accept(self, event: dict[str, Any], out: list[Line]) -> None:
        self.stats.events += 1
        stream = event.get("logStreamName", "")
        if not stream.startswith(self.prefix):  # `job-a` must not show `job-ab`
            self.stats.foreign += 1
            return
        event_id, ts = str(event["eventId"]), int(event["timestamp"])
        if event_id in self._seen:
            self.stats.duplicates += 1
            return
        self._seen[event_id] = ts
        heapq.heappush(self._expiry, (ts, event_id))
        self.stats.max_seen = max(self.stats.max_seen, len(self._seen))
        self._high = ts if self._high is None else max(self._high, ts)
        lag = int(event.get("ingestionTime", ts)) - ts
        if lag > 0:  # widen the overlap to cover the lateness seen so far, with a margin
            self._overlap = min(self._max_overlap, max(self._overlap, lag + self._base_overlap // 2))
        host = self._host(stream)
        if self._hosts is not None and host not in self._hosts:
            return
        message = str(event.get("message", "")).rstrip("\n")
        if self._grep is not None and not self._grep.search(message):
            return
        out.append(Line(ts, host, stream, message, event_id))

    def _host(self, stream: str) -> int | None:
        if stream not in self._stream_hosts:
            m = self._host_re.match(stream)
            self._stream_hosts[stream] = int(m.group(1)) if m else None
        return self._stream_hosts[stream]

    def _advance_floor(self) -> None:
        """Move the next query's startTime up to the overlap window and forget ids below it."""
        if self._high is None:
            return
        floor = self._high - self._overlap
        if self._since is not None:
            floor = max(floor, self._since)
        self._floor = floor if self._floor is None else max(self._floor, floor)
        while self._expiry and self._expiry[0][0] < self._floor:
            _, event_id = heapq.heappop(self._expiry)
            self._seen.pop(event_id, None)

    def _call(self, params: dict[str, Any]) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        attempt = 0
        while True:
            self.limiter.acquire()
            try:
                page = self.client.filter_log_events(**params)
            except ClientError as exc:
                self.stats.retried += int(exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)
                code = exc.response.get("Error", {}).get("Code", "")
                if code == "ResourceNotFoundException":  # the group appears with a job's first stream
                    return {"events": []}
                if code in THROTTLE_CODES and attempt < self.max_backoffs:
                    self.stats.throttled += 1
                    delay = min(60.0, 2.0 * 2 ** attempt) * self._rng.uniform(0.5, 1.0)
                    attempt += 1
                    self._hint(f"CloudWatch Logs is throttling reads (a quota shared by the whole account and "
                               f"region); retrying in {delay:.1f}s", force=True)
                    self._sleep(delay)
                    continue
                raise explain(exc, f"reading the logs of {self.job}") from None
            except BotoCoreError as exc:
                raise explain(exc, f"reading the logs of {self.job}") from None
            self.stats.calls += 1
            retried = int(page.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)
            if retried:
                self.stats.retried += retried
                self._hint(f"CloudWatch Logs throttled or failed {retried} read(s), retried; polling more slowly")
            return page

    def _hint(self, message: str, force: bool = False) -> None:
        now = self._clock()
        if force or now - self._last_hint >= 30.0:
            self._last_hint = now
            self._notify(message)


@dataclass
class FollowResult:
    job: str
    status: str | None
    exit_code: int
    failure_reason: str | None = None
    interrupted: bool = False
    stats: Stats = field(default_factory=Stats)


class _Printer:
    """Log lines to `out`, as text (`[algo-N] message`, coloured on a terminal) or as JSON lines."""

    def __init__(self, out: TextIO, err: TextIO, as_json: bool, color: bool):
        self.out, self.err, self.as_json, self.color = out, err, as_json, color

    def lines(self, lines: list[Line]) -> None:
        if not lines:
            return
        if self.as_json:
            text = "".join(json.dumps({"type": "log", "timestamp": iso(ln.timestamp / 1000), "host": ln.label,
                                       "stream": ln.stream, "message": ln.message, "event_id": ln.event_id}) + "\n"
                           for ln in lines)
        else:
            text = "".join(f"{self._label(ln)} {ln.message}\n" for ln in lines)
        self.out.write(text)
        self.out.flush()

    def _label(self, line: Line) -> str:
        label = f"[{line.label}]"
        if self.color and line.host is not None:
            return f"\x1b[{COLOURS[(line.host - 1) % len(COLOURS)]}m{label}\x1b[0m"
        return label

    def status(self, transition: dict[str, Any]) -> None:
        if self.as_json:
            self.out.write(json.dumps({"type": "status", "status": transition["Status"],
                                       "time": iso(epoch(transition.get("StartTime")) or 0),
                                       "message": transition.get("StatusMessage", "")}) + "\n")
            self.out.flush()
        else:
            self.note(f"{clock_time(transition.get('StartTime'))} {transition['Status']} - "
                      f"{transition.get('StatusMessage', '')}".rstrip(" -"))

    def end(self, result: FollowResult, billable: Any) -> None:
        if self.as_json:
            self.out.write(json.dumps({"type": "end", "job": result.job, "status": result.status,
                                       "exit_code": result.exit_code, "failure_reason": result.failure_reason,
                                       "billable_seconds": billable}) + "\n")
            self.out.flush()
            return
        if result.status == "Failed":
            self.note(f"{result.job} Failed: {result.failure_reason or 'no FailureReason given'}")
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


def follow(job: str, clients: Clients, *, follow: bool = True, since: float | None = None,
           hosts: Iterable[int] | None = None, grep: str | None = None, as_json: bool = False,
           rate: float = 2.0, interval: float = 5.0, status_interval: float | None = None,
           flush_min: float | None = None, flush_max: float = 90.0, overlap: float = 10.0,
           out: TextIO | None = None, err: TextIO | None = None, color: bool | None = None,
           limiter: RateLimiter | None = None, clock: Callable[[], float] = time.time,
           sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None) -> FollowResult:
    """Print a job's log lines from every host until it ends (or once, with `follow=False`).

    Returns the job's status and the documented exit code: 0 Completed, 1 Failed, 5 Stopped,
    130 when interrupted (the job keeps running). `since` is seconds back from now. `submit --wait`
    calls this with the job it just started.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    if color is None:
        color = bool(getattr(out, "isatty", lambda: False)()) and not as_json and "NO_COLOR" not in os.environ
    printer = _Printer(out, err, as_json, color)
    since_ms = None if since is None else int((clock() - since) * 1000)
    reader = LogReader(job, clients.logs, limiter or shared_limiter(rate), since_ms=since_ms, hosts=hosts,
                       grep=grep, overlap_s=overlap, max_backoffs=8 if follow else 4, notify=printer.note,
                       clock=clock, sleep=sleep, rng=rng)
    watcher = _Status(job, clients, printer)
    result = FollowResult(job, None, EXIT_OK, stats=reader.stats)
    try:
        if not follow:
            printer.lines(reader.poll(drain=True))
            if reader.stats.events == reader.stats.foreign:  # nothing of this job's (not merely filtered out)
                desc = watcher.check()
                printer.note(f"no log lines yet for {job} ({desc['TrainingJobStatus']}, {desc.get('SecondaryStatus')})")
            result.status = watcher.status
            return result
        _follow_loop(reader, watcher, printer, interval, status_interval or 3 * interval,
                     min(20.0, 4 * interval) if flush_min is None else flush_min, flush_max, clock, sleep, rng)
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
                 status_interval: float, flush_min: float, flush_max: float, clock: Callable[[], float],
                 sleep: Callable[[float], None], rng: random.Random | None) -> None:
    """Poll until the job is terminal and a final flush has caught its last lines."""
    rng = rng or random.Random()
    watcher.check()
    next_status = clock() + status_interval
    terminal_at: float | None = None
    ended = 0.0
    ended_long_ago = False
    empty = 0
    while True:
        if terminal_at is None and watcher.status in TERMINAL:
            terminal_at = clock()
            # The job's own end time, unless our clock runs behind AWS's.
            ended = min(terminal_at, epoch(watcher.desc.get("TrainingEndTime")) or terminal_at)
            ended_long_ago = terminal_at - ended >= flush_min + reader.overlap_s
        lines = reader.poll(drain=terminal_at is not None)
        printer.lines(lines)
        if terminal_at is not None:
            empty = 0 if lines else empty + 1
            settled = empty >= 2 and clock() - ended >= flush_min
            if ended_long_ago or settled or clock() - terminal_at >= flush_max:
                return
        sleep(interval * reader.slowdown * rng.uniform(0.9, 1.1))
        if terminal_at is None and clock() >= next_status:
            watcher.check()
            next_status = clock() + status_interval
