"""Following a queue's jobs: each running job's status polled, its end announced, and a job whose plan has other
instance types watched until it has its instances; a job that ended badly is handed to the queue's retries
(launcher.orchestrate.retry and the capacity fallback decide what, if anything, runs in its place)."""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from launcher.orchestrate import fallback

if TYPE_CHECKING:
    from launcher.jobs.status import JobStatus
    from launcher.orchestrate.queue_state import QueueSettings, QueueState

POLL_RETRIES = 3  # a failed status poll is asked again after 1, 2 and 4 s (as `logs` does) before the queue gives up


def polled(read: Callable[[], Any], nap: Callable[[float], None]) -> Any:
    """`read()`, asked again after a short wait when AWS failed to answer it (a 500, a dropped connection, a
    throttle outlasting botocore's own tries): one bad moment of the endpoint does not end the queue."""
    from launcher.core.aws import AwsError

    for attempt in range(POLL_RETRIES):
        try:
            return read()
        except AwsError:
            nap(2.0 ** attempt)
    return read()  # the last try: its failure is the queue's


def in_batch_queue(state: QueueState, i: int) -> bool:
    """Run `i`'s latest job was handed to an AWS Batch queue (a QueuedSubmission carries the queue)."""
    run = state.runs[i]
    return bool(run.attempts and getattr(run.attempts[-1].submission, "queue", None))


def watched(state: QueueState, settings: QueueSettings) -> bool:
    """A job the queue follows until it has its instances: its plan has another instance type to fall back on
    (a job in a Batch queue is not: Batch keeps it queued until there is capacity)."""
    return not settings.dry_run and any(
        fallback.has_alternatives(state.current[i]) and name not in state.provisioned and not in_batch_queue(state, i)
        for name, i in state.running.items())


def poll(state: QueueState, settings: QueueSettings) -> None:
    """Each running job's status once; an ended job leaves the running set and may be resubmitted."""
    from launcher.orchestrate import admission
    from launcher.orchestrate.runs import Event, EventKind

    for name, i in list(state.running.items()):
        # A failed job that may be resubmitted is classified (algo-1's log tail, its plan) so the policy or hook
        # sees why.
        status = polled(functools.partial(settings.status_of, settings.poll_client(state.current[i].region or ""),
                                          name, diagnose=settings.diagnose), settings.nap)
        run = state.runs[i]
        state.update(i, attempts=(*run.attempts[:-1], dataclasses.replace(run.attempts[-1], status=status)))
        if not status.terminal:
            if fallback.has_alternatives(state.current[i]) and fallback.settled(status):
                state.provisioned.add(name)
            continue
        del state.running[name]
        admission.quota_freed(state)
        settings.emit(Event(EventKind.ENDED, i, name, status=status, running=len(state.running)))
        resubmit(state, settings, i, status)


def resubmit(state: QueueState, settings: QueueSettings, i: int, status: JobStatus) -> None:
    """A job that ended Failed or Stopped: what the capacity fallback, the retry policy or the hook decides runs
    next in its place goes to the queue's head, after its backoff."""
    from launcher.jobs.status import JobState
    from launcher.orchestrate.runs import Event, EventKind

    if status.status == JobState.COMPLETED:
        return
    before = state.current[i]
    decided = settings.decide(before, status, len(state.runs[i].attempts))
    if decided is None:
        return
    state.current[i], state.backoff[i] = decided
    state.pending.appendleft(i)
    settings.emit(Event(EventKind.RESUBMIT, i, decided[0].job_name, status=status, running=len(state.running),
                        backoff_s=decided[1], message=fallback.describe(before, decided[0], status.job_name)))


def rest(state: QueueState, settings: QueueSettings) -> None:
    """Sleep until the next poll, or less when the queue's head waits out a shorter backoff."""
    seconds = settings.interval
    if state.pending and settings.free(state) and state.backoff.get(state.pending[0], 0.0) > 0:
        head = state.backoff[state.pending[0]]
        seconds = min(seconds, head) if state.running else head
    settings.nap(seconds)
    for i in state.backoff:
        used = min(seconds, state.backoff[i])
        state.waited[i] = state.waited.get(i, 0.0) + used
        state.backoff[i] -= used
