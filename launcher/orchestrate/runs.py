"""What a queue of plans reports (launcher.orchestrate.queue): where each plan got to, what happened to it as an
Event, each job started for it as an Attempt, and the whole of it as a frozen PlanRun."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from launcher.core.enums import StrEnum
from launcher.core.errors import EXIT_OK, LauncherError

if TYPE_CHECKING:
    from launcher.core.aws import Clients
    from launcher.jobs.status import JobStatus
    from launcher.plan.build import Plan
    from launcher.submission.create import Submission

ClientsFor = Union["Clients", Callable[[str | None], "Clients"], None]
OnFailure = Callable[["Plan", "JobStatus"], Union["Plan", None]]


class PlanState(StrEnum):
    """Where a plan got to in the queue; the values are the `state` key of `submit --output json`."""

    PLANNED = "planned"  # not yet submitted; a returned PlanRun is never left in this state
    DRY_RUN = "dry_run"
    STARTED = "started"
    NOT_STARTED = "not_started"
    ERROR = "error"


class EventKind(StrEnum):
    """What the queue just did for a plan."""

    STARTED = "started"  # a job was created (the event carries its Submission)
    DRY_RUN = "dry_run"  # a dry run passed every check (the event carries its Submission)
    ENDED = "ended"  # a job the queue holds ended (the event carries its JobStatus)
    RESUBMIT = "resubmit"  # the job that ended will be followed by `job_name`, after `backoff_s` seconds
    WAITING = "waiting"  # the account's quota cannot hold the plan's job yet: it waits for running jobs to end
    WAIT = "wait"  # CreateTrainingJob refused the plan (quota, throttling): it is tried again after `backoff_s`
    ERROR = "error"  # a check or a submit failed (the event's `message` says why)


@dataclass(frozen=True)
class Event:
    """Something the queue did for plan `index`; `running` is the jobs it holds as running after it."""

    kind: EventKind
    index: int
    job_name: str | None = None
    status: JobStatus | None = None
    message: str = ""
    running: int = 0
    submission: Submission | None = None
    backoff_s: float = 0.0


@dataclass(frozen=True)
class Attempt:
    """One job started for a plan (or, with dry_run, one that would be): what was submitted, the last status
    seen for it, and the backoff waited before it."""

    submission: Submission
    status: JobStatus | None = None
    backoff_s: float = 0.0

    @property
    def job_name(self) -> str:
        return self.submission.job_name

    def to_dict(self) -> dict[str, Any]:
        """One attempt of `submit --retry --output json`."""
        status, failure = self.status, self.status.failure if self.status else None
        return {"job_name": self.job_name, "status": status.status.value if status else None,
                "failure_class": failure.failure_class if failure else None,
                "failure_reason": status.failure_reason if status else None,
                "remedy": failure.remedy if failure else None, "backoff_s": self.backoff_s}


@dataclass(frozen=True)
class PlanRun:
    """What happened to one plan: each job started for it (a resubmission adds one), and how each ended."""

    index: int
    plan: Plan
    state: PlanState = PlanState.PLANNED
    attempts: tuple[Attempt, ...] = ()
    error: LauncherError | None = None

    @property
    def submissions(self) -> tuple[Submission, ...]:
        return tuple(a.submission for a in self.attempts)

    @property
    def statuses(self) -> tuple[JobStatus | None, ...]:
        """The last status seen for each submission (None before the first poll)."""
        return tuple(a.status for a in self.attempts)

    @property
    def job_name(self) -> str:
        """The latest job's name once one started, else the plan's."""
        return self.attempts[-1].job_name if self.attempts else self.plan.job_name

    @property
    def status(self) -> JobStatus | None:
        return self.attempts[-1].status if self.attempts else None

    @property
    def exit_code(self) -> int:
        """The error's exit code, else the last job's outcome (1 Failed, 5 Stopped) once it ended, else 0."""
        if self.error is not None:
            return self.error.exit_code
        status = self.status
        return status.exit_code if status is not None and status.terminal else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        last = self.submissions[-1].to_dict() if self.attempts else None
        if last is not None:
            last.pop("request", None)  # the plan's own keys hold it
        return {"job_name": self.job_name, "state": self.state.value, "started": self.state is PlanState.STARTED,
                "jobs": [s.job_name for s in self.submissions if not s.dry_run], "submission": last,
                "job_status": self.status.to_dict() if self.status else None,
                "error": str(self.error) if self.error else None}
