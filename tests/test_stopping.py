"""How long SageMaker lets a job run against how long the prediction says it takes (launcher.rules.stopping)."""
import pytest

from launcher.plan.build import build_plan
from launcher.predict.budget import MAX_RUN_LIMIT, proposed_max_run, step_reached
from launcher.spec import load_spec
from tests.conftest import MINIMAL, REPO

ENV = {"SMP_LAUNCH_BUCKET": "example-bucket", "XDG_STATE_HOME": "/nonexistent/smp-launch-stopping"}


def _plan(path, *sets):
    return build_plan(load_spec(path, list(sets), env=ENV), env=ENV, region="us-west-2")


def _rules(plan):
    return {a.rule: a for a in plan.advisories}


def test_a_run_predicted_past_max_run_is_refused_with_the_step_and_the_ways_out(run_cli):
    """The issue's case: 5,000 steps of llama7b under a one-hour max_run."""
    r = run_cli("plan", str(REPO / "jobs" / "llama7b.yaml"), "--set", "cluster.max_run=1h",
                "--set", "training.max_steps=5000")
    assert r.code == 2
    line = next(ln for ln in r.err.splitlines() if "SMP080" in ln)
    assert "cluster.max_run is 1h 0m: SageMaker stops it (MaxRuntimeExceeded) at about step " in line
    assert " of 5,000" in line and "raise cluster.max_run to " in line and "up to 28 days" in line
    assert "train fewer steps (training.max_steps or training.tokens" in line
    plan = _plan(REPO / "jobs" / "llama7b.yaml", "cluster.max_run=1h", "training.max_steps=5000")
    n = int(line.split("at about step ")[1].split(" of")[0].replace(",", ""))
    t = plan.training_time
    assert 0 < n < 5000 and t.startup_seconds + n * t.step_seconds <= 3600  # the step reached by the hour


def test_a_spec_without_max_run_gets_one_the_band_fits_in(write_spec):
    plan = _plan(write_spec(MINIMAL))
    fast_end, slow_end = (_ctx(plan).time_band[i].total_seconds for i in (0, 1))
    proposal = plan.estimator.max_run
    assert proposal == proposed_max_run(slow_end) and proposal % 900 == 0
    assert slow_end * 1.1 <= proposal < slow_end * 1.1 + 900 and fast_end < slow_end
    assert plan.request["StoppingCondition"]["MaxRuntimeInSeconds"] == proposal
    found = _rules(plan)
    assert found["SMP082"].severity == "info" and "SMP080" not in found and "SMP081" not in found
    # a spec that sets max_run keeps its own, and no proposal is made
    own = _plan(write_spec(MINIMAL), "cluster.max_run=3h")
    assert own.estimator.max_run == 3 * 3600 and "SMP082" not in _rules(own)


def _ctx(plan):
    from launcher.rules.engine import Context

    return Context(plan.spec, plan.region)


def test_spot_checks_max_wait_too_and_a_proposal_stays_within_it(write_spec):
    path = write_spec(MINIMAL)
    short = _plan(path, "cluster.spot=true", "cluster.max_run=1h", "cluster.max_wait=70m")
    errors = [a for a in short.advisories if a.rule == "SMP080"]
    assert [a.field for a in errors] == ["cluster.max_run", "cluster.max_wait"]
    assert "MaxRuntimeExceeded" in errors[0].message and "MaxWaitTimeExceeded" in errors[1].message
    # max_wait given, max_run not: the proposal never passes max_wait (CreateTrainingJob refuses that)
    capped = _plan(path, "cluster.spot=true", "cluster.max_wait=90m")
    assert capped.estimator.max_run == 90 * 60 == capped.estimator.max_wait
    assert "capped at cluster.max_wait" in _rules(capped)["SMP082"].message
    assert _rules(capped)["SMP081"].field == "cluster.max_wait"  # 90 minutes is inside the band
    roomy = _plan(path, "cluster.spot=true", "cluster.max_wait=1d")
    assert roomy.estimator.max_run < 86400 == roomy.estimator.max_wait and not roomy.errors


def test_a_budget_no_single_job_can_hold_says_so(write_spec):
    plan = _plan(write_spec(MINIMAL), "training.tokens=1T")
    assert plan.estimator.max_run == MAX_RUN_LIMIT
    message = _rules(plan)["SMP080"].message
    assert "no limit SageMaker allows (28 days) holds the band's slow end" in message and "rerun" in message


@pytest.mark.parametrize("limit,expected", [(600, 0), (610, 2), (600 + 5 * 10 + 2, 10), (10**9, 20)])
def test_the_step_reached_counts_start_up_steps_and_their_share_of_checkpoint_writes(limit, expected):
    from launcher.predict.budget import TrainingTime

    time = TrainingTime(20, "training.max_steps", 5.0, 600.0, 2, 0.0, 0.0)
    assert step_reached(time, limit, checkpoint_seconds_each=0.0, checkpoint_every=10) == expected
    # a 50 s write every 10 steps adds 5 s to each step's share
    assert step_reached(time, 600 + 10 * 10, checkpoint_seconds_each=50.0, checkpoint_every=10) == 10
