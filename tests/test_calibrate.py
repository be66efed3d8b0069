"""`calibrate`: finished emulated jobs whose progress lines carry a known speed set this account's factor."""
import dataclasses
import json
import time

import pytest

import emulator
from launcher import api
from launcher.core.aws import Clients
from launcher.core.errors import UsageError
from launcher.orchestrate.calibrate import WARMUP_LINES, steady_speed
from launcher.predict import account
from launcher.render import progress
from launcher.spec import load_spec
from tests.conftest import JOBS


def progress_line(step, speed):
    return progress.LINE_FORMAT.format(step=step, loss=2.0, lr=1e-4, tokens_per_s=speed, tflops_per_gpu=1.0,
                                       gpu_mem_gb=1.0)


def test_steady_state_leaves_out_warm_up_and_the_line_after_a_checkpoint():
    lines = [progress_line(1, 100.0), progress_line(2, 500.0), progress_line(3, 1000.0), progress_line(4, 1010.0),
             "checkpoint of step 4 saved to /opt/ml/checkpoints/step_4", progress_line(5, 300.0),
             progress_line(6, 990.0), "unrelated line", progress_line(7, 1000.0)]
    speed, used, skipped = steady_speed(lines)
    assert (speed, used, skipped) == (1000.0, 4, WARMUP_LINES + 1)
    assert steady_speed(lines[:4])[1] == 2  # too few steady lines: the caller refuses


def launch_finished(moto_world, monkeypatch, tokens_per_s, *sets, ago=3600.0):
    """Submit llama7b (through the API, its tarball to moto's S3) as a job that ran an hour ago, its progress
    lines logging `tokens_per_s` after three warm-up lines, with a checkpoint part-way."""
    monkeypatch.delenv("SMP_LAUNCH_BUCKET", raising=False)  # the spec's default bucket, which moto_world made
    clients = Clients(region="us-west-2")
    plan = api.build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good", *sets]), region="us-west-2")
    emulator.expect(emulator.EmulatedJob(plan.job_name, hosts=plan.instance_count, training=30.0, decoy=False,
                                         tokens_per_s=tokens_per_s, warmup_lines=3, checkpoint_after=10.0))
    emulator.set_clock(lambda: time.time() - ago)
    try:
        api.submit(plan, clients=clients, skip_role_check=True)
    finally:
        emulator.set_clock(None)
    return plan, clients


