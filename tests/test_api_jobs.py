"""The job half of the Python API (launcher.status / wait / stop / list_jobs) against emulated jobs.

The jobs have phases of a few tens of milliseconds, so `wait` is exercised with a tiny interval the way
a pipeline would call it, and the whole file takes about a second. Where a test measures how long `wait`
took, the jobs, its polls and its deadline run on one virtual clock (`virtual_wait`).
"""
import json
import time

import boto3
import pytest

import emulator
import launcher
from launcher.jobs.status import JobStatus, JobSummary, StopResult

QUICK = dict(starting=0.05, downloading=0.05, training=0.3, uploading=0.05, decoy=False)


@pytest.fixture
def sm():
    with emulator.mocked():
        yield boto3.client("sagemaker", region_name="us-west-2")
    emulator.set_clock(None)


@pytest.fixture
def clients():
    return launcher.connect(region="us-west-2")


@pytest.fixture
def virtual_wait(clock, monkeypatch):
    """conftest's virtual clock drives the jobs, and `wait`'s sleeps and deadline: a poll's sleep moves the jobs
    on, and the time `wait` took is the virtual seconds it slept (the machine's speed does not enter it)."""
    from types import SimpleNamespace

    import launcher.jobs.status

    monkeypatch.setattr(launcher.jobs.status, "time", SimpleNamespace(sleep=clock.sleep, monotonic=lambda: clock.slept))
    return lambda: clock.slept


def test_the_job_types_are_exported_lazily():
    assert launcher.JobStatus is JobStatus and launcher.JobSummary is JobSummary
    assert {"JobStatus", "JobSummary"} <= set(launcher.__all__)


def test_wait_returns_each_jobs_outcome_in_the_order_given(sm, clients, virtual_wait):
    for job in (emulator.EmulatedJob("w-done", **QUICK), emulator.EmulatedJob("w-failed", outcome="Failed", **QUICK),
                emulator.EmulatedJob("w-stopped", stop_after=0.2, stopping=0.05, **QUICK)):
        emulator.add_job(job, sm)
    started = virtual_wait()
    done = launcher.wait(["w-failed", "w-done", "w-stopped", "w-done"], interval=0.02, clients=clients)
    assert virtual_wait() - started < 10
    assert [(s.job_name, s.status, s.terminal, s.exit_code) for s in done] == [
        ("w-failed", "Failed", True, 1), ("w-done", "Completed", True, 0), ("w-stopped", "Stopped", True, 5)]
    assert all(isinstance(s, JobStatus) for s in done)
    assert "CUDA out of memory" in done[0].failure_reason and done[1].failure_reason is None
    assert [t.status for t in done[1].transitions] == ["Starting", "Downloading", "Training", "Uploading",
                                                       "Completed"]


def test_wait_gives_up_at_the_timeout_with_the_last_status_seen(sm, clients, virtual_wait):
    emulator.add_job(emulator.EmulatedJob("w-quick", **QUICK), sm)
    emulator.add_job(emulator.EmulatedJob("w-long", **{**QUICK, "training": 600}), sm)
    started = virtual_wait()
    seen = launcher.wait(["w-quick", "w-long"], timeout=0.8, interval=0.05, clients=clients)
    took = virtual_wait() - started
    assert 0.8 <= took < 8, took
    assert [(s.job_name, s.status, s.terminal) for s in seen] == [("w-quick", "Completed", True),
                                                                   ("w-long", "InProgress", False)]
    assert seen[1].secondary_status == "Training" and seen[1].exit_code == 0


def test_wait_on_an_unknown_job_raises_job_not_found(sm, clients):
    with pytest.raises(launcher.JobNotFound) as err:
        launcher.wait(["nobody"], interval=0.01, clients=clients)
    assert err.value.exit_code == 2 and "no training job named 'nobody'" in str(err.value)


