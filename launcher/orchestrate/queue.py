"""A queue of plans: submitted in order, at most N jobs running, each job followed and, if asked, resubmitted.

Plans start in the order given (`launcher.plan.sweep.rank` puts the best first); each becomes a job through the
same call a single submit makes (launcher.orchestrate.creation: the plan's backend, or its Batch queue). The
queue's parts each do one thing, in this order: admission (launcher.orchestrate.admission: the account checks
once per account, quota and throttling refusals waited out within a RefusalWait's bound), creation (a job per
plan, the next instance type when one is refused), following (launcher.orchestrate.following: statuses polled,
ends announced) and retries (a RetryPolicy, an `on_failure` hook or the capacity fallback decides what runs in
a failed job's place, launcher.orchestrate.retry). Nothing here prints: progress goes to an `on_event` callback
as typed Events, and the result is one frozen PlanRun per plan. A failed submit, or one refused past the wait's
bound, stops the queue: what started is reported, what did not is `not_started`.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from launcher.core.durations import POLL_S
from launcher.core.errors import Interrupted, LauncherError, UsageError
from launcher.orchestrate.runs import Attempt, ClientsFor, Event, EventKind, OnFailure, PlanRun, PlanState

__all__ = ["Attempt", "ClientsFor", "Event", "EventKind", "OnFailure", "PlanRun", "PlanState", "run_queue"]

if TYPE_CHECKING:
    from launcher.core.aws import Clients
    from launcher.jobs.status import JobStatus
    from launcher.orchestrate.retry import RefusalWait, RetryPolicy
    from launcher.plan.build import Plan
    from launcher.submission.create import AccountCheck, Submission

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


def run_queue(plans: Sequence[Plan], *, max_concurrent: int | None = None, dry_run: bool = False,
              wait: bool = False, interval: float = POLL_S, skip_role_check: bool = False,
              clients: ClientsFor = None, on_event: Callable[[Event], None] | None = None,
              retry: RetryPolicy | None = None, on_failure: OnFailure | None = None,
              submit: Callable[..., Submission] | None = None, check: Callable[..., AccountCheck | None] | None = None,
              sleep: Callable[[float], None] | None = None,
              refusals: RefusalWait | None | bool = True,
              lookup: Callable[..., JobStatus] | None = None) -> tuple[PlanRun, ...]:
    """Submit every plan, in order, keeping at most `max_concurrent` jobs running (None: no limit).

    A queued plan starts when a running job ends (statuses polled every `interval` seconds). A job that ends
    Failed or Stopped is submitted again in its plan's place when `retry` (a RetryPolicy) retries its failure
    class, after the policy's backoff, or when the `on_failure` hook returns a plan. Returns once every plan
    started, or (with `wait`, `retry` or `on_failure`) once every job ended. `clients` is one Clients, a function
    of a region, or None (made per plan's region). `submit`, `check` and `sleep` replace
    launcher.submission.create's submit and check_account and time.sleep (tests). Ctrl-C while waiting stops the
    queue: the plans not yet (re)submitted get an Interrupted error. `refusals` (a RefusalWait; True, the
    default, means RefusalWait() for a queue of several plans) bounds how a refusal that passes with time is
    waited out. `lookup` replaces launcher.jobs.status.job_status for the polls (a Batch queue's jobs are found by
    launcher.jobs.queued's)."""
    if max_concurrent is not None and max_concurrent < 1:
        raise UsageError(f"max_concurrent {max_concurrent}: give 1 or more")
    from launcher.orchestrate import admission, creation, fallback, following
    from launcher.orchestrate.queue_state import QueueSettings, QueueState
    from launcher.orchestrate.retry import RefusalWait, resubmitter
    from launcher.submission import create

    if refusals is True:
        waits = RefusalWait() if len(plans) > 1 and not dry_run else None
    else:
        waits = refusals or None
    then = resubmitter(retry, on_failure)
    client_of, poll_client = _clients_for(clients)
    settings = QueueSettings(
        dry_run=dry_run, skip_role_check=skip_role_check, interval=interval, max_concurrent=max_concurrent,
        follow=(wait or then is not None) and not dry_run,
        queued=not dry_run and (max_concurrent is not None or len(plans) > 1),
        diagnose=then is not None, emit=on_event or (lambda _event: None),
        submit_plan=creation.announcing(submit or create.submit), check_plan=check or create.check_account,
        status_of=lookup or _job_status, nap=sleep or (lambda seconds: time.sleep(seconds)),
        client_of=client_of, poll_client=poll_client,
        decide=fallback.chain(then),  # a capacity failure moves to the plan's next instance type first
        waits=waits)
    state = QueueState.of([PlanRun(i, p) for i, p in enumerate(plans)])

    # Admission: one plan's submit (and a dry run's) makes these checks itself.
    if not dry_run and len(plans) > 1 and not admission.check_accounts(state, settings, plans):
        return _finish(state.runs)
    try:
        while True:
            # Creation: the queue's head while there is room and it has no backoff left to wait.
            started = False
            while state.pending and settings.free(state) and state.backoff.get(state.pending[0], 0.0) <= 0:
                head = state.pending.popleft()
                outcome = creation.start(state, settings, head)
                if outcome is None:  # over quota: try again after the next poll
                    state.pending.appendleft(head)
                    break
                if not outcome:
                    state.pending.clear()
                    return _finish(state.runs)
                if head not in state.running.values() and head in state.backoff:
                    break  # refused and put back to wait: the queue sleeps before trying anything else
                started = True
            if not state.pending and (not state.running or not settings.follow) and not following.watched(
                    state, settings):
                return _finish(state.runs)
            # Following (and, for each job that ended badly, retries).
            if not started:  # a job just started is polled at once: it may end (or fail) as it starts
                following.rest(state, settings)
            if state.running:
                following.poll(state, settings)
    except KeyboardInterrupt:
        return _finish(_interrupted(state))
    except LauncherError as err:  # a status poll that failed: stop watching, say so on every job still held
        for i in state.running.values():
            state.update(i, error=err)
        return _finish(state.runs)


def _job_status(*args: Any, **kwargs: Any) -> JobStatus:
    from launcher.jobs.status import job_status

    return job_status(*args, **kwargs)


def _interrupted(state: Any) -> list[PlanRun]:
    """Ctrl-C stopped the queue: the plan being submitted may or may not have a job, the plans waiting have none;
    the jobs the queue started keep running."""
    for i in state.in_flight:
        name = state.current[i].job_name
        state.update(i, error=Interrupted(f"interrupted while {name} was being submitted: cannot tell whether it was "
                                          "started; look it up by name before submitting again", name, None))
    stopped = Interrupted("interrupted: the queue stopped before this plan started; the jobs it started keep "
                          "running", "", False)  # one error for every plan it stopped
    for i in state.pending:
        name = state.current[i].job_name
        state.update(i, error=Interrupted(f"interrupted: the queue stopped before {name} was submitted again; the "
                                          "jobs it started keep running", "", False) if state.runs[i].attempts
                     else stopped)
    return state.runs


def _finish(runs: list[PlanRun]) -> tuple[PlanRun, ...]:
    return tuple(dataclasses.replace(run, state=PlanState.NOT_STARTED) if run.state is PlanState.PLANNED else run
                 for run in runs)
