"""Jobs already launched: describe one, list the tool's own, stop one. boto3 only, never the SDK."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from launcher.aws import Clients, explain, pages
from launcher.errors import EXIT_INVALID, EXIT_JOB_FAILED, EXIT_OK, EXIT_STOPPED, LauncherError, UsageError
from launcher.sanitize import clean
from launcher.timeutil import epoch

MANAGED_TAG = "smp-launch:managed"  # the same tag launcher.plan puts on every job it launches
TERMINAL = ("Completed", "Failed", "Stopped")
RUNNING = ("InProgress", "Stopping")
_EXIT = {"Completed": EXIT_OK, "Failed": EXIT_JOB_FAILED, "Stopped": EXIT_STOPPED}


class JobNotFound(LauncherError):
    exit_code = EXIT_INVALID


def exit_code_for(status: str) -> int:
    """The documented exit code for a job status: 1 Failed, 5 Stopped, else 0."""
    return _EXIT.get(status, EXIT_OK)


def describe(clients: Clients, job: str) -> dict[str, Any]:
    """DescribeTrainingJob, with "no such job" said plainly (exit 2) rather than as a ValidationException."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return clients.sagemaker.describe_training_job(TrainingJobName=job)
    except ClientError as exc:
        err = exc.response.get("Error", {})
        if err.get("Code") == "ValidationException" and "find" in str(err.get("Message", "")).lower():
            region = clients.sagemaker.meta.region_name
            raise JobNotFound(f"no training job named {job!r} in {region}; check the name and --region") from None
        raise explain(exc, f"describing {job}") from None
    except BotoCoreError as exc:
        raise explain(exc, f"describing {job}") from None


def instances(desc: dict[str, Any]) -> tuple[str, int]:
    """(instance type, instance count), for plain and heterogeneous (InstanceGroups) clusters."""
    rc = desc.get("ResourceConfig") or {}
    if rc.get("InstanceCount"):
        return rc.get("InstanceType", "?"), int(rc["InstanceCount"])
    groups = rc.get("InstanceGroups") or []
    types = sorted({g.get("InstanceType", "?") for g in groups})
    return ",".join(types) or "?", sum(int(g.get("InstanceCount", 0)) for g in groups)


def summary(desc: dict[str, Any]) -> dict[str, Any]:
    """What `status` shows, as plain JSON-able values."""
    itype, count = instances(desc)
    return {
        "job_name": desc["TrainingJobName"],
        "arn": desc.get("TrainingJobArn"),
        "status": desc["TrainingJobStatus"],
        "secondary_status": desc.get("SecondaryStatus"),
        "transitions": [{"status": t["Status"], "start": epoch(t.get("StartTime")), "end": epoch(t.get("EndTime")),
                         "message": t.get("StatusMessage", "")} for t in desc.get("SecondaryStatusTransitions", [])],
        "instance_type": itype,
        "instance_count": count,
        "image": (desc.get("AlgorithmSpecification") or {}).get("TrainingImage"),
        "created": epoch(desc.get("CreationTime")),
        "training_start": epoch(desc.get("TrainingStartTime")),
        "training_end": epoch(desc.get("TrainingEndTime")),
        "training_seconds": desc.get("TrainingTimeInSeconds"),
        "billable_seconds": desc.get("BillableTimeInSeconds"),
        "failure_reason": desc.get("FailureReason"),
        "model_artifacts": (desc.get("ModelArtifacts") or {}).get("S3ModelArtifacts"),
    }


def list_jobs(clients: Clients, running: bool = False, name_contains: str | None = None,
              limit: int = 50) -> list[dict[str, Any]]:
    """The newest jobs carrying the tool's tag, via SageMaker Search's paginator (one call per 100 jobs, tags
    included; at most 2,000 jobs looked at).

    Filters are re-checked here: Search may apply only some of them (moto stops at the tag filter).
    """

    filters = []
    if name_contains:
        filters.append({"Name": "TrainingJobName", "Operator": "Contains", "Value": name_contains})
    filters.append({"Name": f"Tags.{MANAGED_TAG}", "Operator": "Equals", "Value": "true"})
    params: dict[str, Any] = {"Resource": "TrainingJob", "SearchExpression": {"Filters": filters},
                              "SortBy": "CreationTime", "SortOrder": "Descending",
                              "PaginationConfig": {"PageSize": 100, "MaxItems": 2000}}
    rows: list[dict[str, Any]] = []
    for page in pages(clients.sagemaker, "search", "listing training jobs", **params):
        for record in page.get("Results", []):
            job = record.get("TrainingJob") or {}
            tags = {t["Key"]: t["Value"] for t in job.get("Tags", [])}
            if tags.get(MANAGED_TAG) != "true":
                continue
            if name_contains and name_contains not in job.get("TrainingJobName", ""):
                continue
            if running and job.get("TrainingJobStatus") not in RUNNING:
                continue
            itype, count = instances(job)
            rows.append({"job_name": job["TrainingJobName"], "status": job.get("TrainingJobStatus"),
                         "secondary_status": job.get("SecondaryStatus"), "instance_type": itype,
                         "instance_count": count, "created": epoch(job.get("CreationTime")),
                         "training_end": epoch(job.get("TrainingEndTime")),
                         "billable_seconds": job.get("BillableTimeInSeconds")})
        if len(rows) >= limit:
            break
    rows.sort(key=lambda r: r["created"] or 0, reverse=True)
    return rows[:limit]


def stop(clients: Clients, job: str, yes: bool, confirm: Callable[[str], bool] | None) -> dict[str, Any]:
    """Stop a running job, asking first unless `yes`; `confirm` is None when nobody can answer."""
    from botocore.exceptions import BotoCoreError, ClientError

    desc = describe(clients, job)
    status = desc["TrainingJobStatus"]
    if status != "InProgress":
        return {"job_name": job, "stopped": False, "status": status,
                "message": f"{job} is {status}; nothing to stop"}
    if not yes:
        itype, count = instances(desc)
        question = clean(f"Stop training job {job} ({desc.get('SecondaryStatus')}, {count} x {itype})?")
        if confirm is None:
            raise UsageError(f"stop asks before stopping {job}, and there is no terminal to ask on; pass --yes")
        if not confirm(question):
            return {"job_name": job, "stopped": False, "status": status, "message": "not stopped"}
    try:
        clients.sagemaker.stop_training_job(TrainingJobName=job)
    except (ClientError, BotoCoreError) as exc:
        raise explain(exc, f"stopping {job}") from None
    after = describe(clients, job)["TrainingJobStatus"]
    return {"job_name": job, "stopped": True, "status": after,
            "message": f"{job} is {after}; SageMaker uploads what the job saved, then marks it Stopped "
                       f"(follow with `smp-launch logs {job}`)"}
