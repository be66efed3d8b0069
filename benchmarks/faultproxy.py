"""A fault-injecting HTTP proxy on 127.0.0.1 between the CLI and a moto server.

It forwards every request to the upstream endpoint unless a rule says otherwise, counts the calls
per service and operation, and can answer a call with a throttling error (in the protocol that
service speaks), a 5xx, a reset connection, or nothing at all (held until the caller gives up, the
proxy stops, or a bounded wait ends). Loopback only; every wait is bounded.

    with FaultProxy(upstream_url, [Rule("sagemaker", "CreateTrainingJob", "throttle", times=2)]) as proxy:
        env["AWS_ENDPOINT_URL"] = proxy.url
"""
from __future__ import annotations

import http.client
import json
import re
import socket
import struct
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_HOLD_S = 300.0
_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/[^/]+/([a-z0-9-]+)/aws4_request")
JSON_SERVICES = {"sagemaker", "logs", "monitoring"}


@dataclass
class Rule:
    """Answer `times` matching calls (None: every one) with `fault`, after skipping the first `after`.

    fault: throttle | 5xx | reset | reset_after (forwarded, then the answer is lost) | hang |
    hold_after (forwarded, then the answer is held, like a slow network) | taken (forwarded twice, the
    second answer returned: the first stands for another process that made the same call just before) |
    trickle (the upstream's answer sent one byte every `trickle_s` seconds) | garble (the upstream's answer
    with a byte that is not UTF-8 put inside its first string value).
    """

    service: str
    operation: str | None
    fault: str
    times: int | None = 1
    after: int = 0
    seen: int = 0
    fired: int = 0

    def matches(self, service: str, operation: str) -> bool:
        if self.service not in ("*", service) or self.operation not in (None, operation):
            return False
        self.seen += 1
        if self.seen <= self.after or (self.times is not None and self.fired >= self.times):
            return False
        self.fired += 1
        return True


@dataclass
class Call:
    service: str
    operation: str
    fault: str | None
    at: float


@dataclass
class FaultProxy:
    upstream: str
    rules: list[Rule] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    held: threading.Event = field(default_factory=threading.Event)  # set when a call is being held
    taken: list[str] = field(default_factory=list)  # job names a `taken` fault gave to "another process"
    trickle_s: float = 10.0  # a trickled answer's gap between bytes
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> FaultProxy:
        proxy = self

        class Handler(_Handler):
            owner = proxy

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def counts(self) -> Counter:
        with self._lock:
            return Counter(f"{c.service}:{c.operation}" for c in self.calls)

    def faults(self) -> Counter:
        with self._lock:
            return Counter(f"{c.fault} {c.service}:{c.operation}" for c in self.calls if c.fault)

    def decide(self, service: str, operation: str) -> str | None:
        with self._lock:
            fault = next((r.fault for r in self.rules if r.matches(service, operation)), None)
            self.calls.append(Call(service, operation, fault, time.time()))
        return fault


def identify(headers, body: bytes, method: str, path: str) -> tuple[str, str]:
    """(service, operation) of a signed AWS request, from its signature scope and protocol."""
    m = _SCOPE.search(headers.get("Authorization", ""))
    service = m.group(1) if m else "unknown"
    target = headers.get("X-Amz-Target")
    if target:
        return service, target.rsplit(".", 1)[-1]
    if service in ("iam", "sts") or headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
        action = urllib.parse.parse_qs(body.decode("utf-8", "replace")).get("Action", ["?"])[0]
        return service, action
    query = urllib.parse.urlsplit(path).query
    return service, f"{method} {'?' + query.split('=')[0] if query else ''}".strip()


