"""Capacity fallback: when SageMaker has no instances of the preferred type, the same job on the next one.

A spec's `cluster.instance_types` lists instance types in order of preference; the plan carries the job
planned and advised on each of the others (`Plan.alternatives`). When a job fails for capacity (its
FailureReason a CapacityError or InsufficientCapacity, launcher.jobs.failures) or CreateTrainingJob itself
answers that there is no capacity, the queue (launcher.orchestrate.queue) submits the next alternative that
fits (an alternative on which the layout breaks an advisor rule is skipped, saying why) as the next
attempt: its name `<first>-r<n>` and its tags as a retry's, plus `smp-launch:instance-fallback-of`
naming the type that had no capacity. It keeps the first attempt's checkpoint S3 URI, so the next type
resumes from what the last one saved. A plan is followed until its job is past provisioning, so a plain
`submit` falls back too.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from launcher.core.names import TAG_PREFIX
from launcher.jobs.failures import FailureClass

if TYPE_CHECKING:
    from launcher.jobs.status import JobStatus
    from launcher.plan.build import Plan

FALLBACK_TAG = f"{TAG_PREFIX}instance-fallback-of"
# SecondaryStatus values after which a job holds its instances: capacity can no longer fail it.
PROVISIONED = frozenset({"Downloading", "DownloadingTrainingImage", "Training", "Uploading", "Completed"})
CAPACITY_WORDS = ("InsufficientCapacity", "CapacityError", "Insufficient capacity")

Decide = Callable[["Plan", "JobStatus", int], "tuple[Plan, float] | None"]


def has_alternatives(plan: Plan) -> bool:
    return bool(getattr(plan, "alternatives", ()))


def settled(status: JobStatus) -> bool:
    """The job got its instances (or ended): no capacity failure can come any more."""
    return status.terminal or (status.secondary_status or "") in PROVISIONED


def next_instance(plan: Plan, attempt: int, failed_job: str | None) -> tuple[Plan | None, list[str]]:
    """The plan of the next attempt on the next alternative that fits, and a line for each one skipped
    (this layout does not fit it); (None, skipped) when none is left. `failed_job` is the job that failed
    (tagged as the one this retries), None when the last type was refused before a job was created."""
    from launcher.orchestrate.retry import ATTEMPT_TAG, RETRY_OF_TAG, attempt_name, first_name

    skipped = []
    for k, alternative in enumerate(plan.alternatives):
        if alternative.errors:
            skipped.append(f"{alternative.instance_type} skipped: this layout does not fit it "
                           f"({alternative.errors[0].rule} {alternative.errors[0].message})")
            continue
        name = attempt_name(first_name(plan, attempt), attempt + 1)
        keep = [t for t in alternative.estimator.tags if t["Key"] not in (RETRY_OF_TAG, ATTEMPT_TAG, FALLBACK_TAG)]
        retried = [{"Key": RETRY_OF_TAG, "Value": failed_job}] if failed_job else []
        tags = [*keep, *retried, {"Key": ATTEMPT_TAG, "Value": str(attempt + 1)},
                {"Key": FALLBACK_TAG, "Value": plan.instance_type}]
        estimator = dataclasses.replace(alternative.estimator, tags=tags,
                                        checkpoint_s3_uri=plan.estimator.checkpoint_s3_uri)
        return dataclasses.replace(alternative, job_name=name, estimator=estimator,
                                   alternatives=plan.alternatives[k + 1:]), skipped
    return None, skipped


def chain(then: Decide | None) -> Decide:
    """What the queue does with a job that ended badly: the next instance type after a capacity failure
    while the plan has one that fits, else what `then` (a retry policy, a hook) decides."""

    def decide(plan: Plan, status: JobStatus, attempt: int) -> tuple[Plan, float] | None:
        failure = status.failure if has_alternatives(plan) else None
        if failure is not None and failure.failure_class == FailureClass.CAPACITY:
            following, _ = next_instance(plan, attempt, status.job_name)
            if following is not None:
                return following, 0.0
        return then(plan, status, attempt) if then is not None else None

    return decide


def refused_for_capacity(message: str) -> bool:
    """CreateTrainingJob answered that there is no capacity (rather than creating a job that then fails)."""
    return any(word.lower() in message.lower() for word in CAPACITY_WORDS)


def refusal(err: Exception, *, can_wait: bool) -> str | None:
    """Why a submit refused on the plan's instance type is a reason to try the next one (the words of
    `describe`), or None: no capacity; a type SageMaker does not offer in the region; a quota that cannot hold
    the job (unless `can_wait`, a queue, and it will once running jobs end)."""
    from launcher.submission.quotas import NotOffered, OverQuota

    if isinstance(err, OverQuota):
        check = err.check
        if can_wait and check.waitable:
            return None
        return (f"is over its quota ({check.name!r} is {check.quota:g}, {check.in_use or 0} in use, "
                f"the job needs {check.needed})" if check.quota is not None else "is over its quota")
    if isinstance(err, NotOffered):
        return "is not offered for training in this region"
    if refused_for_capacity(str(err)):
        return "had no capacity (CreateTrainingJob refused it)"
    return None


def describe(before: Plan, after: Plan, failed_job: str, why: str = "") -> str:
    """The line that says a job moves to another instance type, and why (and which types it passed over)."""
    if getattr(before, "instance_type", None) == getattr(after, "instance_type", None):
        return ""
    passed = []
    for alternative in before.alternatives:
        if alternative.instance_type == after.instance_type:
            break
        passed.append(f"{alternative.instance_type} skipped: this layout does not fit it "
                      f"({alternative.errors[0].rule})" if alternative.errors else alternative.instance_type)
    skipped = f" ({'; '.join(passed)})" if passed else ""
    return (f"{before.instance_type} {why or f'had no capacity ({failed_job})'}; trying {after.instance_count} x "
            f"{after.instance_type} as {after.job_name}{skipped}")
