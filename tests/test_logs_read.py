"""The follower's reads against emulated jobs in-process: one call per poll whatever the host count, no line lost
or repeated, filters, exit codes, backoff when CloudWatch throttles or fails, and the one rate limiter."""
import dataclasses
import io
import random
import types

import boto3
import botocore.endpoint
import pytest

import emulator
from launcher.core.aws import Clients
from launcher.core.errors import EXIT_INTERRUPTED, EXIT_JOB_FAILED, EXIT_OK, EXIT_STOPPED
from launcher.jobs.logs import LogLine, Polling, iter_lines
from launcher.jobs.ratelimit import RateLimiter
from launcher.jobs.reader import LogReader
from tests.emulation import VirtualClock, body_of, lost_and_duplicated, printed_follow
from tests.emulation import follow_printed as run


@pytest.fixture
def sm(clock):
    """A SageMaker client of moto in-process, the emulated jobs on the virtual clock."""
    with emulator.mocked():
        yield boto3.client("sagemaker", region_name="us-west-2")


def count_calls(clients: Clients) -> dict:
    """Count every Logs API call the follower makes, by operation."""
    seen: dict = {}

    def hook(model, **_kw):
        seen[model.name] = seen.get(model.name, 0) + 1

    clients.logs.meta.events.register("before-call.cloudwatch-logs", hook)
    return seen




@pytest.mark.parametrize("hosts", [1, 64])
def test_one_filter_call_per_poll_whatever_the_host_count(sm, clock, hosts):
    job = emulator.add_job(emulator.EmulatedJob("cost-job", hosts=hosts, training=20, late_hosts={hosts: 4.0}), sm)
    clients = Clients()
    calls = count_calls(clients)
    result, out, _ = run("cost-job", clock, clients)
    assert result.exit_code == EXIT_OK and result.status == "Completed"
    # never GetLogEvents or DescribeLogStreams per host; late lines come from Logs Insights
    assert set(calls) <= {"FilterLogEvents", "StartQuery", "GetQueryResults"}, calls
    assert calls["FilterLogEvents"] == result.stats.polls and result.stats.sweep_calls == 0  # one read a poll
    assert calls.get("StartQuery", 0) == result.stats.queries <= 1  # the job's end: one query for late lines
    assert lost_and_duplicated(job.expected_messages(), body_of(out)) == (0, 0)


def test_late_streams_backdated_lines_and_decoys(sm, clock):
    job = emulator.add_job(emulator.EmulatedJob("job-a", hosts=4, training=30, late_hosts={3: 7.0, 4: 12.5},
                                                backdate_every=3, backdate_seconds=4.0), sm)
    result, out, _ = run("job-a", clock)
    printed = body_of(out)
    assert lost_and_duplicated(job.expected_messages(), printed) == (0, 0)
    assert {ln.split("]", 1)[0] for ln in out.splitlines() if ln.startswith("[")} == {
        "[algo-1", "[algo-2", "[algo-3", "[algo-4"}
    assert "decoy" not in out and result.stats.foreign > 0  # moto ignores the prefix; we re-check it
    assert result.stats.duplicates > 0  # the overlap window re-read lines and eventIds dropped them


def test_exit_codes_and_failure_reason(sm, clock):
    emulator.add_job(emulator.EmulatedJob("ok", training=4), sm)
    emulator.add_job(emulator.EmulatedJob("bad", training=4, outcome="Failed"), sm)
    emulator.add_job(emulator.EmulatedJob("halted", training=60, stop_after=6.0), sm)
    ok, _, ok_err = run("ok", clock)
    bad, bad_out, bad_err = run("bad", clock)
    halted, _, _ = run("halted", clock)
    assert (ok.exit_code, bad.exit_code, halted.exit_code) == (EXIT_OK, EXIT_JOB_FAILED, EXIT_STOPPED)
    assert halted.status == "Stopped"
    assert "bad Failed: AlgorithmError: ExecuteUserScriptError" in bad_err
    assert "RuntimeError: CUDA out of memory" in bad_out  # the last line, caught by the final flush
    assert "billable seconds:" in ok_err


