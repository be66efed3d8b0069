"""Late lines through Logs Insights: what it costs, and what happens where Insights is missing or slow."""
import dataclasses
import io
import random
import types
from collections import Counter
from datetime import datetime, timezone

import boto3
import pytest
from botocore.exceptions import ClientError

import emulator
from launcher.core.aws import Clients
from launcher.core.errors import EXIT_OK
from launcher.jobs.tail import LogLine, Polling, RateLimiter, follow, iter_lines
from tests.emulation import VirtualClock, body_of, lost_and_duplicated

POLLING = {f.name for f in dataclasses.fields(Polling)}  # the knobs run() passes on as a Polling


@pytest.fixture
def sm(clock):
    with emulator.mocked():
        yield boto3.client("sagemaker", region_name="us-west-2")


def late_job(sm, name, **kw):
    """Two hosts, a line a second; every 3rd line of host 1 reaches CloudWatch 40 s late."""
    late = {(1, i): 40.0 for i in range(0, 120, 3)}
    return emulator.add_job(emulator.EmulatedJob(name, hosts=2, training=120, decoy=False, late_lines=late, **kw), sm)


def run(job, clock, clients, **kw):
    out, err = io.StringIO(), io.StringIO()
    knobs = {name: kw.pop(name) for name in list(kw) if name in POLLING}
    knobs.setdefault("interval", 5.0)
    knobs.setdefault("limiter", RateLimiter(2.0, clock=clock, sleep=clock.sleep))
    result = follow(job, clients, out=out, err=err, **kw,
                    polling=Polling(clock=clock, sleep=clock.sleep, rng=random.Random(1), **knobs))
    return result, out.getvalue(), err.getvalue()


class _Wrapped:
    """A Logs client that changes one operation and passes the rest to the real (emulated) one."""

    def __init__(self, real, **ops):
        self.real, self.ops = real, ops

    def __getattr__(self, name):
        return self.ops.get(name) or getattr(self.real, name)


def _refused(**_kw):
    raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized to logs:StartQuery"},
                       "ResponseMetadata": {"HTTPStatusCode": 400}}, "StartQuery")


def test_late_lines_come_from_insights_not_a_second_read(sm, clock):
    job = late_job(sm, "ins")
    result, out, err = run("ins", clock, Clients())
    assert lost_and_duplicated(job.expected_messages(), body_of(out)) == (0, 0)
    assert result.stats.late_check == "insights" and result.stats.queries > 0 and result.stats.sweep_calls == 0
    assert result.stats.late_rows == 40  # exactly the late lines, not the slice's 240
    assert "printed out of order" in err


def test_insights_refused_falls_back_to_re_reading_without_loss(sm, clock):
    job = late_job(sm, "deny")
    clients = Clients()
    clients._cache["logs"] = _Wrapped(clients.logs, start_query=_refused)
    result, out, err = run("deny", clock, clients)
    assert result.exit_code == EXIT_OK
    assert lost_and_duplicated(job.expected_messages(), body_of(out)) == (0, 0)
    assert result.stats.late_check == "sweep" and result.stats.sweep_calls > 0 and result.stats.late_rows == 0
    assert err.count("Logs Insights is not available") == 1 and "AccessDeniedException" in err


def test_results_without_the_computed_fields_are_not_trusted(sm, clock):
    # A plain moto answers any query with every event and only the fields it knows: that is not the late lines.
    job = late_job(sm, "plain")
    clients = Clients()
    real = clients.logs

    def moto_like(queryId):  # noqa: N803
        return {"status": "Complete", "results": [[{"field": "@ptr", "value": "0"},
                                                   {"field": "@logStream", "value": "plain/algo-1-1"}]]}

    clients._cache["logs"] = _Wrapped(real, get_query_results=moto_like)
    result, out, err = run("plain", clock, clients)
    assert lost_and_duplicated(job.expected_messages(), body_of(out)) == (0, 0)
    assert result.stats.late_check == "sweep" and "results lack the computed fields" in err


