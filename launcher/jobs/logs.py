"""Follow a training job's logs from all its hosts until it ends: the poll loop, the status watcher beside it,
and what a caller gets back. Nothing here prints.

`iter_lines` is the core: typed, sanitised `LogLine`s as they come, with status changes and notes handed
to callbacks. `follow` runs it to the end for a caller that takes lines by callback too (the CLI's printer)
and returns the job's outcome and exit code. Reading one poll is launcher.jobs.reader's job.
"""
from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from launcher.core.aws import Clients
from launcher.core.durations import POLL_S
from launcher.core.errors import EXIT_INTERRUPTED, EXIT_OK
from launcher.core.names import TERMINAL
from launcher.core.timeutil import epoch
from launcher.jobs.logrecords import (
    HORIZON_S,
    POLL_JITTER,
    LogLine,
    LogNote,
    NoteKind,
    Stats,
    StatusChange,
    waiting_notes,
)
from launcher.jobs.ratelimit import RateLimiter, shared_limiter
from launcher.jobs.reader import LogReader
from launcher.jobs.status import describe, exit_code_for

_log = logging.getLogger("launcher.logs")
_log.addHandler(logging.NullHandler())  # notes reach a handler the application set up, never stderr by default

__all__ = ["FollowResult", "LogLine", "LogLines", "LogNote", "NoteKind", "Polling", "StatusChange", "follow",
           "follow_many", "iter_lines", "waiting_notes"]


def _to_logger(note: LogNote) -> None:
    _log.warning("%s", note.message)


@dataclass(frozen=True)
class Polling:
    """How the logs are polled: the call rate and interval, the design's windows, and the clock it all runs on
    (tests and the bench drive a virtual one)."""

    rate: float = 2.0  # Logs calls a second, shared by every read (the account's quota is shared too)
    interval: float = POLL_S  # seconds between polls
    status_interval: float | None = None  # seconds between DescribeTrainingJob reads (default: interval)
    settle: float | None = None  # seconds after the job's end before the last read (default: min(5, 4 polls))
    overlap: float = 2.0  # seconds each read goes back below the previous one's end
    horizon: float = HORIZON_S  # how late a line may be and still print (later ones are counted at the end)
    drain_timeout: float | None = None  # the end-of-job check stops after this (None: when done)
    insights: bool = True  # late lines through Logs Insights (False: re-read slices with FilterLogEvents)
    limiter: RateLimiter | None = None  # a bucket to share; default: the process's one at `rate`
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random | None = None


class _Status:
    """DescribeTrainingJob on its own timer; hands each SecondaryStatus transition on once."""

    def __init__(self, job: str, clients: Clients, on_status: Callable[[StatusChange], None] | None):
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
                    self.on_status(StatusChange.from_transition(t))
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


def _warn_missing_hosts(hosts: Iterable[int] | None, watcher: _Status, on_note: Callable[[LogNote], None]) -> None:
    """Host 9 of a 4-host job prints nothing at all: say so rather than look like a silent host."""
    count = watcher.host_count
    if not hosts or count is None:
        return
    beyond = sorted(h for h in hosts if h > count)
    if beyond:
        shown = ", ".join(f"algo-{h}" for h in beyond[:5]) + (", ..." if len(beyond) > 5 else "")
        on_note(LogNote(NoteKind.NO_SUCH_HOST, f"warning: {watcher.job} has {count} host(s), algo-1 to "
                        f"algo-{count}; nothing will print for {shown}"))


