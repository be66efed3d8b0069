"""The one seam to AWS: every boto3 client comes from here, and every AWS error leaves as a sentence.

Clients honour the profile, the region and AWS_ENDPOINT_URL (so tests and demos can point the whole
tool at an emulator); code takes a `Clients` as an argument so tests inject their own.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from launcher.core.errors import EXIT_AWS, LauncherError, PreflightError, no_region
from launcher.core.sanitize import DETAIL_LIMIT, MESSAGE_LIMIT, NAME_LIMIT, PLACE_LIMIT, clean
from launcher.core.version import VERSION

_NOTICES = logging.getLogger(__name__)
_NOTICES.addHandler(logging.NullHandler())  # nothing reaches stderr unless the application asks

# Per call: an endpoint that never answers costs at most TRIES x (CONNECT or READ timeout) plus the
# standard mode's backoff (under 2 s for 3 tries): about 47 s. Set as total tries, not botocore's
# `max_attempts`, which counts retries (5 means 6 tries, of 60 s each by default: 6 minutes).
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 15.0
TRIES = 3  # in all, the first one included
WAIT_NOTICE_S = 3.0  # after this long without an answer, say on stderr what we are waiting for
# The read timeout bounds each wait for a byte, not the answer: an endpoint that sends one byte every
# 10 s would hold a call for ever. Each call, its tries together, ends by this deadline: past it, the
# connection it reads is shut and the call fails, naming the endpoint.
CALL_DEADLINE_S = 50.0
_DeadlineTimer = threading.Timer  # its own name: the notices' timers are replaced in tests, the deadline's are not


class AwsError(LauncherError):
    """AWS refused or could not be reached (exit 4), in words a person can act on."""

    exit_code = EXIT_AWS


class QuotaError(PreflightError):
    """An account quota stops the job: found by the quota check, or SageMaker's own ResourceLimitExceeded."""


class ThrottledError(AwsError):
    """AWS throttled the request (a rate limit shared by the account): trying again later can pass."""


@functools.cache
def deadline_error() -> type:
    """DeadlineExceeded, a botocore error (so every caller's `except BotoCoreError` meets it) that botocore's
    retries leave alone: once a call's time is spent, no try is left. Made on first use (botocore is
    imported lazily)."""
    from botocore.exceptions import BotoCoreError

    class DeadlineExceeded(BotoCoreError):
        fmt = "no whole answer from {endpoint_url} within {seconds:.0f} s"

    return DeadlineExceeded


_EXPIRED: dict[int, tuple[str, float]] = {}  # thread -> (endpoint, seconds) of its call that ran out of time
_IN_USE: dict[int, Any] = {}  # thread -> the HTTP connection its AWS call reads now


@functools.cache
def _watched_pools() -> dict[str, type]:
    """botocore's connection pools, whose connections note, per thread, that they carry its call (so the
    deadline can shut the one a call is stuck on)."""
    from botocore import awsrequest

    def watched(base: Any) -> type:
        def request(self, *args, **kwargs):
            _IN_USE[threading.get_ident()] = self
            return base.request(self, *args, **kwargs)

        return type(f"Watched{base.__name__}", (base,), {"request": request})

    return {"http": type("WatchedHTTPConnectionPool", (awsrequest.AWSHTTPConnectionPool,),
                         {"ConnectionCls": watched(awsrequest.AWSHTTPConnection)}),
            "https": type("WatchedHTTPSConnectionPool", (awsrequest.AWSHTTPSConnectionPool,),
                          {"ConnectionCls": watched(awsrequest.AWSHTTPSConnection)})}


def _watch_connections(client: Any) -> bool:
    """Make `client`'s connections say which thread they serve; False (no deadline beyond the timeouts) for
    a botocore built otherwise."""
    http = getattr(getattr(client, "_endpoint", None), "http_session", None)
    manager = getattr(http, "_manager", None)
    if not isinstance(getattr(http, "_pool_classes_by_scheme", None), dict) or manager is None:
        return False
    pools = _watched_pools()
    http._pool_classes_by_scheme = pools  # type: ignore[union-attr]
    manager.pool_classes_by_scheme = pools
    return True


