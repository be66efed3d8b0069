"""Capacity fallback: cluster.instance_types planned and advised one by one; a capacity failure moves the job to
the next type that fits, on the emulator's clock (in-process moto with the emulator's patches)."""
from __future__ import annotations

import pytest

import emulator
from emulator import quotas as fake_quotas
from launcher import api
from launcher.core.aws import AwsError, Clients
from launcher.core.errors import SpecError
from launcher.core.frozen import thaw
from launcher.orchestrate.fallback import FALLBACK_TAG, describe, next_instance, settled
from launcher.orchestrate.queue import EventKind, PlanState, run_queue
from launcher.orchestrate.retry import ATTEMPT_TAG, RETRY_OF_TAG
from launcher.spec import load_spec
from tests.conftest import JOBS

PREFERENCE = "cluster.instance_types=[ml.p5.48xlarge, ml.p4de.24xlarge, ml.p4d.24xlarge]"
# 4 x 8 GPUs of llama2-70b sharded over all 32: about 48 GB per GPU, so p5 and p4de (80 GB) fit, p4d (40 GB) not.
SEVENTY = ["role=Good", PREFERENCE, "cluster.instance_count=4", "smp.hybrid_shard_degree=32", "training.batch_size=1"]


def plan_of(job="llama70b.yaml", overrides=SEVENTY):
    return api.build_plan(load_spec(JOBS / job, list(overrides)), region="us-west-2")


def tags_of(sm, name):
    arn = sm.describe_training_job(TrainingJobName=name)["TrainingJobArn"]
    return {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}


# -- the spec and the plan ---------------------------------------------------------------------------------------

def test_each_type_is_planned_and_advised_on_its_own_and_the_plan_stays_frozen():
    plan = plan_of()
    assert plan.instance_type == "ml.p5.48xlarge" and not plan.errors
    assert [a.instance_type for a in plan.alternatives] == ["ml.p4de.24xlarge", "ml.p4d.24xlarge"]
    p4de, p4d = plan.alternatives
    assert not p4de.errors and p4d.errors and p4d.errors[0].rule == "SMP060"
    assert p4de.memory.capacity_gb > p4d.memory.capacity_gb and p4de.alternatives == ()
    data = plan.to_dict()
    assert data["instance_types"] == ["ml.p5.48xlarge", "ml.p4de.24xlarge", "ml.p4d.24xlarge"]
    assert [(a["instance_type"], a["fits"]) for a in data["alternatives"]] == [
        ("ml.p4de.24xlarge", True), ("ml.p4d.24xlarge", False)]
    assert data["alternatives"][1]["errors"][0].startswith("SMP060")
    assert isinstance(plan.alternatives, tuple)
    with pytest.raises(AttributeError):
        plan.alternatives = ()


def test_a_plan_without_instance_types_keeps_its_json_keys_and_its_spec_hash():
    plain = plan_of("llama7b.yaml", ["role=Good"])
    assert "alternatives" not in plain.to_dict() and "instance_types" not in plain.to_dict()
    listed = plan_of("llama7b.yaml", ["role=Good", "cluster.instance_types=[ml.p4d.24xlarge]"])
    assert listed.alternatives == () and "alternatives" not in listed.to_dict()  # one type: nothing to fall back on
    assert plain.alternatives == () and listed.instance_type == "ml.p4d.24xlarge"


def test_instance_type_gives_way_to_the_first_preference_but_must_be_among_them():
    spec = load_spec(JOBS / "llama7b.yaml", [PREFERENCE]).spec  # the base file sets instance_type: p4d
    assert spec.cluster.instance_type == "ml.p5.48xlarge"
    with pytest.raises(SpecError, match="is not one of instance_types"):
        load_spec(JOBS / "llama7b.yaml", ["cluster.instance_types=[ml.p5.48xlarge]",
                                          "cluster.instance_type=ml.p4de.24xlarge"])
    with pytest.raises(SpecError, match="twice"):
        load_spec(JOBS / "llama7b.yaml", ["cluster.instance_types=[ml.p5.48xlarge, ml.p5.48xlarge]"])


def test_the_next_attempt_skips_a_type_the_layout_does_not_fit():
    plan = plan_of()
    on_p4de, skipped = next_instance(plan, 1, plan.job_name)
    assert on_p4de.instance_type == "ml.p4de.24xlarge" and skipped == []
    assert on_p4de.job_name == f"{plan.job_name}-r2"
    tags = {t["Key"]: t["Value"] for t in on_p4de.estimator.tags}
    assert tags[FALLBACK_TAG] == "ml.p5.48xlarge" and tags[RETRY_OF_TAG] == plan.job_name and tags[ATTEMPT_TAG] == "2"
    assert on_p4de.estimator.checkpoint_s3_uri == plan.estimator.checkpoint_s3_uri
    assert on_p4de.request["ResourceConfig"]["InstanceType"] == "ml.p4de.24xlarge"
    assert [a.instance_type for a in on_p4de.alternatives] == ["ml.p4d.24xlarge"]
    last, skipped = next_instance(on_p4de, 2, on_p4de.job_name)
    assert last is None and skipped[0].startswith("ml.p4d.24xlarge skipped: this layout does not fit it (SMP060")


