"""One plan made into a job: the backend call (or its Batch queue's), with the notifications its spec asks for,
and, when its instance type is refused, the same job on the next type it fits (launcher.orchestrate.fallback).

Used alike by a single submit (launcher.orchestrate.single) and by a queue of plans (launcher.orchestrate.queue,
through `start`, which also records what it did in the queue's state)."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from launcher.core.errors import Interrupted, LauncherError
from launcher.orchestrate import fallback

if TYPE_CHECKING:
    from launcher.orchestrate.queue_state import QueueSettings, QueueState
    from launcher.plan.build import Plan
    from launcher.submission.create import Submission


def moved_on(plan: Plan, err: LauncherError, *, can_wait: bool, attempt: int) -> tuple[Plan, str] | None:
    """The plan on the next instance type it fits, and the line that says why, when `err` refused this type for a
    reason the next may not have (no capacity, not offered here, a quota that cannot hold the job); else None."""
    why = fallback.refusal(err, can_wait=can_wait) if fallback.has_alternatives(plan) else None
    if why is None:
        return None
    following, _ = fallback.next_instance(plan, attempt, None)
    return None if following is None else (following, fallback.describe(plan, following, plan.job_name, why))


def as_started(plan: Plan, result: Submission) -> Plan:
    """The plan as its job was started: renamed when its name was another's by then (launcher.submission.create),
    so what runs in its place later (a retry, the next instance type) follows the job that exists."""
    if result.job_name == plan.job_name or result.dry_run:
        return plan
    from launcher.plan.naming import renamed

    return renamed(plan, result.job_name)


def announcing(submit_plan: Callable[..., Submission]) -> Callable[..., Submission]:
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


def start(state: QueueState, settings: QueueSettings, i: int) -> bool | None:
    """Submit run `i`'s current plan. True: submitted (or put back to wait out a refusal); False: failed, the
    queue stops; None: over a quota the queue's own jobs hold, to be tried again after the next poll."""
    from launcher.orchestrate import admission
    from launcher.orchestrate.runs import Attempt, Event, EventKind, PlanState

    run, plan = state.runs[i], state.current[i]
    state.backoff.pop(i, None)
    state.in_flight.append(i)
    try:
        result = settings.submit_plan(
            plan, dry_run=settings.dry_run, clients=settings.client_of(plan.region or ""),
            skip_role_check=settings.skip_role_check or admission.account_key(plan) in state.passed)
    except LauncherError as err:
        if admission.waits_for_quota(state, settings, i, plan, err):
            return None
        moved = moved_on(plan, err, can_wait=settings.queued, attempt=len(run.attempts) + 1)
        if moved is not None:
            state.current[i], message = moved
            settings.emit(Event(EventKind.RESUBMIT, i, moved[0].job_name, running=len(state.running),
                                message=message))
            return start(state, settings, i)  # bounded: each call drops an alternative
        if admission.wait_out(state, settings, i, plan, err):
            return True
        if isinstance(err, Interrupted) and err.started:
            state.update(i, error=err, state=PlanState.STARTED)  # the job exists: the error says so and names it
        else:
            state.update(i, error=err, state=run.state if run.attempts else PlanState.ERROR)
        settings.emit(Event(EventKind.ERROR, i, plan.job_name, message=str(err), running=len(state.running)))
        return False
    finally:
        state.in_flight.remove(i)
    state.refused.pop(i, None)
    state.quota_held.discard(i)
    attempts = (*run.attempts, Attempt(result, None, state.waited.pop(i, 0.0)))
    if settings.dry_run:
        state.update(i, attempts=attempts, state=PlanState.DRY_RUN)
        settings.emit(Event(EventKind.DRY_RUN, i, result.job_name, running=len(state.running), submission=result))
        return True
    state.update(i, attempts=attempts, state=PlanState.STARTED)
    state.current[i] = as_started(plan, result)
    state.running[result.job_name] = i
    settings.emit(Event(EventKind.STARTED, i, result.job_name, running=len(state.running), submission=result))
    return True
