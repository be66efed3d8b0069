"""The job lifecycle emulator itself: phases over time, StopTrainingJob, host streams, throttling, patches."""
import time

import boto3
import pytest

import emulator
from emulator import core


@pytest.fixture
def sm(clock):
    with emulator.mocked():
        yield boto3.client("sagemaker", region_name="us-west-2")


def status(sm, name):
    d = sm.describe_training_job(TrainingJobName=name)
    return d["TrainingJobStatus"], d["SecondaryStatus"]


def test_a_job_moves_through_its_phases(sm, clock):
    emulator.add_job(emulator.EmulatedJob("life", starting=2, downloading=1, training=8, uploading=1), sm)
    seen = []
    for _ in range(14):
        seen.append(status(sm, "life"))
        clock.t += 1
    assert seen[0] == ("InProgress", "Starting") and seen[2] == ("InProgress", "Downloading")
    assert seen[3] == ("InProgress", "Training") and seen[11] == ("InProgress", "Uploading")
    assert seen[12] == ("Completed", "Completed")
    d = sm.describe_training_job(TrainingJobName="life")
    assert d["BillableTimeInSeconds"] == 10 and (d["TrainingEndTime"] - d["TrainingStartTime"]).seconds == 10
    assert [t["Status"] for t in d["SecondaryStatusTransitions"]] == ["Starting", "Downloading", "Training",
                                                                     "Uploading", "Completed"]


def test_failed_jobs_skip_uploading_and_say_why(sm, clock):
    emulator.add_job(emulator.EmulatedJob("boom", outcome="Failed", failure_reason="AlgorithmError: boom"), sm)
    clock.t += 60
    d = sm.describe_training_job(TrainingJobName="boom")
    assert d["TrainingJobStatus"] == "Failed" and d["FailureReason"] == "AlgorithmError: boom"
    assert "Uploading" not in [t["Status"] for t in d["SecondaryStatusTransitions"]]


def test_stop_training_job(sm, clock):
    emulator.add_job(emulator.EmulatedJob("halt", training=600, stopping=2), sm)
    clock.t += 10
    sm.stop_training_job(TrainingJobName="halt")
    assert status(sm, "halt") == ("Stopping", "Stopping")
    clock.t += 2
    assert status(sm, "halt") == ("Stopped", "Stopped")
    with pytest.raises(sm.exceptions.ClientError, match="in status Stopped"):
        sm.stop_training_job(TrainingJobName="halt")
    with pytest.raises(sm.exceptions.ClientError, match="Could not find training job"):
        sm.stop_training_job(TrainingJobName="nope")


def test_hosts_write_streams_some_late_and_a_decoy_shares_the_prefix(sm, clock):
    emulator.add_job(emulator.EmulatedJob("hosts", hosts=3, late_hosts={2: 5.0}, training=20), sm)
    logs = boto3.client("logs", region_name="us-west-2")
    clock.t += 3 + 2.5
    names = lambda: {s["logStreamName"] for s in logs.describe_log_streams(  # noqa: E731
        logGroupName="/aws/sagemaker/TrainingJobs")["logStreams"]}
    early = names()
    assert early == {"hosts/algo-1-1800000003", "hosts/algo-3-1800000003", "hosts-decoy/algo-1-1800000003"}
    clock.t += 5
    assert names() - early == {"hosts/algo-2-1800000008"}


def test_backdated_lines_arrive_late_with_their_old_timestamp(sm, clock):
    job = emulator.add_job(emulator.EmulatedJob("late", hosts=1, training=20, backdate_every=2,
                                                backdate_seconds=4.0, decoy=False), sm)
    logs = boto3.client("logs", region_name="us-west-2")
    clock.t += 3 + 4.5  # lines 0-4 are written; 1 and 3 are ingested 4 s late
    events = logs.filter_log_events(logGroupName="/aws/sagemaker/TrainingJobs", interleaved=True)["events"]
    assert [e["message"] for e in events] == [job.line(1, i, False) for i in (0, 2, 4)]
    clock.t += 4
    events = logs.filter_log_events(logGroupName="/aws/sagemaker/TrainingJobs", interleaved=True)["events"]
    late = [e for e in events if e["message"] == job.line(1, 1, False)][0]
    assert late["ingestionTime"] - late["timestamp"] == 4000


def test_throttling_is_deterministic_for_a_seed():
    a, b = emulator.Throttle(0.3, seed=5), emulator.Throttle(0.3, seed=5)
    decisions = [a.decide("FilterLogEvents") for _ in range(200)]
    assert decisions == [b.decide("FilterLogEvents") for _ in range(200)]
    assert 40 <= sum(decisions) <= 80 and a.throttled == sum(decisions)
    assert a.decide("DescribeTrainingJob") is False and a.calls == 200  # not a Logs read: never counted


def test_install_is_idempotent_and_takes_new_patches():
    from moto.sagemaker.models import SageMakerModelBackend

    emulator.install()
    wrapped = SageMakerModelBackend.describe_training_job
    emulator.install()
    assert SageMakerModelBackend.describe_training_job is wrapped
    applied = []
    core.register_patch("test:late-patch", lambda: applied.append(1))
    core.register_patch("test:late-patch", lambda: applied.append(2))
    emulator.install()
    assert applied == [1]


