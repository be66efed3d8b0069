"""The SageMaker SDK v2 PyTorch Estimator backend: the only module that imports `sagemaker`.

It builds the Estimator from a Plan and starts the job, nothing more (torchx's `schedule`): every
argument was decided when the plan was built. The SDK's import noise (two stdout lines, a
deprecation warning, a root-logger change) and its telemetry call are kept from the user.
"""
from __future__ import annotations

import logging
import os
import warnings
from typing import Any

from launcher.plan import Plan

# The SDK's own switch for telemetry (SDK defaults config "TelemetryOptOut"); passing it as the
# session config also keeps the user's SDK-defaults files from changing what the plan promised.
SDK_CONFIG = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}


def import_sdk():
    """Import sagemaker.pytorch quietly and leave the root logger as it was."""
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    logging.getLogger("sagemaker.config").setLevel(logging.WARNING)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import sagemaker
        from sagemaker.pytorch import PyTorch
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    root.setLevel(level)
    for name in ("sagemaker", "botocore.credentials", "botocore.configprovider"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return sagemaker, PyTorch


def channels(plan: Plan) -> dict[str, str]:
    """The job's input channels: every data source except the synthetic one."""
    return dict(plan.channels)


def build(plan: Plan, source_uri: str, role_arn: str, boto_session: Any, sagemaker_client: Any = None):
    """The PyTorch Estimator for the plan; the source tarball is already in S3 at source_uri."""
    sagemaker, PyTorch = import_sdk()
    session = sagemaker.Session(boto_session=boto_session, sagemaker_client=sagemaker_client,
                                sagemaker_config=SDK_CONFIG)
    kwargs = dict(plan.estimator)
    kwargs.update(source_dir=source_uri, role=role_arn, sagemaker_session=session)
    return PyTorch(**kwargs)


def start(plan: Plan, source_uri: str, role_arn: str, boto_session: Any, sagemaker_client: Any = None) -> str:
    """CreateTrainingJob through the SDK (fit with wait=False); returns the job name."""
    estimator = build(plan, source_uri, role_arn, boto_session, sagemaker_client)
    estimator.fit(inputs=channels(plan) or None, job_name=plan.job_name, wait=False, logs=False)
    return plan.job_name