def test_a_query_cut_at_its_row_limit_is_asked_again_in_halves(sm, clock, monkeypatch):
    monkeypatch.setattr("launcher.jobs.tail.LATE_LIMIT", 8)
    monkeypatch.setattr("launcher.jobs.tail.LATE_LIMIT_FINAL", 8)
    job = late_job(sm, "cut")
    calls = Counter()
    clients = Clients()
    real = clients.logs

    def counting(**params):
        calls["start"] += 1
        calls["widest"] = max(calls["widest"], params["endTime"] - params["startTime"])
        return real.start_query(**params)

    clients._cache["logs"] = _Wrapped(real, start_query=counting)
    result, out, _ = run("cut", clock, clients)
    assert lost_and_duplicated(job.expected_messages(), body_of(out)) == (0, 0)
    assert result.stats.sweep_calls == 0 and calls["start"] >= 40 / 8  # several queries, none cut short


def test_an_unfinished_final_check_says_so_and_still_returns(sm, clock, monkeypatch):
    monkeypatch.setattr("launcher.jobs.tail.FINAL_CHECK_S", 20.0)
    emulator.add_job(emulator.EmulatedJob("slowq", hosts=2, training=30, decoy=False), sm)
    clients = Clients()
    clients._cache["logs"] = _Wrapped(clients.logs, get_query_results=lambda **_kw: {"status": "Running"})
    result, _, err = run("slowq", clock, clients)
    end = sm.describe_training_job(TrainingJobName="slowq")["TrainingEndTime"].timestamp()
    assert result.exit_code == EXIT_OK and clock.t - end <= 5 + 20 + 5
    assert "warning: could not finish checking slowq for lines that reached CloudWatch late" in err
    assert result.stats.unchecked_s > 0


def test_iter_lines_yields_typed_sanitised_lines_and_prints_nothing(sm, clock, capsys):
    job = emulator.add_job(emulator.EmulatedJob("api", hosts=2, training=10, decoy=False), sm)
    notes = []
    lines = iter_lines("api", Clients(), follow=True, notify=notes.append,
                       polling=Polling(interval=1.0, clock=clock, sleep=clock.sleep,
                                       limiter=RateLimiter(2.0, clock=clock, sleep=clock.sleep)))
    got = list(lines)
    assert all(isinstance(ln, LogLine) for ln in got) and {ln.host for ln in got} == {1, 2}
    assert [ln.message for ln in got if ln.host == 1] == [m for m in job.expected_messages() if "algo-1]" in m]
    assert all(ln.event_id and ln.stream.startswith("api/algo-") for ln in got)
    assert lines.status == "Completed" and lines.exit_code == EXIT_OK
    assert capsys.readouterr() == ("", "")  # nothing printed: the API hands lines over


def test_iter_lines_sanitises_what_cloudwatch_returns(clock, monkeypatch):
    event = {"logStreamName": "evil/algo-1-1", "eventId": "1\x1b[2J", "timestamp": 1_800_000_000_000,
             "ingestionTime": 1_800_000_000_000, "message": "a \x1b]0;pwned\x07 \u202eb"}
    clients = types.SimpleNamespace(logs=types.SimpleNamespace(filter_log_events=lambda **_p: {"events": [event]}))
    monkeypatch.setattr("launcher.jobs.tail.describe", lambda *_a: {"TrainingJobStatus": "Completed"})
    (line,) = list(iter_lines("evil", clients,
                              polling=Polling(clock=clock, sleep=clock.sleep,
                                              limiter=RateLimiter(2.0, clock=clock, sleep=clock.sleep))))
    assert line.message == "a \\x1b]0;pwned\\x07 \\u202eb" and line.event_id == "1\\x1b[2J" and line.host == 1


class _FakeSageMaker:
    def __init__(self, job, hosts, end, clock):
        self.job, self.hosts, self.end, self.clock = job, hosts, end, clock

    def describe_training_job(self, TrainingJobName):  # noqa: N803
        done = self.clock() >= self.end
        desc = {"TrainingJobName": self.job, "TrainingJobStatus": "Completed" if done else "InProgress",
                "SecondaryStatus": "Completed" if done else "Training",
                "ResourceConfig": {"InstanceCount": self.hosts}, "SecondaryStatusTransitions": []}
        if done:
            desc["TrainingEndTime"] = datetime.fromtimestamp(self.end, timezone.utc)
        return desc


