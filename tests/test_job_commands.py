"""`status`, `list`, `stop`, `metrics` and `logs` through the CLI entry point, against emulated jobs."""
import json
import re
import sys
import time

import boto3
import pytest

import emulator
from launcher.cli.jobs import parse_hosts
from launcher.core.state import record_submitted
from launcher.core.timeutil import parse_since
from launcher.jobs import metrics
from launcher.jobs import status as jobs
from tests.doubles import one_page_paginator
from tests.emulation import started_ago

AGO = 3600.0


@pytest.fixture
def sm():
    with emulator.mocked():
        yield boto3.client("sagemaker", region_name="us-west-2")
    emulator.set_clock(None)




def test_status_of_a_completed_job(sm, run_cli):
    started_ago(sm, AGO, emulator.EmulatedJob("done-1", hosts=4, training=600))
    r = run_cli("status", "done-1", "--output", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert (data["status"], data["instance_type"], data["instance_count"]) == ("Completed", "ml.p4d.24xlarge", 4)
    assert [t["status"] for t in data["transitions"]] == ["Starting", "Downloading", "Training", "Uploading",
                                                        "Completed"]
    assert data["billable_seconds"] == 602 and data["image"].endswith("2.4.1-gpu-py311-cu121")
    text = run_cli("status", "done-1")
    assert text.code == 0 and "Completed" in text.out and "4 x ml.p4d.24xlarge" in text.out and "602" in text.out


def test_status_exit_codes_follow_the_job(sm, run_cli):
    started_ago(sm, AGO, emulator.EmulatedJob("oom", outcome="Failed"))
    started_ago(sm, AGO, emulator.EmulatedJob("halted", training=600, stop_after=30))
    failed = run_cli("status", "oom")
    assert failed.code == 1 and "CUDA out of memory" in failed.out
    assert run_cli("status", "halted").code == 5


def test_status_of_an_unknown_job_says_so(sm, run_cli):
    r = run_cli("status", "no-such-job")
    assert r.code == 2 and "no training job named 'no-such-job' in us-west-2" in r.err


def test_a_refused_describe_is_one_line_saying_which_job_not_that_it_does_not_exist(sm):
    from botocore.exceptions import ClientError

    from launcher.core.aws import AwsError

    emulator.add_job(emulator.EmulatedJob("held-1", training=600), sm)
    clients = jobs.Clients()

    def refuse(**_kw):
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no sagemaker:DescribeTrainingJob"},
                           "ResponseMetadata": {"HTTPStatusCode": 403}}, "DescribeTrainingJob")

    clients.session.events.register("before-send.sagemaker.DescribeTrainingJob", refuse)
    with pytest.raises(AwsError) as err:
        jobs.job_status(clients, "held-1")
    assert str(err.value).startswith("describing held-1: access denied for DescribeTrainingJob")
    assert err.value.exit_code == 4 and "\n" not in str(err.value)


def test_latest_is_the_last_job_submitted_here(sm, run_cli):
    assert run_cli("status", "latest").code == 2
    started_ago(sm, AGO, emulator.EmulatedJob("mine-1"))
    record_submitted("mine-1", "us-west-2")
    r = run_cli("status", "latest", "--output", "json")
    assert r.code == 0 and json.loads(r.out)["job_name"] == "mine-1"


def test_list_shows_only_the_tools_jobs(sm, run_cli):
    started_ago(sm, AGO, emulator.EmulatedJob("llama-done"))
    emulator.add_job(emulator.EmulatedJob("llama-running", training=600), sm)
    emulator.add_job(emulator.EmulatedJob("llama-foreign", training=600), sm, managed=False)
    emulator.add_job(emulator.EmulatedJob("mistral-running", training=600), sm)
    started_ago(sm, 600, emulator.EmulatedJob("llama-older", training=3600))  # running, started 10 minutes ago
    names = {r["job_name"] for r in json.loads(run_cli("list", "--output", "json").out)}
    assert names == {"llama-done", "llama-running", "mistral-running", "llama-older"}
    running = json.loads(run_cli("list", "--running", "--name-contains", "llama", "--output", "json").out)
    assert [r["job_name"] for r in running] == ["llama-running", "llama-older"]  # newest first
    assert {r["status"] for r in running} == {"InProgress"}
    table = run_cli("list")
    assert table.code == 0 and "mistral-running" in table.out and "llama-foreign" not in table.out


