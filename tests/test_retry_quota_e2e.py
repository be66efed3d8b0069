"""A sweep past the account's instance quota, end to end on the emulator (in-process moto, the virtual clock):
SageMaker refuses the plan its own running jobs leave no room for, and the queue waits for one of them to end
and starts it, instead of abandoning it and the plans after it."""
from __future__ import annotations

import pytest

import emulator
from emulator.quotas import in_use, set_quota
from launcher.core.aws import Clients
from launcher.orchestrate.queue import EventKind, PlanState, run_queue
from launcher.plan.sweep import plan_sweep
from tests.conftest import JOBS

STEADY = dict(starting=5.0, downloading=5.0, training=60.0, uploading=5.0, line_interval=5.0, decoy=False)


@pytest.fixture
def quota_world(moto_world, clock):
    """SageMaker's refusal at CreateTrainingJob, with Service Quotas answering as plain moto does: submit's own
    quota check cannot tell, so what is tested here is the queue meeting the refusal itself (tests/test_quotas*
    test the check that sees the quota first)."""
    from emulator import quotas

    emulator.set_default(STEADY)
    quotas.plain(True)
    set_quota("ml.p4d.24xlarge", 2)
    try:
        yield moto_world
    finally:
        emulator.set_default({})


def test_a_sweep_past_the_quota_waits_for_its_own_jobs_and_starts_every_plan(quota_world, clock):
    plans = [c.plan for c in plan_sweep([str(JOBS / "llama7b.yaml")], ["role=Good"], ["training.batch_size=1,2,4"])]
    events, held = [], []

    def on_event(event):
        events.append(event)
        held.append(in_use("ml.p4d.24xlarge"))

    runs = run_queue(plans, wait=True, interval=10, clients=Clients(region="us-west-2"), on_event=on_event,
                     sleep=clock.sleep)
    assert [r.state for r in runs] == [PlanState.STARTED] * 3 and all(r.error is None for r in runs)
    assert [r.status.status for r in runs] == ["Completed"] * 3
    # SageMaker's refusal is read as the quota it names (launcher.submission.quotas), so the plan waits for
    # running jobs (WAITING, said once) rather than for a fixed backoff (WAIT): either way, in its place
    waits = [e for e in events if e.kind in (EventKind.WAIT, EventKind.WAITING)]
    assert waits and {e.job_name for e in waits} == {plans[2].job_name}
    assert "ml.p4d.24xlarge for training job usage" in waits[0].message
    kinds = [e.kind for e in events]
    third = max(i for i, k in enumerate(kinds) if k is EventKind.STARTED)
    # it started right after one of the first two ended, and never more than the quota ran
    assert kinds[third - 1] is EventKind.ENDED and max(held) <= 2


def test_without_a_queue_the_refusal_is_said_at_once(quota_world, run_cli):
    set_quota("ml.p4d.24xlarge", 0)
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--set", "role=Good", "--region", "us-west-2")
    assert r.code == 3 and "ml.p4d.24xlarge for training job usage' in us-west-2 is 0" in r.err, r.err


def test_with_retry_a_refused_submit_is_said_once_on_stderr(quota_world, run_cli):
    """The refusal ends --retry at once (there is no job to retry): said once, on stderr; nothing on stdout."""
    set_quota("ml.p4d.24xlarge", 0)
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--set", "role=Good", "--region", "us-west-2", "--retry",
                "capacity")
    assert r.code == 3 and r.out == "", r.out
    assert r.err.count("ml.p4d.24xlarge for training job usage' in us-west-2 is 0") == 1, r.err
