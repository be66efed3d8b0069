"""Resubmitting a job that failed for a reason a new attempt can get past: short capacity, a spot interruption.

A retried job is the same plan under a linked name (`<first>-r2`, `-r3`...) with a tag naming the job it
retries (`smp-launch:retry-of`), and the SAME checkpoint S3 URI as the first attempt: SageMaker copies that
prefix back into /opt/ml/checkpoints when the new job starts
(https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html), and the entry script resumes from
the newest complete checkpoint there, so a spot job carries on where it stopped.
"""
from __future__ import annotations

import dataclasses
import difflib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from launcher.core.errors import UsageError
from launcher.core.names import TAG_PREFIX
from launcher.jobs.failures import FailureClass

if TYPE_CHECKING:
    from launcher.core.aws import Clients
    from launcher.jobs.status import JobStatus
    from launcher.plan.build import Plan
    from launcher.submission.create import Submission

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
            raise UsageError(f"--max-attempts {self.max_attempts}: give 1 or more (the first attempt counts)")
        unknown = set(self.classes) - set(FailureClass)
        if unknown:
            raise UsageError(f"unknown failure class {sorted(unknown)[0]!r}; choose from {', '.join(FailureClass)}")

    @classmethod
    def parse(cls, text: str, max_attempts: int = 3, backoff: float = 60.0) -> RetryPolicy:
        """`capacity,spot` -> the classes (aliases: spot, oom, nccl); a misspelt one is refused with a suggestion."""
        classes = set()
        for raw in (p.strip().lower() for p in text.split(",")):
            if not raw:
                continue
            name = ALIASES.get(raw, raw)
            if name not in tuple(FailureClass):
                known = [*(c.value for c in FailureClass), *ALIASES]
                close = difflib.get_close_matches(raw, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; choose from {', '.join(known)}"
                raise UsageError(f"--retry {text[:80]!r}: {raw[:40]!r} is not a failure class{hint}")
            classes.add(name)
        if not classes:
            raise UsageError("--retry: name the failure classes to retry, e.g. --retry capacity,spot")
        return cls(classes=frozenset(classes), max_attempts=max_attempts, backoff=backoff)

    def delay(self, attempts_made: int) -> float:
        """Seconds to wait before the next attempt, after `attempts_made` attempts."""
        return min(self.max_backoff, self.backoff * self.factor ** max(0, attempts_made - 1))

    def retries(self, status: JobStatus) -> bool:
        failure = status.failure
        return (failure is not None and failure.failure_class in self.classes
                and failure.failure_class != FailureClass.UNKNOWN)


def attempt_name(first: str, attempt: int) -> str:
    """The name of attempt `attempt` (2, 3...) of the job first named `first`: `<first>-r<attempt>`, the
    first name shortened to keep within SageMaker's 63 characters (and never ending in a hyphen)."""
    suffix = f"-r{attempt}"
    return first[: MAX_NAME - len(suffix)].rstrip("-") + suffix


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


def retrying(policy: RetryPolicy) -> Callable[[Plan, JobStatus], Plan | None]:
    """An `on_failure` hook for launcher.submit_many: each plan's next attempt (next_attempt), counted
    per plan; the queue starts it as soon as a slot is free (the backoff applies to single submits)."""
    attempts: dict[str, int] = {}

    def on_failure(plan: Plan, failed: JobStatus) -> Plan | None:
        attempt = attempts.get(plan.job_name, 1)
        again = next_attempt(plan, failed, attempt, policy)
        if again is not None:
            attempts[again.job_name] = attempt + 1
        return again

    return on_failure


@dataclass(frozen=True)
class Attempt:
    """One job of a retried submit: what was submitted and how it ended."""

    job_name: str
    status: JobStatus
    submission: Submission | None = None
    waited_s: float = 0.0  # the backoff slept before it

    def to_dict(self) -> dict[str, Any]:
        failure = self.status.failure
        return {"job_name": self.job_name, "status": self.status.status,
                "failure_class": failure.failure_class if failure else None,
                "failure_reason": self.status.failure_reason, "remedy": failure.remedy if failure else None,
                "backoff_s": self.waited_s}


@dataclass(frozen=True)
class RetryResult:
    """Every attempt in order; the outcome is the last one's."""

    attempts: tuple[Attempt, ...] = field(default_factory=tuple)

    @property
    def final(self) -> JobStatus:
        return self.attempts[-1].status

    @property
    def exit_code(self) -> int:
        return self.final.exit_code if self.final.terminal else 124

    def to_dict(self) -> dict[str, Any]:
        return {"job_name": self.attempts[-1].job_name, "status": self.final.status,
                "attempts": [a.to_dict() for a in self.attempts]}


def submit_with_retries(plan: Plan, policy: RetryPolicy, clients: Clients, *, skip_role_check: bool = False,
                        interval: float = 30.0, submit: Callable[..., Submission] | None = None,
                        wait: Callable[..., list[JobStatus]] | None = None,
                        sleep: Callable[[float], None] | None = None,
                        on_event: Callable[[str, Any], None] | None = None) -> RetryResult:
    """Submit `plan`, wait for it to end, and while it ends in a class the policy retries (and attempts are
    left) wait the backoff and submit the next attempt (`next_attempt`). `on_event(kind, value)` hears
    ("submitted", Submission), ("ended", JobStatus) and ("backoff", seconds); `submit`, `wait` and `sleep`
    replace the real ones in tests."""
    from launcher.jobs import status as jobs
    from launcher.submission import create as submission

    submit = submit or (lambda p: submission.submit(p, clients, skip_role_check=skip_role_check))
    wait = wait or (lambda names: jobs.wait(clients, names, interval=interval))
    sleep = sleep or time.sleep
    tell = on_event or (lambda kind, value: None)
    attempts: list[Attempt] = []
    current: Plan | None = plan
    waited = 0.0
    number = 1
    while current is not None:
        started = submit(current)
        tell("submitted", started)
        final = wait([current.job_name])[0]
        tell("ended", final)
        attempts.append(Attempt(current.job_name, final, started, waited))
        following = next_attempt(current, final, number, policy)
        if following is None:
            break
        waited = policy.delay(number)
        tell("backoff", waited)
        sleep(waited)
        current, number = following, number + 1
    return RetryResult(tuple(attempts))

