"""Plans whose spec names an AWS Batch queue (cluster.queue): submitted through the same queue of plans as any
other (launcher.orchestrate.queue: the same checks, in order, the same events), each handed to its Batch queue
(launcher.submission.batch) instead of started here.

Nothing waits on this machine unless asked: Batch starts each job when its service environment has room, and
retries it by the retryStrategy made from the RetryPolicy, so the submitting process may end at once. With
`wait`, the jobs are followed to their ends through the queue-aware status (launcher.jobs.queued).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from launcher.core.durations import POLL_S
from launcher.core.errors import UsageError

if TYPE_CHECKING:
    from launcher.core.aws import Clients
    from launcher.jobs.status import JobStatus
    from launcher.orchestrate.queue import ClientsFor, Event, PlanRun
    from launcher.orchestrate.retry import RetryPolicy
    from launcher.plan.build import Plan
    from launcher.submission.batch import QueueOptions
    from launcher.submission.create import AccountCheck, Submission


def any_queued(plans: Sequence[Plan]) -> bool:
    from launcher.submission.batch import queue_of

    return any(queue_of(p) for p in plans)


def queue_options(retry: RetryPolicy | None, priority: int | None, share: str | None) -> QueueOptions:
    """The options a plan goes into its queue with; the policy's classes (and exit codes, where a policy has
    them) become Batch's retryStrategy, or are refused when Batch cannot match them."""
    from launcher.submission.batch import QueueOptions

    if retry is None:
        return QueueOptions(priority=priority, share=share)
    classes = [str(c) for c in retry.classes]
    classes += [f"exit:{code}" for code in getattr(retry, "exit_codes", ()) or ()]
    return QueueOptions(priority=priority, share=share, retry_classes=tuple(sorted(classes)),
                        attempts=retry.max_attempts)


def submit_queued(plans: Sequence[Plan], *, priority: int | None = None, share: str | None = None,
                  retry: RetryPolicy | None = None, max_concurrent: int | None = None, dry_run: bool,
                  wait: bool, interval: float = POLL_S, skip_role_check: bool,
                  clients: ClientsFor = None, on_event: Callable[[Event], None] | None = None,
                  sleep: Callable[[float], None] | None = None) -> tuple[PlanRun, ...]:
    """Submit every plan in order, those naming a Batch queue into it; one PlanRun per plan. With `wait`, return
    once every job ended (polled every `interval` seconds; Batch's retries happen meanwhile, on AWS)."""
    from launcher.jobs import queued
    from launcher.orchestrate.queue import run_queue
    from launcher.submission import batch, create

    if max_concurrent is not None:
        raise UsageError("max_concurrent limits the jobs this machine keeps running; a Batch queue's service "
                         "environment decides how many run: give one or the other")
    if retry is not None and not all(batch.queue_of(p) for p in plans):
        raise UsageError("a retry policy goes to the Batch queue with the plans: give every plan a queue "
                         "(cluster.queue), or submit those without one separately")
    options = queue_options(retry, priority, share)

    def submit(plan: Plan, *, dry_run: bool, skip_role_check: bool, clients: Clients) -> Submission:
        if batch.queue_of(plan):
            return batch.submit(plan, clients, options=options, dry_run=dry_run, skip_role_check=skip_role_check)
        return create.submit(plan, clients, dry_run=dry_run, skip_role_check=skip_role_check)

    def check(plan: Plan, clients: Clients, *, skip_role_check: bool) -> AccountCheck:
        return batch.account_check(plan, clients, options, skip_role_check=skip_role_check)

    runs = run_queue(plans, dry_run=dry_run, interval=interval, skip_role_check=skip_role_check, clients=clients,
                     on_event=on_event, submit=submit, check=check, lookup=queued.job_status, sleep=sleep)
    if not wait or dry_run:
        return runs
    return follow_runs(runs, interval=interval, clients=clients, on_event=on_event, sleep=sleep)


def follow_runs(runs: tuple[PlanRun, ...], *, interval: float, clients: ClientsFor,
                on_event: Callable[[Event], None] | None = None,
                sleep: Callable[[float], None] | None = None) -> tuple[PlanRun, ...]:
    """Wait for every job the runs started (queued or not) to end; each run's last attempt gets its final status,
    and `on_event` an ENDED event per job as it ends."""
    from launcher.orchestrate.queue import PlanState

    emit = on_event or (lambda _event: None)
    poll_client = _poller(clients)
    # a job that ended while the queue still polled (watching another for capacity) had its ENDED event then
    started = [r for r in runs if r.state is PlanState.STARTED and r.attempts and r.error is None
               and not (r.status is not None and r.status.terminal)]
    by_region: dict[str | None, list[PlanRun]] = {}
    for run in started:
        by_region.setdefault(run.plan.region, []).append(run)
    final: dict[int, JobStatus] = {}
    for region, group in by_region.items():
        final.update(_wait_for(group, poll_client(region or ""), interval, emit, sleep))
    out = []
    for run in runs:
        if run.index in final:
            last = dataclasses.replace(run.attempts[-1], status=final[run.index])
            run = dataclasses.replace(run, attempts=(*run.attempts[:-1], last))
        out.append(run)
    return tuple(out)



def _wait_for(group: list[PlanRun], clients: Clients, interval: float, emit: Callable[[Event], None],
              sleep: Callable[[float], None] | None) -> dict[int, JobStatus]:
    """One region's jobs waited for (queue-aware): the final status of each, by its run's index."""
    from launcher.jobs import queued
    from launcher.jobs import status as jobs
    from launcher.orchestrate.queue import Event, EventKind

    index = {r.job_name: r.index for r in group}
    left = [len(group)]

    def ended(status: JobStatus) -> None:
        if status.terminal:
            left[0] -= 1
            emit(Event(EventKind.ENDED, index[status.job_name], status.job_name, status=status, running=left[0]))

    done = jobs.wait(clients, list(index), interval=interval, on_change=ended, lookup=queued.job_status,
                     sleep=sleep)
    return {index[s.job_name]: s for s in done}


def _poller(clients: ClientsFor) -> Callable[[str | None], Clients]:
    """Clients for a region's polls: the one Clients given, the factory given, or made for the region."""
    if clients is not None and not callable(clients):
        shared = clients
        return lambda _region: shared
    if clients is not None:
        return clients
    from launcher.core.aws import Clients as Made

    return lambda region: Made(region=region or None)
