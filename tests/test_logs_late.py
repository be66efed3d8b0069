"""Lines that reach CloudWatch late: found through Logs Insights, what that costs at volume, and what happens
where Insights is missing, refused, cut at its row limit or slow."""
import dataclasses
import io
import json
import random
import re
import types
from collections import Counter
from datetime import datetime, timezone
from itertools import pairwise

import boto3
import pytest
from botocore.exceptions import ClientError

import emulator
from emulator.logs import SyntheticLogs
from launcher.core.aws import Clients
from launcher.core.errors import EXIT_OK
from launcher.jobs.logs import Polling, iter_lines
from launcher.jobs.ratelimit import RateLimiter
from launcher.jobs.reader import LogReader
from tests.emulation import VirtualClock, body_of, lost_and_duplicated, printed_follow

POLLING = {f.name for f in dataclasses.fields(Polling)}  # the knobs run() passes on as a Polling


@pytest.fixture
def sm(clock):
    """A SageMaker client of moto in-process, the emulated jobs on the virtual clock."""
    with emulator.mocked():
        yield boto3.client("sagemaker", region_name="us-west-2")


def late_job(sm, name, **kw):
    """Two hosts, a line a second; every 3rd line of host 1 reaches CloudWatch 40 s late."""
    late = {(1, i): 40.0 for i in range(0, 120, 3)}
    return emulator.add_job(emulator.EmulatedJob(name, hosts=2, training=120, decoy=False, late_lines=late, **kw), sm)


