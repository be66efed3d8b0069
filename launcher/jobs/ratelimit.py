"""Every CloudWatch Logs call the follower makes: one token bucket for the process, and backoff that says so.

CloudWatch Logs quotas are per account and region (FilterLogEvents: 5 to 25 calls a second,
https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/cloudwatch_limits_cwl.html) and shared with
colleagues and the console, so every Logs read in this process takes a token from one bucket. A call
that is throttled anyway backs off with jitter; a server error or a dropped connection that outlives
botocore's own retries is tried a few more times, spaced out (a few seconds of CloudWatch trouble must not
end a follow). Each backoff is a note, never a silent wait.
"""
from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from launcher.core.aws import explain
from launcher.core.sanitize import clean
from launcher.jobs.logrecords import NoteKind, Notes, Stats

THROTTLE_CODES = frozenset({"ThrottlingException", "Throttling", "TooManyRequestsException",
                            "RequestLimitExceeded"})
TRANSIENT_CODES = frozenset({"InternalFailure", "InternalServerError", "ServiceUnavailable",
                             "ServiceUnavailableException"})
MAX_TRANSIENT_RETRIES = 3


class RateLimiter:
    """A token bucket: on average `rate` calls a second, in bursts of at most `burst`."""

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


class Unsupported(Exception):
    """Logs Insights is missing, refused, or answered in a way the reader cannot trust."""


class LogsCalls:
    """One job's Logs calls through the bucket, with backoff on throttling and on passing server trouble.

    A FilterLogEvents failure that outlasts the retries ends in one clear line (`AwsError`); an Insights
    call that cannot be made (missing operation, refused, malformed) raises `Unsupported`, so the late
    check falls back to re-reading.
    """

    def __init__(self, job: str, client: Any, limiter: RateLimiter, stats: Stats, notes: Notes, *,
                 max_backoffs: int = 8, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None):
        self.job, self.client, self.limiter = job, client, limiter
        self.stats, self.notes, self.max_backoffs = stats, notes, max_backoffs
        self._clock, self._sleep = clock, sleep
        self._rng = rng or random.Random()
        self.sent_ms = 0  # our clock when the latest call was sent (after its wait for a token)

    def call(self, op: str, params: dict[str, Any], insights: bool = False) -> dict[str, Any]:
        """The reply of `op`; `{"events": []}` or `{"_missing_group": True}` before the log group exists, and
        `{"_busy": True}` while the account runs as many Insights queries as it may."""
        from botocore.exceptions import BotoCoreError, ClientError, ConnectionClosedError

        method = getattr(self.client, op, None)
        if method is None:
            raise Unsupported(f"this client has no {op}")
        action = f"reading the logs of {self.job}"
        attempt = failures = 0
        while True:
            self.limiter.acquire()
            self.sent_ms = int(self._clock() * 1000)
            try:
                reply: dict[str, Any] = method(**params)
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
                    self.notes.hint(NoteKind.THROTTLED, f"CloudWatch Logs is throttling reads (a quota shared by the "
                                    f"whole account and region); retrying in {delay:.1f}s", force=True, delay_s=delay)
                    self._sleep(delay)
                    continue
                if insights and code == "LimitExceededException":
                    self.notes.hint(NoteKind.INSIGHTS_BUSY, "30 Logs Insights queries are already running in this "
                                    "account and region; the late-line check waits for a free one")
                    return {"_busy": True}
                status = meta.get("HTTPStatusCode")
                transient = code in TRANSIENT_CODES or (isinstance(status, int) and status >= 500)
                if transient and failures < MAX_TRANSIENT_RETRIES:
                    failures += 1
                    self._back_off_after_failure(clean(code or status, limit=60), failures)
                    continue
                if insights:
                    raise Unsupported(clean(code or status, limit=60)) from None
                raise explain(exc, action) from None
            except ConnectionClosedError as exc:
                if failures < MAX_TRANSIENT_RETRIES:
                    failures += 1
                    self._back_off_after_failure("connection dropped", failures)
                    continue
                if insights:
                    raise Unsupported("connection dropped") from None
                raise explain(exc, action) from None
            except BotoCoreError as exc:
                if insights:
                    raise Unsupported(clean(type(exc).__name__, limit=60)) from None
                raise explain(exc, action) from None
            if insights:
                self.stats.query_calls += 1
            else:
                self.stats.calls += 1
            retried = int(reply.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)
            if retried:
                self.stats.retried += retried
                self.notes.hint(NoteKind.RETRIED, f"CloudWatch Logs throttled or failed {retried} read(s), retried; "
                                "polling more slowly", retried=retried)
            return reply

    def _back_off_after_failure(self, what: str, failures: int) -> None:
        delay = min(8.0, 2.0 ** failures) * self._rng.uniform(0.5, 1.0)
        self.stats.retried += 1
        self.notes.hint(NoteKind.READ_FAILED, f"CloudWatch Logs failed a read ({what}); retrying in {delay:.1f}s",
                        force=True, delay_s=delay)
        self._sleep(delay)
