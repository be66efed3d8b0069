"""Resubmitting a job that failed for a reason a new attempt can get past: short capacity, a spot interruption,
SageMaker's own internal error, a failed instance.

The RetryPolicy says which failure classes (and which exit codes of the training process) are retried, how
many attempts in all and the backoff before each; the queue (launcher.orchestrate.queue) applies it, to one
plan or many. A RefusalWait says how a queue waits out a CreateTrainingJob that was refused for a reason
that passes with time (a quota its own jobs hold, throttling) instead of giving up on the plans after it.

A retried job is the same plan under a linked name (`<first>-r2`, `-r3`...) with a tag naming the job it
retries (`smp-launch:retry-of`), and the SAME checkpoint S3 URI as the first attempt: SageMaker copies that
prefix back into /opt/ml/checkpoints when the new job starts
(https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html), and the entry script resumes from
the newest complete checkpoint there, so a spot job carries on where it stopped.
"""
from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from launcher.core.aws import QuotaError, ThrottledError
from launcher.core.errors import LauncherError, UsageError
from launcher.core.names import TAG_PREFIX
from launcher.core.sanitize import quoted
from launcher.jobs.failures import FailureClass
from launcher.plan.naming import ATTEMPT_TAG, MAX_NAME, attempt_name  # noqa: F401 (MAX_NAME: re-exported)

if TYPE_CHECKING:
    from launcher.jobs.status import JobStatus
    from launcher.plan.build import Plan

RETRY_OF_TAG = f"{TAG_PREFIX}retry-of"
ALIASES = {"spot": FailureClass.SPOT_INTERRUPTION, "oom": FailureClass.OUT_OF_MEMORY, "nccl": FailureClass.NCCL_TIMEOUT,
           "internal": FailureClass.INTERNAL_ERROR, "host_oom": FailureClass.HOST_OUT_OF_MEMORY}
# What a new attempt can get past without a change to the spec: SageMaker's side, not the job's.
DEFAULT_CLASSES = frozenset({FailureClass.CAPACITY, FailureClass.SPOT_INTERRUPTION, FailureClass.INTERNAL_ERROR,
                             FailureClass.HARDWARE})
DEFAULT_WORD = "default"  # `--retry default,exit:1`: the default classes and more
EXIT_PREFIX = "exit:"


