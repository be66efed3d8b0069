"""One plan submitted: one call to its backend, read top to bottom.

The plan goes to its AWS Batch queue (launcher.submission.batch) or, through its backend, to CreateTrainingJob
(launcher.submission.create), with the notifications its spec asks for (launcher.orchestrate.creation). A plan
with other instance types (cluster.instance_types) falls back: a type refused (no capacity, not offered in the
region, over quota) moves to the next at once, and its job is followed until it has its instances, moving to the
next type when it fails for capacity (launcher.orchestrate.fallback). Nothing here prints: a move is an Event.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from launcher.core.durations import POLL_S
from launcher.core.errors import Interrupted, LauncherError
from launcher.orchestrate import fallback
from launcher.orchestrate.creation import announcing, as_started, moved_on

if TYPE_CHECKING:
    from launcher.core.aws import Clients
    from launcher.jobs.status import JobStatus
    from launcher.orchestrate.runs import Event
    from launcher.plan.build import Plan
    from launcher.submission.batch import QueueOptions
    from launcher.submission.create import Submission


def submit(plan: Plan, clients: Clients, *, dry_run: bool = False, skip_role_check: bool = False,
           options: QueueOptions | None = None, on_event: Callable[[Event], None] | None = None,
           interval: float = POLL_S, sleep: Callable[[float], None] | None = None) -> Submission:
    """Submit `plan`: its Submission (the job on the instance type that had capacity, after a fallback), or the
    error that stopped it. `options` go with a plan that names a Batch queue."""
    from launcher.orchestrate.runs import Event, EventKind
    from launcher.submission import batch, create

    emit = on_event or (lambda _event: None)
    queued = batch.queue_of(plan)
    if options is not None and not queued:
        from launcher.core.errors import UsageError

        raise UsageError("priority and share are for a Batch queue: the plan names none (cluster.queue)")
    if queued:
        send = announcing(functools.partial(batch.submit, options=options or batch.QueueOptions()))
    else:
        send = announcing(create.submit)
    attempt = 1
    while True:
        try:
            submission = send(plan, dry_run=dry_run, skip_role_check=skip_role_check, clients=clients)
        except LauncherError as err:
            moved = moved_on(plan, err, can_wait=False, attempt=attempt)
            if moved is None:
                raise
            plan, attempt = moved[0], attempt + 1
            emit(Event(EventKind.RESUBMIT, 0, plan.job_name, message=moved[1]))
            continue
        if dry_run or queued or not fallback.has_alternatives(plan):
            return submission  # Batch holds a queued job until there is capacity: nothing to follow here
        plan = as_started(plan, submission)
        status = _until_provisioned(clients, submission.job_name, interval, sleep or time.sleep)
        following = fallback.chain(None)(plan, status, attempt)
        if following is None:
            return submission
        emit(Event(EventKind.ENDED, 0, submission.job_name, status=status))
        before, plan, attempt = plan, following[0], attempt + 1
        emit(Event(EventKind.RESUBMIT, 0, plan.job_name, status=status,
                   message=fallback.describe(before, plan, submission.job_name)))


def _until_provisioned(clients: Clients, name: str, interval: float, nap: Callable[[float], None]) -> JobStatus:
    """The job's status once it has its instances or has ended (polled every `interval` seconds, the first at once):
    only until then can it fail for capacity."""
    from launcher.jobs.status import job_status
    from launcher.orchestrate.following import polled

    try:
        while True:
            status: JobStatus = polled(functools.partial(job_status, clients, name), nap)
            if fallback.settled(status):
                return status
            nap(interval)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted while waiting for {name} to get its instances: it was started and keeps "
                          "running (it will not move to another instance type if it fails for capacity)", name,
                          True) from None