def test_host_and_grep_filters(sm, clock):
    emulator.add_job(emulator.EmulatedJob("filt", hosts=4, training=10), sm)
    _, out, _ = run("filt", clock, hosts=[2, 4], grep=r"step=[0-9]\b")
    labels = {ln.split("]", 1)[0] for ln in out.splitlines()}
    assert labels == {"[algo-2", "[algo-4"}
    assert all("step=" in ln for ln in out.splitlines()) and len(out.splitlines()) == 2 * 9


def test_no_follow_prints_what_exists_and_returns(sm, clock):
    job = emulator.add_job(emulator.EmulatedJob("running", hosts=2, training=600), sm)
    clock.t += 3 + 20.5  # 20 s into training
    result, out, err = run("running", clock, until_end=False)
    assert result.exit_code == EXIT_OK and len(body_of(out)) == 2 * 21
    assert body_of(out)[0] == job.line(1, 0, False)
    emulator.add_job(emulator.EmulatedJob("fresh"), sm)
    result, out, err = run("fresh", clock, until_end=False)
    assert out == "" and "no log lines yet for fresh (InProgress, Starting)" in err


def test_since_skips_older_lines(sm, clock):
    emulator.add_job(emulator.EmulatedJob("recent", hosts=1, training=600), sm)
    clock.t += 3 + 100.5
    _, out, _ = run("recent", clock, until_end=False, since=10)
    assert len(body_of(out)) == 10  # one line a second, the newest 0.5 s old


def test_a_host_beyond_the_jobs_count_is_warned_about(sm, clock):
    emulator.add_job(emulator.EmulatedJob("two", hosts=2, training=5), sm)
    clock.t += 20
    _, out, err = run("two", clock, until_end=False, hosts=[2, 9])
    assert "warning: two has 2 host(s), algo-1 to algo-2; nothing will print for algo-9" in err
    assert out and all(ln.startswith("[algo-2]") for ln in out.splitlines())


def test_paging_resumes_next_poll_without_loss(sm, clock):
    job = emulator.add_job(emulator.EmulatedJob("paged", hosts=8, training=20, backdate_every=5), sm)
    clients = Clients()
    out, err = io.StringIO(), io.StringIO()
    from launcher.cli.logprint import Printer

    printer = Printer(out, err)
    polling = Polling(interval=1.0, settle=4.0, limiter=RateLimiter(100, clock=clock, sleep=clock.sleep),
                      clock=clock, sleep=clock.sleep, rng=random.Random(0))
    limits = []
    real = clients.logs

    class Recording:  # every FilterLogEvents call's page size, the real (emulated) answer
        def __getattr__(self, op):
            return getattr(real, op)

        def filter_log_events(self, **params):
            limits.append(params.get("limit"))
            return real.filter_log_events(**params)

    clients._cache["logs"] = Recording()
    lines = iter_lines("paged", clients, until_end=True, on_note=printer.note, polling=polling)
    reader = lines.reader
    assert reader.page_size is None  # CloudWatch's own page size unless asked
    reader.page_size, reader.max_pages = 7, 2
    assert (reader.page_size, reader.max_pages) == (7, 2)
    for line in lines:
        printer.line(line)
    assert lost_and_duplicated(job.expected_messages(), body_of(out.getvalue())) == (0, 0)
    assert reader.stats.calls > reader.stats.polls  # pages beyond the first were read
    assert limits and set(limits) == {7}  # both reads page at the size asked for


def test_dedup_memory_stays_bounded_on_a_long_job(sm, clock):
    # 10 minutes of training: twice the 5-minute horizon, so ids kept for the whole horizon would pile up
    # to about 1,400, far above the bound below.
    job = emulator.add_job(emulator.EmulatedJob("long", hosts=4, training=600, decoy=False), sm)
    result, out, _ = run("long", clock, interval=5.0)
    assert len(body_of(out)) == len(job.expected_messages()) == 4 * 600
    # eventIds are kept for the overlap window and a poll, not the 5-minute horizon (about 1,400 here)
    assert result.stats.max_seen <= 4 * (2 + 5 + 2 * 2 + 5)