@dataclass(frozen=True)
class RetryPolicy:
    """Which failure classes are retried, which exit codes of the training process are retried whatever the
    class, how many attempts in all (the first included), and the wait before attempt n+1:
    `backoff * factor**(n-1)` seconds, at most `max_backoff`."""

    classes: frozenset[str] = DEFAULT_CLASSES
    max_attempts: int = 3
    backoff: float = 60.0
    factor: float = 2.0
    max_backoff: float = 900.0
    exit_codes: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise UsageError(f"max_attempts {self.max_attempts}: give 1 or more (the first attempt counts)")
        unknown = set(self.classes) - set(FailureClass)
        if unknown:
            raise UsageError(f"unknown failure class {sorted(unknown)[0]!r}; choose from {', '.join(FailureClass)}")

    @classmethod
    def parse(cls, text: str, max_attempts: int = 3, backoff: float = 60.0) -> RetryPolicy:
        """`capacity,spot,exit:139` -> the classes (aliases: spot, oom, nccl, internal, host_oom; `default` for
        DEFAULT_CLASSES) and exit codes; a misspelt class is refused with a suggestion.

        The error names the class, not where `text` came from: a caller adds that (the CLI names its flag)."""
        classes: set[str] = set()
        codes: set[int] = set()
        for raw in (p.strip().lower() for p in text.split(",")):
            if not raw:
                continue
            if raw.startswith(EXIT_PREFIX):
                codes.add(_exit_code(raw))
                continue
            if raw == DEFAULT_WORD:
                classes |= DEFAULT_CLASSES
                continue
            name = ALIASES.get(raw, raw)
            if name not in tuple(FailureClass):
                known = [*(c.value for c in FailureClass), *ALIASES, DEFAULT_WORD]
                close = difflib.get_close_matches(raw, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; choose from {', '.join(known)}, or exit:CODE"
                raise UsageError(f"{quoted(raw)} is not a failure class{hint}")
            classes.add(name)
        if not classes and not codes:
            raise UsageError(f"no failure class in {quoted(text)}: name the classes to retry, e.g. 'capacity,spot' "
                             "or 'default,exit:139'")
        return cls(classes=frozenset(classes), max_attempts=max_attempts, backoff=backoff, exit_codes=frozenset(codes))

    def delay(self, attempts_made: int) -> float:
        """Seconds to wait before the next attempt, after `attempts_made` attempts."""
        return min(self.max_backoff, self.backoff * self.factor ** max(0, attempts_made - 1))

    def retries(self, status: JobStatus) -> bool:
        """Whether a job that ended as `status` failed in a class this policy retries, or with an exit code
        it retries."""
        failure = status.failure
        if failure is None:
            return False
        if failure.exit_code is not None and failure.exit_code in self.exit_codes:
            return True
        return failure.failure_class in self.classes and failure.failure_class != FailureClass.UNKNOWN


def _exit_code(token: str) -> int:
    """`exit:139` -> 139 (`exit:-9` too: Python reports a signal as its negative)."""
    text = token[len(EXIT_PREFIX):].strip()
    try:
        code = int(text)
    except ValueError:
        raise UsageError(f"{quoted(token)}: give an exit code as a whole number, e.g. exit:1 or exit:139") from None
    if not -255 <= code <= 255:
        raise UsageError(f"{quoted(token)}: an exit code is between -255 and 255")
    return code


@dataclass(frozen=True)
class RefusalWait:
    """How a queue waits out a CreateTrainingJob refused for a reason that passes with time: the account's
    quota for the instance type (ResourceLimitExceeded; the queue's own running jobs may hold it) or throttling.

    A plan is tried again at most `max_refusals` times: the wait before try n+1 is `backoff * factor**(n-1)`
    seconds, at most `max_backoff`, and a quota wait ends early when one of the queue's jobs ends."""

    max_refusals: int = 5
    backoff: float = 60.0
    factor: float = 2.0
    max_backoff: float = 900.0

    def __post_init__(self) -> None:
        if self.max_refusals < 0:
            raise UsageError(f"max_refusals {self.max_refusals}: give 0 or more")

    def delay(self, refusals: int) -> float:
        """Seconds to wait after the `refusals`-th refusal of one plan."""
        return min(self.max_backoff, self.backoff * self.factor ** max(0, refusals - 1))

    @staticmethod
    def passes_with_time(err: LauncherError) -> str | None:
        """"quota" or "throttling" when `err` is a refusal that waiting can get past, else None."""
        if isinstance(err, QuotaError):
            return "quota"
        if isinstance(err, ThrottledError):
            return "throttling"
        return None


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


def resubmitter(retry: RetryPolicy | None, on_failure: Callable[[Plan, JobStatus], Plan | None] | None
                ) -> Callable[[Plan, JobStatus, int], tuple[Plan, float] | None] | None:
    """What a queue runs in place of a job that ended badly after `attempt` attempts: (the next plan, the seconds
    to wait first) by the retry policy, or by the `on_failure` hook (give one or the other); None for neither."""
    if retry is not None and on_failure is not None:
        raise UsageError("give retry or on_failure, not both")
    if retry is not None:
        policy = retry

        def by_policy(plan: Plan, status: JobStatus, attempt: int) -> tuple[Plan, float] | None:
            again = next_attempt(plan, status, attempt, policy)
            return None if again is None else (again, policy.delay(attempt))

        return by_policy
    if on_failure is not None:
        hook = on_failure

        def by_hook(plan: Plan, status: JobStatus, _attempt: int) -> tuple[Plan, float] | None:
            again = hook(plan, status)
            return None if again is None else (again, 0.0)

        return by_hook
    return None
