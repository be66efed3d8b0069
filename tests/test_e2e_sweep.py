"""Sweeps end to end on the lifecycle emulator (virtual clock): refusals before anything starts, at most
N jobs running, every job ending, a resubmission from the on_failure hook, one upload per distinct source."""
import json
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

import emulator
import launcher.orchestrate.queue
import launcher.plan.sweep
from emulator import scenario
from launcher.orchestrate.queue import run_queue
from launcher.plan.build import build_plan
from launcher.spec import load_spec
from tests.aws_setup import REGION
from tests.conftest import JOBS

SPEC = str(JOBS / "llama7b.yaml")
SETS = ("--set", "role=Good", "--set", "smp.hybrid_shard_degree=0")
GRID = ("--sweep", "smp.tensor_parallel_degree=1,2,3", "--sweep", "training.batch_size=2,4,64")
QUICK = {"starting": 2.0, "downloading": 1.0, "training": 5.0, "uploading": 1.0, "decoy": False}


@pytest.fixture
def jobs_run(clock, monkeypatch):
    """Emulated jobs that take 9 s of virtual time; `log` records plans built, jobs created and, after each
    creation and each poll interval, which jobs the emulator has InProgress."""
    log: list[tuple[str, object]] = []

    def in_progress() -> list[str]:
        return sorted(j.name for j in scenario.created_jobs(REGION)
                      if j.state(emulator.now())["training_job_status"] == "InProgress")

    real_prepare, real_create = launcher.plan.sweep.prepare, scenario.on_create

    def prepare(expansion, **kw):
        log.append(("planned", expansion.index))
        return real_prepare(expansion, **kw)

    def on_create(name, *args):
        job = real_create(name, *args)
        log.append(("created", name))
        log.append(("in_progress", in_progress()))
        return job

    def sleep(seconds):
        clock.sleep(seconds)
        log.append(("in_progress", in_progress()))

    monkeypatch.setattr(launcher.plan.sweep, "prepare", prepare)
    monkeypatch.setattr(scenario, "on_create", on_create)
    monkeypatch.setattr(launcher.orchestrate.queue, "time", SimpleNamespace(sleep=sleep))  # the queue's polls only
    emulator.set_default(QUICK)
    yield log
    emulator.set_default({})


def test_a_3x3_sweep_refuses_impossible_layouts_first_and_never_runs_more_than_2(moto_world, run_cli, jobs_run):
    r = run_cli("submit", SPEC, *SETS, *GRID, "--max-concurrent", "2", "--wait", "--interval", "0.5",
                "--output", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    ok = [d for d in data if d["status"] == "ok"]
    refused = [d for d in data if d["status"] == "refused"]
    assert len(ok) == 4 and len(refused) == 5
    # every plan was built and advised before the first CreateTrainingJob
    kinds = [k for k, _ in jobs_run]
    assert kinds.index("created") == 9 and kinds[:9] == ["planned"] * 9
    # only the plans that can work were created, best first
    created = [name for kind, name in jobs_run if kind == "created"]
    assert created == [d["job_name"] for d in sorted(ok, key=lambda d: d["rank"])]
    assert all(d["state"] == "not_started" and not d.get("jobs") for d in refused)
    listed = moto_world.session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    assert sorted(j["TrainingJobName"] for j in listed) == sorted(created)
    # never more than 2 InProgress at once, and 2 at some point; every job ended Completed
    counts = [len(names) for kind, names in jobs_run if kind == "in_progress"]
    assert max(counts) == 2 and counts[-1] == 0
    assert all(d["state"] == "started" and d["job_status"]["status"] == "Completed" for d in ok)
    assert {j["TrainingJobStatus"] for j in listed} == {"Completed"}


def test_without_wait_the_queue_returns_once_the_last_plan_started(moto_world, run_cli, jobs_run):
    r = run_cli("submit", SPEC, "--set", "role=Good", "--sweep", "training.batch_size=1,2,4", "--max-concurrent", "1",
                "--interval", "0.5")
    assert r.code == 0, r.err
    assert r.out.count("started llama2-7b-") == 3 and r.out.count(" Completed (") == 2
    counts = [len(names) for kind, names in jobs_run if kind == "in_progress"]
    assert max(counts) == 1 and counts[-1] == 1  # the last job is still running when submit returns


NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)


def test_a_plan_the_on_failure_hook_returns_is_submitted_in_the_failed_ones_place(moto_world, clock, jobs_run):
    loaded = load_spec(SPEC, ["role=Good"])
    first, other = build_plan(loaded, now=NOW), build_plan(loaded, now=NOW + timedelta(milliseconds=1))
    emulator.expect(emulator.EmulatedJob(first.job_name, hosts=1, outcome="Failed", **QUICK))
    retry = build_plan(loaded, now=NOW + timedelta(seconds=5))
    seen = []

    def on_failure(plan, status):
        seen.append((plan.job_name, status.status, status.failure_reason))
        return retry if plan is first else None

    events = []
    runs = run_queue([first, other], max_concurrent=1, interval=0.5, on_failure=on_failure, on_event=events.append)
    assert seen == [(first.job_name, "Failed", scenario.DEFAULT_FAILURE)]
    assert [s.job_name for s in runs[0].submissions] == [first.job_name, retry.job_name]
    assert runs[0].status.status == "Completed" and runs[1].status.status == "Completed"
    assert [(e.kind, e.job_name) for e in events if e.kind in ("started", "resubmit")] == [
        ("started", first.job_name), ("resubmit", retry.job_name), ("started", retry.job_name),
        ("started", other.job_name)]  # the resubmission keeps its place ahead of the queue
    assert runs[0].to_dict()["jobs"] == [first.job_name, retry.job_name]