def test_stop_asks_unless_yes(sm, run_cli):
    emulator.add_job(emulator.EmulatedJob("long-1", training=600), sm)
    refused = run_cli("stop", "long-1")  # no terminal to ask on
    assert refused.code == 2 and "pass --yes" in refused.err
    assert jobs.stop(jobs.Clients(), "long-1", yes=False, confirm=lambda q: False).stopped is False
    assert sm.describe_training_job(TrainingJobName="long-1")["TrainingJobStatus"] == "InProgress"
    r = run_cli("stop", "long-1", "--yes", "--output", "json")
    assert r.code == 0 and json.loads(r.out)["status"] == "Stopping"
    again = run_cli("stop", "long-1", "--yes")
    assert again.code == 0 and "nothing to stop" in again.err


def test_stop_without_yes_or_anyone_to_ask_is_refused_and_a_refused_stop_is_one_line(sm):
    from botocore.exceptions import ClientError

    from launcher.core.aws import AwsError
    from launcher.core.errors import UsageError

    emulator.add_job(emulator.EmulatedJob("long-3", training=600), sm)
    with pytest.raises(UsageError, match="stop asks before stopping long-3, and no `confirm` was given"):
        jobs.stop(jobs.Clients(), "long-3", yes=False, confirm=None)
    clients = jobs.Clients()

    def refuse(**_kw):
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"},
                           "ResponseMetadata": {"HTTPStatusCode": 403}}, "StopTrainingJob")

    clients.session.events.register("before-send.sagemaker.StopTrainingJob", refuse)
    with pytest.raises(AwsError, match="stopping long-3"):
        jobs.stop(clients, "long-3", yes=True, confirm=None)
    assert sm.describe_training_job(TrainingJobName="long-3")["TrainingJobStatus"] == "InProgress"
    done = jobs.stop(jobs.Clients(), "long-3", yes=True, confirm=None)
    assert done.to_dict() == {"job_name": "long-3", "stopped": True, "status": "Stopping", "message": (
        "long-3 is Stopping; SageMaker uploads what the job saved, then marks it Stopped")}


def test_a_status_sagemaker_never_used_is_an_error_and_any_text_has_an_exit_code():
    from launcher.core.errors import LauncherError

    with pytest.raises(LauncherError, match="SageMaker reported a job status this version does not know: 'Paused'"):
        jobs.JobState.parse("Paused")
    with pytest.raises(LauncherError) as long_one:
        jobs.JobState.parse("P" * 200)
    assert str(long_one.value).endswith("'" + "P" * 79 + "…'")  # cut to 80 characters
    assert [jobs.exit_code_for(s) for s in ("Completed", "Failed", "Stopped", "InProgress", "Paused")] == [
        0, 1, 5, 0, 0]


def test_a_heterogeneous_cluster_counts_every_group():
    groups = [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2, "InstanceGroupName": "a"},
              {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1, "InstanceGroupName": "b"}]
    assert jobs.instances({"ResourceConfig": {"InstanceGroups": groups}}) == ("ml.p4d.24xlarge,ml.p5.48xlarge", 3)
    assert jobs.instances({"ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 4}}) == (
        "ml.p4d.24xlarge", 4)
    assert jobs.instances({}) == ("?", 0)


def test_wait_without_sagemaker_search_describes_each_job_instead_and_stops_asking(sm, clock):
    from botocore.exceptions import ClientError

    for name in ("nos-1", "nos-2"):
        emulator.add_job(emulator.EmulatedJob(name, training=20), sm)
    clients = jobs.Clients()
    asked = []

    def refuse(**_kw):
        asked.append("Search")
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no sagemaker:Search"},
                           "ResponseMetadata": {"HTTPStatusCode": 403}}, "Search")

    clients.session.events.register("before-send.sagemaker.Search", refuse)
    clients.session.events.register("provide-client-params.sagemaker.DescribeTrainingJob",
                                    lambda params, **_kw: asked.append(params["TrainingJobName"]))
    done = jobs.wait(clients, ["nos-1", "nos-2"], interval=5.0, sleep=clock.sleep, clock=clock)
    assert [(s.job_name, s.status) for s in done] == [("nos-1", "Completed"), ("nos-2", "Completed")]
    assert asked.count("Search") == 1 and asked.count("nos-1") > 2  # refused once, then each job described


