"""The emulator's shared parts: its clock, a registry of moto patches, and a server to run them in.

moto is patched at the class level, so one `install()` serves both `mock_aws` (in-process) and a
ThreadedMotoServer started in the same process. Other modules register their patches here with
`register_patch`; `install()` applies every registered patch once.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

_PATCHES: dict[str, Callable[[], None]] = {}
_APPLIED: set[str] = set()
_LOCK = threading.RLock()
_installed = False
_clock: Callable[[], float] = time.time

FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                    "AWS_SESSION_TOKEN": "testing"}


def register_patch(name: str, apply: Callable[[], None]) -> None:
    """Add a patch that `install()` applies once; after `install()` it is applied at once.

    Call it at import time of a module in this package: `install()` imports them all, so a new
    module (say `iam.py`) needs no other wiring.
    """
    with _LOCK:
        _PATCHES.setdefault(name, apply)
        if _installed:
            _apply(name)


_RESETS: list[Callable[[], None]] = []


def register_reset(reset: Callable[[], None]) -> None:
    """Add what `forget_registered()` runs: a module's own settings (prices, quotas) back to their defaults."""
    with _LOCK:
        if reset not in _RESETS:
            _RESETS.append(reset)


def forget_registered() -> None:
    """Run every registered reset (scenario.forget_all calls this, so each test starts from the defaults)."""
    for reset in list(_RESETS):
        reset()


def install() -> None:
    """Apply every registered patch exactly once (safe to call from every test and fixture)."""
    global _installed
    import importlib
    import pkgutil

    import emulator as package

    with _LOCK:
        for info in pkgutil.iter_modules(package.__path__):
            if not info.name.startswith("_"):  # not __main__ (the demo server)
                importlib.import_module(f"{package.__name__}.{info.name}")
        for name in list(_PATCHES):
            _apply(name)
        _installed = True


def _apply(name: str) -> None:
    if name not in _APPLIED:
        _PATCHES[name]()
        _APPLIED.add(name)


def after(first: Callable[[Any], None]):
    """Wrap a moto backend method so `first(backend)` runs before it (e.g. writing due log lines)."""

    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            first(self)
            return method(self, *args, **kwargs)

        return wrapper

    return decorate


def lock() -> threading.RLock:
    """The lock every patched operation holds, since a ThreadedMotoServer serves requests in threads."""
    return _LOCK


def now() -> float:
    """Emulated seconds since the epoch: the real clock unless a test or benchmark set its own."""
    return _clock()


def set_clock(clock: Callable[[], float] | None) -> None:
    """Drive every emulated job from `clock` (None restores the real clock)."""
    global _clock
    _clock = clock or time.time


def moto_time(seconds: float) -> datetime:
    """moto keeps naive UTC datetimes."""
    return datetime.fromtimestamp(seconds, timezone.utc).replace(tzinfo=None)


@contextlib.contextmanager
def server(port: int = 0) -> Iterator[str]:
    """Run a patched ThreadedMotoServer on 127.0.0.1 (port 0: a free one) and yield its endpoint URL."""
    import logging

    from moto.server import ThreadedMotoServer

    install()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    srv = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    srv.start()
    host, port = srv.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        srv.stop()


def reset_server(endpoint: str) -> None:
    """Forget every resource in a running server (moto's own reset endpoint) and every emulated job."""
    import urllib.request

    from emulator.scenario import forget_all

    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=10).read()
    forget_all()


def server_env(endpoint: str, region: str = "us-west-2") -> dict[str, str]:
    """Environment for a subprocess (the real CLI) that should talk to the emulator only."""
    return {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": region, "AWS_REGION": region}


@contextlib.contextmanager
def mocked() -> Iterator[None]:
    """In-process emulation: moto's `mock_aws` with the patches installed and no emulated jobs left over."""
    from moto import mock_aws

    from emulator.scenario import forget_all

    install()
    forget_all()
    with mock_aws():
        try:
            yield
        finally:
            forget_all()
