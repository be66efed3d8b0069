"""Submitting many plans with at most N jobs running: a queue that starts the next plan as a job ends.

Plans start in the order given (`launcher.plan.sweep.rank` puts the best first) through the API's own
submit, so each gets the same checks as a single submit. Nothing here prints: progress goes to an
`on_event` callback and the result is one PlanRun per plan. An `on_failure(plan, status)` hook may
return a new plan for a job that ended Failed or Stopped; that plan takes the same place in the queue
(launcher.orchestrate.retry builds such plans). A submit that fails stops the queue: what started is reported,
what did not is `not_started`.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from launcher.core.errors import EXIT_OK, Interrupted, LauncherError

if TYPE_CHECKING:
    from launcher.core.aws import Clients
    from launcher.jobs.status import JobStatus
    from launcher.plan.build import Plan
    from launcher.submission.create import Submission

ClientsFor = Union["Clients", Callable[[str | None], "Clients"], None]
OnFailure = Callable[["Plan", "JobStatus"], Union["Plan", None]]

PLANNED, DRY_RUN, STARTED, NOT_STARTED, ERROR = "planned", "dry_run", "started", "not_started", "error"


@dataclass(frozen=True)
class Event:
    """Something the queue did: `started`, `dry_run`, `ended`, `resubmit` or `error`, for plan `index`."""

    kind: str
    index: int
    job_name: str | None = None
    status: JobStatus | None = None
    message: str = ""
    running: int = 0  # jobs the queue holds as running after this event


@dataclass
class PlanRun:
    """What happened to one plan: each job started for it (a resubmission adds one), and how each ended."""

    index: int
    plan: Plan
    state: str = PLANNED
    submissions: list[Submission] = field(default_factory=list)
    statuses: list[JobStatus | None] = field(default_factory=list)  # the last status seen, per submission
    error: LauncherError | None = None

    @property
    def job_name(self) -> str:
        """The latest job's name once one started, else the plan's."""
        return self.submissions[-1].job_name if self.submissions else self.plan.job_name

    @property
    def status(self) -> JobStatus | None:
        return self.statuses[-1] if self.statuses else None

    @property
    def exit_code(self) -> int:
        """The error's exit code, else the last job's outcome (1 Failed, 5 Stopped) once it ended, else 0."""
        if self.error is not None:
            return self.error.exit_code
        status = self.status
        return status.exit_code if status is not None and status.terminal else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        last = self.submissions[-1].to_dict() if self.submissions else None
        if last is not None:
            last.pop("request", None)  # the plan's own keys hold it
        return {"job_name": self.job_name, "state": self.state, "started": self.state == STARTED,
                "jobs": [s.job_name for s in self.submissions if not s.dry_run], "submission": last,
                "job_status": self.status.to_dict() if self.status else None,
                "error": str(self.error) if self.error else None}


def _clients_for(clients: ClientsFor) -> tuple[Callable[[str | None], Clients], Callable[[str | None], Clients]]:
    """(clients for one submit, clients for status polls) by region.

    Each submit gets its own clients from a factory: a Submission's `aws_calls` are recorded by a hook
    on the session, which a client made earlier by another submit would not carry."""
    if clients is not None and not callable(clients):
        shared = clients
        return (lambda _region: shared), (lambda _region: shared)
    factory = clients
    if factory is None:
        from launcher.core.aws import Clients

        def factory(region: str | None) -> Clients:
            return Clients(region=region)

    polling: dict[str | None, Clients] = {}

    def for_polls(region: str | None) -> Clients:
        if region not in polling:
            polling[region] = factory(region)
        return polling[region]

    return factory, for_polls


def account_key(plan: Plan) -> tuple:
    """What the account checks read for a plan (region, role, buckets, keys, VPC, image, secrets): plans
    with equal keys pass or fail them alike, so each key is checked once before anything starts."""
    est = getattr(plan, "estimator", None)
    if est is None:
        return (plan.job_name,)
    checkpoint = est.checkpoint_s3_uri.replace(plan.job_name, "<job-name>")
    return (plan.region, plan.role, est.output_path, est.code_location, checkpoint, est.output_kms_key,
            tuple(est.subnets or ()), tuple(est.security_group_ids or ()), plan.framework.image_uri,
            tuple(sorted(plan.channels.items())), tuple(sorted(plan.secrets.items())))


def run_queue(plans: Sequence[Plan], *, max_concurrent: int | None = None, dry_run: bool = False,
              wait: bool = False, interval: float = 30.0, skip_role_check: bool = False,
              clients: ClientsFor = None, on_event: Callable[[Event], None] | None = None,
              on_failure: OnFailure | None = None, submit: Callable[..., Submission] | None = None,
              check: Callable[..., Any] | None = None,
              sleep: Callable[[float], None] | None = None) -> list[PlanRun]:
    """Submit every plan, in order, keeping at most `max_concurrent` jobs running (None: no limit).

    Before the first job starts, the account checks (buckets, role) run once for each distinct
    account_key: one that refuses stops the queue with nothing started. A queued plan starts when a
    running job ends (statuses polled every `interval` seconds). Returns once every plan started, or
    (with `wait` or an `on_failure` hook) once every job ended. `clients` is one Clients, a function
    of a region, or None (made per plan's region). `submit`, `check` and `sleep` replace the API's
    submit, launcher.submission.create.check_account and time.sleep (tests). Ctrl-C while waiting stops the
    queue: the plans not yet started are `not_started` with an Interrupted error."""
    if max_concurrent is not None and max_concurrent < 1:
        raise ValueError("max_concurrent must be at least 1")
    from launcher.jobs.status import job_status

    if submit is None:
        from launcher.submission.create import submit
    if check is None:
        from launcher.submission.create import check_account

        check = check_account
    sleep = sleep or time.sleep
    emit = on_event or (lambda _event: None)
    client_of, poll_client = _clients_for(clients)
    runs = [PlanRun(i, p) for i, p in enumerate(plans)]
    current = {i: p for i, p in enumerate(plans)}  # the plan each run submits next (a hook may replace it)
    pending = deque(range(len(runs)))
    running: dict[str, int] = {}
    follow = (wait or on_failure is not None) and not dry_run

    def start(i: int) -> bool:
        run, plan = runs[i], current[i]
        try:
            result = submit(plan, dry_run=dry_run, skip_role_check=skip_role_check, clients=client_of(plan.region))
        except LauncherError as err:
            run.error = err
            if isinstance(err, Interrupted) and err.started:
                run.state = STARTED  # the job exists: the error says so and names it
            elif not run.submissions:
                run.state = ERROR
            emit(Event("error", i, plan.job_name, message=str(err), running=len(running)))
            return False
        run.submissions.append(result)
        run.statuses.append(None)
        if dry_run:
            run.state = DRY_RUN
            emit(Event("dry_run", i, result.job_name, running=len(running)))
            return True
        run.state = STARTED
        running[result.job_name] = i
        emit(Event("started", i, result.job_name, running=len(running)))
        return True

    def poll() -> None:
        for name, i in list(running.items()):
            # With a hook, a failed job is classified (algo-1's log tail, its plan) so the hook sees why.
            status = job_status(poll_client(current[i].region), name, diagnose=on_failure is not None)
            runs[i].statuses[-1] = status
            if not status.terminal:
                continue
            del running[name]
            emit(Event("ended", i, name, status=status, running=len(running)))
            if status.status != "Completed" and on_failure is not None:
                again = on_failure(current[i], status)
                if again is not None:
                    current[i] = again
                    pending.appendleft(i)
                    emit(Event("resubmit", i, again.job_name, status=status, running=len(running)))

    if not dry_run:  # a dry run's submit makes exactly these checks, plan by plan
        checked: set[tuple] = set()
        for i, plan in enumerate(plans):
            key = account_key(plan)
            if key in checked:
                continue
            checked.add(key)
            try:
                check(plan, client_of(plan.region), skip_role_check=skip_role_check)
            except LauncherError as err:
                runs[i].error, runs[i].state = err, ERROR
                emit(Event("error", i, plan.job_name, message=str(err)))
                return _finish(runs)

    try:
        while True:
            while pending and (max_concurrent is None or len(running) < max_concurrent):
                if not start(pending.popleft()):
                    pending.clear()
                    return _finish(runs)
            if not running or (not pending and not follow):
                return _finish(runs)
            sleep(interval)
            poll()
    except KeyboardInterrupt:
        stopped = Interrupted("interrupted: the queue stopped before this plan started; the jobs it started "
                              "keep running", "", False)
        for i in pending:
            if not runs[i].submissions:
                runs[i].error = stopped
        return _finish(runs)
    except LauncherError as err:  # a status poll that failed: stop watching, say so on every job still held
        for i in running.values():
            runs[i].error = err
        return _finish(runs)


def _finish(runs: list[PlanRun]) -> list[PlanRun]:
    for run in runs:
        if run.state == PLANNED:
            run.state = NOT_STARTED
    return runs


def worst_exit_code(runs: Sequence[PlanRun]) -> int:
    """The exit code for a queue: an error's (the first), else the worst ending, 1 Failed over 5 Stopped."""
    for run in runs:
        if run.error is not None:
            return run.error.exit_code
    codes = {run.exit_code for run in runs}
    for code in (1, 5):
        if code in codes:
            return code
    return EXIT_OK
