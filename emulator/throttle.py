"""ThrottlingException on a chosen fraction of calls, deterministic for a seed.

Two ways in, one policy: `attach(client, policy)` registers a botocore `before-send` hook on a client
(the call never leaves the process, and botocore's real retry logic sees an HTTP 400), and
`serve(policy)` makes the patched moto (in-process or the server) refuse Logs reads itself, for
a CLI running in a subprocess whose clients a test cannot reach.
"""
from __future__ import annotations

import functools
import random
import threading
from dataclasses import dataclass, field

from emulator import core

BODY = b'{"__type":"ThrottlingException","message":"Rate exceeded"}'
LOGS_READS = ("FilterLogEvents", "GetLogEvents", "DescribeLogStreams")


@dataclass
class Throttle:
    """Refuse `fraction` of the calls to `operations` (None: every operation), in a seeded order."""

    fraction: float
    seed: int = 0
    operations: tuple[str, ...] | None = LOGS_READS
    calls: int = 0
    throttled: int = 0
    _rng: random.Random = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def decide(self, operation: str) -> bool:
        """Count a call; True when it is to be throttled."""
        if self.operations is not None and operation not in self.operations:
            return False
        with self._lock:
            self.calls += 1
            refuse = self._rng.random() < self.fraction
            self.throttled += refuse
        return refuse


class _Raw:
    """The minimal urllib3-like body botocore reads an AWSResponse through."""

    def __init__(self, body: bytes):
        self._body = body

    def stream(self, **_kwargs):
        yield self._body

    def read(self, *_args, **_kwargs) -> bytes:
        return self._body


def attach(target, policy: Throttle, service: str = "cloudwatch-logs") -> Throttle:
    """Throttle the calls of a boto3 client, or of every `service` client a boto3 Session creates later
    (the SDK makes its own Logs client), per `policy`, before they are sent (retries included)."""
    from botocore.awsrequest import AWSResponse

    def before_send(request, event_name: str = "", **_kwargs):
        if policy.decide(event_name.rsplit(".", 1)[-1]):
            headers = {"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": "throttled"}
            return AWSResponse(request.url, 400, headers, _Raw(BODY))
        return None

    if hasattr(target, "meta"):
        service = target.meta.service_model.service_id.hyphenize()
        events = target.meta.events
    else:
        events = target.events
    events.register_first(f"before-send.{service}", before_send)
    return policy


_SERVED: list[Throttle] = []


def serve(policy: Throttle | None) -> None:
    """Make the patched moto throttle Logs reads per `policy` (None: stop throttling)."""
    core.install()
    _SERVED[:] = [policy] if policy else []


def _apply() -> None:
    from moto.core.exceptions import JsonRESTError
    from moto.logs.responses import LogsResponse

    for operation in LOGS_READS:
        method_name = "".join("_" + c.lower() if c.isupper() else c for c in operation).lstrip("_")
        original = getattr(LogsResponse, method_name)

        def throttled(self, *args, _original=original, _operation=operation, **kwargs):
            if _SERVED and _SERVED[0].decide(_operation):
                raise JsonRESTError("ThrottlingException", "Rate exceeded")
            return _original(self, *args, **kwargs)

        setattr(LogsResponse, method_name, functools.wraps(original)(throttled))


core.register_patch("logs:throttle", _apply)
