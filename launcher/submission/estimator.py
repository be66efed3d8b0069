"""The SageMaker SDK v2 PyTorch Estimator backend: the only module that imports `sagemaker`.

It builds the Estimator from a Plan and starts the job, nothing more (torchx's `schedule`): every
argument was decided when the plan was built. The SDK's import noise (two stdout lines, a
deprecation warning, root-logger changes, its own error line) is kept from the user, and so are
its SDK-defaults files and its telemetry:

- Defaults: the SDK reads its defaults config from the files named by its own override variables
  (https://sagemaker.readthedocs.io/en/stable/api/utility/config.html).
  While the Session is built both point at an empty file, so a user's defaults (tags, VPC, KMS) cannot
  change the request `plan` predicted, nothing is fetched from S3, and the config is empty. An empty
  config is also what keeps submit fast: the SDK validates a non-empty one against its JSON schema
  on every lookup (22 times per job).
- Telemetry: `EstimatorBase.fit` is wrapped by the SDK's telemetry decorator, which would send a
  request to an S3 telemetry endpoint (no opt-out in an empty config) and, ending in
  `finally: return response`, swallows a KeyboardInterrupt raised during CreateTrainingJob. `start`
  calls the function under that decorator, so no telemetry is sent and Ctrl-C comes out as
  KeyboardInterrupt.
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
from launcher.plan.build import Plan

# The SDK's environment variables naming its admin and user defaults files.
CONFIG_OVERRIDES = ("SAGEMAKER_ADMIN_CONFIG_OVERRIDE", "SAGEMAKER_USER_CONFIG_OVERRIDE")
SDK_LOGGERS = ("sagemaker", "botocore.credentials", "botocore.configprovider")


@contextlib.contextmanager
def _root_logger_kept() -> Iterator[None]:
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


@contextlib.contextmanager
def sdk_silent() -> Iterator[None]:
    """No SDK log line during the call: a failure is reported once, by smp-launch, from the exception."""
    sdk = logging.getLogger("sagemaker")
    level = sdk.level
    sdk.setLevel(logging.CRITICAL + 1)
    try:
        with _root_logger_kept():
            yield
    finally:
        sdk.setLevel(level)


@contextlib.contextmanager
def _no_sdk_defaults() -> Iterator[None]:
    """Point the SDK's defaults-file variables at an empty file while a Session reads them."""
    saved = {name: os.environ.get(name) for name in CONFIG_OVERRIDES}
    os.environ.update({name: os.devnull for name in CONFIG_OVERRIDES})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@functools.cache
def _skip_the_exit_collection() -> None:
    """Freeze the heap at exit, so the interpreter's teardown does not garbage-collect it.

    After the SDK's import the collector tracks about a quarter of a million objects; traversing them
    while the interpreter shuts down cost as much as a third of the import itself, after the job had
    started. Frozen objects are left to the operating system; standard streams are still flushed and
    the other atexit handlers still run.
    """
    atexit.register(gc.freeze)