def test_calibrate_stores_the_measured_factor_and_later_plans_use_it(moto_world, monkeypatch, tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    plan, clients = launch_finished(moto_world, monkeypatch, 0.0)  # placeholder speed, replaced below
    predicted = plan.performance.tokens_per_second_per_gpu
    emulator.scenario.get(plan.job_name).tokens_per_s = 0.75 * predicted * plan.world_size  # all GPUs together
    result = api.calibrate([plan.job_name], clients=clients, env=env)
    (job,) = result.jobs
    assert job.measured == pytest.approx(0.75 * predicted, rel=1e-3)  # the line's one decimal
    assert job.predicted == pytest.approx(predicted) and job.ratio == pytest.approx(0.75, rel=1e-3)
    # WARMUP_LINES (2) and the line after the save are left out; the job's third slow warm-up line is in, and the
    # median keeps it from moving the speed (the measured value above is exact)
    assert job.skipped_lines == WARMUP_LINES + 1 and job.steady_lines >= 20
    assert result.factors == {"ml.p4d.24xlarge": pytest.approx(0.75, rel=1e-3)}
    stored = json.loads(account.path(env).read_text())
    assert stored["samples"][0]["job"] == plan.job_name
    later = api.build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good"], env=env), env=env, region="us-west-2")
    assert later.performance.tokens_per_second_per_gpu == pytest.approx(0.75 * predicted, rel=1e-3)
    assert later.performance.calibration.startswith("this account's factor 0.750 for ml.p4d.24xlarge from 1")
    assert later.to_dict()["performance"]["calibration"] == later.performance.calibration


def test_two_jobs_make_one_factor_their_geometric_mean(moto_world, monkeypatch, tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    names = []
    for ratio, sets in ((0.5, ()), (2.0, ("training.batch_size=2",))):
        plan, clients = launch_finished(moto_world, monkeypatch, 0.0, *sets)
        emulator.scenario.get(plan.job_name).tokens_per_s = (
            ratio * plan.performance.tokens_per_second_per_gpu * plan.world_size)
        names.append(plan.job_name)
    result = api.calibrate(names, clients=clients, env=env)
    assert [round(j.ratio, 2) for j in result.jobs] == [0.5, 2.0]
    assert result.factors["ml.p4d.24xlarge"] == pytest.approx(1.0, rel=1e-3)


def test_a_running_job_and_a_job_without_progress_lines_store_nothing(moto_world, monkeypatch, tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    # the job that ended an hour ago first: the emulator's clock may not go back past a job it has started
    quiet, clients = launch_finished(moto_world, monkeypatch, 1000.0, "training.batch_size=2")
    emulator.scenario.get(quiet.job_name).training = 3.0  # three lines: all warm-up
    running, clients = launch_finished(moto_world, monkeypatch, 1000.0, ago=5.0)
    with pytest.raises(UsageError, match=f"^{running.job_name} is InProgress: calibrate reads finished jobs"):
        api.calibrate([running.job_name], clients=clients, env=env)
    with pytest.raises(UsageError, match="steady progress lines"):
        api.calibrate([quiet.job_name], clients=clients, env=env)
    assert not account.path(env).exists()


def test_a_job_whose_stored_spec_is_missing_invalid_or_does_not_divide_its_gpus_is_refused(moto_world, monkeypatch,
                                                                                           tmp_path):
    from launcher.jobs.stored import read_files
    from launcher.render.source import tarball

    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    plan, clients = launch_finished(moto_world, monkeypatch, 1000.0)
    s3 = moto_world.session.client("s3")
    bucket, key = plan.source.uri[5:].split("/", 1)
    files = read_files(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    spec = json.loads(files.pop("spec.json"))
    s3.put_object(Bucket=bucket, Key=key, Body=tarball(files))
    with pytest.raises(UsageError, match="did not store its spec: it cannot be predicted again"):
        api.calibrate([plan.job_name], clients=clients, env=env)
    for degree, why in (("two", "stored spec does not validate with this smp-launch: Input should be a valid integer"),
                        (3, "layout does not divide its GPUs: there is nothing to compare its speed with")):
        spec["smp"]["tensor_parallel_degree"] = degree
        s3.put_object(Bucket=bucket, Key=key, Body=tarball({**files, "spec.json": json.dumps(spec)}))
        with pytest.raises(UsageError, match=f"^{plan.job_name}('s)? {why}"):
            api.calibrate([plan.job_name], clients=clients, env=env)
    assert not account.path(env).exists()


def test_the_cli_prints_the_table_and_json(moto_world, monkeypatch, tmp_path, run_cli):
    plan, _ = launch_finished(moto_world, monkeypatch, 0.0)
    emulator.scenario.get(plan.job_name).tokens_per_s = plan.performance.tokens_per_second_per_gpu * plan.world_size
    state = {"XDG_STATE_HOME": str(tmp_path / "cli-state"), "AWS_REGION": "us-west-2"}
    r = run_cli("calibrate", plan.job_name, "--output", "json", env=state)
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["jobs"][0]["ratio"] == pytest.approx(1.0, rel=1e-3) and data["factors"]["ml.p4d.24xlarge"]
    r = run_cli("calibrate", plan.job_name, env=state)
    assert r.code == 0 and "later plans multiply the published prediction by 1.000" in r.out
    r = run_cli("calibrate", "no-such-job", env=state)
    assert r.code != 0 and len(r.err.strip().splitlines()) == 1
    from launcher.core.state import record_submitted

    record_submitted(plan.job_name, "us-west-2", env=state)  # `latest` is looked for in its own region
    r = run_cli("calibrate", "latest", "--output", "json", env={**state, "AWS_REGION": "eu-west-1"})
    assert r.code == 0 and json.loads(r.out)["jobs"][0]["job"] == plan.job_name, r.err


def test_a_job_a_fallback_moved_is_predicted_on_the_instance_type_it_ran_on(moto_world, monkeypatch, tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    plan, clients = launch_finished(moto_world, monkeypatch, 0.0, "cluster.instance_type=ml.p4de.24xlarge")
    emulator.scenario.get(plan.job_name).tokens_per_s = plan.performance.tokens_per_second_per_gpu * plan.world_size
    from launcher.orchestrate import provenance

    read = provenance.stored_job

    def as_if_the_spec_preferred_p4d(clients, job):  # the spec's first choice; SageMaker ran p4de
        stored = read(clients, job)
        spec = {**stored.spec, "cluster": {**stored.spec["cluster"], "instance_type": "ml.p4d.24xlarge"}}
        return dataclasses.replace(stored, spec=spec)

    monkeypatch.setattr(provenance, "stored_job", as_if_the_spec_preferred_p4d)
    (job,) = api.calibrate([plan.job_name], clients=clients, env=env).jobs
    assert job.instance_type == "ml.p4de.24xlarge" and job.ratio == pytest.approx(1.0, rel=1e-3)
