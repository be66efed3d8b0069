"""Job names after the plan: the name of a later attempt, and a plan given a new name when the one it was built
with turned out to be another's (another process, on this machine or elsewhere, made a job of that name first).

Pure: no AWS call and no file. Which names are free is for launcher.core.claims (this machine) and SageMaker
(everywhere) to say; these functions only make the names and the renamed plans."""
from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Container
from datetime import datetime, timedelta, timezone

from launcher.core.names import TAG_PREFIX
from launcher.plan.build import Plan, job_name

ATTEMPT_TAG = f"{TAG_PREFIX}attempt"
MAX_NAME = 63  # TrainingJobName's limit (CreateTrainingJob)
FRESH_TRIES = 1000  # milliseconds tried past now for a name not yet used


def attempt_name(first: str, attempt: int) -> str:
    """The name of attempt `attempt` (2, 3...) of the job first named `first`: `<first>-r<attempt>`, within
    SageMaker's 63 characters. A first name too long for that keeps its head and ends in a hash of the whole
    of it (`<head>-<8 hex>-r<attempt>`): cutting the tail alone would drop the milliseconds that tell two
    first names apart, and two queues' retries would then share one name."""
    suffix = f"-r{attempt}"
    if len(first) + len(suffix) <= MAX_NAME:
        return first + suffix
    digest = hashlib.sha256(first.encode("utf-8")).hexdigest()[:8]
    head = first[: MAX_NAME - len(suffix) - len(digest) - 1].rstrip("-")
    return f"{head}-{digest}{suffix}"


def attempt_of(plan: Plan) -> int:
    """The attempt a plan is (its attempt tag; 1 without one)."""
    for tag in plan.estimator.tags:
        if tag["Key"] == ATTEMPT_TAG and str(tag["Value"]).isdigit():
            return int(tag["Value"])
    return 1


def fresh_name(plan: Plan, taken: Container[str], now: datetime | None = None) -> str:
    """A name for the plan's job made as its first was (`<name>-<UTC time>-<ms>`, `-r<k>` for a later attempt),
    at `now` or the first millisecond after it whose name is not in `taken`."""
    start = now or datetime.now(timezone.utc)
    attempt = attempt_of(plan)
    for ms in range(FRESH_TRIES):
        first = job_name(plan.base_job_name, start + timedelta(milliseconds=ms))
        name = attempt_name(first, attempt) if attempt > 1 else first
        if name not in taken and name != plan.job_name:
            return name
    raise RuntimeError(f"no free name for {plan.base_job_name} in {FRESH_TRIES} ms")  # a caller bug: taken is huge


def renamed(plan: Plan, name: str) -> Plan:
    """The plan with job name `name`: the same job in every other way, its checkpoints (where the spec names no
    folder) under the new name, as a plan built with that name would have them; an attempt's checkpoints, which
    are its first attempt's, stay where they are."""
    if name == plan.job_name:
        return plan
    est = plan.estimator
    checkpoint = est.checkpoint_s3_uri
    own = f"/checkpoints/{plan.job_name}"
    if not plan.spec.output.checkpoint_path and checkpoint and checkpoint.endswith(own):
        checkpoint = checkpoint[: -len(own)] + f"/checkpoints/{name}"
    return dataclasses.replace(plan, job_name=name,
                               estimator=dataclasses.replace(est, checkpoint_s3_uri=checkpoint),
                               alternatives=tuple(renamed(a, name) if a.job_name == plan.job_name else a
                                                  for a in plan.alternatives))
