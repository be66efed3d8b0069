"""A queue's admission: the account checks once before anything starts, and the refusals that pass with time.

Before a queue of several plans starts anything, the account checks (buckets, role) run once for each distinct
account key: one that refuses stops the queue with nothing started (one plan's submit makes the same checks). A
plan CreateTrainingJob refused for quota or throttling goes back to the queue's head with a wait, within a
RefusalWait's bound (launcher.orchestrate.retry); a quota wait ends early when one of the queue's jobs ends.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from launcher.core.errors import LauncherError

if TYPE_CHECKING:
    from launcher.orchestrate.queue_state import QueueSettings, QueueState
    from launcher.plan.build import Plan


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


def check_accounts(state: QueueState, settings: QueueSettings, plans: Sequence[Plan]) -> bool:
    """Each distinct account key checked once; False (the refusing plan's run holds the error) when one refuses."""
    from launcher.orchestrate.runs import Event, EventKind, PlanState

    checked: set[tuple[Any, ...]] = set()
    for i, plan in enumerate(plans):
        key = account_key(plan)
        if key in checked:
            continue
        checked.add(key)
        try:
            settings.check_plan(plan, settings.client_of(plan.region or ""), skip_role_check=settings.skip_role_check)
        except LauncherError as err:
            state.update(i, error=err, state=PlanState.ERROR)
            settings.emit(Event(EventKind.ERROR, i, plan.job_name, message=str(err)))
            return False
        state.passed.add(key)
    return True


def waits_for_quota(state: QueueState, settings: QueueSettings, i: int, plan: Plan, err: LauncherError) -> bool:
    """A queue's plan over a quota that its own running jobs hold: it waits for them (said once); True when so."""
    from launcher.orchestrate.runs import Event, EventKind

    if not (settings.queued and getattr(getattr(err, "check", None), "waitable", False)):
        return False
    if i not in state.waiting:
        state.waiting.add(i)
        settings.emit(Event(EventKind.WAITING, i, plan.job_name, message=str(err), running=len(state.running)))
    return True


def wait_out(state: QueueState, settings: QueueSettings, i: int, plan: Plan, err: LauncherError) -> bool:
    """Put a plan CreateTrainingJob refused for quota or throttling back at the queue's head with a wait;
    False when the refusal does not pass with time or the plan was refused too often."""
    from launcher.orchestrate.retry import RefusalWait
    from launcher.orchestrate.runs import Event, EventKind

    waits = settings.waits
    why = RefusalWait.passes_with_time(err) if waits is not None else None
    if waits is None or why is None:
        return False
    count = state.refused.get(i, 0) + 1
    if count > waits.max_refusals:
        return False
    state.refused[i] = count
    delay = waits.delay(count)
    state.backoff[i] = delay
    if why == "quota" and state.running:
        state.quota_held.add(i)
    state.pending.appendleft(i)
    until = " or until one of this queue's jobs ends" if i in state.quota_held else ""
    settings.emit(Event(EventKind.WAIT, i, plan.job_name, running=len(state.running), backoff_s=delay,
                        message=f"CreateTrainingJob refused {plan.job_name} ({why}, refusal {count} of at most "
                                f"{waits.max_refusals}): trying again in {delay:g} s{until}; {err}"))
    return True


def quota_freed(state: QueueState) -> None:
    """One of the queue's jobs ended and gave back its share of the quota: the plans waiting for it go now."""
    for held in state.quota_held:
        state.backoff[held] = 0.0
    state.quota_held.clear()
