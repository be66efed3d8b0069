"""`stop NAME` stops only what smp-launch started (the smp-launch:managed tag it puts on every job, as `list`
and `rerun` read it); another's job is named with what is known of whose it is, and stopped only with
`--foreign`. A job whose tags cannot be read is not assumed to be ours either."""
import json

import boto3
import pytest

import emulator
import launcher
from launcher.core.errors import UsageError
from launcher.jobs import status as jobs


@pytest.fixture
def sm():
    with emulator.mocked():
        yield boto3.client("sagemaker", region_name="us-west-2")
    emulator.set_clock(None)


def state(sm, name: str) -> str:
    return sm.describe_training_job(TrainingJobName=name)["TrainingJobStatus"]


def test_a_job_smp_launch_did_not_start_is_not_stopped_without_a_flag(sm, run_cli):
    emulator.add_job(emulator.EmulatedJob("theirs-1", training=600), sm, managed=False)
    r = run_cli("stop", "theirs-1", "--yes")
    assert r.code == 2 and "Traceback" not in r.err
    (line,) = r.err.strip().splitlines()
    assert "theirs-1 was not started by smp-launch" in line and "smp-launch:managed" in line
    assert "role SMPTrainingRole" in line and "team=nlp" in line and "--foreign" in line
    assert state(sm, "theirs-1") == "InProgress"


def test_foreign_stops_it(sm, run_cli):
    emulator.add_job(emulator.EmulatedJob("theirs-2", training=600), sm, managed=False)
    r = run_cli("stop", "theirs-2", "--yes", "--foreign", "--output", "json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["stopped"] is True and state(sm, "theirs-2") == "Stopping"


def test_our_own_job_needs_no_flag(sm, run_cli):
    emulator.add_job(emulator.EmulatedJob("ours-1", training=600), sm)
    assert run_cli("stop", "ours-1", "--yes").code == 0 and state(sm, "ours-1") == "Stopping"


def test_the_api_refuses_the_same_way(sm):
    emulator.add_job(emulator.EmulatedJob("theirs-3", training=600), sm, managed=False)
    with pytest.raises(UsageError, match="was not started by smp-launch"):
        launcher.stop("theirs-3")
    assert state(sm, "theirs-3") == "InProgress"
    assert launcher.stop("theirs-3", foreign=True).status == "Stopping"


def test_a_tuning_jobs_training_job_says_which_tuning_job_started_it(sm, monkeypatch):
    emulator.add_job(emulator.EmulatedJob("theirs-4", training=600), sm, managed=False)
    clients = jobs.Clients()
    real = jobs.describe

    def with_tuner(c, name):
        arn = "arn:aws:sagemaker:us-west-2:123456789012:hyper-parameter-tuning-job/hpo-7"
        return {**real(c, name), "TuningJobArn": arn}

    monkeypatch.setattr(jobs, "describe", with_tuner)
    with pytest.raises(UsageError) as err:
        jobs.stop(clients, "theirs-4", yes=True, confirm=None)
    assert "started by tuning job hpo-7" in str(err.value)


def test_tags_that_cannot_be_read_are_not_taken_for_ours(sm):
    from tests.conftest import refusing

    emulator.add_job(emulator.EmulatedJob("ours-2", training=600), sm)
    clients = refusing(jobs.Clients(), "sagemaker.ListTags")
    with pytest.raises(UsageError) as err:
        jobs.stop(clients, "ours-2", yes=True, confirm=None)
    assert "cannot tell whether smp-launch started ours-2" in str(err.value) and "--foreign" in str(err.value)
    assert state(sm, "ours-2") == "InProgress"
    assert jobs.stop(clients, "ours-2", yes=True, confirm=None, foreign=True).stopped


def test_an_ended_job_is_left_alone_whoever_started_it(sm, run_cli):
    emulator.add_job(emulator.EmulatedJob("theirs-5", training=0.0, starting=0.0, downloading=0.0,
                                          uploading=0.0), sm, managed=False)
    emulator.set_clock(lambda: 10**10)
    r = run_cli("stop", "theirs-5", "--yes")
    assert r.code == 0 and "nothing to stop" in r.err


@pytest.fixture
def batch_world(monkeypatch):
    from tests.batch_world import create_batch_world

    for k, v in emulator.FAKE_CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    with emulator.mocked():
        session = boto3.Session(region_name="us-west-2")
        create_batch_world(session)
        yield session


def test_a_queued_job_smp_launch_did_not_queue_is_refused_too(batch_world, clock):
    from emulator import scenario
    from launcher.core.aws import Clients
    from tests.test_batch import QUICK, _submit

    scenario.set_default(QUICK)
    b = batch_world.client("batch")
    _submit(b, "their-queued")
    clients = Clients(region="us-west-2")
    with pytest.raises(UsageError, match="their-queued was not queued by smp-launch"):
        launcher.stop("their-queued", clients=clients)
    assert launcher.status("their-queued", clients=clients).queue.status not in ("FAILED",)
    launcher.stop("their-queued", clients=clients, foreign=True)
    clock.sleep(5.0)
    assert launcher.status("their-queued", clients=clients).queue.status == "FAILED"
    scenario.set_default({})