def test_stop_then_the_job_ends_stopped(sm):
    emulator.add_job(emulator.EmulatedJob("long-2", training=600, stopping=0.0), sm)
    jobs.stop(jobs.Clients(), "long-2", yes=True, confirm=None)
    desc = sm.describe_training_job(TrainingJobName="long-2")
    assert desc["TrainingJobStatus"] == "Stopped"
    assert [t["Status"] for t in desc["SecondaryStatusTransitions"]][-2:] == ["Stopping", "Stopped"]


@pytest.mark.parametrize("answer,stopped,status", [("n", False, "InProgress"), ("y", True, "Stopping")])
def test_stop_on_a_terminal_asks_on_stderr_and_does_what_the_answer_says(sm, run_cli, monkeypatch, answer, stopped,
                                                                         status):
    import io

    emulator.add_job(emulator.EmulatedJob("asked-1", training=600), sm)
    terminal = io.StringIO(answer + "\n")
    terminal.isatty = lambda: True
    monkeypatch.setattr(sys, "stdin", terminal)
    r = run_cli("stop", "asked-1", "--output", "json")
    assert r.code == 0 and r.err.startswith("Stop training job asked-1 (") and "? [y/N]: " in r.err
    assert (json.loads(r.out)["stopped"], json.loads(r.out)["status"]) == (stopped, status)  # stdout: JSON only


