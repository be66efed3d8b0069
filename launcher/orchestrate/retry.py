"""Resubmitting a job that failed for a reason a new attempt can get past: short capacity, a spot interruption.

The RetryPolicy says which failure classes are retried, how many attempts in all and the backoff before each;
the queue (launcher.orchestrate.queue) applies it, to one plan or many.

A retried job is the same plan under a linked name (`<first>-r2`, `-r3`...) with a tag naming the job it
retries (`smp-launch:retry-of`), and the SAME checkpoint S3 URI as the first attempt: SageMaker copies that
prefix back into /opt/ml/checkpoints when the new job starts
(https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html), and the entry script resumes from
the newest complete checkpoint there, so a spot job carries on where it stopped.
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from launcher.core.errors import UsageError
from launcher.core.names import TAG_PREFIX
from launcher.jobs.failures import FailureClass

if TYPE_CHECKING:
    from launcher.jobs.status import JobStatus
    from launcher.plan.build import Plan

RETRY_OF_TAG = f"{TAG_PREFIX}retry-of"
ATTEMPT_TAG = f"{TAG_PREFIX}attempt"
ALIASES = {"spot": FailureClass.SPOT_INTERRUPTION, "oom": FailureClass.OUT_OF_MEMORY, "nccl": FailureClass.NCCL_TIMEOUT}
MAX_NAME = 63  # TrainingJobName's limit (CreateTrainingJob)


@dataclass(frozen=True)
class RetryPolicy:
    """Which failure classes are retried, how many attempts in all (the first included), and the wait before
    attempt n+1: `backoff * factor**(n-1)` seconds, at most `max_backoff`."""

    classes: frozenset[str] = frozenset({FailureClass.CAPACITY, FailureClass.SPOT_INTERRUPTION})
    max_attempts: int = 3
    backoff: float = 60.0
    factor: float = 2.0
    max_backoff: float = 900.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise UsageError(f"max_attempts {self.max_attempts}: give 1 or more (the first attempt counts)")
        unknown = set(self.classes) - set(FailureClass)
        if unknown:
            raise UsageError(f"unknown failure class {sorted(unknown)[0]!r}; choose from {', '.join(FailureClass)}")

    @classmethod
    def parse(cls, text: str, max_attempts: int = 3, backoff: float = 60.0) -> RetryPolicy:
        """`capacity,spot` -> the classes (aliases: spot, oom, nccl); a misspelt one is refused with a suggestion.

        The error names the class, not where `text` came from: a caller adds that (the CLI names its flag)."""
        classes = set()
        for raw in (p.strip().lower() for p in text.split(",")):
            if not raw:
                continue
            name = ALIASES.get(raw, raw)
            if name not in tuple(FailureClass):
                known = [*(c.value for c in FailureClass), *ALIASES]
                close = difflib.get_close_matches(raw, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; choose from {', '.join(known)}"
                raise UsageError(f"{raw[:40]!r} is not a failure class{hint}")
            classes.add(name)
        if not classes:
            raise UsageError(f"no failure class in {text[:80]!r}: name the classes to retry, e.g. 'capacity,spot'")
        return cls(classes=frozenset(classes), max_attempts=max_attempts, backoff=backoff)

    def delay(self, attempts_made: int) -> float:
        """Seconds to wait before the next attempt, after `attempts_made` attempts."""
        return min(self.max_backoff, self.backoff * self.factor ** max(0, attempts_made - 1))

    def retries(self, status: JobStatus) -> bool:
        """Whether a job that ended as `status` failed in a class this policy retries."""
        failure = status.failure
        return (failure is not None and failure.failure_class in self.classes
                and failure.failure_class != FailureClass.UNKNOWN)


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


def first_name(plan: Plan, attempt: int) -> str:
    """The first attempt's name, from the plan of attempt `attempt` (whose name ends in `-r<attempt>`)."""
    suffix = f"-r{attempt}"
    if attempt > 1 and plan.job_name.endswith(suffix):
        return plan.job_name[: -len(suffix)]
    return plan.job_name


def next_attempt(plan: Plan, failed: JobStatus, attempt: int, policy: RetryPolicy) -> Plan | None:
    """The plan of attempt `attempt + 1` after attempt `attempt` (1 = the first) ended as `failed`, or None
    when the policy does not retry it (its class, or no attempts left).

    The new plan differs only in its job name, its tags (retry-of, attempt) and nothing else: the checkpoint
    S3 URI stays the first attempt's, so a spot job resumes from what it saved."""
    if attempt >= policy.max_attempts or not policy.retries(failed):
        return None
    name = attempt_name(first_name(plan, attempt), attempt + 1)
    keep = [t for t in plan.estimator.tags if t["Key"] not in (RETRY_OF_TAG, ATTEMPT_TAG)]
    tags = [*keep, {"Key": RETRY_OF_TAG, "Value": failed.job_name}, {"Key": ATTEMPT_TAG, "Value": str(attempt + 1)}]
    # checkpoint_s3_uri is left as it is: the first attempt's (its default names the first job).
    estimator = dataclasses.replace(plan.estimator, tags=tags)
    return dataclasses.replace(plan, job_name=name, estimator=estimator)