def test_seen_ids_and_late_keys_forget_whole_buckets():
    from launcher.jobs.fresh_read import LateKeys, SeenIds
    from launcher.jobs.logrecords import BUCKET_MS

    ids = SeenIds()
    assert ids.add("a", 5) and ids.add("b", BUCKET_MS + 5) and not ids.add("a", 5)
    ids.forget_below(BUCKET_MS)
    assert ids.size == 1 and ids.add("a", 5)  # forgotten with its bucket; bucket 1 kept
    assert not ids.add("b", BUCKET_MS + 5)
    keys = LateKeys()
    k = LateKeys.key("j/algo-1-1", 5, "same line")
    keys.add(k, 5)
    keys.add(k, 5)  # the same text twice in one millisecond: two lines
    assert keys.take(k, 5) and keys.take(k, 5) and not keys.take(k, 5) and keys.size == 0
    keys.add(k, 5)
    keys.forget_below(BUCKET_MS)
    assert keys.size == 0 and not keys.take(k, 5)


def test_returns_within_15s_of_the_job_ending(sm, clock):
    emulator.add_job(emulator.EmulatedJob("quick-end", hosts=4, training=120, uploading=3.0,
                                          lag=emulator.LagModel()), sm)
    result, _, _ = run("quick-end", clock, interval=5.0)
    end = sm.describe_training_job(TrainingJobName="quick-end")["TrainingEndTime"].timestamp()
    assert result.status == "Completed" and clock.t - end <= 15.0


def test_own_backoff_on_throttling_with_a_hint(sm, clock):
    job = emulator.add_job(emulator.EmulatedJob("thr", hosts=3, training=20), sm)
    clients = Clients(max_attempts=0)  # no botocore retries: every throttle reaches the follower
    policy = emulator.attach(clients.logs, emulator.Throttle(0.3, seed=4))
    result, out, err = run("thr", clock, clients)
    assert policy.throttled > 0 and result.stats.throttled == policy.throttled
    assert "CloudWatch Logs is throttling reads" in err and "retrying in" in err
    assert lost_and_duplicated(job.expected_messages(), body_of(out)) == (0, 0)


def test_botocore_retries_absorb_throttling(sm, clock, monkeypatch):
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=clock.sleep))
    job = emulator.add_job(emulator.EmulatedJob("retry", hosts=3, training=20), sm)
    clients = Clients(max_attempts=4)
    policy = emulator.attach(clients.logs, emulator.Throttle(0.2, seed=7))
    result, out, err = run("retry", clock, clients)
    assert policy.throttled > 0 and result.stats.retried == policy.throttled and result.stats.throttled == 0
    assert "retried; polling more slowly" in err
    assert lost_and_duplicated(job.expected_messages(), body_of(out)) == (0, 0)


def test_server_side_throttling_in_process(sm, clock):
    job = emulator.add_job(emulator.EmulatedJob("srv", hosts=2, training=10), sm)
    policy = emulator.Throttle(0.5, seed=2)
    emulator.serve(policy)
    try:
        result, out, _ = run("srv", clock, Clients(max_attempts=0))
    finally:
        emulator.serve(None)
    assert policy.throttled > 0 and result.stats.throttled == policy.throttled
    assert lost_and_duplicated(job.expected_messages(), body_of(out)) == (0, 0)


class _Flaky:
    """A Logs client whose first reads fail the way a proxy or CloudWatch does after botocore gave up."""

    def __init__(self, real, failures):
        self.real, self.failures = real, list(failures)

    def __getattr__(self, name):
        return getattr(self.real, name)

    def filter_log_events(self, **params):
        from botocore.exceptions import ClientError, ConnectionClosedError

        if self.failures:
            kind = self.failures.pop(0)
            if kind == "reset":
                raise ConnectionClosedError(endpoint_url="http://127.0.0.1:1")
            if kind == "bare-500":  # a code this version does not know, on a status that says the server failed
                raise ClientError({"Error": {"Code": "Unexplained", "Message": "?"},
                                   "ResponseMetadata": {"HTTPStatusCode": 500}}, "FilterLogEvents")
            raise ClientError({"Error": {"Code": "InternalFailure", "Message": "internal error"},
                               "ResponseMetadata": {"HTTPStatusCode": 500, "RetryAttempts": 2}}, "FilterLogEvents")
        return self.real.filter_log_events(**params)


