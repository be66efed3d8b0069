"""The one way a plan becomes a job: a queue that submits plans in order with at most N jobs running.

A single submit is a queue of one (`submit_one`). Plans start in the order given
(`launcher.plan.sweep.rank` puts the best first) through launcher.submission.create.submit, so each gets
the same checks. A job that ends Failed or Stopped may be submitted again in its plan's place: a
RetryPolicy (launcher.orchestrate.retry) decides whether, when (its backoff) and as what (the linked next
attempt); an `on_failure(plan, status)` hook may decide instead. Nothing here prints: progress goes to an
`on_event` callback as typed Events, and the result is one frozen PlanRun per plan. A submit refused for a
reason that passes with time (a quota its own jobs hold, throttling) is tried again after a wait, within a
RefusalWait's bound (launcher.orchestrate.retry); any other failed submit, or one refused past that bound,
stops the queue: what started is reported, what did not is `not_started`.
"""
from __future__ import annotations

import dataclasses
import functools
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from launcher.core.enums import StrEnum
from launcher.core.errors import EXIT_OK, Interrupted, LauncherError, UsageError

if TYPE_CHECKING:
    from launcher.core.aws import Clients
    from launcher.jobs.status import JobStatus
    from launcher.orchestrate.retry import RefusalWait, RetryPolicy
    from launcher.plan.build import Plan
    from launcher.submission.create import AccountCheck, Submission

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


def _clients_for(clients: ClientsFor) -> tuple[Callable[[str | None], Clients], Callable[[str | None], Clients]]:
    """(clients for one submit, clients for status polls) by region: one Clients for all, or made by a
    factory per submit (the default makes them for the plan's region)."""
    if clients is not None and not callable(clients):
        shared = clients
        return (lambda _region: shared), (lambda _region: shared)
    factory: Callable[[str | None], Clients]
    if clients is None:
        from launcher.core.aws import Clients as Made

        def made(region: str | None) -> Clients:
            return Made(region=region or None)

        factory = made
    else:
        factory = clients
    polling: dict[str | None, Clients] = {}

    def for_polls(region: str | None) -> Clients:
        if region not in polling:
            polling[region] = factory(region)
        return polling[region]

    return factory, for_polls


POLL_RETRIES = 3  # a failed status poll is asked again after 1, 2 and 4 s (as `logs` does) before the queue gives up


def _polled(read: Callable[[], Any], nap: Callable[[float], None]) -> Any:
    """`read()`, asked again after a short wait when AWS failed to answer it (a 500, a dropped connection, a
    throttle outlasting botocore's own tries): one bad moment of the endpoint does not end the queue."""
    from launcher.core.aws import AwsError

    for attempt in range(POLL_RETRIES):
        try:
            return read()
        except AwsError:
            nap(2.0 ** attempt)
    return read()  # the last try: its failure is the queue's


def account_key(plan: Plan) -> tuple[Any, ...]:
    """What the account checks read for a plan (region, role, buckets, keys, VPC, image, secrets): plans
    with equal keys pass or fail them alike, so each key is checked once before anything starts."""
    est = getattr(plan, "estimator", None)
    if est is None:
        return (plan.job_name,)
    checkpoint = est.checkpoint_s3_uri.replace(plan.job_name, "<job-name>")
    return (plan.region, plan.role, est.output_path, est.code_location, checkpoint, est.output_kms_key,
            tuple(est.subnets or ()), tuple(est.security_group_ids or ()), plan.framework.image_uri,
            tuple(sorted(plan.channels.items())), tuple(sorted(plan.secrets.items())))


def _resubmitter(retry: RetryPolicy | None, on_failure: OnFailure | None
                 ) -> Callable[[Plan, JobStatus, int], tuple[Plan, float] | None] | None:
    """(the next plan, the seconds to wait first) for a job that ended badly after `attempt` attempts."""
    if retry is not None and on_failure is not None:
        raise UsageError("give retry or on_failure, not both")
    if retry is not None:
        from launcher.orchestrate.retry import next_attempt

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