def test_equal_sources_are_uploaded_once(moto_world, run_cli):
    r = run_cli("submit", SPEC, SPEC, "--set", "role=Good", "--sweep", "training.batch_size=2,4", "--output", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert len(data) == 4 and all(d["started"] for d in data)
    assert len({d["job_name"] for d in data}) == 4 and len({d["source_uri"] for d in data}) == 2
    puts = sum(d["submission"]["aws_calls"].count("s3.PutObject") for d in data)
    creates = sum(d["submission"]["aws_calls"].count("sagemaker.CreateTrainingJob") for d in data)
    assert puts == 2 and creates == 4
    objects = moto_world.session.client("s3").list_objects_v2(Bucket=data[0]["source_uri"][5:].split("/")[0])
    assert sum(o["Key"].endswith("sourcedir.tar.gz") for o in objects["Contents"]) == 2


# -- the installed CLI against a moto server, in real time ------------------------------------------------

def test_the_cli_never_has_more_than_2_running_and_every_job_ends(server_cli, clock, monkeypatch):
    """A driver reads the server's job states while `submit --max-concurrent 2 --wait` runs, and it alone moves
    the jobs' clock (conftest's `clock`), so the result does not depend on how fast the machine is.

    The clock stands still until two jobs exist, and after each job is created it moves only once the CLI has
    polled (DescribeTrainingJob) since: a job cannot end before the CLI could start the second, and a CLI that
    started a third job before one ended would be seen with 3 InProgress. The server runs in this process and
    answers from the emulator's scripts (emulator/scenario.py), so the driver reads those directly: the state
    each job's DescribeTrainingJob gives at that instant."""
    import threading
    import time

    from moto.sagemaker.models import SageMakerModelBackend

    from tests.aws_setup import create_world

    create_world(server_cli.session)
    client = server_cli.session.client("sagemaker")
    clock.t = time.time()  # virtual, but near the real date the CLI stamps its plans with
    polls: list[None] = []  # one per DescribeTrainingJob the server answered
    describe = SageMakerModelBackend.describe_training_job

    def counted(self, *args, **kwargs):
        polls.append(None)
        return describe(self, *args, **kwargs)

    monkeypatch.setattr(SageMakerModelBackend, "describe_training_job", counted)
    samples: list[dict[str, str]] = []
    done = threading.Event()

    def drive():
        created, polled = 0, 0
        while not done.is_set():
            jobs = scenario.created_jobs(REGION)
            samples.append({j.name: j.state(emulator.now())["training_job_status"] for j in jobs})
            if len(jobs) != created:  # a new job: the next step waits for a poll made after it
                created, polled = len(jobs), len(polls)
            elif created >= 2 and len(polls) > polled:
                polled = len(polls)
                clock.sleep(0.5)
            done.wait(0.02)

    emulator.set_default({"starting": 0.3, "downloading": 0.2, "training": 2.3, "uploading": 0.2, "decoy": False})
    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    try:
        out = server_cli.cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--sweep",
                             "training.batch_size=1,2,4", "--max-concurrent", "2", "--wait", "--interval", "0.1",
                             "--output", "json", timeout=600)
    finally:
        done.set()
        driver.join()
        emulator.set_default({})
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [d["job_status"]["status"] for d in data] == ["Completed"] * 3
    running = [sum(s == "InProgress" for s in sample.values()) for sample in samples]
    assert max(running) == 2, running
    final = client.list_training_jobs()["TrainingJobSummaries"]
    assert sorted(j["TrainingJobName"] for j in final) == sorted(d["job_name"] for d in data)
    assert {j["TrainingJobStatus"] for j in final} == {"Completed"}


def test_an_account_check_that_fails_for_one_plan_starts_none(moto_world, run_cli):
    """The second plan's bucket does not exist: found before the first plan's job is created."""
    from tests.aws_setup import BUCKET

    r = run_cli("submit", SPEC, "--set", "role=Good", "--sweep",
                f"output.path=s3://{BUCKET}/a,s3://no-such-bucket-13a/b", "--output", "json")
    assert r.code == 3 and "bucket no-such-bucket-13a does not exist" in r.err
    data = json.loads(r.out)
    assert [d["state"] for d in data] == ["not_started", "error"] and not any(d["started"] for d in data)
    assert moto_world.session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
    assert "Contents" not in moto_world.session.client("s3").list_objects_v2(Bucket=BUCKET)  # nothing uploaded either