@pytest.mark.parametrize("failures", [["5xx", "5xx", "5xx"], ["reset", "5xx", "reset"], ["bare-500", "bare-500"]])
def test_server_errors_and_dropped_connections_are_retried_not_fatal(sm, clock, failures):
    job = emulator.add_job(emulator.EmulatedJob("flaky", hosts=2, training=20), sm)
    clients = Clients()
    clients._cache["logs"] = _Flaky(clients.logs, failures)
    result, out, err = run("flaky", clock, clients)
    assert result.exit_code == EXIT_OK
    assert "CloudWatch Logs failed a read" in err and "retrying in" in err
    assert lost_and_duplicated(job.expected_messages(), body_of(out)) == (0, 0)


def test_server_errors_past_the_retry_budget_end_in_one_line(sm, clock):
    from launcher.core.errors import LauncherError

    emulator.add_job(emulator.EmulatedJob("down", hosts=1, training=20), sm)
    clients = Clients()
    clients._cache["logs"] = _Flaky(clients.logs, ["5xx"] * 10)
    with pytest.raises(LauncherError) as err:
        run("down", clock, clients)
    assert "FilterLogEvents failed" in str(err.value) and "\n" not in str(err.value)


def test_ctrl_c_leaves_the_job_running(sm, clock):
    emulator.add_job(emulator.EmulatedJob("intr", training=600), sm)
    polls = []

    def sleep(seconds):
        polls.append(seconds)
        if len(polls) == 3:
            raise KeyboardInterrupt
        clock.sleep(seconds)

    out, err = io.StringIO(), io.StringIO()
    polling = Polling(clock=clock, sleep=sleep, interval=1.0, limiter=RateLimiter(2.0, clock=clock, sleep=clock.sleep))
    result = printed_follow("intr", Clients(), out=out, err=err, polling=polling)
    assert result.exit_code == EXIT_INTERRUPTED and result.interrupted
    assert "stopped following intr; the job keeps running" in err.getvalue()
    assert sm.describe_training_job(TrainingJobName="intr")["TrainingJobStatus"] == "InProgress"


def test_rate_limiter_spaces_calls():
    clock = VirtualClock()
    limiter = RateLimiter(2.0, clock=clock, sleep=clock.sleep)
    for _ in range(11):
        limiter.acquire()
    assert clock.slept == pytest.approx(5.0)  # one token up front, then 2 a second
    clock.t += 100  # a long idle refills to the burst (2), not more
    waits = [limiter.acquire() for _ in range(3)]
    assert waits[:2] == [0.0, 0.0] and waits[2] == pytest.approx(0.5)


def test_one_limiter_is_shared_by_every_logs_read(sm, clock):
    emulator.add_job(emulator.EmulatedJob("s1", training=10), sm)
    emulator.add_job(emulator.EmulatedJob("s2", training=10), sm)
    limiter = RateLimiter(1.0, clock=clock, sleep=clock.sleep)
    clock.t += 20
    for name in ("s1", "s2"):
        run(name, clock, until_end=False, limiter=limiter)
    assert clock.slept == pytest.approx(1.0)  # the second job's read waited for the first's token