def test_wait_polls_every_interval_until_done():
    """On an injected clock: one describe per pending job per poll, sleeping `interval` between polls."""
    from launcher.jobs import status as jobs

    statuses = {"a": ["InProgress", "InProgress", "Completed"], "b": ["InProgress", "Failed"]}
    calls, slept = [], []

    class FakeSageMaker:
        def describe_training_job(self, TrainingJobName):
            calls.append(TrainingJobName)
            status = statuses[TrainingJobName].pop(0)
            return {"TrainingJobName": TrainingJobName, "TrainingJobStatus": status,
                    "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1}}

    fake = jobs.Clients(overrides={"sagemaker": FakeSageMaker()})
    done = jobs.wait(fake, ["a", "b"], interval=7.0, sleep=slept.append)
    assert calls == ["a", "b", "a", "b", "a"] and slept == [7.0, 7.0]
    assert [s.status for s in done] == ["Completed", "Failed"]


def test_status_to_dict_is_the_status_commands_json(sm, clients, run_cli):
    emulator.add_job(emulator.EmulatedJob("s-1", hosts=3, failure_reason="bad \x1b[2J thing", outcome="Failed",
                                          **QUICK), sm)
    final = launcher.wait(["s-1"], interval=0.02, clients=clients)[0]
    assert final.failure_reason == "bad \\x1b[2J thing"  # sanitised in the object, not only when printed
    r = run_cli("status", "s-1", "--output", "json")
    assert r.code == 1 and json.loads(r.out) == final.to_dict() == launcher.status("s-1", clients=clients).to_dict()
    with pytest.raises(AttributeError):
        final.status = "Completed"  # frozen


def test_list_jobs_returns_summaries(sm, clients, run_cli):
    held = {**QUICK, "starting": 600, "training": 600}  # one status for the whole test: API and CLI agree
    emulator.add_job(emulator.EmulatedJob("l-run", **held), sm)
    emulator.add_job(emulator.EmulatedJob("l-other", **held), sm, managed=False)
    rows = launcher.list_jobs(clients=clients)
    assert [type(r) for r in rows] == [JobSummary] and rows[0].job_name == "l-run"
    assert (rows[0].instance_count, rows[0].status) == (2, "InProgress")
    assert json.loads(run_cli("list", "--output", "json").out) == [r.to_dict() for r in rows]


def test_stop_returns_the_status_after_the_request(sm, clients):
    emulator.add_job(emulator.EmulatedJob("st-1", **{**QUICK, "training": 600}), sm)
    after = launcher.stop("st-1", clients=clients)
    assert isinstance(after, JobStatus) and after.status == "Stopping"
    from launcher.jobs import status as jobs

    again = jobs.stop(clients, "st-1", yes=True, confirm=None)
    assert isinstance(again, StopResult) and again.stopped is False and "nothing to stop" in again.message


def test_metrics_are_typed_and_their_dict_is_the_commands_json(sm, clients, run_cli):
    from launcher.jobs import metrics

    emulator.set_clock(lambda: time.time() - 900)
    try:
        emulator.add_job(emulator.EmulatedJob("m-1", hosts=2, training=3600, decoy=False), sm)
    finally:
        emulator.set_clock(None)
    data = launcher.metrics("m-1", since=600, clients=clients)
    assert launcher.JobMetrics is metrics.JobMetrics
    assert isinstance(data, metrics.JobMetrics) and [h.host for h in data.hosts] == ["algo-1", "algo-2"]
    gpu = data.hosts[0].series["GPUUtilization"]
    assert gpu.points and gpu.min <= gpu.mean <= gpu.max and gpu.values == [v for _, v in gpu.points]
    shown = json.loads(run_cli("metrics", "m-1", "--since", "10m", "--output", "json").out)
    as_dict = data.to_dict()  # the same shape; the values may differ by a minute's point between the two reads
    assert shown.keys() == as_dict.keys() and shown["units"] == as_dict["units"] == dict(data.units)
    assert [(h["host"], list(h["series"])) for h in shown["hosts"]] == [(h["host"], list(h["series"]))
                                                                       for h in as_dict["hosts"]]
    assert as_dict["hosts"][0]["series"]["GPUUtilization"]["points"] == [list(p) for p in gpu.points]
    assert list(data.labels) == list(data.units) and data.labels["GPUUtilization"]
    assert gpu.sparkline() == metrics.sparkline(gpu.values)


def test_logs_yields_every_hosts_lines_typed(sm, clients):
    emulator.add_job(emulator.EmulatedJob("l-done", hosts=3, line_interval=0.05, **QUICK), sm)
    launcher.wait(["l-done"], interval=0.02, clients=clients)
    lines = launcher.logs("l-done", clients=clients)
    got = list(lines)
    assert got and all(isinstance(line, launcher.LogLine) for line in got)
    assert {line.host for line in got} == {1, 2, 3}
    assert [line.timestamp for line in got] == sorted(line.timestamp for line in got)
    assert len({line.event_id for line in got}) == len(got)  # each line once
    assert lines.exit_code == 0


def test_resolve_job_reads_the_record_of_the_last_submit(tmp_path, monkeypatch):
    from launcher.core.state import record_submitted

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    with pytest.raises(launcher.UsageError, match="no job has been submitted"):
        launcher.resolve_job("latest")
    record_submitted("llama-1", "eu-west-1")
    assert launcher.resolve_job("latest") == ("llama-1", "eu-west-1")
    assert launcher.resolve_job("latest", "us-east-1") == ("llama-1", "us-east-1")
    assert launcher.resolve_job("other-job") == ("other-job", None)


def test_the_job_functions_use_the_clients_they_are_given(sm):
    """A caller's clients decide the account and region: a job in eu-west-1 is found through eu-west-1 clients
    while the environment names us-west-2 (where no such job exists)."""
    from launcher.jobs.status import JobNotFound

    eu = launcher.connect(region="eu-west-1")
    emulator.add_job(emulator.EmulatedJob("eu-1", **{**QUICK, "training": 600}), eu.sagemaker)
    with pytest.raises(JobNotFound):
        launcher.status("eu-1", diagnose=False)  # no clients: the environment's region
    assert launcher.status("eu-1", clients=eu, diagnose=False).job_name == "eu-1"
    assert [r.job_name for r in launcher.list_jobs(clients=eu)] == ["eu-1"]
    assert launcher.list_jobs() == []
    assert [h.host for h in launcher.metrics("eu-1", since=600, clients=eu).hosts] == ["algo-1", "algo-2"]
    assert launcher.stop("eu-1", clients=eu).status == "Stopping"
    assert launcher.wait(["eu-1"], interval=0.02, clients=eu)[0].status == "Stopped"


def test_following_a_job_no_one_knows_raises_job_not_found(sm, clients):
    """Neither SageMaker nor any Batch queue holds it: the caller learns so, with no line handed on."""
    from launcher.jobs.status import JobNotFound

    lines = []
    with pytest.raises(JobNotFound, match="no training job named 'nobody-1'"):
        launcher.follow("nobody-1", until_end=False, on_line=lines.append, clients=clients)
    assert lines == []


def test_list_jobs_gives_the_newest_first(sm, clients):
    emulator.set_clock(lambda: time.time() - 7200)
    try:
        emulator.add_job(emulator.EmulatedJob("older-1", **{**QUICK, "training": 600}), sm)
    finally:
        emulator.set_clock(None)
    emulator.add_job(emulator.EmulatedJob("newer-1", **{**QUICK, "training": 600}), sm)
    rows = launcher.list_jobs(clients=clients)
    assert [r.job_name for r in rows] == ["newer-1", "older-1"] and rows[0].created > rows[1].created


def test_stopping_or_measuring_a_job_no_one_knows_raises_job_not_found(sm, clients):
    """Neither SageMaker nor any Batch queue holds it: stop and metrics say so, as status does."""
    from launcher.jobs.status import JobNotFound

    with pytest.raises(JobNotFound, match="no training job named 'nobody-2'") as err:
        launcher.stop("nobody-2", clients=clients)
    assert err.value.exit_code == 2
    with pytest.raises(JobNotFound, match="no training job named 'nobody-3'") as err:
        launcher.metrics("nobody-3", since=600, clients=clients)
    assert err.value.exit_code == 2