class LogLines(Iterator[LogLine]):
    """A job's log lines as they come; once exhausted, `status`, `exit_code`, `failure_reason`, `stats`.

    Nothing here prints: notes (throttling, late lines printed out of order, an unfinished final check)
    go to `on_note`, status transitions to `on_status`, and `on_idle` runs before each wait between
    polls (a printer flushes there). With `until_end`, following ends when the job does, after its last
    lines; without, the iterator holds what exists now.
    """

    def __init__(self, job: str, clients: Clients, *, until_end: bool, since: float | None,
                 hosts: Iterable[int] | None, grep: str | None, polling: Polling, on_note: Callable[[LogNote], None],
                 on_status: Callable[[StatusChange], None] | None, on_idle: Callable[[], None] | None):
        p = polling
        self.job = job
        self._clients, self._until_end, self._on_note = clients, until_end, on_note
        self._hosts = frozenset(hosts) if hosts else None
        self._since = since
        self._interval = p.interval
        self._status_interval = p.status_interval or p.interval
        self._settle = min(5.0, 4 * p.interval) if p.settle is None else p.settle
        self._on_idle = on_idle or (lambda: None)
        self._clock, self._sleep = p.clock, p.sleep
        self._rng = p.rng or random.Random()
        since_ms = None if since is None else int((p.clock() - since) * 1000)
        self.reader = LogReader(job, clients.logs, p.limiter or shared_limiter(p.rate), since_ms=since_ms,
                                hosts=self._hosts, grep=grep, overlap_s=p.overlap, horizon_s=p.horizon,
                                poll_s=p.interval, drain_timeout_s=p.drain_timeout,
                                max_backoffs=8 if until_end else 4, insights=p.insights, on_note=on_note,
                                clock=p.clock, sleep=p.sleep, rng=p.rng)
        self.watcher = _Status(job, clients, on_status)
        self.stats: Stats = self.reader.stats
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
            if not self._until_end:
                if self._hosts:
                    watcher.desc = describe(self._clients, self.job)  # the host count only, no transitions
                    _warn_missing_hosts(self._hosts, watcher, self._on_note)
                for page in reader.pages(drain=True):
                    yield from page
                if reader.stats.events == reader.stats.foreign:  # nothing of this job's (not merely filtered out)
                    desc = watcher.check()
                    state = f"({desc['TrainingJobStatus']}, {desc.get('SecondaryStatus')})"
                    if desc["TrainingJobStatus"] in TERMINAL:  # an ended job writes no more: "yet" would mislead
                        window = " in the --since window" if self._since is not None else ""
                        text = f"no log lines for {self.job}{window} {state}; it has ended, so no more will come"
                    else:
                        text = f"no log lines yet for {self.job} {state}"
                    self._on_note(LogNote(NoteKind.NO_LINES_YET, text))
                return
            watcher.check()
            _warn_missing_hosts(self._hosts, watcher, self._on_note)
            next_status = self._clock() + self._status_interval
            while watcher.status not in TERMINAL:
                started = self._clock()
                for page in reader.pages():
                    yield from page
                self._on_idle()
                # Polls start `interval` apart: time spent reading (pages, waits for tokens) is not added to it.
                jitter = self._rng.uniform(1 - POLL_JITTER, 1 + POLL_JITTER)
                self._sleep(max(0.0, self._interval * reader.slowdown * jitter - (self._clock() - started)))
                # a poll may come POLL_JITTER early: a status read due every poll must not skip those
                if self._clock() >= next_status - 2 * POLL_JITTER * self._interval:
                    watcher.check()
                    next_status = self._clock() + self._status_interval
            # Lines still on their way get `settle` seconds from the job's end time (not from when we
            # noticed it); then one draining read and the final late check, and nothing waits for more.
            noticed = self._clock()
            ended = min(noticed, epoch(watcher.desc.get("TrainingEndTime")) or noticed)
            reader.ended(int(ended * 1000))
            if ended + self._settle > noticed:
                self._on_idle()
                self._sleep(ended + self._settle - noticed)
            for page in reader.pages(drain=True):
                yield from page
            began = epoch(watcher.desc.get("TrainingStartTime")) or epoch(watcher.desc.get("CreationTime"))
            for page in reader.finish_pages(None if began is None else int(began * 1000)):
                yield from page
                self._on_idle()  # the end-of-job check may go on for a while: what it finds shows as it comes
            self.failure_reason = watcher.desc.get("FailureReason")
            self.billable = watcher.desc.get("BillableTimeInSeconds")
            self.exit_code = exit_code_for(watcher.status or "")
        finally:
            self._on_idle()


def iter_lines(job: str, clients: Clients, *, until_end: bool = False, since: float | None = None,
               hosts: Iterable[int] | None = None, grep: str | None = None, polling: Polling | None = None,
               on_note: Callable[[LogNote], None] | None = None,
               on_status: Callable[[StatusChange], None] | None = None,
               on_idle: Callable[[], None] | None = None) -> LogLines:
    """A job's log lines from every host, typed and sanitised: what exists now, or (`until_end`) until it ends.

    `since` is seconds back from now; `hosts` keeps those algo-N; `grep` is a regular expression on the
    message. Notes go to `on_note` (default: the `launcher.logs` logger, silent unless the application
    configures logging). Errors raise `LauncherError`s.
    """
    return LogLines(job, clients, until_end=until_end, since=since, hosts=hosts, grep=grep,
                    polling=polling or Polling(), on_note=on_note or _to_logger, on_status=on_status,
                    on_idle=on_idle)