def test_iter_lines_yields_typed_sanitised_lines_and_prints_nothing(sm, clock, capsys):
    job = emulator.add_job(emulator.EmulatedJob("api", hosts=2, training=10, decoy=False), sm)
    notes = []
    lines = iter_lines("api", Clients(), until_end=True, on_note=notes.append,
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
    monkeypatch.setattr("launcher.jobs.logs.describe", lambda *_a: {"TrainingJobStatus": "Completed"})
    (line,) = list(iter_lines("evil", clients,
                              polling=Polling(clock=clock, sleep=clock.sleep,
                                              limiter=RateLimiter(2.0, clock=clock, sleep=clock.sleep))))
    assert line.message == "a \\x1b]0;pwned\\x07 \\u202eb" and line.event_id == "1\\x1b[2J" and line.host == 1


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_is_for_a_terminal_and_never_for_json_lines(monkeypatch):
    """Kills logprint: the auto colour choice ignoring --output json (or the terminal, or NO_COLOR)."""
    from launcher.jobs.logs import Polling
    from launcher.jobs.ratelimit import RateLimiter
    from tests.emulation import VirtualClock, printed_follow

    monkeypatch.delenv("NO_COLOR", raising=False)
    clock = VirtualClock()
    emulator.set_clock(clock)
    try:
        with emulator.mocked():
            emulator.add_job(emulator.EmulatedJob("tty", hosts=2, training=3, decoy=False),
                             boto3.client("sagemaker", region_name="us-west-2"))
            clock.t += 30

            def printed(out, **kw):
                limiter = RateLimiter(2.0, clock=clock, sleep=clock.sleep)
                printed_follow("tty", Clients(region="us-west-2"), out=out, err=io.StringIO(), until_end=False, **kw,
                               polling=Polling(clock=clock, sleep=clock.sleep, limiter=limiter))
                return out.getvalue()

            assert "\x1b[36m[algo-1]" in printed(_Terminal())
            assert "\x1b[" not in printed(io.StringIO())
            as_json = printed(_Terminal(), as_json=True)
            assert "\x1b" not in as_json and as_json.lstrip().startswith("{")
            monkeypatch.setenv("NO_COLOR", "1")
            assert "\x1b[" not in printed(_Terminal())
    finally:
        emulator.set_clock(None)


def test_an_unthrottled_poll_leaves_the_interval_alone(monkeypatch):
    """Kills reader: the poll interval doubled after a poll with no throttling or retry."""
    from launcher.jobs.ratelimit import RateLimiter
    from launcher.jobs.reader import LogReader
    from tests.emulation import VirtualClock

    clock = VirtualClock()
    emulator.set_clock(clock)
    try:
        with emulator.mocked():
            emulator.add_job(emulator.EmulatedJob("calm", hosts=2, training=3, decoy=False),
                             boto3.client("sagemaker", region_name="us-west-2"))
            clock.t += 30
            reader = LogReader("calm", Clients(region="us-west-2").logs,
                               RateLimiter(2.0, clock=clock, sleep=clock.sleep), clock=clock, sleep=clock.sleep)
            for _ in range(3):
                reader.poll()
            assert reader.stats.throttled == reader.stats.retried == 0 and reader.slowdown == 1.0
    finally:
        emulator.set_clock(None)


class _QuietLogs:
    """A Logs client whose pages carry no ResponseMetadata (as a stub or another SDK may send)."""

    def filter_log_events(self, **_):
        return {"events": []}


def test_calm_polls_halve_the_slowdown_and_a_page_without_metadata_is_no_retry():
    """Kills reader: the slowdown eased by a third instead of half; a missing RetryAttempts counted as one."""
    from launcher.jobs.ratelimit import RateLimiter
    from launcher.jobs.reader import LogReader
    from tests.emulation import VirtualClock

    clock = VirtualClock()
    reader = LogReader("calm", _QuietLogs(), RateLimiter(2.0, clock=clock, sleep=clock.sleep), clock=clock,
                       sleep=clock.sleep)
    reader.slowdown = 8.0
    reader.poll()
    assert reader.stats.retried == 0 and reader.slowdown == 4.0
    reader.poll()
    assert reader.slowdown == 2.0


def test_a_rate_limit_of_zero_is_refused():
    """Kills ratelimit: a zero rate accepted (every call would then wait forever)."""
    from launcher.jobs.ratelimit import RateLimiter

    with pytest.raises(ValueError):
        RateLimiter(0)
    assert RateLimiter(0.5).rate == 0.5


class _ThrottledOnce:
    """A Logs client that refuses its first read with ThrottlingException, then answers."""

    def __init__(self):
        self.calls = 0

    def filter_log_events(self, **_):
        from botocore.exceptions import ClientError

        self.calls += 1
        if self.calls == 1:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "FilterLogEvents")
        return {"events": []}


