"""Whose a job is, before a command that changes it (`stop`): smp-launch's own carry the smp-launch:managed tag
it puts on every job it starts (the tag `list` finds them by; `rerun` reads the plan stored beside them). Another's
job is described by what SageMaker says of it: the tuning, AutoML or labeling job that started it
(DescribeTrainingJob's TuningJobArn, AutoMLJobArn, LabelingJobArn:
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeTrainingJob.html), its role, when it was
made, a few of its tags.
"""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from launcher.core.aws import Clients
from launcher.core.errors import UsageError
from launcher.core.names import MANAGED_TAG
from launcher.core.sanitize import DETAIL_LIMIT, NAME_LIMIT, clean
from launcher.core.timeutil import epoch

SHOWN_TAGS = 3  # tags named in the refusal, in key order
STARTERS = (("TuningJobArn", "tuning job"), ("AutoMLJobArn", "AutoML job"), ("LabelingJobArn", "labeling job"))
FLAG = "--foreign"  # the CLI flag; the API's keyword is `foreign=True`


class NotOurs(UsageError):
    """A job smp-launch did not start (or cannot tell that it did): changed only when the caller says so (exit 2)."""


def job_tags(clients: Clients, arn: str) -> dict[str, str]:
    """The job's tags (ListTags, paged); raises what the call raises."""
    tags: dict[str, str] = {}
    token = None
    for _ in range(50):  # 50 pages of 50 tags: far more than SageMaker's 50 tags per resource
        page = clients.sagemaker.list_tags(ResourceArn=arn, **({"NextToken": token} if token else {}))
        tags.update({str(t.get("Key")): str(t.get("Value", "")) for t in page.get("Tags") or ()})
        token = page.get("NextToken")
        if not token:
            break
    return tags


def describe_owner(desc: Mapping[str, Any], tags: Mapping[str, str]) -> str:
    """What is known of whose the job is, in a few words."""
    parts = []
    for key, what in STARTERS:
        arn = desc.get(key)
        if isinstance(arn, str) and arn:
            parts.append(f"started by {what} {clean(arn.rsplit('/', 1)[-1], NAME_LIMIT)}")
    role = desc.get("RoleArn")
    if isinstance(role, str) and role:
        parts.append(f"role {clean(role.rsplit('/', 1)[-1], NAME_LIMIT)}")
    created = desc.get("CreationTime")
    if isinstance(created, datetime):
        parts.append(f"created {datetime.fromtimestamp(epoch(created), timezone.utc):%Y-%m-%d %H:%M} UTC")
    shown = [f"{clean(k, NAME_LIMIT)}={clean(v, NAME_LIMIT)}" for k, v in sorted(tags.items())[:SHOWN_TAGS]]
    if shown:
        parts.append("tags " + ", ".join(shown) + (", ..." if len(tags) > SHOWN_TAGS else ""))
    return clean("; ".join(parts), DETAIL_LIMIT) if parts else "nothing else is known of it"


def require_ours(clients: Clients, job: str, desc: Mapping[str, Any], action: str = "stops") -> None:
    """Return when smp-launch started `job` (described as `desc`); else a NotOurs naming whose it is."""
    from botocore.exceptions import BotoCoreError, ClientError

    shown = clean(job, NAME_LIMIT)
    try:
        tags = job_tags(clients, str(desc.get("TrainingJobArn") or ""))
    except (ClientError, BotoCoreError) as exc:
        why = exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else type(exc).__name__
        raise NotOurs(f"cannot tell whether smp-launch started {shown}: its tags cannot be read (ListTags: "
                      f"{clean(why, NAME_LIMIT)}); {FLAG} {action} it all the same") from None
    if tags.get(MANAGED_TAG) == "true":
        return
    raise NotOurs(f"{shown} was not started by smp-launch (it has no {MANAGED_TAG} tag: {describe_owner(desc, tags)}); "
                  f"{FLAG} {action} it all the same")


def require_ours_queued(job: str, desc: Mapping[str, Any], action: str = "terminates") -> None:
    """The same for a job in an AWS Batch queue: its service job carries the training job's tags."""
    tags = desc.get("tags") or {}
    if isinstance(tags, Mapping) and tags.get(MANAGED_TAG) == "true":
        return
    raise NotOurs(f"{clean(job, NAME_LIMIT)} was not queued by smp-launch (its service job has no {MANAGED_TAG} tag); "
                  f"{FLAG} {action} it all the same")