def error_response(service: str, fault: str) -> tuple[int, dict[str, str], bytes]:
    """The error a real endpoint of this service sends for a throttled or failed call."""
    if fault == "throttle":
        if service in JSON_SERVICES:
            return 400, {"Content-Type": "application/x-amz-json-1.1"}, \
                b'{"__type":"ThrottlingException","message":"Rate exceeded"}'
        if service == "s3":
            return 503, {"Content-Type": "application/xml"}, (
                b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
                b"<Message>Please reduce your request rate.</Message><RequestId>fault</RequestId></Error>")
        return 400, {"Content-Type": "text/xml"}, (
            b"<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message>"
            b"</Error><RequestId>fault</RequestId></ErrorResponse>")
    if service in JSON_SERVICES:
        return 500, {"Content-Type": "application/x-amz-json-1.1"}, \
            b'{"__type":"InternalFailure","message":"We encountered an internal error. Please try again."}'
    if service == "s3":
        return 500, {"Content-Type": "application/xml"}, (
            b"<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>")
    return 500, {"Content-Type": "text/html"}, b"<html><body><h1>500 Internal Server Error</h1></body></html>"


def _job_name(body: bytes) -> str:
    """The TrainingJobName of a CreateTrainingJob request body (JSON), or "" when it has none."""
    try:
        return str(json.loads(body).get("TrainingJobName") or "")
    except (ValueError, AttributeError):
        return ""


def garbled(payload: bytes) -> bytes:
    """The payload with the byte 0xff (never UTF-8) inside its first JSON string value, or at its end."""
    m = re.search(rb'"\s*:\s*"', payload)
    if m is None:
        return payload + b"\xff"
    return payload[:m.end()] + b"\xff" + payload[m.end():]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: FaultProxy

    def log_message(self, *args) -> None:  # quiet
        pass

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            return self.rfile.read(length)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return b""

    def _handle(self) -> None:
        body = self._body()
        service, operation = identify(self.headers, body, self.command, self.path)
        fault = self.owner.decide(service, operation)
        if fault == "reset":
            return self._reset()
        if fault == "hang":
            return self._hold()
        if fault in ("throttle", "5xx"):
            status, headers, payload = error_response(service, fault)
            return self._send(status, headers, payload)
        status, headers, payload = self._forward(body)
        if fault == "taken":
            with self.owner._lock:
                self.owner.taken.append(_job_name(body))
            status, headers, payload = self._forward(body)
        if fault == "garble":
            payload = garbled(payload)
        if fault == "trickle":
            return self._trickle(status, headers, payload)
        if fault == "reset_after":
            return self._reset()
        if fault == "hold_after":
            return self._hold()
        self._send(status, headers, payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

    def _forward(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        up = urllib.parse.urlsplit(self.owner.upstream)
        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=60)
        try:
            skip = {"host", "content-length", "transfer-encoding", "connection", "expect"}
            headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
            headers["Host"] = f"{up.hostname}:{up.port}"
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
            keep = {k: v for k, v in resp.getheaders()
                    if k.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date")}
            return resp.status, keep, payload
        finally:
            conn.close()

    def _send(self, status: int, headers: dict[str, str], payload: bytes) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _trickle(self, status: int, headers: dict[str, str], payload: bytes) -> None:
        """The answer's head at once, then its body a byte at a time, `trickle_s` apart (bounded by MAX_HOLD_S)."""
        self.owner.held.set()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        deadline = time.monotonic() + MAX_HOLD_S
        try:
            for i in range(len(payload)):
                self.wfile.write(payload[i:i + 1])
                self.wfile.flush()
                if self.owner._stop.wait(self.owner.trickle_s) or time.monotonic() > deadline:
                    break
        except OSError:  # the caller gave up
            pass
        self.close_connection = True

    def _reset(self) -> None:
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True

    def _hold(self) -> None:
        """Say nothing until the caller hangs up, the proxy stops, or MAX_HOLD_S passes."""
        self.owner.held.set()
        self.connection.settimeout(0.2)
        deadline = time.monotonic() + MAX_HOLD_S
        while time.monotonic() < deadline and not self.owner._stop.is_set():
            try:
                if self.connection.recv(1, socket.MSG_PEEK) == b"":
                    break  # the caller closed the connection
            except (TimeoutError, BlockingIOError):
                continue
            except OSError:
                break
            time.sleep(0.2)
        self.close_connection = True