def import_sdk():
    """Import sagemaker.pytorch quietly and leave the root logger as it was.

    The import builds a JumpStart Session, which reads the SDK defaults files: without them it
    cannot fetch a config from S3 or print a page of schema errors for a malformed one.
    `sagemaker.experiments` is imported here too: `fit` imports it lazily, and its import
    configures the root logger (INFO, to stderr). The SDK's sagemaker_core installs rich's traceback
    handler as sys.excepthook on import (its `enable_rich_logging`); the hook in place before is put back,
    so an error is never a screen of boxed source on stdout.
    """
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    logging.getLogger("sagemaker.config").setLevel(logging.WARNING)
    hook = sys.excepthook
    try:
        with _root_logger_kept(), _no_sdk_defaults(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import sagemaker
            import sagemaker.experiments  # noqa: F401
            from sagemaker.pytorch import PyTorch
    finally:
        sys.excepthook = hook
    for name in SDK_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    _skip_the_exit_collection()
    return sagemaker, PyTorch


def untracked(owner: type, method: str) -> Callable[..., Any]:
    """`owner.method` without the SDK's telemetry decorator (no request leaves for its telemetry endpoint);
    refuses an SDK built differently rather than guess."""
    from sagemaker.telemetry import telemetry_logging

    wrapped = getattr(owner, method)
    inner = getattr(wrapped, "__wrapped__", None)
    # Every function the decorator wraps shares one code object: the decorator's own wrapper.
    probe = telemetry_logging._telemetry_emitter(feature="probe", func_name="probe")(lambda: None)
    if inner is None or wrapped.__code__ is not probe.__code__:
        raise LauncherError(f"this SageMaker SDK version is not supported: {owner.__name__}.{method} is not wrapped "
                            "by its telemetry decorator as expected; install the version pinned in setup.cfg")
    return inner


def untracked_fit() -> Callable[..., Any]:
    """`EstimatorBase.fit`, untracked. `PyTorch.fit`, above it, only adds a training-recipe channel, and a
    plan never names a recipe."""
    from sagemaker.estimator import EstimatorBase

    return untracked(EstimatorBase, "fit")


class _Unused:
    """Stands in for the SDK clients starting a job never uses (runtime, feature store, metrics).

    Passing these keeps the Session from building three boto3 clients; any use is a loud error.
    """

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        raise LauncherError(f"the SageMaker SDK used its {self._name} client ({attr}) while starting a job; "
                            "this SDK version is not supported")


def channels(plan: Plan) -> dict[str, str]:
    """The job's input channels: every data source except the synthetic one."""
    return dict(plan.channels)


def session(boto_session: Any, sagemaker_client: Any = None, *, pipeline: bool = False):
    """The SDK Session a job is built under, without the user's SDK defaults; with `pipeline`, a
    PipelineSession (fit then records the request as a pipeline step's arguments instead of starting a job)."""
    sagemaker, _ = import_sdk()
    factory: Any  # either SDK Session class; the extra clients below go only to the plain one
    if pipeline:
        from sagemaker.workflow.pipeline_context import PipelineSession

        factory = PipelineSession
    else:
        factory = sagemaker.Session
    with _no_sdk_defaults():
        made = factory(
            boto_session=boto_session, sagemaker_client=sagemaker_client,
            **({} if pipeline else {
                "sagemaker_runtime_client": _Unused("sagemaker-runtime"),
                "sagemaker_featurestore_runtime_client": _Unused("sagemaker-featurestore-runtime"),
                "sagemaker_metrics_client": _Unused("sagemaker-metrics")}))
    if made.sagemaker_config:
        raise LauncherError(f"the SageMaker SDK loaded a defaults config despite {' and '.join(CONFIG_OVERRIDES)}; "
                            "refusing to submit a request that may differ from the plan")
    return made


def build(plan: Plan, source_uri: str, role_arn: str, boto_session: Any, sagemaker_client: Any = None,
          sdk_session: Any = None):
    """The PyTorch Estimator for the plan; the source tarball is already in S3 at source_uri.

    `sdk_session` replaces the plain Session (launcher.orchestrate.pipeline passes a PipelineSession)."""
    _, PyTorch = import_sdk()
    session_ = sdk_session or session(boto_session, sagemaker_client)
    kwargs = plan.estimator.to_dict()
    kwargs.update(source_dir=source_uri, role=role_arn, sagemaker_session=session_)
    # The image the plan resolved (the SDK's own lookup gives the same; tests/test_plan.py checks);
    # naming it spares the SDK loading its image tables.
    kwargs.setdefault("image_uri", plan.framework.image_uri)
    return PyTorch(**kwargs)


def start(plan: Plan, source_uri: str, role_arn: str, boto_session: Any, sagemaker_client: Any = None) -> str:
    """CreateTrainingJob through the SDK (fit with wait=False); returns the job name.

    A KeyboardInterrupt during the call propagates: whether the job exists is then for the caller to
    find out (DescribeTrainingJob).
    """
    estimator = build(plan, source_uri, role_arn, boto_session, sagemaker_client)
    fit = untracked_fit()
    with sdk_silent():
        fit(estimator, inputs=channels(plan) or None, job_name=plan.job_name, wait=False, logs=False)
    return plan.job_name