def test_a_throttled_poll_backs_off_one_to_two_seconds_and_doubles_the_interval():
    """Kills ratelimit: the first backoff's base or the interval's doubling changed."""
    import random

    from launcher.jobs.logrecords import LogNote
    from launcher.jobs.ratelimit import RateLimiter
    from launcher.jobs.reader import LogReader
    from tests.emulation import VirtualClock

    clock = VirtualClock()
    slept: list[float] = []
    notes: list[LogNote] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.sleep(seconds)

    reader = LogReader("busy", _ThrottledOnce(), RateLimiter(1000.0, clock=clock, sleep=clock.sleep), clock=clock,
                       sleep=sleep, rng=random.Random(3), on_note=notes.append)
    reader.poll()
    assert reader.stats.throttled == 1 and reader.slowdown == 2.0
    backoffs = [s for s in slept if s >= 0.5]
    assert len(backoffs) == 1 and 1.0 <= backoffs[0] <= 2.0 and any("throttling" in n.message for n in notes)


class _Logs:
    """FilterLogEvents answering the same page every time (the fresh read's overlap re-reads lines)."""

    def __init__(self, events):
        self.events = events

    def filter_log_events(self, **_):
        return {"events": list(self.events)}


def test_the_dedup_memory_statistic_is_the_most_ids_held():
    """Kills fresh_read: stats.max_seen never rising (the dedup memory's peak, which bench_logs reports)."""
    now = 1_700_000_000.0
    ts = int(now * 1000)
    events = [{"logStreamName": f"job/algo-{h}-1", "eventId": f"id-{h}-{i}", "timestamp": ts - 3000 + i,
               "ingestionTime": ts - 3000 + i, "message": f"step {i}"} for h in (1, 2) for i in range(3)]
    reader = LogReader("job", _Logs(events), RateLimiter(100, clock=lambda: now, sleep=lambda _s: None),
                       clock=lambda: now, sleep=lambda _s: None)
    assert len(reader.poll()) == 6
    assert reader.stats.max_seen == 6
    assert reader.poll() == [] and reader.stats.duplicates == 6
    assert reader.stats.max_seen == 6  # the same ids again are not more ids held


def test_the_longest_lag_is_the_largest_seen_however_small_the_step(clock, monkeypatch):
    # Two lines the fresh read finds after they reached CloudWatch late: 3.000 s and 3.001 s after their timestamps.
    ts = int(clock.t * 1000) - 10_000
    events = [{"logStreamName": "lag/algo-1-1", "eventId": str(i), "timestamp": ts + i, "ingestionTime": ts + i + lag,
               "message": f"line {i}"} for i, lag in enumerate((3000, 3001))]
    clients = types.SimpleNamespace(logs=types.SimpleNamespace(filter_log_events=lambda **_kw: {"events": events}))
    monkeypatch.setattr("launcher.jobs.logs.describe", lambda *_a: {"TrainingJobStatus": "InProgress"})
    lines = iter_lines("lag", clients, until_end=False, polling=Polling(
        clock=clock, sleep=clock.sleep, limiter=RateLimiter(2.0, clock=clock, sleep=clock.sleep)))
    assert [ln.message for ln in lines] == ["line 0", "line 1"]
    assert lines.stats.max_late_s == 3.001


def test_a_notes_kind_and_the_late_check_mode_print_as_their_values():
    # str-valued enums print as "NoteKind.THROTTLED" unless told otherwise; a caller formats them into text
    from launcher.jobs.logrecords import LateCheckMode, NoteKind

    assert f"{NoteKind.THROTTLED} / {LateCheckMode.SWEEP}" == "throttled / sweep"


