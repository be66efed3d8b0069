"""What a queue of plans holds while it runs (launcher.orchestrate.queue): its settings, fixed when it starts, and
its state, which each of its parts (admission, creation, following, retries) reads and moves on."""
from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from launcher.core.aws import Clients
    from launcher.jobs.status import JobStatus
    from launcher.orchestrate.retry import RefusalWait
    from launcher.orchestrate.runs import Event, PlanRun
    from launcher.plan.build import Plan
    from launcher.submission.create import AccountCheck, Submission

Decide = Callable[["Plan", "JobStatus", int], "tuple[Plan, float] | None"]


@dataclass(frozen=True)
class QueueSettings:
    """How one run of the queue works, decided before its first plan is submitted."""

    dry_run: bool
    skip_role_check: bool
    interval: float
    max_concurrent: int | None
    follow: bool  # wait for the jobs to end (with `wait`, a retry policy or an on_failure hook)
    queued: bool  # a queue proper (several plans, or a concurrency limit): it waits for quota, one submit does not
    diagnose: bool  # classify a failed job (its log tail): a retry policy or hook decides on its class
    emit: Callable[[Event], None]
    submit_plan: Callable[..., Submission]
    check_plan: Callable[..., AccountCheck | None]
    status_of: Callable[..., JobStatus]
    nap: Callable[[float], None]
    client_of: Callable[[str | None], Clients]  # clients for one submit
    poll_client: Callable[[str | None], Clients]  # clients for status polls, one per region
    decide: Decide  # the next plan for a job that ended badly (capacity fallback, then a policy or hook)
    waits: RefusalWait | None  # how refusals that pass with time are waited out (None: they are not)

    def free(self, state: QueueState) -> bool:
        """Room for one more running job."""
        return self.max_concurrent is None or len(state.running) < self.max_concurrent


@dataclass
class QueueState:
    """A running queue's state. Mutable on purpose, and never returned: run_queue returns its frozen PlanRuns."""

    runs: list[PlanRun]
    current: dict[int, Plan]  # the plan each run submits next (a resubmission replaces it)
    pending: deque[int]  # the runs waiting to be submitted, in order
    backoff: dict[int, float] = field(default_factory=dict)  # seconds a resubmission still waits
    waited: dict[int, float] = field(default_factory=dict)  # seconds a plan has waited out its backoffs so far
    running: dict[str, int] = field(default_factory=dict)  # job name -> run
    in_flight: list[int] = field(default_factory=list)  # the plan being submitted now: a Ctrl-C leaves it unknown
    refused: dict[int, int] = field(default_factory=dict)  # refusals (quota, throttling) of each plan so far
    quota_held: set[int] = field(default_factory=set)  # plans waiting for a quota the queue's own jobs hold
    waiting: set[int] = field(default_factory=set)  # the plans that said they wait for quota (said once each)
    provisioned: set[str] = field(default_factory=set)  # jobs past provisioning: capacity can no longer fail them
    passed: set[tuple[Any, ...]] = field(default_factory=set)  # account keys checked before the first start

    @classmethod
    def of(cls, runs: list[PlanRun]) -> QueueState:
        return cls(runs, {r.index: r.plan for r in runs}, deque(range(len(runs))))

    def update(self, i: int, **changes: Any) -> None:
        self.runs[i] = dataclasses.replace(self.runs[i], **changes)