@dataclass(frozen=True)
class FollowResult:
    """How a follow ended: the job's status and the documented exit code, and what the reads cost."""

    job: str
    status: str | None
    exit_code: int
    failure_reason: str | None = None  # as AWS gave it (not sanitised)
    billable_seconds: Any = None
    interrupted: bool = False  # Ctrl-C stopped the follow; the job keeps running
    to_end: bool = False  # followed until the job ended (its outcome is known)
    stats: Stats = field(default_factory=Stats)


def follow(job: str, clients: Clients, *, until_end: bool = True, since: float | None = None,
           hosts: Iterable[int] | None = None, grep: str | None = None, polling: Polling | None = None,
           on_line: Callable[[LogLine], None] | None = None, on_note: Callable[[LogNote], None] | None = None,
           on_status: Callable[[StatusChange], None] | None = None,
           on_idle: Callable[[], None] | None = None) -> FollowResult:
    """Hand a job's log lines to `on_line` until it ends (or what exists now, without `until_end`).

    Returns the job's status and the documented exit code: 0 Completed, 1 Failed, 5 Stopped,
    130 when interrupted (Ctrl-C ends the follow, not the job). The status is read every poll
    (`status_interval`), so this returns within about a poll plus `settle` plus the final late-line
    check of the job's end.
    """
    lines = iter_lines(job, clients, until_end=until_end, since=since, hosts=hosts, grep=grep, polling=polling,
                       on_note=on_note, on_status=on_status, on_idle=on_idle)
    write = on_line or (lambda _line: None)
    try:
        for line in lines:
            write(line)
    except KeyboardInterrupt:
        return FollowResult(job, lines.status, EXIT_INTERRUPTED, interrupted=True, stats=lines.stats)
    if not until_end:
        return FollowResult(job, lines.status, EXIT_OK, stats=lines.stats)
    return FollowResult(job, lines.status, lines.exit_code, lines.failure_reason, lines.billable, to_end=True,
                        stats=lines.stats)


def follow_many(jobs: Iterable[str], clients: Clients, *, until_end: bool = True, since: float | None = None,
                hosts: Iterable[int] | None = None, grep: str | None = None, polling: Polling | None = None,
                on_line: Callable[[LogLine], None] | None = None, on_note: Callable[[LogNote], None] | None = None,
                on_status: Callable[[str, StatusChange], None] | None = None,
                on_idle: Callable[[], None] | None = None) -> list[FollowResult]:
    """Follow several jobs at once, one thread each, every Logs call through one bucket at `polling.rate`.

    Each job has its own reads (a FilterLogEvents over its prefix each poll, its late-line windows), so
    the calls a poll grow with the number of jobs; once they pass `rate x interval`, the bucket spaces
    the polls out (printing falls behind, nothing is lost). Callbacks may run on any of the threads, one
    at a time (a lock holds them). A line's job is the first part of `line.stream`. Ctrl-C ends every
    follow (each result `interrupted`). Returns one FollowResult per job, in order.
    """
    import threading

    p = polling or Polling()
    p = replace(p, limiter=p.limiter or shared_limiter(p.rate))
    lock = threading.Lock()

    def locked(callback: Callable[..., None] | None) -> Callable[..., None] | None:
        if callback is None:
            return None

        def call(*args: Any) -> None:
            with lock:
                callback(*args)

        return call

    names = list(dict.fromkeys(jobs))
    results: dict[str, FollowResult] = {}
    errors: list[BaseException] = []
    status_cb = locked(on_status)

    def run(job: str) -> None:
        def status(change: StatusChange) -> None:
            if status_cb is not None:
                status_cb(job, change)

        try:
            results[job] = follow(job, clients, until_end=until_end, since=since, hosts=hosts, grep=grep, polling=p,
                                  on_line=locked(on_line), on_note=locked(on_note), on_status=status,
                                  on_idle=locked(on_idle))
        except BaseException as exc:  # noqa: BLE001 (handed to the calling thread, which raises it)
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(job,), name=f"follow {job}", daemon=True) for job in names]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except KeyboardInterrupt:
        return [results.get(job) or FollowResult(job, None, EXIT_INTERRUPTED, interrupted=True) for job in names]
    if errors:
        raise errors[0]  # a job's follow failed (a LauncherError says why)
    return [results[job] for job in names]