def test_the_counters_of_one_read_are_exact(clock, monkeypatch):
    # What a caller (or the bench) reads off `stats`: one FilterLogEvents page of three events, one of them from
    # another job's stream sharing the prefix, read once without following.
    ts = int(clock.t * 1000) - 10_000
    events = [{"logStreamName": stream, "eventId": str(i), "timestamp": ts + i, "ingestionTime": ts + i + 100,
               "message": f"line {i}"} for i, stream in enumerate(("cnt/algo-1-1", "cnt/algo-2-1", "cnt-x/algo-1-1"))]
    clients = types.SimpleNamespace(logs=types.SimpleNamespace(filter_log_events=lambda **_kw: {"events": events}))
    monkeypatch.setattr("launcher.jobs.logs.describe", lambda *_a: {"TrainingJobStatus": "InProgress"})
    lines = iter_lines("cnt", clients, until_end=False, polling=Polling(
        clock=clock, sleep=clock.sleep, limiter=RateLimiter(2.0, clock=clock, sleep=clock.sleep)))
    assert [ln.message for ln in lines] == ["line 0", "line 1"]
    expected = {"polls": 1, "calls": 1, "sweep_calls": 0, "query_calls": 0, "queries": 0, "retried": 0,
                "throttled": 0, "events": 3, "late_rows": 0, "duplicates": 0, "foreign": 1, "printed": 2, "late": 0,
                "max_seen": 2, "unchecked_slices": 0, "past_horizon": 0}
    counters = dataclasses.asdict(lines.stats)
    assert {name: counters[name] for name in expected} == expected
    empty = iter_lines("cnt", types.SimpleNamespace(logs=types.SimpleNamespace(
        filter_log_events=lambda **_kw: {"events": []})), until_end=False, polling=Polling(
        clock=clock, sleep=clock.sleep, limiter=RateLimiter(2.0, clock=clock, sleep=clock.sleep)))
    assert list(empty) == [] and (empty.stats.max_seen, empty.stats.printed, empty.stats.events) == (0, 0, 0)


def test_a_note_of_one_kind_goes_out_at_most_every_30_seconds_unless_it_must():
    from launcher.jobs.logrecords import NoteKind, Notes

    clock, said = VirtualClock(), []
    notes = Notes(said.append, clock)
    assert notes.hint(NoteKind.THROTTLED, "first") is True
    clock.t += 29.9
    assert notes.hint(NoteKind.THROTTLED, "too soon") is False and notes.hint(NoteKind.RETRIED, "another kind")
    clock.t += 0.1  # 30 s after the first: it may go out again
    assert notes.hint(NoteKind.THROTTLED, "again") is True
    assert notes.hint(NoteKind.THROTTLED, "forced", force=True, delay_s=1.5) is True
    assert [(n.kind, n.message) for n in said] == [(NoteKind.THROTTLED, "first"), (NoteKind.RETRIED, "another kind"),
                                                   (NoteKind.THROTTLED, "again"), (NoteKind.THROTTLED, "forced")]
    assert dict(said[-1].args) == {"delay_s": 1.5}


def test_records_are_read_only_slotted_and_notes_hash_without_their_figures():
    from dataclasses import FrozenInstanceError
    from types import MappingProxyType

    from launcher.jobs.logrecords import LogNote, NoteKind, StatusChange

    line = LogLine(1, 1, "j/algo-1-1", "m", "e")
    change = StatusChange("Training", "", None)
    assert line.late is False  # printed in order unless the follower says otherwise
    for record, field in ((line, "message"), (change, "status")):
        with pytest.raises(FrozenInstanceError):
            setattr(record, field, "changed")
        assert not hasattr(record, "__dict__")  # slots: no dict per record, at thousands of lines a second
    a = LogNote(NoteKind.WAITING, "waiting", MappingProxyType({"s": 1}))
    b = LogNote(NoteKind.WAITING, "waiting", MappingProxyType({"s": 2}))
    assert hash(a) == hash(b) and len({a, LogNote(NoteKind.WAITING, "waiting", a.args)}) == 1
    with pytest.raises(FrozenInstanceError):
        a.message = "changed"
