"""smp-launch: plan, check and launch SageMaker model parallelism v2 (SMP v2) training jobs.

The Python API (docs/api.md) is exported here. Names load on first use, so `import launcher` stays
cheap: neither boto3, pydantic nor the SageMaker SDK is imported until a function needs it.
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "connect": "launcher.api",
    "load_spec": "launcher.api",
    "build_plan": "launcher.api",
    "submit": "launcher.api",
    "status": "launcher.api",
    "wait": "launcher.api",
    "worst_exit_code": "launcher.api",
    "resolve_job": "launcher.api",
    "logs": "launcher.api",
    "stop": "launcher.api",
    "list_jobs": "launcher.api",
    "Plan": "launcher.plan.build",
    "LoadedSpec": "launcher.spec.loader",
    "Clients": "launcher.core.aws",
    "LauncherError": "launcher.core.errors",
    "SpecError": "launcher.core.errors",
    "UsageError": "launcher.core.errors",
    "Problem": "launcher.core.errors",
    "AwsError": "launcher.core.aws",
    "QuotaError": "launcher.core.aws",
    "RoleRefused": "launcher.submission.role",
    "JobNotFound": "launcher.jobs.status",
    "Interrupted": "launcher.core.errors",
    "Submission": "launcher.submission.create",
    "Advisory": "launcher.rules",
    "Topology": "launcher.rules.topology",
    "JobStatus": "launcher.jobs.status",
    "JobState": "launcher.jobs.status",
    "JobSummary": "launcher.jobs.status",
    "LogLine": "launcher.jobs.tail",
    "Failure": "launcher.jobs.failures",
    "RetryPolicy": "launcher.orchestrate.retry",
    "next_attempt": "launcher.orchestrate.retry",
    "plan_sweep": "launcher.api",
    "warm_pool_notes": "launcher.api",
    "submit_many": "launcher.api",
    "Candidate": "launcher.plan.sweep",
    "PlanRun": "launcher.orchestrate.queue",
    "PlanState": "launcher.orchestrate.queue",
    "Event": "launcher.orchestrate.queue",
    "EventKind": "launcher.orchestrate.queue",
    "rerun": "launcher.api",
    "diff": "launcher.api",
    "pipeline_definition": "launcher.api",
    "upsert_pipeline": "launcher.api",
    "Change": "launcher.orchestrate.provenance",
    "NotLaunchedHere": "launcher.orchestrate.provenance",
    "PipelineResult": "launcher.orchestrate.pipeline",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'launcher' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
