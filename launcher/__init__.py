"""smp-launch: plan, check and launch SageMaker model parallelism v2 (SMP v2) training jobs.

The Python API (docs/api.md) is exported here. Names load on first use, so `import launcher` stays
cheap: neither boto3, pydantic nor the SageMaker SDK is imported until a function needs it.
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "connect": "launcher.api", "load_spec": "launcher.api", "build_plan": "launcher.api",
    "submit": "launcher.api", "status": "launcher.api", "wait": "launcher.api", "logs": "launcher.api",
    "stop": "launcher.api", "list_jobs": "launcher.api",
    "Plan": "launcher.plan", "LoadedSpec": "launcher.spec.loader", "Clients": "launcher.aws",
    "LauncherError": "launcher.errors", "SpecError": "launcher.errors", "UsageError": "launcher.errors",
    "Problem": "launcher.errors", "AwsError": "launcher.aws", "QuotaError": "launcher.aws",
    "RoleRefused": "launcher.iam", "JobNotFound": "launcher.jobs", "Interrupted": "launcher.errors",
    "Submission": "launcher.submission", "Advisory": "launcher.rules", "Topology": "launcher.topology",
    "JobStatus": "launcher.jobs", "JobSummary": "launcher.jobs", "LogLine": "launcher.tail",
    # Failure classes and retries (issue 13).
    "Failure": "launcher.failures", "RetryPolicy": "launcher.retry", "next_attempt": "launcher.retry",
    "submit_with_retries": "launcher.retry",
    # many plans (issue 13)
    "plan_sweep": "launcher.api", "submit_many": "launcher.api", "Candidate": "launcher.sweep",
    "PlanRun": "launcher.orchestrate", "Event": "launcher.orchestrate",
    # issue 13 (13c): provenance and SageMaker Pipelines
    "rerun": "launcher.api", "diff": "launcher.api", "pipeline_definition": "launcher.api",
    "upsert_pipeline": "launcher.api", "Change": "launcher.provenance", "NotLaunchedHere": "launcher.provenance",
    "PipelineResult": "launcher.pipeline",
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