def _announcing(submit_plan: Callable[..., Submission]) -> Callable[..., Submission]:
    """`submit_plan` that, once a plan whose spec has `notify` has a job (or a dry run), sets up the EventBridge
    rules announcing its jobs' ends (launcher.orchestrate.notify) once per spec and topic; what it did or could
    not do is in the Submission's notes and warnings."""
    done: dict[tuple[Any, ...], tuple[list[str], list[str]]] = {}

    def submit_and_announce(plan: Plan, **kwargs: Any) -> Submission:
        result = submit_plan(plan, **kwargs)
        notify = getattr(getattr(plan, "spec", None), "notify", None)  # tests queue stand-ins without a spec
        if notify is None:
            return result
        key = (plan.region, plan.base_job_name, notify.sns, kwargs.get("dry_run", False))
        if key not in done:
            from launcher.orchestrate.notify import announce_jobs

            done[key] = announce_jobs(plan, kwargs["clients"], dry_run=bool(kwargs.get("dry_run")))
        warnings, notes = done[key]
        return dataclasses.replace(result, warnings=(*result.warnings, *warnings), notes=(*result.notes, *notes))

    return submit_and_announce


def run_queue(plans: Sequence[Plan], *, max_concurrent: int | None = None, dry_run: bool = False,
              wait: bool = False, interval: float = 30.0, skip_role_check: bool = False,
              clients: ClientsFor = None, on_event: Callable[[Event], None] | None = None,
              retry: RetryPolicy | None = None, on_failure: OnFailure | None = None,
              submit: Callable[..., Submission] | None = None, check: Callable[..., AccountCheck | None] | None = None,
              sleep: Callable[[float], None] | None = None,
              refusals: RefusalWait | None | bool = True,
              lookup: Callable[..., JobStatus] | None = None) -> tuple[PlanRun, ...]:
    """Submit every plan, in order, keeping at most `max_concurrent` jobs running (None: no limit).

    With several plans, the account checks (buckets, role) run first, once for each distinct account_key:
    one that refuses stops the queue with nothing started (one plan's submit makes the same checks). A
    queued plan starts when a running job ends (statuses polled every `interval` seconds). A job that ends
    Failed or Stopped is submitted again in its plan's place when `retry` (a RetryPolicy) retries its
    failure class, after the policy's backoff (the queue's head waits it out), or when the `on_failure`
    hook returns a plan. Returns once every plan started, or (with `wait`, `retry` or `on_failure`) once
    every job ended. `clients` is one Clients, a function of a region, or None (made per plan's region).
    `submit`, `check` and `sleep` replace launcher.submission.create's submit and check_account and
    time.sleep (tests). Ctrl-C while waiting stops the queue: the plans not yet (re)submitted get an
    Interrupted error. `refusals` (a RefusalWait; True, the default, means RefusalWait() for a queue of
    several plans) lets a plan whose CreateTrainingJob was refused for quota or throttling wait and be tried
    again, each wait a WAIT event, before the queue gives up on it. `lookup` replaces
    launcher.jobs.status.job_status for the polls (a Batch queue's jobs are found by launcher.jobs.queued's); a
    job handed to a Batch queue is not followed for capacity fallback: Batch keeps it queued until it has
    capacity."""
    if max_concurrent is not None and max_concurrent < 1:
        raise UsageError(f"max_concurrent {max_concurrent}: give 1 or more")
    from launcher.jobs import status as jobs
    from launcher.orchestrate.retry import RefusalWait
    from launcher.submission import create

    waits: RefusalWait | None
    if refusals is True:
        waits = RefusalWait() if len(plans) > 1 and not dry_run else None
    else:
        waits = refusals or None

    status_of = lookup or jobs.job_status
    submit_plan = _announcing(submit or create.submit)
    check_plan = check or create.check_account
    nap = sleep or (lambda seconds: time.sleep(seconds))
    emit = on_event or (lambda _event: None)
    again_after = _resubmitter(retry, on_failure)
    from launcher.orchestrate import fallback

    decide = fallback.chain(again_after)  # a capacity failure moves to the plan's next instance type first
    client_of, poll_client = _clients_for(clients)
    runs = [PlanRun(i, p) for i, p in enumerate(plans)]
    current = dict(enumerate(plans))  # the plan each run submits next (a resubmission replaces it)
    backoff: dict[int, float] = {}  # seconds a resubmission still waits, counted down by the queue's sleeps
    waited: dict[int, float] = {}  # seconds a plan has waited out its backoffs so far (counted as slept)
    pending = deque(range(len(runs)))
    running: dict[str, int] = {}
    in_flight: list[int] = []  # the plan being submitted now: a Ctrl-C there leaves its fate unknown
    refused: dict[int, int] = {}  # times CreateTrainingJob refused each plan for a reason that passes with time
    quota_held: set[int] = set()  # plans waiting for a quota: one of the queue's own jobs ending frees some
    follow = (wait or again_after is not None) and not dry_run
    queued = not dry_run and (max_concurrent is not None or len(plans) > 1)  # a queue waits for quota, one submit not
    waiting: set[int] = set()  # the plans that said they wait for quota (said once each)
    provisioned: set[str] = set()  # jobs past provisioning: capacity can no longer fail them

    def watched() -> bool:
        """A job the queue follows until it has its instances: its plan has another instance type to fall back on."""
        return not dry_run and any(fallback.has_alternatives(current[i]) and name not in provisioned
                                   and not _in_batch_queue(runs[i]) for name, i in running.items())

    def update(i: int, **changes: Any) -> None:
        runs[i] = dataclasses.replace(runs[i], **changes)

    passed: set[tuple[Any, ...]] = set()  # account keys checked before the first start: their role check is done

    def start(i: int) -> bool | None:
        """True: submitted; False: failed (the queue stops); None: over quota for now, to be tried again."""
        run, plan = runs[i], current[i]
        backoff.pop(i, None)
        in_flight.append(i)
        try:
            result = submit_plan(plan, dry_run=dry_run, skip_role_check=skip_role_check or account_key(plan) in passed,
                                 clients=client_of(plan.region or ""))
        except LauncherError as err:
            if queued and getattr(getattr(err, "check", None), "waitable", False):
                if i not in waiting:
                    waiting.add(i)
                    emit(Event(EventKind.WAITING, i, plan.job_name, message=str(err), running=len(running)))
                return None
            why = fallback.refusal(err, can_wait=queued) if fallback.has_alternatives(plan) else None
            if why is not None:  # no capacity, no such type here, or a quota that cannot hold it: the next type
                following, _ = fallback.next_instance(plan, len(run.attempts) + 1, None)
                if following is not None:
                    current[i] = following
                    emit(Event(EventKind.RESUBMIT, i, following.job_name, running=len(running),
                               message=fallback.describe(plan, following, plan.job_name, why)))
                    return start(i)  # bounded: each call drops an alternative
            if wait_out(i, plan, err):
                return True
            if isinstance(err, Interrupted) and err.started:
                update(i, error=err, state=PlanState.STARTED)  # the job exists: the error says so and names it
            else:
                update(i, error=err, state=run.state if run.attempts else PlanState.ERROR)
            emit(Event(EventKind.ERROR, i, plan.job_name, message=str(err), running=len(running)))
            return False
        finally:
            in_flight.remove(i)
        refused.pop(i, None)
        quota_held.discard(i)
        attempts = (*run.attempts, Attempt(result, None, waited.pop(i, 0.0)))
        if dry_run:
            update(i, attempts=attempts, state=PlanState.DRY_RUN)
            emit(Event(EventKind.DRY_RUN, i, result.job_name, running=len(running), submission=result))
            return True
        update(i, attempts=attempts, state=PlanState.STARTED)
        running[result.job_name] = i
        emit(Event(EventKind.STARTED, i, result.job_name, running=len(running), submission=result))
        return True

    def wait_out(i: int, plan: Plan, err: LauncherError) -> bool:
        """Put a plan CreateTrainingJob refused for quota or throttling back at the queue's head with a wait;
        False when the refusal does not pass with time or the plan was refused too often."""
        why = RefusalWait.passes_with_time(err) if waits is not None else None
        if waits is None or why is None:
            return False
        count = refused.get(i, 0) + 1
        if count > waits.max_refusals:
            return False
        refused[i] = count
        delay = waits.delay(count)
        backoff[i] = delay
        if why == "quota" and running:
            quota_held.add(i)
        pending.appendleft(i)
        until = " or until one of this queue's jobs ends" if i in quota_held else ""
        emit(Event(EventKind.WAIT, i, plan.job_name, running=len(running), backoff_s=delay,
                   message=f"CreateTrainingJob refused {plan.job_name} ({why}, refusal {count} of at most "
                           f"{waits.max_refusals}): trying again in {delay:g} s{until}; {err}"))
        return True

    def poll() -> None:
        for name, i in list(running.items()):
            # A failed job that may be resubmitted is classified (algo-1's log tail, its plan) so the
            # policy or hook sees why.
            status = _polled(functools.partial(status_of, poll_client(current[i].region or ""), name,
                                               diagnose=again_after is not None), nap)
            run = runs[i]
            update(i, attempts=(*run.attempts[:-1], dataclasses.replace(run.attempts[-1], status=status)))
            if not status.terminal:
                if fallback.has_alternatives(current[i]) and fallback.settled(status):
                    provisioned.add(name)
                continue
            del running[name]
            for held in quota_held:  # a job that ended gave back its share of the quota
                backoff[held] = 0.0
            quota_held.clear()
            emit(Event(EventKind.ENDED, i, name, status=status, running=len(running)))
            if status.status == jobs.JobState.COMPLETED:
                continue
            before = current[i]
            decided = decide(before, status, len(runs[i].attempts))
            if decided is not None:
                current[i], backoff[i] = decided
                pending.appendleft(i)
                emit(Event(EventKind.RESUBMIT, i, decided[0].job_name, status=status, running=len(running),
                           backoff_s=decided[1], message=fallback.describe(before, decided[0], name)))

    def free() -> bool:
        return max_concurrent is None or len(running) < max_concurrent

    def rest() -> None:
        """Sleep until the next poll, or less when the queue's head waits out a shorter backoff."""
        seconds = interval
        if pending and free() and backoff.get(pending[0], 0.0) > 0:
            head = backoff[pending[0]]
            seconds = min(seconds, head) if running else head
        nap(seconds)
        for i in backoff:
            used = min(seconds, backoff[i])
            waited[i] = waited.get(i, 0.0) + used
            backoff[i] -= used

    if not dry_run and len(plans) > 1:  # one plan's submit (and a dry run's) makes exactly these checks
        checked: set[tuple[Any, ...]] = set()
        for i, plan in enumerate(plans):
            key = account_key(plan)
            if key in checked:
                continue
            checked.add(key)
            try:
                check_plan(plan, client_of(plan.region or ""), skip_role_check=skip_role_check)
            except LauncherError as err:
                update(i, error=err, state=PlanState.ERROR)
                emit(Event(EventKind.ERROR, i, plan.job_name, message=str(err)))
                return _finish(runs)
            passed.add(key)

    try:
        while True:
            started = False
            while pending and free() and backoff.get(pending[0], 0.0) <= 0:
                head = pending.popleft()
                outcome = start(head)
                if outcome is None:  # over quota: try again after the next poll
                    pending.appendleft(head)
                    break
                if not outcome:
                    pending.clear()
                    return _finish(runs)
                if head not in running.values() and head in backoff:
                    break  # refused and put back to wait: the queue sleeps before trying anything else
                started = True
            if not pending and (not running or not follow) and not watched():
                return _finish(runs)
            if not started:  # a job just started is polled at once: it may end (or fail) as it starts
                rest()
            if running:
                poll()
    except KeyboardInterrupt:
        for i in in_flight:
            name = current[i].job_name
            update(i, error=Interrupted(f"interrupted while {name} was being submitted: cannot tell whether it was "
                                        "started; look it up by name before submitting again", name, None))
        stopped = Interrupted("interrupted: the queue stopped before this plan started; the jobs it started keep "
                              "running", "", False)  # one error for every plan it stopped
        for i in pending:
            name = current[i].job_name
            update(i, error=Interrupted(f"interrupted: the queue stopped before {name} was submitted again; the "
                                        "jobs it started keep running", "", False) if runs[i].attempts else stopped)
        return _finish(runs)
    except LauncherError as err:  # a status poll that failed: stop watching, say so on every job still held
        for i in running.values():
            update(i, error=err)
        return _finish(runs)


def _in_batch_queue(run: PlanRun) -> bool:
    """Its latest job was handed to an AWS Batch queue (a QueuedSubmission carries the queue)."""
    return bool(run.attempts and getattr(run.attempts[-1].submission, "queue", None))


def _finish(runs: list[PlanRun]) -> tuple[PlanRun, ...]:
    return tuple(dataclasses.replace(run, state=PlanState.NOT_STARTED) if run.state is PlanState.PLANNED else run
                 for run in runs)


def submit_one(plan: Plan, *, dry_run: bool = False, skip_role_check: bool = False,
               clients: ClientsFor = None) -> Submission:
    """A single submit: a queue of one that does not wait (but for a plan with other instance types to fall back
    on, until its job has its instances). Its Submission, or the error that stopped it."""
    (run,) = run_queue([plan], dry_run=dry_run, skip_role_check=skip_role_check, clients=clients)
    if run.error is not None:
        raise run.error
    return run.attempts[-1].submission  # after a capacity fallback, the job on the type that had capacity