def test_the_server_runs_the_same_lifecycle(clock):
    with emulator.server() as url:
        sm = boto3.client("sagemaker", endpoint_url=url, region_name="us-west-2",
                          aws_access_key_id="x", aws_secret_access_key="x")
        emulator.add_job(emulator.EmulatedJob("served", training=5), sm)
        first = status(sm, "served")
        clock.t += 100
        assert (first, status(sm, "served")) == (("InProgress", "Starting"), ("Completed", "Completed"))
        emulator.reset_server(url)
        assert sm.list_training_jobs()["TrainingJobSummaries"] == []


def test_filter_log_events_pages_like_cloudwatch_10000_events_or_1_mb(sm, clock):
    logs = boto3.client("logs", region_name="us-west-2")
    group = "/aws/sagemaker/TrainingJobs"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="s/algo-1-1")
    logs.create_log_stream(logGroupName=group, logStreamName="s/algo-2-1")
    t0 = int(time.time() * 1000) - 3_600_000  # PutLogEvents refuses events from more than 2 h ahead
    for stream, n, size in (("s/algo-1-1", 12_000, 10), ("s/algo-2-1", 300, 9_974)):
        logs.put_log_events(logGroupName=group, logStreamName=stream,
                            logEvents=[{"timestamp": t0 + i, "message": "x" * size} for i in range(n)])
    small = logs.filter_log_events(logGroupName=group, logStreamNames=["s/algo-1-1"])
    assert len(small["events"]) == 10_000 and small["nextToken"]  # the event cap
    big = logs.filter_log_events(logGroupName=group, logStreamNames=["s/algo-2-1"])
    assert len(big["events"]) == 1_048_576 // 10_000 and big["nextToken"]  # the 1 MB cap (message + 26 bytes)
    seen, token, pages = [], None, 0
    while True:
        page = logs.filter_log_events(logGroupName=group, **({"nextToken": token} if token else {}))
        seen += page["events"]
        pages += 1
        token = page.get("nextToken")
        if not token:
            break
    assert len(seen) == 12_300 and len({e["eventId"] for e in seen}) == 12_300
    assert [e["timestamp"] for e in seen] == sorted(e["timestamp"] for e in seen) and pages >= 3
    window = logs.filter_log_events(logGroupName=group, startTime=t0 + 10, endTime=t0 + 19)["events"]
    assert {e["timestamp"] for e in window} == set(range(t0 + 10, t0 + 20))  # both ends inclusive


def test_lag_is_long_tailed_and_nothing_arrives_after_the_hosts_stop():
    job = emulator.EmulatedJob("lagged", hosts=4, training=600, lag=emulator.LagModel(), seed=3)
    job.created = 1_800_000_000.0
    window = job.training_window()
    lags = sorted(v - t for h in range(1, 5) for t, v in (job.line_times(h, i) for i in range(job.line_count(h))))
    assert lags[len(lags) // 2] < 1.0 and sum(x < 2 for x in lags) / len(lags) > 0.9  # most well under 2 s
    assert lags[-1] > 20  # some are minutes rather than seconds
    assert max(job.line_times(h, i)[1] for h in range(1, 5) for i in range(job.line_count(h))) <= window[1]


def test_synthetic_logs_page_in_order_and_hold_back_what_has_not_arrived():
    from emulator.logs import SyntheticLogs

    now = [1_800_000_100.0]
    logs = SyntheticLogs("syn", hosts=3, rate=50, start=1_800_000_000.0, duration=60, clock=lambda: now[0])
    seen, token = [], None
    while True:
        page = logs.filter_log_events(**({"nextToken": token} if token else {}))
        seen += page["events"]
        token = page.get("nextToken")
        if not token:
            break
    assert len(seen) == logs.expected() == 3 * 50 * 60 and len({e["eventId"] for e in seen}) == len(seen)
    assert [e["timestamp"] for e in seen] == sorted(e["timestamp"] for e in seen)
    now[0] = 1_800_000_030.0
    early = logs.filter_log_events(startTime=1_800_000_029_000)["events"]
    assert early and all(e["ingestionTime"] <= 1_800_000_030_000 for e in early)
    assert len(early) < 3 * 50  # lines of the last second that have not reached CloudWatch yet are held back


def test_the_demo_server_runs_from_the_repository_and_its_hint_is_a_command_that_works(monkeypatch):
    """`python -m emulator` works from the repository root; its hint names a CLI that runs without PATH set."""
    import shlex
    import subprocess
    import sys

    from emulator.__main__ import cli_command
    from tests.conftest import REPO

    out = subprocess.run([sys.executable, "-m", "emulator", "--help"], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "python -m emulator" in out.stdout, out.stderr
    monkeypatch.setenv("PATH", "/nonexistent")
    hint = cli_command(REPO)
    assert hint != "smp-launch"
    ran = subprocess.run([*shlex.split(hint), "--help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and "validate" in ran.stdout, ran.stderr