def _six_minutes(job, hosts, rate):
    """A job's `hosts` hosts writing 20 lines a second for 6 minutes of virtual time, followed at `rate`
    calls a second: (its logs, when it ends, the lines iterator, the clock)."""
    from emulator.logs import SyntheticLogs

    clock = VirtualClock()
    start, minutes = clock.t + 5, 6
    logs = SyntheticLogs(job, hosts, 20.0, start, minutes * 60, clock, seed=hosts)
    end = start + minutes * 60 + 10
    clients = types.SimpleNamespace(logs=logs, sagemaker=_FakeSageMaker(job, hosts, end, clock))
    lines = iter_lines(job, clients, follow=True, notify=lambda _m: None,
                       polling=Polling(interval=5.0, clock=clock, sleep=clock.sleep, rng=random.Random(0),
                                       limiter=RateLimiter(rate, clock=clock, sleep=clock.sleep)))
    return logs, start, end, lines, clock


def test_64_hosts_at_20_lines_a_second_read_each_line_under_1_5_times_and_exit_within_15s():
    logs, start, end, lines, clock = _six_minutes("vol", 64, 2.0)
    seen = bytearray(logs.expected())
    for line in lines:
        step = int(line.message.split("step=", 1)[1].split(" ", 1)[0])
        seen[(line.host - 1) * logs.count + step] += 1
    assert lines.status == "Completed" and clock.t - end <= 15.0  # was 39 s: the final sweep re-read 5 minutes
    assert Counter(seen) == {1: logs.expected()}  # every line once
    assert logs.served / logs.expected() <= 1.5  # was 2.3 to 2.8 with a sweep at the horizon
    assert logs.calls / (clock.t - start) <= 2.0  # within --rate


def test_a_read_that_takes_several_pages_re_reads_only_the_overlap():
    # 160 lines/s served 100 to a page at --rate 4: each poll's read takes about 3 s of token waits. A floor
    # taken from when the read began re-read those 3 s as well as the 2 s overlap (about 2x in all).
    logs, _, _, lines, _ = _six_minutes("paged", 8, 4.0)
    lines.reader.page_size = 100
    seen = Counter((ln.host, ln.message.split("step=", 1)[1].split(" ", 1)[0]) for ln in lines)
    assert len(seen) == logs.expected() and set(seen.values()) == {1}
    assert logs.calls > 10 * lines.stats.polls  # many pages a poll
    assert logs.served / logs.expected() <= 1.5


def test_a_slice_checked_while_an_older_one_is_cut_is_not_read_again(monkeypatch):
    # A query cut at its row limit is asked again in halves; a newer slice done meanwhile waits behind it.
    # Its results must not be read (and its late lines printed) a second time. The fake forgets a query's
    # results once read, as a caller must assume.
    monkeypatch.setattr("launcher.jobs.tail.LATE_LIMIT", 150)
    monkeypatch.setattr("launcher.jobs.tail.LATE_LIMIT_FINAL", 150)
    logs, _, _, lines, _ = _six_minutes("cut2", 16, 5.0)
    seen = Counter((ln.host, ln.message.split("step=", 1)[1].split(" ", 1)[0]) for ln in lines)
    assert len(seen) == logs.expected() and set(seen.values()) == {1}
    assert lines.stats.queries > lines.stats.query_calls / 2 - 1  # each query's results read once


def test_the_emulated_insights_query_returns_late_lines_only_and_counts_past_its_limit(sm, clock):
    late_job(sm, "emu")
    clock.t += 200  # training done, every late line arrived
    logs = boto3.client("logs", region_name="us-west-2")
    start = int(sm.describe_training_job(TrainingJobName="emu")["TrainingStartTime"].timestamp())
    query = ("fields @logStream, @message, toMillis(@timestamp) as ts, toMillis(@ingestionTime) as ingested"
             " | filter @logStream like /^emu\\// and toMillis(@ingestionTime) - toMillis(@timestamp) > 2000"
             " | limit 5")
    qid = logs.start_query(logGroupName="/aws/sagemaker/TrainingJobs", startTime=start - 60, endTime=start + 400,
                           queryString=query, limit=5)["queryId"]
    assert logs.get_query_results(queryId=qid)["status"] == "Running"
    clock.t += 1.0
    reply = logs.get_query_results(queryId=qid)
    rows = [{f["field"]: f["value"] for f in row} for row in reply["results"]]
    assert reply["status"] == "Complete" and len(rows) == 5 and reply["statistics"]["recordsMatched"] == 40
    assert all(int(r["ingested"]) - int(r["ts"]) > 2000 and r["@logStream"].startswith("emu/algo-1-") for r in rows)
    assert all("@ptr" in r for r in rows)