def test_metrics_per_host_normalised_in_one_call(sm, run_cli):
    started_ago(sm, 1200, emulator.EmulatedJob("busy", hosts=3, training=3600))
    r = run_cli("metrics", "busy", "--since", "15m", "--output", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["get_metric_data_calls"] == 1 and [h["host"] for h in data["hosts"]] == ["algo-1", "algo-2", "algo-3"]
    gpu = {h["host"]: h["series"]["GPUUtilization"] for h in data["hosts"]}
    assert 85 < gpu["algo-1"]["mean"] <= 100 and gpu["algo-2"]["max"] < 60  # per GPU; algo-2 straggles
    cpu = data["hosts"][0]["series"]["CPUUtilization"]
    assert 5 < cpu["mean"] < 20 and len(cpu["points"]) >= 14  # divided by 96 vCPUs; 1-minute points
    text = run_cli("metrics", "busy")
    assert text.code == 0 and "GPU utilization (% per GPU: the sum / 8)" in text.out
    assert "CPU utilization (% per vCPU: the sum / 96)" in text.out  # a p4d's 96 vCPUs (EC2's P4 page)
    assert any(line.strip().startswith("algo-2") and "▄" in line for line in text.out.splitlines())


def test_metrics_of_an_ended_job_read_up_to_a_minute_past_its_end(sm):
    from launcher.core.timeutil import iso

    started_ago(sm, AGO, emulator.EmulatedJob("ended-1", hosts=1, training=600))
    ended = sm.describe_training_job(TrainingJobName="ended-1")["TrainingEndTime"].timestamp()
    data = metrics.fetch(jobs.Clients(), "ended-1", since=300, now=time.time())
    assert (data.start, data.end) == (iso(ended + 60 - 300), iso(ended + 60))


def test_metrics_of_an_instance_type_this_version_does_not_know_are_left_summed(sm):
    started_ago(sm, 1200, emulator.EmulatedJob("odd", hosts=1, training=3600, instance_type="ml.x9.unknown"))
    data = metrics.fetch(jobs.Clients(), "odd", since=900, now=time.time())
    assert data.units["GPUUtilization"] == data.units["CPUUtilization"] == (
        "% summed over devices (instance type unknown)")
    assert data.units["MemoryUtilization"] == "% of memory"
    assert data.hosts[0].series["GPUUtilization"].max > 100  # eight GPUs' percentages, summed as AWS reports them


def test_metrics_of_an_ended_job_without_points_say_no_data_not_yet(sm, run_cli):
    from emulator import failures as scenarios

    started_ago(sm, 7200, emulator.EmulatedJob("never-ran", **scenarios.capacity_failure()))
    r = run_cli("metrics", "never-ran")
    rows = [line for line in r.out.splitlines() if line.strip().startswith("algo-1")]
    assert r.code == 0 and rows and all("no data" in line for line in rows) and "yet" not in r.out


class FakeCloudWatch:
    def __init__(self):
        self.calls = []

    def get_metric_data(self, **kw):
        self.calls.append(len(kw["MetricDataQueries"]))
        return {"MetricDataResults": []}

    def get_paginator(self, name):
        return one_page_paginator(getattr(self, name))


def test_metrics_split_at_500_queries(sm):
    started_ago(sm, 600, emulator.EmulatedJob("wide", hosts=130, training=3600, decoy=False))
    fake = FakeCloudWatch()
    clients = jobs.Clients(overrides={"cloudwatch": fake})
    data = metrics.fetch(clients, "wide", 3600, time.time())
    assert fake.calls == [500, 20] and data.get_metric_data_calls == 2 and len(data.hosts) == 130


def test_sparkline_scale_and_width():
    assert metrics.sparkline([0, 50, 100]) == "▁▅█"
    assert len(metrics.sparkline(list(range(100)), width=40)) == 40
    assert len(metrics.sparkline(list(range(100)))) == 40 and len(metrics.sparkline([1.0] * 40)) == 40  # the default


def test_flag_parsers():
    assert parse_hosts("1,3, 5-7,algo-2") == [1, 2, 3, 5, 6, 7] and parse_hosts(None) is None
    assert parse_since("1h30m") == 5400 and parse_since("90") == 90 and parse_since("0.5s") == 0.5


def test_a_bad_since_names_its_flag_and_exits_2():
    from launcher.core.errors import UsageError

    with pytest.raises(UsageError) as err:
        parse_since("soon")
    assert err.value.exit_code == 2 and str(err.value).startswith("--since 'soon': 'soon' is not a duration")


def test_times_from_aws_read_as_utc_whatever_the_machines_zone(monkeypatch):
    from datetime import datetime, timedelta, timezone

    from launcher.core.timeutil import clock_time, epoch, iso

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        naive = datetime(2026, 1, 1, 12, 0, 0)  # boto3 gives naive datetimes in UTC
        aware = datetime(2026, 1, 1, 7, 0, 0, tzinfo=timezone(timedelta(hours=-5)))
        assert epoch(naive) == epoch(aware) == 1767268800.0 and epoch(None) is None
        assert clock_time(naive) == clock_time(1767268800.0) == "2026-01-01 12:00:00" and clock_time(None) == "-"
        assert iso(1767268800.25) == "2026-01-01T12:00:00.250Z"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_the_managed_tag_is_the_plans():
    from launcher.plan.build import MANAGED_TAG

    assert jobs.MANAGED_TAG == MANAGED_TAG


def test_the_status_table_shows_each_time_in_utc_to_the_second(sm, run_cli):
    from datetime import datetime, timezone

    started_ago(sm, AGO, emulator.EmulatedJob("times-1", training=600))
    data = json.loads(run_cli("status", "times-1", "--output", "json").out)

    def utc(epoch):
        return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")

    rows = dict(line.split(":", 1) for line in run_cli("status", "times-1").out.splitlines()[:8] if ":" in line)
    assert rows["created"].strip() == utc(data["created"])
    assert (rows["training start"].strip(), rows["training end"].strip()) == (utc(data["training_start"]),
                                                                            utc(data["training_end"]))
    table = run_cli("status", "times-1").out
    first = data["transitions"][0]
    assert re.search(rf"^Starting +{utc(first['start'])} +{utc(first['end'])} ", table, re.M), table


def test_a_metrics_summary_rounds_to_two_decimals():
    assert metrics.stats([1.0, 2.0, 2.0]) == {"min": 1.0, "mean": 1.67, "max": 2.0}
    assert metrics.stats([0.123, 0.456]) == {"min": 0.12, "mean": 0.29, "max": 0.46}
    assert metrics.stats([]) == {"min": None, "mean": None, "max": None}