def run(job, clock, clients=None, **kw):
    """Follow `job` as `smp-launch logs` does (printed): (result, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    clients = clients or Clients()
    knobs = {name: kw.pop(name) for name in list(kw) if name in POLLING}
    knobs.setdefault("interval", 5.0)
    knobs.setdefault("limiter", RateLimiter(2.0, clock=clock, sleep=clock.sleep))
    result = printed_follow(job, clients, out=out, err=err, **kw,
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
    monkeypatch.setattr("launcher.jobs.late_check.LATE_LIMIT", 8)
    monkeypatch.setattr("launcher.jobs.late_check.LATE_LIMIT_FINAL", 8)
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
    monkeypatch.setattr("launcher.jobs.late_check.FINAL_CHECK_S", 20.0)
    emulator.add_job(emulator.EmulatedJob("slowq", hosts=2, training=30, decoy=False), sm)
    clients = Clients()
    clients._cache["logs"] = _Wrapped(clients.logs, get_query_results=lambda **_kw: {"status": "Running"})
    result, _, err = run("slowq", clock, clients)
    end = sm.describe_training_job(TrainingJobName="slowq")["TrainingEndTime"].timestamp()
    # the settle time after the end (5 s), then the drain timeout: the draining read waits for no query
    assert result.exit_code == EXIT_OK and clock.t - end <= 5 + 20 + 1
    assert "warning: could not finish checking slowq for lines that reached CloudWatch late" in err
    assert result.stats.unchecked_s > 0


def test_a_line_up_to_five_minutes_late_prints_once_though_no_lateness_was_seen_before(sm, clock):
    # One line 300 s late and one 60 s late, in a job where every other line arrives at once.
    job = emulator.add_job(emulator.EmulatedJob("tardy", hosts=2, training=420, decoy=False,
                                                late_lines={(1, 20): 299.0, (2, 100): 60.0}), sm)
    result, out, err = run("tardy", clock, interval=5.0)
    printed = body_of(out)
    assert lost_and_duplicated(job.expected_messages(), printed) == (0, 0)
    assert printed.index(job.line(1, 20, False)) > printed.index(job.line(1, 300, False))  # printed when it came
    assert result.stats.late == 2 and "reached CloudWatch late and printed out of order (up to" in err


def test_every_line_of_a_job_whose_lines_turn_90s_late_prints_once(sm, clock):
    # After 12 s of training half the hosts' lines start reaching CloudWatch 90 s after their timestamps.
    late = {(h, i): 90.0 for h in range(1, 9) for i in range(12, 200)}
    job = emulator.add_job(emulator.EmulatedJob("drift", hosts=16, training=200, decoy=False, late_lines=late), sm)
    result, out, _ = run("drift", clock, interval=5.0)
    assert lost_and_duplicated(job.expected_messages(), body_of(out)) == (0, 0)
    assert result.stats.max_late_s == 90.0 and result.stats.late > 0


def test_long_tailed_lag_loses_nothing_and_reads_each_event_about_twice(sm, clock):
    job = emulator.add_job(emulator.EmulatedJob("tail", hosts=4, training=600, decoy=False, line_interval=0.5,
                                                lag=emulator.LagModel(tail=0.02, tail_max=240.0)), sm)
    result, out, _ = run("tail", clock, interval=5.0)
    lines = len(job.expected_messages())
    assert lost_and_duplicated(job.expected_messages(), body_of(out)) == (0, 0)
    assert result.stats.late > 0
    # a fresh read re-reads 2 s of a 5 s poll; Logs Insights returns only the lines later than that (a few
    # percent), where re-reading every slice at the horizon would fetch each event about 2.4 times
    assert result.stats.queries > 0 and result.stats.sweep_calls == 0
    assert result.stats.fetched / lines <= 1.5


def test_json_marks_lines_printed_out_of_order(sm, clock):
    emulator.add_job(emulator.EmulatedJob("jlate", hosts=2, training=60, decoy=False, late_lines={(1, 5): 20.0}), sm)
    _, out, _ = run("jlate", clock, as_json=True, interval=5.0)
    logs = [json.loads(line) for line in out.splitlines() if '"type": "log"' in line]
    late = [r for r in logs if r.get("late")]
    assert len(logs) == 120 and [r["host"] for r in late] == ["algo-1"]


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
    clock = VirtualClock()
    start, minutes = clock.t + 5, 6
    logs = SyntheticLogs(job, hosts, 20.0, start, minutes * 60, clock, seed=hosts)
    end = start + minutes * 60 + 10
    clients = types.SimpleNamespace(logs=logs, sagemaker=_FakeSageMaker(job, hosts, end, clock))
    lines = iter_lines(job, clients, until_end=True, on_note=lambda _m: None,
                       polling=Polling(interval=5.0, clock=clock, sleep=clock.sleep, rng=random.Random(0),
                                       limiter=RateLimiter(rate, clock=clock, sleep=clock.sleep)))
    return logs, start, end, lines, clock


def test_64_hosts_at_20_lines_a_second_read_each_line_under_1_5_times_and_exit_within_15s():
    logs, start, end, lines, clock = _six_minutes("vol", 64, 2.0)
    seen = bytearray(logs.expected())
    for line in lines:
        step = int(line.message.split("step=", 1)[1].split(" ", 1)[0])
        seen[(line.host - 1) * logs.count + step] += 1
    assert lines.status == "Completed" and clock.t - end <= 15.0  # the final check reads only unchecked slices
    assert Counter(seen) == {1: logs.expected()}  # every line once
    assert logs.served / logs.expected() <= 1.5  # a sweep at the horizon would read each line 2-3 times
    assert logs.calls / (clock.t - start) <= 2.0  # within --rate


def test_a_read_that_takes_several_pages_re_reads_only_the_overlap():
    # 160 lines/s served 100 to a page at 4 calls a second: each poll's read takes about 3 s of token waits. A
    # floor taken from when the read began would re-read those 3 s as well as the 2 s overlap (about 2x in all).
    logs, _, _, lines, _ = _six_minutes("paged", 8, 4.0)
    lines.reader.page_size = 100
    seen = Counter((ln.host, ln.message.split("step=", 1)[1].split(" ", 1)[0]) for ln in lines)
    assert len(seen) == logs.expected() and set(seen.values()) == {1}
    assert logs.calls > 10 * lines.stats.polls  # many pages a poll
    assert logs.served / logs.expected() <= 1.5


def test_one_read_of_minutes_of_lines_holds_the_ids_of_a_few_seconds_not_of_the_minutes():
    # --no-follow on an ended job, or a follower whose polls a shared --rate spaces a minute apart: one read of
    # minutes of lines. Only the ids the next read can meet again (its overlap) are worth keeping while it goes on.
    clock = VirtualClock()
    logs = SyntheticLogs("backlog", 8, 20.0, clock.t - 400, 360, clock, seed=8)
    clients = types.SimpleNamespace(logs=logs, sagemaker=_FakeSageMaker("backlog", 8, clock.t - 30, clock))
    lines = iter_lines("backlog", clients, until_end=False,
                       polling=Polling(clock=clock, sleep=clock.sleep, limiter=RateLimiter(2.0, clock=clock,
                                                                                           sleep=clock.sleep)))
    seen = Counter((ln.host, ln.message.split("step=", 1)[1].split(" ", 1)[0]) for ln in lines)
    assert len(seen) == logs.expected() == 57_600 and set(seen.values()) == {1}
    assert logs.calls >= 8 and lines.stats.max_seen <= 2 * 10_000  # two pages' worth at most, not 57,600


def test_no_follow_reads_what_exists_once_to_its_last_page_and_starts_no_late_check():
    # --no-follow prints what exists now and exits: one fresh read to its last page, however many (more than the
    # 50 a followed poll takes before leaving the rest to the next), each line once, and no late check: nothing
    # can have arrived late since the read began, so no StartQuery (nor sweep) is paid for, even when the read's
    # 120 pages at 2 calls a second take a minute, more than a late-check window spans.
    clock = VirtualClock()
    logs = SyntheticLogs("whole", 4, 2.0, clock.t - 400, 300, clock, seed=3)
    clients = types.SimpleNamespace(logs=logs, sagemaker=_FakeSageMaker("whole", 4, clock.t - 90, clock))
    lines = iter_lines("whole", clients, until_end=False, on_note=lambda _n: None,
                       polling=Polling(clock=clock, sleep=clock.sleep, limiter=RateLimiter(2.0, clock=clock,
                                                                                           sleep=clock.sleep)))
    lines.reader.page_size = 20
    began = clock.t
    seen = Counter((ln.host, ln.message.split("step=", 1)[1].split(" ", 1)[0]) for ln in lines)
    assert len(seen) == logs.expected() == 2400 and set(seen.values()) == {1}
    assert clock.t - began > 50  # the read spanned more than a late-check window of arrivals
    assert logs.calls == logs.expected() // 20 == 120 and logs.query_calls == 0  # FilterLogEvents pages only
    stats = lines.stats
    assert (stats.polls, stats.calls, stats.queries, stats.query_calls, stats.sweep_calls) == (1, 120, 0, 0, 0)


def test_a_slice_checked_while_an_older_one_is_cut_is_not_read_again(monkeypatch):
    # A query cut at its row limit is asked again in halves; a newer slice done meanwhile waits behind it.
    # Its results must not be read (and its late lines printed) a second time. The fake forgets a query's
    # results once read, as a caller must assume.
    monkeypatch.setattr("launcher.jobs.late_check.LATE_LIMIT", 150)
    monkeypatch.setattr("launcher.jobs.late_check.LATE_LIMIT_FINAL", 150)
    logs, _, _, lines, _ = _six_minutes("cut2", 16, 5.0)
    seen = Counter((ln.host, ln.message.split("step=", 1)[1].split(" ", 1)[0]) for ln in lines)
    assert len(seen) == logs.expected() and set(seen.values()) == {1}
    assert lines.stats.queries > lines.stats.query_calls / 2 - 1  # each query's results read once


def test_a_second_holding_as_many_late_lines_as_one_query_returns_stays_with_insights():
    # 50 hosts write 100,000 lines within one second, each reaching CloudWatch 15 s late: the window's query is
    # cut, its count per second says one second holds 100,000, and that second is asked for with the largest
    # limit a query takes (CloudWatch refuses a larger one), then re-read once the query is cut there too.
    from emulator.logs import QUERY_ROWS_MAX, SyntheticLogs
    from launcher.jobs.logrecords import NoteKind

    clock = VirtualClock()
    start = clock.t + 5
    lag = emulator.LagModel(tail=1.0, tail_min=15.0, tail_max=15.0)
    logs = SyntheticLogs("burst", 50, 2000.0, start, 1.0, clock, lag=lag, clamp=False)
    assert logs.expected() == QUERY_ROWS_MAX and int(start) == start  # every line in one whole second
    notes = []
    clients = types.SimpleNamespace(logs=logs, sagemaker=_FakeSageMaker("burst", 50, start + 30, clock))
    lines = iter_lines("burst", clients, until_end=True, on_note=notes.append,
                       polling=Polling(interval=5.0, clock=clock, sleep=clock.sleep, rng=random.Random(0),
                                       limiter=RateLimiter(2.0, clock=clock, sleep=clock.sleep)))
    seen = Counter((ln.host, ln.message.split("step=", 1)[1].split(" ", 1)[0]) for ln in lines)
    assert len(seen) == logs.expected() and set(seen.values()) == {1}
    assert lines.stats.late_check == "insights" and lines.stats.late_rows >= QUERY_ROWS_MAX
    assert lines.stats.fetched == logs.served  # every event and row the reads were sent, counted once
    assert not [n for n in notes if n.kind is NoteKind.INSIGHTS_MISSING]
    with pytest.raises(ClientError, match="InvalidParameterException"):  # the emulated refusal the check avoided
        logs.start_query(startTime=int(start), endTime=int(start) + 1, queryString="fields @message",
                         limit=QUERY_ROWS_MAX + 1)


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


class _Arriving(SyntheticLogs):
    """SyntheticLogs where the lines named in `arrive` reach CloudWatch when it says ((host, step) -> epoch s)."""

    def __init__(self, *args, arrive=None, **kw):
        super().__init__(*args, **kw)
        self.arrive = {key: int(at * 1000) for key, at in (arrive or {}).items()}

    def times(self, host, k):
        ts, ingested = super().times(host, k)
        return ts, self.arrive.get((host, k), ingested)


def _synthetic(job, hosts, minutes, rate=2.0, lag=None, clamp=True, arrive=None, sagemaker=None, on_idle=None,
               **polling):
    """A SyntheticLogs job followed to its end: (its logs, the end of writing, the job's end, lines, clock).
    `arrive(start, end)` names lines that reach CloudWatch at given times ((host, step) -> epoch s)."""
    clock = VirtualClock()
    start = clock.t + 5
    end = start + minutes * 60 + 10
    logs = _Arriving(job, hosts, 20.0, start, minutes * 60, clock, lag=lag, seed=hosts, clamp=clamp,
                     arrive=arrive(start, end) if arrive else None)
    notes = []
    clients = types.SimpleNamespace(logs=logs, sagemaker=(sagemaker or _FakeSageMaker)(job, hosts, end, clock))
    lines = iter_lines(job, clients, until_end=True, on_note=notes.append, on_idle=on_idle,
                       polling=Polling(interval=5.0, clock=clock, sleep=clock.sleep, rng=random.Random(0),
                                       limiter=RateLimiter(rate, clock=clock, sleep=clock.sleep), **polling))
    return logs, start + minutes * 60, end, lines, clock, notes


def _tally(logs, lines, on_line=None):
    seen = bytearray(logs.expected())
    for line in lines:
        step = int(line.message.split("step=", 1)[1].split(" ", 1)[0])
        seen[(line.host - 1) * logs.count + step] += 1
        if on_line is not None:
            on_line(line.host, step)
    return Counter(seen)


def test_half_the_lines_90_to_250s_late_print_once_and_the_follow_ends_soon_after_the_job():
    # Half of every host's lines reach CloudWatch 90-250 s late; what is still held when writing stops lands at
    # once. Slices checked only once 5 minutes old would leave minutes of them to the end and give up on them.
    lag = emulator.LagModel(tail=0.5, tail_min=90.0, tail_max=250.0)
    logs, _, end, lines, clock, notes = _synthetic("half", 8, 6, lag=lag)
    tally = _tally(logs, lines)
    assert tally == {1: logs.expected()}  # every line once
    assert lines.status == "Completed" and clock.t - end <= 30.0
    assert lines.stats.unchecked_slices == 0 and lines.stats.sweep_calls == 0
    assert logs.calls / (clock.t - end + 370) <= 2.0  # within --rate


def test_lines_later_than_the_horizon_are_counted_at_the_end_and_a_longer_horizon_prints_them():
    from launcher.cli.logprint import worded
    from launcher.jobs.logrecords import NoteKind

    lag = emulator.LagModel(tail=0.01, tail_min=300.5, tail_max=600.0)
    logs, _, _, lines, _, notes = _synthetic("past", 8, 12, lag=lag)
    tally = _tally(logs, lines)
    beyond = logs.late_lines(300_000)
    assert beyond and tally[0] == len(beyond) and tally[1] == logs.expected() - len(beyond) and tally[2] == 0
    (note,) = [n for n in notes if n.kind is NoteKind.PAST_HORIZON]
    worst = max(i - t for t, i in beyond) / 1000
    assert note.args["count"] == len(beyond) == lines.stats.past_horizon
    assert abs(note.args["worst_s"] - worst) < 0.01 and lines.stats.past_horizon_max_s == note.args["worst_s"]
    assert worded(note).endswith(f"and were not printed; --late-horizon {note.args['suggest_s']:.0f}s prints them")
    logs, _, _, lines, _, notes = _synthetic("past", 8, 12, lag=lag, horizon=660.0)
    assert _tally(logs, lines) == {1: logs.expected()} and lines.stats.past_horizon == 0
    assert not [n for n in notes if n.kind is NoteKind.PAST_HORIZON]


def test_lines_that_arrive_after_the_job_ended_are_waited_for_while_they_keep_coming():
    # No flush at the end: a host's late lines go on arriving up to 2 minutes after it stopped writing.
    from launcher.jobs.logrecords import NoteKind

    lag = emulator.LagModel(tail=0.05, tail_min=20.0, tail_max=120.0)
    logs, written, end, lines, clock, notes = _synthetic("after", 8, 4, lag=lag, clamp=False)
    assert logs.arrived_after(int(end * 1000)) > 0  # lines the job's end does not wait for
    tally = _tally(logs, lines)
    lost = logs.arrived_after(int(clock.t * 1000) - 1000)  # only what came after the follow's last window
    assert tally[0] == lost and tally[2] == 0
    assert tally[0] <= 3 and clock.t - end < 120
    assert [n for n in notes if n.kind is NoteKind.FINAL_PROGRESS]  # said while it waited


QUICK = emulator.LagModel(median=0.05, sigma=0.1, tail=0.0)  # every line in CloudWatch within a moment


def test_each_late_line_found_after_the_end_moves_the_wait_on_and_a_note_says_later_ones_will_not_print():
    # No flush at the end: late lines 3 s after the job's end, then every 8 s, each within the 10 s quiet time of the
    # one before. A wait measured from a line found before the last window was read stopped after the second.
    from launcher.cli.logprint import worded
    from launcher.jobs.logrecords import NoteKind

    def arrive(start, end):
        return {(1, 1100): end + 3, (2, 1110): end + 11, (1, 1120): end + 19, (2, 1130): end + 27}

    shown = []  # the lines that arrived after the end, and each flush of the output (the printer's on_idle)
    logs, _, end, lines, clock, notes = _synthetic("trickle", 2, 1, lag=QUICK, clamp=False, arrive=arrive,
                                                   on_idle=lambda: shown.append("flush"))
    after = set(arrive(0, 0))
    assert _tally(logs, lines, lambda host, step: (host, step) in after and shown.append(step)) == {
        1: logs.expected()}
    found = [shown.index(step) for step in (1100, 1110, 1120, 1130)]  # in the order they arrived
    assert found == sorted(found) and all("flush" in shown[a:b] for a, b in pairwise([*found, len(shown)]))
    assert lines.stats.late_after_end == 4 and lines.stats.checked_until >= end + 27
    (note,) = [n for n in notes if n.kind is NoteKind.ARRIVING_AFTER_END]
    assert note.args["count"] == 4 and round(note.args["after_s"]) == 27
    assert worded(note).endswith("lines that arrive from now on are not printed (`smp-launch logs trickle "
                                 "--no-follow` later prints every line)")
    logs, _, _, lines, _, notes = _synthetic("flushed", 2, 1, lag=QUICK)  # nothing after the end: nothing said
    assert _tally(logs, lines) == {1: logs.expected()} and lines.stats.late_after_end == 0
    assert not [n for n in notes if n.kind is NoteKind.ARRIVING_AFTER_END]


def _query_kind(query: str) -> str:
    if "by sec" in query:
        return "histogram"
    if "worst" in query:
        return "count"
    return "part" if "toMillis(@timestamp) >=" in query else "window"


def test_a_flush_is_read_in_parts_that_return_only_their_own_lines_and_the_windows_after_it_stay_whole(monkeypatch):
    # 2,000 lines written over a minute reach CloudWatch in one millisecond (an agent's flush) in a job whose other
    # lines arrive at once. StartQuery's range is whole seconds: a part must not return its neighbours' lines too.
    # And one flush says nothing of what comes next: the windows after it are not split in parts for it.
    monkeypatch.setattr("launcher.jobs.late_check.LATE_LIMIT", 400)
    monkeypatch.setattr("launcher.jobs.late_check.LATE_LIMIT_FINAL", 400)

    def arrive(start, end):
        return {(h, k): start + 210 for h in range(1, 9) for k in range(1200, 1450)}

    logs, _, _, lines, clock, _ = _synthetic("flush", 8, 6, lag=QUICK, arrive=arrive)
    started = []
    real = logs.start_query

    def recording(**params):
        started.append((clock.t, _query_kind(params["queryString"])))
        return real(**params)

    logs.start_query = recording
    assert _tally(logs, lines) == {1: logs.expected()}
    kinds = Counter(kind for _, kind in started)
    assert kinds["histogram"] == 1 and kinds["part"] >= 2000 / 400
    assert logs.rows_served == len(logs.late_lines(2000)) + 400  # each late line once, and the cut query's rows
    windows = [t for t, kind in started if kind == "window"]
    assert all(b - a > 2.5 for a, b in pairwise(windows))  # one window a poll at most: none split


def test_while_late_lines_flow_every_poll_plans_a_window():
    # 24 hosts, half their lines 90-250 s late: from the 4th minute over 1,000 late lines arrive a poll. Polls are
    # jittered around the interval, so a window must not wait for a whole interval of arrivals.
    lag = emulator.LagModel(tail=0.5, tail_min=90.0, tail_max=250.0)
    logs, written, _, lines, clock, _ = _synthetic("flow", 24, 5, lag=lag)
    windows = []
    real = logs.start_query

    def recording(**params):
        if _query_kind(params["queryString"]) == "window" and clock.t < written:
            windows.append(clock.t)
        return real(**params)

    logs.start_query = recording
    assert _tally(logs, lines) == {1: logs.expected()}
    flowing = [b for a, b in pairwise(windows) if b - a < 10][0]  # the first window of a poll's arrivals
    later = [t for t in windows if t >= flowing]
    assert len(later) >= 8 and all(b - a <= 1.5 * 5.0 for a, b in pairwise(later))


def test_the_status_is_read_every_poll_though_polls_come_up_to_a_tenth_early():
    reads = []

    class Counting(_FakeSageMaker):
        def describe_training_job(self, TrainingJobName):  # noqa: N803
            reads.append(self.clock())
            return super().describe_training_job(TrainingJobName)

    logs, _, end, lines, clock, _ = _synthetic("status", 2, 2, sagemaker=Counting)
    assert _tally(logs, lines) == {1: logs.expected()}
    assert len(reads) >= lines.stats.polls  # one a poll (and the first)
    assert min(t for t in reads if t >= end) - end <= 5.0 * 1.1  # the end is seen within a poll


def test_past_horizon_counts_of_stretches_add_up_and_one_missing_says_nothing():
    from launcher.jobs.logrecords import NoteKind, Notes, Stats
    from launcher.jobs.past_horizon import PastHorizonCount

    clock = VirtualClock()
    started, replies = [], {}

    def start_query(ts_lo, ts_hi, query, limit):
        started.append(query)
        return f"q{len(started)}"

    def results(query_id):
        return replies.get(query_id, {"status": "Running"})

    said = []
    count = PastHorizonCount("job", "job\\/", 300_000, None, start_query, results, clock)
    count.start(1_000_000, 2_000_000, job_start_ms=0)
    count.start(1_000_000, 2_000_000, job_start_ms=0)  # nothing new to count
    count.start(1_000_000, 2_500_000, job_start_ms=0)  # the stretch since
    assert len(started) == 2 and "> 2000000 and toMillis(@ingestionTime) <= 2500000" in started[1]
    count.read(1.0)
    assert count.pending and not count.count  # read no sooner than a second after each started
    clock.t += 1.0
    replies["q1"] = {"status": "Complete", "results": [[{"field": "n", "value": "3"},
                                                        {"field": "worst", "value": "400000"}]]}
    count.read(1.0)
    assert count.pending and count.count == 3  # q2 still running: read again a second later
    replies["q2"] = {"status": "Complete", "results": [[{"field": "n", "value": "2"},
                                                        {"field": "worst", "value": "650000"}]]}
    count.read(1.0)
    assert count.pending
    clock.t += 1.0
    count.read(1.0)
    stats = Stats()
    count.say(stats, Notes(said.append, clock))
    assert not count.pending and stats.past_horizon == 5 and stats.past_horizon_max_s == 650.0
    (note,) = said
    assert note.kind is NoteKind.PAST_HORIZON and note.args["count"] == 5 and note.args["suggest_s"] == 660.0
    count.start(1_000_000, 3_000_000, job_start_ms=0)
    clock.t += 1.0
    replies["q3"] = {"status": "Failed"}
    count.read(1.0)
    stats, said = Stats(), []
    count.say(stats, Notes(said.append, clock))
    assert count.unknown and not said and stats.past_horizon == 0  # a total it cannot vouch for is not given


def test_a_drain_timeout_says_how_many_slices_were_left_unchecked():
    from launcher.jobs.logrecords import NoteKind

    lag = emulator.LagModel(tail=0.5, tail_min=90.0, tail_max=250.0)
    logs, _, end, lines, clock, notes = _synthetic("hurry", 8, 6, lag=lag, drain_timeout=0.0)
    logs.get_query_results = lambda **_kw: {"status": "Running"}
    tally = _tally(logs, lines)
    (note,) = [n for n in notes if n.kind is NoteKind.FINAL_UNCHECKED]
    assert note.args["slices"] == lines.stats.unchecked_slices > 0 and tally[0] > 0
    assert f"({note.args['slices']} slice(s), " in note.message and clock.t - end <= 15.0


class _PagedLogs:
    """FilterLogEvents serving `pages` (lists of events) one after another through nextToken; every call's
    arguments kept. StartQuery answers, and each query ends Failed."""

    def __init__(self, pages):
        self.pages, self.filtered = pages, []

    def filter_log_events(self, **params):
        self.filtered.append(params)
        k = int(params.get("nextToken", 0))
        return {"events": self.pages[k], **({"nextToken": str(k + 1)} if k + 1 < len(self.pages) else {})}

    def start_query(self, **_params):
        return {"queryId": "q1"}

    def get_query_results(self, **_params):
        return {"status": "Failed"}


def _late_pages(job, first_ts, ingested, pages=5, per_page=2):
    """Pages of lines of one host, each line reaching CloudWatch at `ingested` (ms), long after its timestamp."""
    return [[{"logStreamName": f"{job}/algo-1-1", "eventId": f"e{p}-{i}", "timestamp": first_ts + 1000 * p + i,
              "ingestionTime": ingested, "message": f"page={p} line={i}"} for i in range(per_page)]
            for p in range(pages)]


def _late_reader(job, logs, clock, **kw):
    return LogReader(job, logs, RateLimiter(100.0, clock=clock, sleep=clock.sleep), clock=clock, sleep=clock.sleep,
                     horizon_s=300.0, sweep_span_s=30.0, **kw)


def _checked(late, now_ms, budget):
    return [ln.message for page in late.check(now_ms, now_ms, budget) for ln in page]


def test_a_sweep_reads_as_many_pages_as_the_polls_budget_allows_and_goes_on_from_there_next_poll(clock):
    # Without Logs Insights a slice is re-read with FilterLogEvents, a few pages a poll: a poll given a budget
    # of n calls reads n pages (one at least) and prints their late lines; the next poll reads on from its token.
    now_ms = int(clock.t) * 1000
    logs = _PagedLogs(_late_pages("sw", now_ms - 300_000, now_ms - 200_000))
    reader = _late_reader("sw", logs, clock, insights=False)
    reader.late.begin(now_ms - 30_000)  # one 30 s slice of timestamps is a horizon old now
    assert _checked(reader.late, now_ms, 1) == ["page=0 line=0", "page=0 line=1"]
    assert len(logs.filtered) == reader.stats.sweep_calls == 1
    assert _checked(reader.late, now_ms, 3) == [f"page={p} line={i}" for p in (1, 2, 3) for i in (0, 1)]
    assert len(logs.filtered) == reader.stats.sweep_calls == 4
    assert [c.get("nextToken") for c in logs.filtered] == [None, "1", "2", "3"]
    assert _checked(reader.late, now_ms, 3) == ["page=4 line=0", "page=4 line=1"]  # the slice ends there
    assert len(logs.filtered) == 5 and reader.late.check_from == now_ms - 300_000


def test_a_window_whose_query_failed_is_re_read_as_many_pages_as_the_polls_budget_allows(clock):
    # A Logs Insights query that ends Failed leaves its window of arrivals to FilterLogEvents: a later poll given
    # a budget of n calls reads n pages of its timestamps and prints the lines that arrived late in it.
    now_ms = int(clock.t) * 1000
    cut = now_ms - 61_000  # arrivals up to it were read; the window runs from it to CloudWatch's clock now
    logs = _PagedLogs(_late_pages("win", cut - 40_000, cut + 5_000))
    notes = []
    reader = _late_reader("win", logs, clock, on_note=notes.append)
    reader.late.begin(now_ms)
    reader.late.start_at(cut)
    assert _checked(reader.late, now_ms, 2) == [] and logs.filtered == []  # StartQuery, then its Failed results
    assert any("ended Failed" in n.message for n in notes)
    later = int(clock.t * 1000)
    assert _checked(reader.late, later, 3) == [f"page={p} line={i}" for p in (0, 1, 2) for i in (0, 1)]
    assert len(logs.filtered) == reader.stats.sweep_calls == 3
    assert logs.filtered[0]["startTime"] == cut - 300_000
    assert _checked(reader.late, later, 1) == ["page=3 line=0", "page=3 line=1"]
    assert len(logs.filtered) == 4


def _client_error(code, op):
    return ClientError({"Error": {"Code": code, "Message": f"{op}: {code}"},
                        "ResponseMetadata": {"HTTPStatusCode": 400}}, op)


class _InsightsLogs(_PagedLogs):
    """_PagedLogs that serves one host's `late` lines (timestamp, arrival, message), all on one page, and answers
    Logs Insights from them as CloudWatch does: a query's rows are the lines within its bounds of arrival and of
    timestamp (StartQuery's whole seconds, a part's own bounds), at most its limit, with the count it matched; a
    count per second (`by sec`) answers the counts, or `per_second` when set. The query started i-th answers
    Running `running[i]` times first. Every query started and every read of results kept."""

    def __init__(self, job, late):
        stream = f"{job}/algo-1-1"
        super().__init__([[{"logStreamName": stream, "eventId": f"e{ts}", "timestamp": ts, "ingestionTime": at,
                            "message": message} for ts, at, message in late]])
        self.stream, self.late = stream, late
        self.started, self.read, self.running, self.per_second = [], [], {}, None

    def start_query(self, **params):
        self.started.append(params)
        return {"queryId": str(len(self.started) - 1)}

    def get_query_results(self, queryId):  # noqa: N803
        self.read.append(queryId)
        params = self.started[int(queryId)]
        if self.running.get(int(queryId)):
            self.running[int(queryId)] -= 1
            return {"status": "Running"}
        query = params["queryString"]
        lo, hi = (int(re.search(rf"@ingestionTime\) {op} (\d+)", query)[1]) for op in (">", "<="))
        ts_lo, ts_hi = params["startTime"] * 1000, (params["endTime"] + 1) * 1000
        own = re.search(r"@timestamp\) >= (\d+) and toMillis\(@timestamp\) < (\d+)", query)
        if own:
            ts_lo, ts_hi = max(ts_lo, int(own[1])), min(ts_hi, int(own[2]))
        hits = sorted((ts, at, m) for ts, at, m in self.late if lo < at <= hi and ts_lo <= ts < ts_hi)
        if "by sec" in query:
            counts = Counter(ts // 1000 for ts, _, _ in hits)
            return {"status": "Complete", "results": self.per_second if self.per_second is not None else [
                [{"field": "sec", "value": str(s)}, {"field": "n", "value": str(n)}] for s, n in counts.items()]}
        rows = [[{"field": "@logStream", "value": self.stream}, {"field": "@message", "value": m},
                 {"field": "ts", "value": str(ts)}, {"field": "ingested", "value": str(at)},
                 {"field": "@ptr", "value": f"p{ts}"}] for ts, at, m in hits[:params["limit"]]]
        return {"status": "Complete", "results": rows, "statistics": {"recordsMatched": float(len(hits))}}


def _parts_asked(logs):
    """The timestamps [from, to) of each part of a window asked for, in the order their queries started."""
    found = (re.search(r"@timestamp\) >= (\d+) and toMillis\(@timestamp\) < (\d+)", q["queryString"])
             for q in logs.started)
    return [(int(m[1]), int(m[2])) for m in found if m]


def test_the_late_check_says_up_to_which_timestamp_every_line_was_handed_over_as_its_windows_are_read(clock):
    # Before the log group exists StartQuery finds none: nothing can have arrived late in the window, so it is not
    # asked again, and every line up to the horizon before its arrivals has been handed over.
    now_ms = int(clock.t) * 1000
    cut = now_ms - 61_000
    logs = _InsightsLogs("grp", [])

    def no_group(**params):
        logs.started.append(params)
        raise _client_error("ResourceNotFoundException", "StartQuery")

    logs.start_query = no_group
    reader = _late_reader("grp", logs, clock)
    reader.late.begin(now_ms)
    assert reader.late.check_from is None  # no read yet
    reader.late.start_at(cut)
    assert reader.late.check_from == cut - 300_000
    assert _checked(reader.late, now_ms, 5) == []
    assert len(logs.started) == 1 and logs.read == [] and reader.stats.late_check == "insights"
    assert reader.late.check_from == now_ms - 1_000 - 300_000  # the window's arrivals: CloudWatch's clock, less 1 s


def test_a_start_query_without_a_query_id_gives_insights_up_and_the_poll_re_reads_the_windows_timestamps(clock):
    from launcher.jobs.logrecords import NoteKind

    now_ms = int(clock.t) * 1000
    cut = now_ms - 61_000
    logs = _PagedLogs(_late_pages("noid", cut - 290_000, cut + 5_000))
    logs.start_query = lambda **_params: {}
    notes = []
    reader = _late_reader("noid", logs, clock, on_note=notes.append)
    reader.late.begin(now_ms)
    reader.late.start_at(cut)
    # StartQuery, then the two calls left of the budget read two pages from the earliest timestamp not checked
    assert _checked(reader.late, now_ms, 3) == [f"page={p} line={i}" for p in (0, 1) for i in (0, 1)]
    assert [c["startTime"] for c in logs.filtered] == [cut - 300_000] * 2
    (note,) = [n for n in notes if n.kind is NoteKind.INSIGHTS_MISSING]
    assert "(StartQuery returned no queryId)" in note.message
    assert reader.stats.late_check == "sweep" and reader.stats.queries == 0
    assert not [n for n in notes if n.kind is NoteKind.QUERY_ENDED]  # no results were asked for


def _window_with_results(job, clock, results):
    """A reader whose late check starts one window 61 s back, its GetQueryResults answered by `results`."""
    now_ms = int(clock.t) * 1000
    cut = now_ms - 61_000
    logs = _PagedLogs(_late_pages(job, cut - 290_000, cut + 5_000))
    logs.get_query_results = results
    notes = []
    reader = _late_reader(job, logs, clock, on_note=notes.append)
    reader.late.begin(now_ms)
    reader.late.start_at(cut)
    return reader, logs, notes, now_ms, cut


def test_results_refused_give_insights_up_and_the_polls_calls_left_re_read_the_window(clock):
    from launcher.jobs.logrecords import NoteKind

    def refused(**_params):
        raise _client_error("AccessDeniedException", "GetQueryResults")

    reader, logs, notes, now_ms, cut = _window_with_results("deny", clock, refused)
    # StartQuery, its results refused, and the one call left of the budget reads a page
    assert _checked(reader.late, now_ms, 3) == ["page=0 line=0", "page=0 line=1"]
    assert [c["startTime"] for c in logs.filtered] == [cut - 300_000]
    (note,) = [n for n in notes if n.kind is NoteKind.INSIGHTS_MISSING]
    assert "(AccessDeniedException)" in note.message and reader.stats.late_check == "sweep"


def test_a_query_ending_in_a_status_not_known_is_re_read_in_the_same_poll_and_the_note_names_it_cut(clock):
    from launcher.jobs.logrecords import NoteKind

    reader, logs, notes, now_ms, cut = _window_with_results(
        "odd", clock, lambda **_params: {"status": "StatusFromTheFuture42"})
    # StartQuery, its results, and the one call left of the budget reads a page of the window's timestamps
    assert _checked(reader.late, now_ms, 3) == ["page=0 line=0", "page=0 line=1"]
    assert [c["startTime"] for c in logs.filtered] == [cut - 300_000]
    (note,) = [n for n in notes if n.kind is NoteKind.QUERY_ENDED]
    assert note.message == ("a Logs Insights query for late lines ended StatusFromTheFuture…; re-reading its "
                            "timestamps instead")


def test_a_cut_window_whose_counts_per_second_lack_their_fields_is_asked_again_in_even_parts(clock, monkeypatch):
    # Ten late lines arrive in one window; a query returns 4. The count per second comes back without its fields,
    # so the window is asked again in three parts of its 360 whole seconds; the first part, cut too (5 lines), is
    # asked again in halves while the second part's query still runs. Every line prints once.
    monkeypatch.setattr("launcher.jobs.late_check.LATE_LIMIT", 4)
    monkeypatch.setattr("launcher.jobs.late_check.LATE_LIMIT_FINAL", 4)
    now_ms = int(clock.t) * 1000
    cut = now_ms - 61_000
    late = [(now_ms - s * 1000, cut + 5_000, f"{s}s before") for s in (350, 340, 290, 280, 270, 200, 180, 160, 100, 80)]
    logs = _InsightsLogs("even", late)
    logs.per_second = [[{"field": "sec"}]]
    logs.running = {3: 1}  # the second part
    reader = _late_reader("even", logs, clock)
    reader.late.begin(now_ms)
    reader.late.start_at(cut)
    printed = _checked(reader.late, now_ms, None)
    assert sorted(printed) == sorted(m for _, _, m in late) and reader.stats.sweep_calls == 0
    first, end = now_ms - 361_000, now_ms - 999  # the window's timestamps: from a horizon before its arrivals
    thirds = [(first, now_ms - 241_000), (now_ms - 241_000, now_ms - 121_000), (now_ms - 121_000, end)]
    assert _parts_asked(logs) == [*thirds, (first, now_ms - 302_000), (now_ms - 302_000, now_ms - 241_000)]


def test_a_cut_window_whose_count_per_second_finds_no_line_is_done_without_another_query(clock, monkeypatch):
    monkeypatch.setattr("launcher.jobs.late_check.LATE_LIMIT", 4)
    now_ms = int(clock.t) * 1000
    cut = now_ms - 61_000
    logs = _InsightsLogs("gone", [(now_ms - s * 1000, cut + 5_000, f"{s}s before") for s in range(100, 110)])
    logs.per_second = []
    reader = _late_reader("gone", logs, clock)
    reader.late.begin(now_ms)
    reader.late.start_at(cut)
    assert _checked(reader.late, now_ms, None) == []
    assert ["by sec" in q["queryString"] for q in logs.started] == [False, True] and logs.read == ["0", "1"]
    assert reader.late.check_from == now_ms - 1_000 - 300_000 and logs.filtered == []


def test_a_burst_too_dense_to_split_waits_behind_the_next_windows_query(monkeypatch):
    # The job's first lines, written in its first second, reach CloudWatch 2.9 s late, more of them than a query
    # returns: that second cannot be split, so it is re-read with FilterLogEvents, behind the window of the
    # arrivals since (whose findings size the windows after it).
    monkeypatch.setattr("launcher.jobs.late_check.LATE_LIMIT", 4)
    clock = VirtualClock(1_800_000_003.9995)
    now_ms = int(clock.t * 1000)
    since, hi = 1_800_000_000_001, now_ms - 1_000  # the window's timestamps lie in whole seconds 1 and 2 of the job
    logs = _InsightsLogs("dense", [(since + k, hi - 100, f"line {k}") for k in range(10)])
    logs.per_second = [[{"field": "n"}]]  # no count that can be used
    reader = _late_reader("dense", logs, clock, since_ms=since)
    reader.late.begin(now_ms)
    reader.late.start_at(now_ms - 61_000)
    assert _checked(reader.late, now_ms, 4) == []  # the window's query, its results, the count's, its results
    clock.t += 31
    later = int(clock.t * 1000)
    assert _checked(reader.late, later, 1) == []
    assert len(logs.started) == 3 and logs.filtered == []  # the new window's query went first
    assert f"toMillis(@ingestionTime) > {hi}" in logs.started[2]["queryString"]
    assert sorted(_checked(reader.late, later, None)) == [f"line {k}" for k in range(10)]
    assert len(logs.filtered) == 1 and logs.filtered[0]["startTime"] == since


def test_a_sweep_after_insights_was_given_up_skips_the_lines_insights_returned(clock):
    # Insights returns one late line; then StartQuery is refused and the arrivals since are re-read with
    # FilterLogEvents, which returns that line again with a newer one: only the newer one prints.
    now_ms = int(clock.t) * 1000
    cut = now_ms - 61_000
    seen, new = (now_ms - 285_000, now_ms - 6_000, "seen"), (now_ms - 290_000, now_ms + 4_000, "new")
    logs = _InsightsLogs("twice", [seen, new])
    reader = _late_reader("twice", logs, clock)
    reader.late.begin(now_ms)
    reader.late.start_at(cut)
    assert _checked(reader.late, now_ms, None) == ["seen"]

    def refused(**_params):  # logs:StartQuery taken away while following
        raise _client_error("AccessDeniedException", "StartQuery")

    logs.start_query = refused
    clock.t += 31
    later = int(clock.t) * 1000
    assert _checked(reader.late, later, 3) == ["new"]  # the sweep returned both
    assert len(logs.filtered) == 1 and reader.stats.duplicates == 1 and reader.stats.late_check == "sweep"


def test_a_sweep_drops_the_lines_of_streams_outside_the_job_a_server_returns(clock):
    # moto ignores logStreamNamePrefix: another job's streams come back too, and are not the job's lines.
    now_ms = int(clock.t) * 1000
    pages = _late_pages("pre", now_ms - 300_000, now_ms - 200_000, pages=1)
    pages[0][1]["logStreamName"] = "pre-other/algo-1-1"
    logs = _PagedLogs(pages)
    reader = _late_reader("pre", logs, clock, insights=False)
    reader.late.begin(now_ms - 30_000)
    assert _checked(reader.late, now_ms, 1) == ["page=0 line=0"]
    assert reader.stats.foreign == 1 and reader.stats.events == 2


def test_a_drain_timeout_while_the_check_waits_for_arrivals_counts_the_wait_as_a_slice_left(clock):
    # A late line arrived 2 s before the last window's end: the end-of-job check waits the quiet time (10 s) past
    # it. A drain timeout of 0 stops it at once: the 8 s of arrivals it waited for are left unchecked.
    from launcher.jobs.logrecords import NoteKind

    now_ms = int(clock.t) * 1000
    cut = now_ms - 61_000
    logs = _InsightsLogs("wait", [(now_ms - 61_000, now_ms - 3_000, "late")])
    notes = []
    reader = _late_reader("wait", logs, clock, drain_timeout_s=0.0, on_note=notes.append)
    reader.late.begin(now_ms)
    reader.late.start_at(cut)
    assert _checked(reader.late, now_ms, None) == ["late"]
    assert [ln for page in reader.late.finish(now_ms) for ln in page] == []
    (note,) = [n for n in notes if n.kind is NoteKind.FINAL_UNCHECKED]
    assert (note.args["slices"], note.args["left_s"]) == (1, 8.0) and reader.stats.unchecked_slices == 1
    assert "(1 slice(s), 8s of arrivals, left unchecked after 0s)" in note.message


@pytest.mark.parametrize(("horizon_s", "slices", "left_s"), [(300.0, 9, 300.001), (100.0, 4, 100.001)])
def test_a_drain_timeout_without_insights_counts_the_slices_planned_and_the_rest_as_one(clock, horizon_s, slices,
                                                                                         left_s):
    # The end-of-job sweep plans 8 slices of 30 s at a time; a timeout before any is read leaves those, and the
    # timestamps not yet planned count as one more.
    from launcher.jobs.logrecords import NoteKind

    now_ms = int(clock.t) * 1000
    logs = _PagedLogs([[]])
    notes = []
    reader = LogReader("nolog", logs, RateLimiter(100.0, clock=clock, sleep=clock.sleep), clock=clock,
                       sleep=clock.sleep, horizon_s=horizon_s, sweep_span_s=30.0, insights=False, drain_timeout_s=0.0,
                       on_note=notes.append)
    reader.late.begin(now_ms)  # every timestamp a horizon back is to be re-read
    assert list(reader.late.finish(now_ms)) == [] and logs.filtered == []
    (note,) = [n for n in notes if n.kind is NoteKind.FINAL_UNCHECKED]
    assert note.args["slices"] == slices == reader.stats.unchecked_slices
    assert note.args["left_s"] == pytest.approx(left_s, abs=1e-6) == reader.stats.unchecked_s
    assert f"({slices} slice(s), {left_s:.0f}s of arrivals, " in note.message


def _past_horizon_count(failure):
    """A count of the lines past the horizon over two stretches: the first counts 3, the second fails as `failure`
    says. (the count, the clock)"""
    from launcher.jobs.past_horizon import PastHorizonCount
    from launcher.jobs.ratelimit import Unsupported

    clock = VirtualClock()
    started = []

    def start_query(ts_lo, ts_hi, query, limit):
        if failure == "start refused" and started:
            raise Unsupported("AccessDeniedException")
        started.append(query)
        return f"q{len(started)}"

    def results(query_id):
        if query_id == "q1":
            return {"status": "Complete", "results": [[{"field": "n", "value": "3"},
                                                       {"field": "worst", "value": "400000"}]]}
        if failure == "results refused":
            raise Unsupported("AccessDeniedException")
        if failure == "unreadable":
            return {"status": "Complete", "results": [[{"field": "n", "value": "many"}]]}
        return {"status": "Running"}

    count = PastHorizonCount("job", "job\\/", 300_000, None, start_query, results, clock)
    count.start(1_000_000, 2_000_000, job_start_ms=0)
    clock.t += 1.0
    count.read(1.0)
    assert count.count == 3 and not count.pending
    count.start(1_000_000, 2_500_000, job_start_ms=0)
    return count, clock


@pytest.mark.parametrize("failure", ["start refused", "results refused", "unreadable", "still running"])
def test_a_count_past_the_horizon_that_fails_any_way_leaves_the_total_unsaid(failure):
    from launcher.jobs.logrecords import Notes, Stats

    count, clock = _past_horizon_count(failure)
    clock.t += 1.0
    count.read(1.0)
    if failure == "still running":
        assert count.pending
        clock.t += 300.0
        count.give_up_older_than(300.0)
    said, stats = [], Stats()
    count.say(stats, Notes(said.append, clock))
    assert not said and stats.past_horizon == 0  # a total it cannot vouch for is not given
    assert count.unknown and not count.pending


def test_several_jobs_followed_together_share_the_rate_and_each_line_is_labelled_by_job_and_host():
    from launcher.cli.logprint import Printer
    from launcher.jobs.logs import follow_many
    from tests.emulation import ThreadedVirtualClock

    jobs = [f"sweep-{i}" for i in range(4)]
    clock = ThreadedVirtualClock(threads=len(jobs))
    start = clock.t + 5
    per_job = {job: SyntheticLogs(job, 4, 20.0, start, 120, clock, seed=i) for i, job in enumerate(jobs)}

    class Logs:  # one account's Logs: each job's reads go to its own synthetic streams
        def __getattr__(self, op):
            def call(**params):
                if op == "filter_log_events":
                    return per_job[params["logStreamNamePrefix"].rstrip("/")].filter_log_events(**params)
                if op == "start_query":
                    job = params["queryString"].split("like /^", 1)[1].split("\\/", 1)[0]
                    reply = per_job[job].start_query(**params)
                    return {"queryId": f"{job}:{reply['queryId']}"}
                job, query_id = params["queryId"].split(":", 1)
                return per_job[job].get_query_results(queryId=query_id)

            return call

    class SageMaker:
        def describe_training_job(self, TrainingJobName):  # noqa: N803
            return _FakeSageMaker(TrainingJobName, 4, start + 130, clock).describe_training_job(TrainingJobName)

    out, err = io.StringIO(), io.StringIO()
    printer = Printer(out, err, with_job=True)
    hooks = printer.hooks()
    limiter = RateLimiter(2.0, clock=clock, sleep=clock.sleep)
    results = follow_many(jobs, types.SimpleNamespace(logs=Logs(), sagemaker=SageMaker()),
                          polling=Polling(interval=5.0, clock=clock, sleep=clock.sleep, rng=random.Random(0),
                                          limiter=limiter),
                          on_line=hooks["on_line"], on_note=hooks["on_note"], on_idle=hooks["on_idle"])
    assert [r.status for r in results] == ["Completed"] * 4 and {r.exit_code for r in results} == {0}
    lines = out.getvalue().splitlines()
    for job, logs in per_job.items():
        mine = [ln for ln in lines if ln.startswith(f"[{job}/algo-")]
        assert len(mine) == len(set(mine)) == logs.expected()  # every line of every job, once, labelled
    calls = sum(logs.calls for logs in per_job.values())
    assert calls / (clock.t - start + 5) <= 2.0  # all jobs within one --rate
    assert clock.t - (start + 130) <= 30.0


def test_several_jobs_followed_together_raise_the_first_jobs_error(sm, clock):
    from launcher.jobs.logs import follow_many
    from launcher.jobs.status import JobNotFound

    polling = Polling(clock=clock, sleep=clock.sleep, limiter=RateLimiter(2.0, clock=clock, sleep=clock.sleep))
    with pytest.raises(JobNotFound, match="no training job named 'nosuch'"):
        follow_many(["nosuch"], Clients(), polling=polling)


def test_ctrl_c_while_several_jobs_are_followed_ends_every_follow_as_interrupted(ctrl_c_reaches_python):
    import _thread
    import sys
    import threading
    import time

    from launcher.core.errors import EXIT_INTERRUPTED
    from launcher.jobs.logs import follow_many

    release = threading.Event()

    def main_thread_joins():
        frame = sys._current_frames().get(threading.main_thread().ident)
        while frame is not None and frame.f_code.co_name != "join":
            frame = frame.f_back
        return frame is not None

    class SageMaker:  # Ctrl-C lands once every follow is under way; every describe waits until the test is done
        asked = 0

        def describe_training_job(self, TrainingJobName):  # noqa: N803
            SageMaker.asked += 1
            if SageMaker.asked == 2:
                deadline = time.monotonic() + 60  # however slow the machine: the main thread gets there
                while not main_thread_joins() and time.monotonic() < deadline:
                    time.sleep(0.01)
                _thread.interrupt_main()
            release.wait(60)
            return {"TrainingJobName": TrainingJobName, "TrainingJobStatus": "Completed",
                    "SecondaryStatusTransitions": []}

    clock = VirtualClock()
    clients = types.SimpleNamespace(sagemaker=SageMaker(), logs=types.SimpleNamespace(
        filter_log_events=lambda **_kw: {"events": []}))
    try:
        results = follow_many(["one", "two"], clients, polling=Polling(
            clock=clock, sleep=clock.sleep, limiter=RateLimiter(100.0, clock=clock, sleep=clock.sleep)))
    finally:
        release.set()  # the follows' threads go on to the (Completed) job's end on the virtual clock
    assert [(r.job, r.exit_code, r.interrupted) for r in results] == [
        ("one", EXIT_INTERRUPTED, True), ("two", EXIT_INTERRUPTED, True)]
    for thread in [t for t in threading.enumerate() if t.name in ("follow one", "follow two")]:
        thread.join(30)
        assert not thread.is_alive()  # nothing left running behind the caller's back
