"""Helpers shared by the tests that follow emulated jobs (the emulator package over moto)."""
from __future__ import annotations

import io
from collections import Counter
from typing import Any, TextIO


class VirtualClock:
    """One clock for the emulated jobs, the tailer, its rate limiter and its sleeps: tests run in no time."""

    def __init__(self, start: float = 1_800_000_000.0):
        self.t = start
        self.slept = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += max(0.0, seconds)
        self.slept += max(0.0, seconds)


class ThreadedVirtualClock:
    """A virtual clock for `threads` threads (`launcher.jobs.logs.follow_many`): time moves only when every
    one still running sleeps, to the earliest wake-up, and wakes that thread alone, so runs are repeatable."""

    def __init__(self, start: float = 1_800_000_000.0, threads: int = 1):
        import threading

        self.t = start
        self.slept = 0.0
        self.threads = threads
        self._cond = threading.Condition()
        self._asleep: list[tuple[float, int]] = []
        self._woken: set[int] = set()
        self._seen: set[threading.Thread] = set()
        self._seq = 0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        import heapq
        import threading

        with self._cond:
            self._seen.add(threading.current_thread())
            self._seq += 1
            me = self._seq
            heapq.heappush(self._asleep, (self.t + max(0.0, seconds), me))
            while me not in self._woken:
                self._advance()
                self._cond.wait(0.01)  # a thread that ended does not say so: look again
            self._woken.discard(me)

    def _advance(self) -> None:
        import heapq

        running = self.threads - sum(1 for t in self._seen if not t.is_alive())
        if self._asleep and len(self._asleep) >= running and not self._woken:
            wake, who = heapq.heappop(self._asleep)
            self.slept += max(0.0, wake - self.t)
            self.t = max(self.t, wake)
            self._woken.add(who)
            self._cond.notify_all()


def body_of(printed: str) -> list[str]:
    """The messages in `[algo-N] message` output (the label dropped)."""
    return [line.split("] ", 1)[1] for line in printed.splitlines() if line.startswith("[algo-")]


def lost_and_duplicated(expected: list[str], printed: list[str]) -> tuple[int, int]:
    want, got = Counter(expected), Counter(printed)
    lost = sum((want - got).values())
    duplicated = sum(n - 1 for n in got.values() if n > 1)
    return lost, duplicated


def printed_follow(job: str, clients: Any, *, polling: Any, as_json: bool = False, color: bool | None = None,
                   out: TextIO | None = None, err: TextIO | None = None, **kw: Any) -> Any:
    """Follow `job` as `smp-launch logs` does, the follower's records through the CLI's printer, into `out` and
    `err` (new StringIOs when not given); returns the FollowResult."""
    from launcher.cli.logprint import Printer
    from launcher.jobs.logs import follow

    printer = Printer(out if out is not None else io.StringIO(), err if err is not None else io.StringIO(), as_json,
                      color)
    result = follow(job, clients, polling=polling, **kw, **printer.hooks())
    printer.finish(result)
    return result


def started_ago(sm: Any, seconds: float, job: Any) -> Any:
    """Create the emulated `job` as if it had been submitted `seconds` ago (emulator and CLI share the real
    clock)."""
    import time

    import emulator

    emulator.set_clock(lambda: time.time() - seconds)
    try:
        return emulator.add_job(job, sm)
    finally:
        emulator.set_clock(None)


def follow_printed(job: str, clock: Any, clients: Any = None, **kw: Any) -> tuple[Any, str, str]:
    """Follow `job` as `smp-launch logs` does, printed, on the virtual `clock`: (result, stdout, stderr).
    Keyword arguments that name a Polling field go to the Polling; the rest to the printer."""
    import dataclasses
    import random

    from launcher.core.aws import Clients
    from launcher.jobs.logs import Polling
    from launcher.jobs.ratelimit import RateLimiter

    out, err = io.StringIO(), io.StringIO()
    knobs = {name: kw.pop(name) for name in list(kw) if name in {f.name for f in dataclasses.fields(Polling)}}
    knobs.setdefault("interval", 1.0)
    knobs["limiter"] = knobs.get("limiter") or RateLimiter(2.0, clock=clock, sleep=clock.sleep)
    result = printed_follow(job, clients or Clients(), out=out, err=err, **kw,
                            polling=Polling(clock=clock, sleep=clock.sleep, rng=random.Random(1), **knobs))
    return result, out.getvalue(), err.getvalue()
