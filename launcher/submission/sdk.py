"""The SageMaker SDK kept quiet and kept to the plan, whichever line is installed (2.x or 3.x).

Both backends (launcher.submission.estimator, launcher.submission.model_trainer) import the SDK only through
here, when a command needs it. What the SDK does on its own is kept from the user and from the request:

- Noise: importing SDK 2.x prints two lines on stdout and a deprecation warning, configures the root logger,
  and installs rich's traceback hook as sys.excepthook (sagemaker_core's `enable_rich_logging`); its loggers
  print through rich handlers while a job is built. All of it is undone or silenced here; a failure is
  reported once, by smp-launch, from the exception.
- Defaults: the SDK reads a defaults config (tags, VPC, KMS, network isolation...) from the files its override
  variables name (https://sagemaker.readthedocs.io/en/stable/api/utility/config.html). While a Session or a
  trainer reads them both point at an empty file, so a user's defaults cannot change the request `plan`
  predicted and nothing is fetched from S3. An empty config also keeps submit fast: SDK 2.x validates a
  non-empty one against its JSON schema on every lookup (22 times per job).
- Role validation: SDK 3.x validates a role passed to ModelTrainer through iam:SimulatePrincipalPolicy
  unless SAGEMAKER_VALIDATE_ROLE is false; the role check (launcher.submission.role) has already run, or the
  user skipped it, so the SDK does not ask again.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from launcher.core.errors import LauncherError

# The SDK's environment variables naming its admin and user defaults files (the same in 2.x and 3.x).
CONFIG_OVERRIDES = ("SAGEMAKER_ADMIN_CONFIG_OVERRIDE", "SAGEMAKER_USER_CONFIG_OVERRIDE")
# What the SDK reads while it builds a job, and the value it gets here.
QUIET_ENVIRONMENT = {**dict.fromkeys(CONFIG_OVERRIDES, os.devnull), "SAGEMAKER_VALIDATE_ROLE": "false"}
SDK_LOGGERS = ("sagemaker", "sagemaker_core", "botocore.credentials", "botocore.configprovider")
SILENT = logging.CRITICAL + 1


@contextlib.contextmanager
def root_logger_kept() -> Iterator[None]:
    """Undo what the SDK does to the root logger (its imports call logging.basicConfig)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for h in list(root.handlers):
            if h not in handlers:
                root.removeHandler(h)
        root.setLevel(level)


def _sdk_loggers() -> list[logging.Logger]:
    """The SDK's loggers as they stand: its packages' roots and every one below them that set a level of its own
    (sagemaker_core's sets INFO, so its parent's level does not reach it)."""
    named = [logging.getLogger(n) for n in SDK_LOGGERS[:2]]
    below = [logger for name, logger in logging.root.manager.loggerDict.items()
             if isinstance(logger, logging.Logger) and name.startswith(SDK_LOGGERS[:2])]
    return [*named, *below]


@contextlib.contextmanager
def sdk_silent() -> Iterator[None]:
    """No SDK log line during the call: a failure is reported once, by smp-launch, from the exception."""
    loggers = _sdk_loggers()
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(SILENT)
    try:
        with root_logger_kept():
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


@contextlib.contextmanager
def no_sdk_defaults() -> Iterator[None]:
    """The SDK's defaults files pointed at an empty file, and its own role validation off, while it reads them."""
    saved = {name: os.environ.get(name) for name in QUIET_ENVIRONMENT}
    os.environ.update(QUIET_ENVIRONMENT)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@functools.cache
def skip_the_exit_collection() -> None:
    """Freeze the heap at exit, so the interpreter's teardown does not garbage-collect it.

    After the SDK's import the collector tracks about a quarter of a million objects; traversing them
    while the interpreter shuts down cost as much as a third of the import itself, after the job had
    started. Frozen objects are left to the operating system; standard streams are still flushed and
    the other atexit handlers still run.
    """
    atexit.register(gc.freeze)


def quiet_import(load: Callable[[], Any]) -> Any:
    """`load()` (a function that imports SDK modules and returns what it needs), without the import's noise: no
    stdout line, no warning, the root logger and sys.excepthook as they were, the SDK's loggers at WARNING."""
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    logging.getLogger("sagemaker.config").setLevel(logging.WARNING)
    hook = sys.excepthook
    try:
        with root_logger_kept(), no_sdk_defaults(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = load()
    finally:
        sys.excepthook = hook
    for name in SDK_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    skip_the_exit_collection()
    return loaded


def untracked(owner: type, method: str, emitter: Callable[..., Any]) -> Callable[..., Any]:
    """`owner.method` without the SDK's telemetry decorator `emitter` (no request leaves for its telemetry
    endpoint); refuses an SDK built differently rather than guess."""
    wrapped = getattr(owner, method)
    inner = getattr(wrapped, "__wrapped__", None)
    # Every function the decorator wraps shares one code object: the decorator's own wrapper.
    probe = emitter(feature="probe", func_name="probe")(lambda: None)
    if inner is None or wrapped.__code__ is not probe.__code__:
        raise LauncherError(f"this SageMaker SDK version is not supported: {owner.__name__}.{method} is not wrapped "
                            "by its telemetry decorator as expected; install a version setup.cfg accepts")
    return inner


class Unused:
    """Stands in for the SDK clients building a job never uses (runtime, feature store, metrics).

    Passing these keeps a Session from building three boto3 clients; any use is a loud error.
    """

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        raise LauncherError(f"the SageMaker SDK used its {self._name} client ({attr}) while building a job; "
                            "this SDK version is not supported")