def test_the_move_to_another_type_names_each_type_passed_over_and_the_rule_that_refused_it():
    order = "cluster.instance_types=[ml.p5.48xlarge, ml.p4d.24xlarge, ml.p4de.24xlarge]"
    plan = plan_of(overrides=[order if s == PREFERENCE else s for s in SEVENTY])
    on_p4de, _ = next_instance(plan, 1, plan.job_name)
    assert describe(plan, on_p4de, "first-job") == (
        f"ml.p5.48xlarge had no capacity (first-job); trying 4 x ml.p4de.24xlarge as {on_p4de.job_name} "
        "(ml.p4d.24xlarge skipped: this layout does not fit it (SMP060))")
    assert describe(plan, on_p4de, "first-job", "is over its quota").startswith(
        "ml.p5.48xlarge is over its quota; trying 4 x ml.p4de.24xlarge")


# -- the queue on the emulator ---------------------------------------------------------------------------------

QUICK = {"starting": 2.0, "downloading": 1.0, "training": 30.0, "uploading": 1.0, "decoy": False}


@pytest.fixture
def quick_jobs():
    emulator.set_default(QUICK)
    yield
    emulator.set_default(None)


def test_a_capacity_failure_moves_the_job_to_the_next_type(moto_world, clock, quick_jobs):
    fake_quotas.no_capacity("ml.p5.48xlarge")
    plan = plan_of()
    events = []
    (run,) = run_queue([plan], clients=Clients(region="us-west-2"), interval=1.0, sleep=clock.sleep,
                       on_event=events.append)
    assert run.state is PlanState.STARTED and run.error is None
    first, second = (s.job_name for s in run.submissions)
    assert second == f"{plan.job_name}-r2" and first == plan.job_name
    sm = moto_world.sagemaker
    assert sm.describe_training_job(TrainingJobName=first)["TrainingJobStatus"] == "Failed"
    again = sm.describe_training_job(TrainingJobName=second)
    assert again["ResourceConfig"]["InstanceType"] == "ml.p4de.24xlarge" and again["TrainingJobStatus"] == "InProgress"
    assert settled(run.status) and run.status.instance_type == "ml.p4de.24xlarge"
    assert tags_of(sm, second)[FALLBACK_TAG] == "ml.p5.48xlarge"
    assert again["CheckpointConfig"]["S3Uri"] == plan.estimator.checkpoint_s3_uri
    (moved,) = [e for e in events if e.kind is EventKind.RESUBMIT]
    assert moved.message == (f"ml.p5.48xlarge had no capacity ({first}); trying 4 x ml.p4de.24xlarge as {second}")
    assert clock.slept < 30, "the queue waited for the job to end instead of only for its instances"


def test_when_no_type_that_fits_has_capacity_the_last_failure_stands(moto_world, clock, quick_jobs):
    fake_quotas.no_capacity("ml.p5.48xlarge", "ml.p4de.24xlarge")
    plan = plan_of()
    (run,) = run_queue([plan], clients=Clients(region="us-west-2"), interval=1.0, sleep=clock.sleep)
    assert [s.job_name for s in run.submissions] == [plan.job_name, f"{plan.job_name}-r2"]
    assert run.status.status == "Failed" and run.status.failure.failure_class == "capacity"
    assert run.exit_code == 1
    names = [j["TrainingJobName"] for j in moto_world.sagemaker.list_training_jobs()["TrainingJobSummaries"]]
    assert len(names) == 2, "p4d, which the layout does not fit, was started"


def test_a_plan_without_alternatives_is_not_followed(moto_world, clock, quick_jobs):
    fake_quotas.no_capacity("ml.p4d.24xlarge")
    (run,) = run_queue([plan_of("llama7b.yaml", ["role=Good"])], clients=Clients(region="us-west-2"),
                       interval=1.0, sleep=clock.sleep)
    assert len(run.submissions) == 1 and run.status is None and clock.slept == 0


def test_a_create_refused_for_capacity_moves_on_at_once(moto_world, clock, quick_jobs):
    from launcher.submission.create import submit as real_submit

    plan = plan_of()

    def submit(p, **kw):
        if p.instance_type == "ml.p5.48xlarge":
            raise AwsError("CreateTrainingJob failed: InsufficientCapacityError: We currently do not have "
                           "sufficient ml.p5.48xlarge capacity in the Availability Zone you requested")
        return real_submit(p, **kw)

    events = []
    (run,) = run_queue([plan], clients=Clients(region="us-west-2"), interval=1.0, sleep=clock.sleep,
                       submit=submit, on_event=events.append)
    assert [s.job_name for s in run.submissions] == [f"{plan.job_name}-r2"] and run.error is None
    assert run.submissions[0].request["ResourceConfig"]["InstanceType"] == "ml.p4de.24xlarge"
    assert [e.kind for e in events][:2] == [EventKind.RESUBMIT, EventKind.STARTED]