def _shut(thread: int) -> None:
    """Shut the socket `thread`'s call reads: the read returns at once and the call fails."""
    conn = _IN_USE.get(thread)
    sock = getattr(conn, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


@dataclass
class Clients:
    """Lazily created boto3 clients sharing one session; pass `overrides` to inject test doubles."""

    profile: str | None = None
    region: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    max_attempts: int | None = None  # botocore's meaning: retries after the first try (default TRIES - 1)
    connect_timeout: float | None = None
    read_timeout: float | None = None
    wait_notice_s: float | None = None
    call_deadline: float | None = None  # seconds one call may take, its tries together (default CALL_DEADLINE_S)
    notify: Callable[[str], None] | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    _session: Any = None
    _cache: dict[str, Any] = field(default_factory=dict)
    _waits: dict[int, threading.Timer] = field(default_factory=dict)
    _deadlines: dict[int, threading.Timer] = field(default_factory=dict)

    @property
    def session(self):
        if self._session is None:
            import boto3

            try:
                self._session = boto3.Session(profile_name=self.profile or self.env.get("AWS_PROFILE") or None,
                                              region_name=self.region)
            except Exception as exc:  # ProfileNotFound: one line, never a traceback
                raise explain(exc) from None
        return self._session

    def client(self, service: str, region: str | None = None):
        """The `service` client, in this command's region unless `region` names another (the Price List API
        answers in a few regions only)."""
        if service in self.overrides:
            return self.overrides[service]
        key = service if region is None else f"{service}@{region}"
        if key not in self._cache:
            try:
                client = self.session.client(service, **self._settings(region))
            except LauncherError:
                raise
            except Exception as exc:  # NoRegionError, ProfileNotFound, ...
                raise explain(exc) from None
            self._watch(client, service)
            client.meta.events.register("before-parse.*.*", _valid_utf8)
            self._cache[key] = client
        return self._cache[key]

    def resource(self, service: str) -> Any:
        """A boto3 resource on this command's `service` client (the SDK uploads files through an S3 resource): its
        calls have the client's endpoint, region, deadlines and record."""
        client = self.client(service)
        try:
            made = self.session.resource(service, **self._settings(None))
        except Exception as exc:
            raise explain(exc) from None
        made.meta.client = client
        return made

    def _settings(self, region: str | None) -> dict[str, Any]:
        """What every client of this command is made with: deadlines, retries, region and endpoint."""
        from botocore.config import Config

        retries = TRIES - 1 if self.max_attempts is None else self.max_attempts
        config = Config(retries={"mode": "standard", "max_attempts": retries},
                        user_agent_extra=f"smp-launch/{VERSION}",
                        connect_timeout=self.connect_timeout or CONNECT_TIMEOUT,
                        read_timeout=self.read_timeout or READ_TIMEOUT)
        kwargs: dict[str, Any] = {"config": config}
        if region or self.region:  # the one region resolved for this command, whatever the session's default
            kwargs["region_name"] = region or self.region
        endpoint = self.env.get("AWS_ENDPOINT_URL")
        if endpoint:
            kwargs["endpoint_url"] = endpoint
        return kwargs

    def _watch(self, client: Any, service: str) -> None:
        """Say what we wait for when a call has had no answer for a few seconds: to `notify`, else as a warning
        of the `launcher` logger (the CLI prints those on stderr; a library's caller decides). And end a call
        still unanswered at its deadline (CALL_DEADLINE_S), its tries together."""
        delay = WAIT_NOTICE_S if self.wait_notice_s is None else self.wait_notice_s
        limit = CALL_DEADLINE_S if self.call_deadline is None else self.call_deadline
        notify = self.notify or _NOTICES.warning
        where = f"{service}.{client.meta.region_name}"
        endpoint = clean(getattr(client.meta, "endpoint_url", "") or where, PLACE_LIMIT)
        watched = _watch_connections(client)
        expired = deadline_error()

        def begin(**_):
            self.cancel_waits()
            me = threading.get_ident()
            _EXPIRED.pop(me, None)
            timer = threading.Timer(delay, lambda: _quietly(notify, f"waiting for {where}…"))
            timer.daemon = True
            self._waits[me] = timer
            timer.start()
            if watched:
                stop = _DeadlineTimer(limit, lambda: _expire(me, endpoint, limit))
                stop.daemon = True
                self._deadlines[me] = stop
                stop.start()

        def before_try(**_):
            me = threading.get_ident()
            if me in _EXPIRED:
                raise expired(endpoint_url=endpoint, seconds=_EXPIRED[me][1])

        def end(**_):
            self.cancel_waits()

        def answered(**_):
            end()
            me = threading.get_ident()
            if me in _EXPIRED:  # the answer was cut short by the deadline: never taken as a whole one
                raise expired(endpoint_url=endpoint, seconds=_EXPIRED[me][1])

        client.meta.events.register("before-call.*.*", begin)
        client.meta.events.register("before-send.*.*", before_try)
        client.meta.events.register("after-call.*.*", answered)
        client.meta.events.register("after-call-error.*.*", end)

    def cancel_waits(self) -> None:
        """Forget this thread's pending notice and deadline (a call that ended by an interrupt emits no event)."""
        me = threading.get_ident()
        for timers in (self._waits, self._deadlines):
            timer = timers.pop(me, None)
            if timer is not None:
                timer.cancel()

    @property
    def pricing(self):
        """The AWS Price List API's client: its endpoints are in us-east-1, eu-central-1 and ap-south-1 only
        (https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-price-list-query-api.html); any of
        them answers for every region, so the nearest is used."""
        return self.client("pricing", pricing_region(self.region))

    def __getattr__(self, name: str):
        services = {"sagemaker": "sagemaker", "logs": "logs", "s3": "s3", "iam": "iam", "sts": "sts",
                    "cloudwatch": "cloudwatch", "service_quotas": "service-quotas"}
        if name in services:
            return self.client(services[name])
        raise AttributeError(name)


PRICING_REGIONS = ("us-east-1", "eu-central-1", "ap-south-1")


def pricing_region(region: str | None) -> str:
    """The Price List API endpoint's region for a job in `region`: Europe and Asia to their own, else us-east-1."""
    if region and region.startswith(("eu-", "me-", "af-", "il-")):
        return "eu-central-1"
    if region and region.startswith("ap-"):
        return "ap-south-1"
    return "us-east-1"


def resolve_region(spec_region: str | None = None, env: Mapping[str, str] | None = None, *,
                   flag: str | None = None, profile: str | None = None) -> str | None:
    """The one place a region is decided: the one the caller was given (`flag`: an argument, a command's
    --region), else the spec's, else AWS_REGION / AWS_DEFAULT_REGION, else the profile's (read from disk,
    no network); None when nothing names one. Decide it once, before anything reads it, and hand the
    result to everything (plan, bucket checks, clients, state)."""
    env = os.environ if env is None else env
    if flag:
        return flag
    if spec_region:
        return spec_region
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if env.get(var):
            return env[var]
    import botocore.exceptions
    import botocore.session  # only when neither the caller, the spec nor the environment names a region

    try:
        session = botocore.session.Session(profile=profile or env.get("AWS_PROFILE") or None)
        region = session.get_config_variable("region")
    except botocore.exceptions.ProfileNotFound:
        return None  # the client factory says so, in one line, when a client is made
    return str(region) if region else None


@contextlib.contextmanager
def recording(clients: Clients) -> Iterator[list[str]]:
    """Every AWS call made through `clients` while inside, as `service.Operation`, in order.

    The hook goes on the session (clients made later copy its handlers) and on every client made
    already; on the way out it is taken off all of them, those made inside included, so a shared
    Clients records nothing after the block and no hook piles up. Injected doubles record nothing.
    Only this thread's calls are recorded: two threads submitting through one Clients each see their own."""
    calls: list[str] = []
    me = threading.get_ident()

    def note(model: Any, **_: Any) -> None:
        if threading.get_ident() == me:
            calls.append(f"{model.service_model.service_name}.{model.name}")

    session_events = clients.session.events
    for events in [session_events, *(c.meta.events for c in clients._cache.values())]:
        events.register("before-call.*.*", note)
    try:
        yield calls
    finally:
        for events in [session_events, *(c.meta.events for c in clients._cache.values())]:
            events.unregister("before-call.*.*", note)


def read_body(body: Any, limit: int, *, what: str, seconds: float = CALL_DEADLINE_S) -> bytes:
    """At most `limit` bytes of a streamed answer (S3 GetObject's Body), within `seconds` like any call: a
    trickling body is cut off and said (AwsError naming `what`); botocore's errors pass through."""
    me = threading.get_ident()
    _EXPIRED.pop(me, None)
    stop = _DeadlineTimer(seconds, lambda: _expire(me, what, seconds))
    stop.daemon = True
    stop.start()
    try:
        data = body.read(limit)
    except Exception as exc:
        if me in _EXPIRED:
            raise explain(exc) from None
        raise
    finally:
        stop.cancel()
    if _EXPIRED.pop(me, None) is not None:
        raise AwsError(f"{clean(what, PLACE_LIMIT)} gave no whole answer within {seconds:.0f} s (it answers too "
                       "slowly, or something between holds the connection); check the network, then retry")
    return bytes(data)


def _valid_utf8(response_dict: dict[str, Any], **_: Any) -> None:
    """An answer's bytes that are not UTF-8 (a broken proxy, a corrupted log event) become U+FFFD before
    botocore parses them, which would otherwise end the command in a UnicodeDecodeError."""
    body = response_dict.get("body")
    if isinstance(body, bytes):
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            response_dict["body"] = body.decode("utf-8", "replace").encode("utf-8")


def _expire(thread: int, endpoint: str, seconds: float) -> None:
    _EXPIRED[thread] = (endpoint, seconds)
    _shut(thread)


def _quietly(notify: Callable[[str], None], message: str) -> None:
    try:
        notify(message)
    except (OSError, ValueError):  # stderr closed
        pass


_ACTIONABLE = {
    "ExpiredToken": "your AWS session token has expired; refresh your credentials (e.g. `aws sso login`) and retry",
    "ExpiredTokenException": "your AWS session token has expired; refresh your credentials and retry",
    "InvalidClientTokenId": "AWS does not recognise these credentials; check AWS_PROFILE or your access key",
    "UnrecognizedClientException": "AWS does not recognise these credentials; check AWS_PROFILE or your access key",
    "SignatureDoesNotMatch": "the secret access key does not match the key id; check your credentials",
    "ThrottlingException": "AWS is throttling this account's requests (a shared quota); wait a minute and retry",
    "Throttling": "AWS is throttling this account's requests (a shared quota); wait a minute and retry",
    "NoSuchBucket": "the S3 bucket does not exist; create it or fix output.path in the spec",
}


def pages(client: Any, operation: str, action: str, **params: Any) -> Iterator[dict[str, Any]]:
    """Every page of a paged operation, by boto3's paginator for it (its tokens, its page size and item
    limits via `PaginationConfig`); an AWS error while paging leaves as `explain(exc, action)`."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield from client.get_paginator(operation).paginate(**params)
    except (ClientError, BotoCoreError) as exc:
        raise explain(exc, action) from None


def explain(exc: BaseException, action: str = "") -> LauncherError:
    """Turn a botocore exception into a one-line LauncherError that says what to do."""
    from botocore import exceptions as bx

    where = f"{clean(action, DETAIL_LIMIT)}: " if action else ""  # an action may name a job, which may hold escapes
    if isinstance(exc, LauncherError):
        return exc
    ran_out = _EXPIRED.pop(threading.get_ident(), None)
    if ran_out is not None or isinstance(exc, deadline_error()):
        url, seconds = ran_out or (getattr(exc, "kwargs", {}).get("endpoint_url", "AWS"),
                                   getattr(exc, "kwargs", {}).get("seconds", CALL_DEADLINE_S))
        return AwsError(f"{where}{clean(url, PLACE_LIMIT)} gave no whole answer within {seconds:.0f} s (it answers too "
                        "slowly, or something between holds the connection); check the network, the region and "
                        "AWS_ENDPOINT_URL, then retry")
    if isinstance(exc, bx.NoCredentialsError):
        return AwsError(f"{where}no AWS credentials found; set AWS_PROFILE, run `aws configure`, "
                        "or export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
    if isinstance(exc, bx.NoRegionError):
        return no_region()  # not AWS refusing: nothing named a region (exit 2, the hint every command gives)
    if isinstance(exc, bx.ProfileNotFound):
        return AwsError(f"{where}{exc}; check AWS_PROFILE and ~/.aws/config")
    if isinstance(exc, (bx.ConnectTimeoutError, bx.ReadTimeoutError)):
        url = clean(getattr(exc, "kwargs", {}).get("endpoint_url", "") or "", PLACE_LIMIT)
        return AwsError(f"{where}{url or 'AWS'} did not answer in time (each try timed out); check the "
                        "network, the region and AWS_ENDPOINT_URL, then retry")
    if isinstance(exc, bx.EndpointConnectionError):
        return AwsError(f"{where}cannot reach AWS ({clean(exc, DETAIL_LIMIT)}); check the network, the region and "
                        "AWS_ENDPOINT_URL")
    if isinstance(exc, bx.ClientError):
        err = exc.response.get("Error", {})
        code = clean(err.get("Code", ""), NAME_LIMIT)
        message = clean(str(err.get("Message", "")).strip(), MESSAGE_LIMIT)
        op = getattr(exc, "operation_name", "") or "the request"
        if code in _ACTIONABLE:
            kind = ThrottledError if code in ("ThrottlingException", "Throttling") else AwsError
            return kind(f"{where}{_ACTIONABLE[code]} ({op}: {code})")
        if code in ("AccessDenied", "AccessDeniedException", "403") or "not authorized" in message:
            return AwsError(f"{where}access denied for {op}: {message or code}. Ask for this permission on your "
                            "identity (check with `aws sts get-caller-identity`)")
        if code == "ResourceLimitExceeded":
            return QuotaError(f"{where}{message or 'a SageMaker quota was exceeded'}. Request an increase in "
                              "Service Quotas (service: Amazon SageMaker; quota: '<instance type> for training "
                              "job usage') or lower cluster.instance_count")
        if code == "ValidationException":
            return AwsError(f"{where}SageMaker rejected the request: {message}")
        return AwsError(f"{where}{op} failed: {code}: {message}")
    if isinstance(exc, bx.BotoCoreError):
        return AwsError(f"{where}{clean(exc, MESSAGE_LIMIT)}")
    return AwsError(f"{where}{type(exc).__name__}: {clean(exc, MESSAGE_LIMIT)}")
