"""A sweep past the account's instance quota, end to end on the emulator (in-process moto, the virtual clock):
SageMaker refuses the plan its own running jobs leave no room for, and the queue waits for one of them to end
and starts it, instead of abandoning it and the plans after it."""
from __future__ import annotations

import pytest

import emulator
from emulator.quota import in_use, set_quota
from launcher.core.aws import Clients
from launcher.orchestrate.queue import EventKind, PlanState, run_queue
from launcher.plan.sweep import plan_sweep
from tests.conftest import JOBS

STEADY = dict(starting=5.0, downloading=5.0, training=60.0, uploading=5.0, line_interval=5.0, decoy=False)


@pytest.fixture
def quota_world(moto_world, clock):
    emulator.set_default(STEADY)
    set_quota("ml.p4d.24xlarge", 2)
    try:
        yield moto_world
    finally:
        set_quota(None)
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
    waits = [e for e in events if e.kind is EventKind.WAIT]
    # refused at once, and again when its first 60 s ran out with both jobs still running (75 s each)
    assert [(e.job_name, e.backoff_s) for e in waits] == [(plans[2].job_name, 60), (plans[2].job_name, 120)]
    assert "(quota, refusal 1 of at most 5)" in waits[0].message and "is 2 Instances" in waits[0].message
    assert "or until one of this queue's jobs ends" in waits[1].message
    kinds = [e.kind for e in events]
    third = max(i for i, k in enumerate(kinds) if k is EventKind.STARTED)
    # it started right after one of the first two ended, not 120 s later, and never more than the quota ran
    assert kinds[third - 1] is EventKind.ENDED and max(held) <= 2
    assert 60 < runs[2].attempts[0].backoff_s < 180


def test_without_a_queue_the_refusal_is_said_at_once(quota_world, run_cli):
    set_quota("ml.p4d.24xlarge", 0)
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--set", "role=Good", "--region", "us-west-2")
    assert r.code == 3 and "ml.p4d.24xlarge for training job usage' is 0 Instances" in r.err