def test_the_plan_json_of_a_fallback_is_plain_data():
    data = plan_of().to_dict()
    assert thaw(data) == data and isinstance(data["alternatives"], list)


def test_the_plan_table_says_where_a_capacity_failure_moves_the_job(run_cli):
    r = run_cli("plan", str(JOBS / "llama70b.yaml"), *[f"--set={o}" for o in SEVENTY])
    assert r.code == 0, r.err
    line = " ".join(next(x for x in r.out.splitlines() if "capacity fallback" in x).split())
    assert "ml.p4de.24xlarge (fits), then ml.p4d.24xlarge (skipped, SMP060)" in line


def test_a_plan_with_alternatives_is_frozen_all_the_way_down():
    from tests.test_frozen import assert_frozen

    plan = plan_of()
    assert assert_frozen(plan.alternatives, "alternatives") > 100


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_type_over_quota_or_not_offered_moves_on_to_the_next(moto_world, clock, quick_jobs, dry_run):
    """p5's quota is 0 (the default in many accounts) and p4de is not offered here: the job goes to... nothing
    that fits; with p4de offered it goes to p4de, in a dry run as in a submit."""
    fake_quotas.set_quota("ml.p5.48xlarge", 0)
    plan = plan_of()
    events = []
    (run,) = run_queue([plan], clients=Clients(region="us-west-2"), interval=1.0, sleep=clock.sleep,
                       dry_run=dry_run, on_event=events.append)
    assert run.error is None and [s.job_name for s in run.submissions] == [f"{plan.job_name}-r2"]
    assert run.submissions[0].request["ResourceConfig"]["InstanceType"] == "ml.p4de.24xlarge"
    (moved,) = [e.message for e in events if e.kind is EventKind.RESUBMIT]
    assert moved.startswith("ml.p5.48xlarge is over its quota ('ml.p5.48xlarge for training job usage' is 0, 0 in "
                            "use, the job needs 4); trying 4 x ml.p4de.24xlarge as ")
    tags = {t["Key"]: t["Value"] for t in run.submissions[0].request["Tags"]}
    assert tags[FALLBACK_TAG] == "ml.p5.48xlarge" and RETRY_OF_TAG not in tags  # no job was created before it

    fake_quotas.not_offered("ml.p4de.24xlarge", "us-west-2")
    (run,) = run_queue([plan_of()], clients=Clients(region="us-west-2"), interval=1.0, sleep=clock.sleep,
                       dry_run=dry_run)
    assert run.state is PlanState.ERROR and run.exit_code == 3  # p4d is left, and the layout does not fit it
    assert "does not offer ml.p4de.24xlarge" in str(run.error)


def test_a_sweep_says_where_each_plan_over_its_quota_moves(moto_world, run_cli):
    fake_quotas.set_quota("ml.p5.48xlarge", 0)
    r = run_cli("submit", str(JOBS / "llama70b.yaml"), *[f"--set={o}" for o in SEVENTY if "batch_size" not in o],
                "--sweep", "training.batch_size=1,2", "--dry-run")
    assert r.code == 0, r.err
    names = [ln.split()[-1] for ln in r.out.splitlines() if ln.split()[2:3] == ["ok"]]
    assert len(names) == 2 and all(n.startswith("llama2-70b-") for n in names)
    moved = [ln for ln in r.out.splitlines() if ln.startswith("ml.p5.48xlarge ")]
    assert moved == [f"ml.p5.48xlarge is over its quota ('ml.p5.48xlarge for training job usage' is 0, 0 in use, the "
                     f"job needs 4); trying 4 x ml.p4de.24xlarge as {name}-r2" for name in names]
    assert "resubmitting as" not in r.out
    assert "dry run: 2 of 2 plans passed the account checks (buckets, role); nothing was written" in r.out


def test_the_fallback_printer_says_a_failure_and_the_next_type_and_nothing_else(capsys):
    from types import SimpleNamespace

    from launcher import EventKind
    from launcher.cli.submit import fallback_printer

    capacity = SimpleNamespace(failure_class="capacity")
    events = [SimpleNamespace(kind=EventKind.STARTED, job_name="j", status=None, message="j started"),
              SimpleNamespace(kind=EventKind.ENDED, job_name="j", status=SimpleNamespace(status="Failed",
                                                                                         failure=capacity), message=""),
              SimpleNamespace(kind=EventKind.RESUBMIT, job_name="j-r2",
                              status=SimpleNamespace(status="Failed", failure=capacity), message="trying the next"),
              SimpleNamespace(kind=EventKind.ENDED, job_name="j-r2",
                              status=SimpleNamespace(status="Completed", failure=None), message="j-r2 ended")]
    for event in events:
        fallback_printer(event)
    out, err = capsys.readouterr()
    assert (out, err) == ("", "j: Failed [capacity]\ntrying the next\n")
