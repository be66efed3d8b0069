"""The CLI's side of logs: how a followed job prints (labels coloured by host, status changes, JSON lines, hostile
text, notes worded for a shell), the `logs` command's flags, `submit --wait`, and an API that prints nothing."""
import io
import json
import re
import types

import boto3
import pytest

import emulator
import launcher
import launcher.jobs.logs
from launcher.core.aws import Clients
from launcher.core.errors import EXIT_JOB_FAILED
from launcher.jobs.logs import Polling
from launcher.jobs.ratelimit import RateLimiter
from tests.conftest import JOBS
from tests.emulation import VirtualClock, printed_follow, started_ago
from tests.emulation import follow_printed as run

AGO = 3600.0


@pytest.fixture
def sm(clock):
    """A SageMaker client of moto in-process, the emulated jobs on the virtual clock."""
    with emulator.mocked():
        yield boto3.client("sagemaker", region_name="us-west-2")




# -- the printer ------------------------------------------------------------------------------------------

def test_labels_carry_the_host_number_and_colour_by_it_on_a_terminal(sm, clock):
    emulator.add_job(emulator.EmulatedJob("colour", hosts=2, training=3), sm)
    clock.t += 10
    _, plain, _ = run("colour", clock, until_end=False)
    assert "\x1b[" not in plain and "[algo-2] [1,mpirank:8,algo-2]" in plain
    _, coloured, _ = run("colour", clock, until_end=False, color=True)
    assert "\x1b[36m[algo-1]\x1b[0m" in coloured and "\x1b[33m[algo-2]\x1b[0m" in coloured


def test_secondary_status_transitions_print_once_in_order(sm, clock):
    emulator.add_job(emulator.EmulatedJob("phases", training=10), sm)
    _, _, err = run("phases", clock, interval=0.5)
    seen = [w for line in err.splitlines() for w in ("Starting", "Downloading", "Training", "Uploading",
                                                     "Completed") if f" {w} - " in line]
    assert seen == ["Starting", "Downloading", "Training", "Uploading", "Completed"]


def test_json_lines(sm, clock):
    job = emulator.add_job(emulator.EmulatedJob("js", hosts=2, training=5, outcome="Failed"), sm)
    result, out, _ = run("js", clock, as_json=True)
    records = [json.loads(line) for line in out.splitlines()]
    logs = [r for r in records if r["type"] == "log"]
    assert {r["host"] for r in logs} == {"algo-1", "algo-2"} and len(logs) == len(job.expected_messages())
    assert [r["status"] for r in records if r["type"] == "status"][-1] == "Failed"
    assert records[-1]["type"] == "end" and records[-1]["exit_code"] == EXIT_JOB_FAILED == result.exit_code
    assert records[-1]["failure_reason"].startswith("AlgorithmError")


class _Page:
    """A Logs client whose one page of events is whatever a test hands it."""

    def __init__(self, events):
        self.events = events

    def filter_log_events(self, **_params):
        return {"events": self.events}


def _hostile_event(message: str) -> dict:
    return {"logStreamName": "evil/algo-1-1", "eventId": "1", "timestamp": 1_800_000_000_000,
            "ingestionTime": 1_800_000_000_000, "message": message}


@pytest.mark.parametrize("as_json", [False, True])
def test_terminal_escapes_and_lone_surrogates_from_cloudwatch_are_neutralised(clock, monkeypatch, as_json):
    hostile = "ok \x1b]0;pwned\x07 \x1b]52;c;ZXZpbA==\x07 \x1b[2J \u202eevil \ud800 end"
    clients = types.SimpleNamespace(logs=_Page([_hostile_event(hostile)]))
    monkeypatch.setattr("launcher.jobs.logs.describe", lambda *_a: {"TrainingJobStatus": "Completed"})
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="strict")  # a strict UTF-8 stdout
    polling = Polling(clock=clock, sleep=clock.sleep, limiter=RateLimiter(2.0, clock=clock, sleep=clock.sleep))
    printed_follow("evil", clients, until_end=False, as_json=as_json, out=out, err=io.StringIO(), polling=polling)
    out.flush()
    text = raw.getvalue().decode("utf-8")
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    message = json.loads(text)["message"] if as_json else text.split("] ", 1)[1]
    assert "\\x1b]0;pwned\\x07" in message and "\ufffd end" in message


def test_a_stream_outside_sagemakers_naming_is_labelled_by_its_whole_name_after_the_job(clock, monkeypatch):
    # `JOB/algo-N-<epoch>` is labelled algo-N; any other stream of the job (a sidecar's, nested with slashes) by
    # everything after `JOB/`, so two such streams stay apart.
    events = [{**_hostile_event("from the sidecar"), "logStreamName": "evil/sidecar/proxy-1"},
              {**_hostile_event("from the agent"), "logStreamName": "evil/agent/proxy-1", "eventId": "2"}]
    monkeypatch.setattr("launcher.jobs.logs.describe", lambda *_a: {"TrainingJobStatus": "Completed"})
    polling = Polling(clock=clock, sleep=clock.sleep, limiter=RateLimiter(2.0, clock=clock, sleep=clock.sleep))
    text, js = io.StringIO(), io.StringIO()
    for out, as_json in ((text, False), (js, True)):
        printed_follow("evil", types.SimpleNamespace(logs=_Page(events)), until_end=False, as_json=as_json, out=out,
                       err=io.StringIO(), polling=polling)
    # one timestamp: ordered by stream
    assert text.getvalue().splitlines() == ["[agent/proxy-1] from the agent", "[sidecar/proxy-1] from the sidecar"]
    assert [json.loads(x)["host"] for x in js.getvalue().splitlines()] == ["agent/proxy-1", "sidecar/proxy-1"]


# -- the logs command --------------------------------------------------------------------------------------

@pytest.fixture
def sm_now():
    """A SageMaker client of moto in-process, the emulated jobs on the real clock (the CLI's own)."""
    with emulator.mocked():
        yield boto3.client("sagemaker", region_name="us-west-2")
    emulator.set_clock(None)




def test_logs_cli_no_follow_and_follow(sm_now, run_cli):
    job = started_ago(sm_now, AGO, emulator.EmulatedJob("logged", hosts=2, training=30, outcome="Failed"))
    r = run_cli("logs", "logged", "--no-follow")
    assert r.code == 0 and len([ln for ln in r.out.splitlines() if ln.startswith("[algo-")]) == 60
    followed = run_cli("logs", "logged", "--interval", "0.05")
    assert followed.code == 1 and "logged Failed: AlgorithmError" in followed.err
    assert followed.out == r.out  # an ended job: everything once, then the exit code
    one = run_cli("logs", "logged", "--no-follow", "--host", "algo-2", "--grep", "step=1[0-9] ", "--output", "json")
    records = [json.loads(line) for line in one.out.splitlines()]
    assert [x["message"] for x in records] == [job.line(2, i, False) for i in range(10, 20)]


def test_logs_of_several_jobs_labels_each_line_by_job_and_host_and_exits_with_the_worst(sm_now, run_cli):
    done = started_ago(sm_now, AGO, emulator.EmulatedJob("pair-a", hosts=2, training=20))
    failed = started_ago(sm_now, AGO, emulator.EmulatedJob("pair-b", hosts=2, training=10, outcome="Failed"))
    r = run_cli("logs", "pair-a", "pair-b", "--interval", "0.05")
    assert r.code == 1 and "pair-b Failed: AlgorithmError" in r.err and "pair-a Completed" in r.err
    for job in (done, failed):
        mine = [ln.split("] ", 1)[1] for ln in r.out.splitlines() if ln.startswith(f"[{job.name}/algo-")]
        assert sorted(mine) == sorted(job.expected_messages())
    # each job's status changes print once, in order, named by job (stderr; the time first)
    for job, last in ((done, ["Uploading", "Completed"]), (failed, ["Failed"])):
        changes = [ln.split(" ", 3)[3].split(" - ", 1)[0] for ln in r.err.splitlines()
                   if ln.split(" ", 3)[2:3] == [job.name] and " - " in ln]
        assert changes == ["Starting", "Downloading", "Training", *last]
    records = [json.loads(x) for x in run_cli("logs", "pair-a", "pair-b", "--no-follow", "--output", "json").out.split(
        "\n") if x]
    assert {x["job"] for x in records if x["type"] == "log"} == {"pair-a", "pair-b"}
    # while following: each job's transitions, on stderr for people, as JSON records for pipelines
    noted = [ln.split(" ", 2)[2] for ln in r.err.splitlines() if re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", ln)]
    assert "pair-a Completed - Training job completed" in noted and "pair-b Failed - Training job failed" in noted
    followed = run_cli("logs", "pair-a", "pair-b", "--interval", "0.05", "--output", "json")
    statuses = [json.loads(x) for x in followed.out.splitlines() if '"type": "status"' in x]
    assert [x["status"] for x in statuses if x["job"] == "pair-b"] == ["Starting", "Downloading", "Training", "Failed"]
    assert all(x["time"].endswith("Z") for x in statuses) and followed.err == ""


@pytest.mark.parametrize("args,message", [
    (["--host", "x"], "--host 'x'"), (["--since", "soon"], "--since 'soon'"), (["--grep", "("], "--grep '('"),
])
def test_logs_rejects_bad_flags(sm_now, run_cli, args, message):
    r = run_cli("logs", "any-job", "--no-follow", *args)
    assert r.code == 2 and message in r.err


def test_a_huge_host_range_is_refused_at_once_not_expanded():
    from launcher.cli.jobs import MAX_HOST, parse_hosts
    from launcher.core.errors import UsageError

    with pytest.raises(UsageError, match=f"host numbers go up to {MAX_HOST}"):
        parse_hosts("1-100000000")
    with pytest.raises(UsageError, match="give host numbers like 1,3 or 1-4"):
        parse_hosts("3-1")
    long = "x" * 79 + "yz" + "9" * 100  # a long value is quoted by its first 80 characters only
    with pytest.raises(UsageError) as err:
        parse_hosts(long)
    assert str(err.value).startswith(f"--host {long[:80]!r}: give host numbers")
    with pytest.raises(UsageError) as err:
        parse_hosts("1-" + "9" * 100)
    assert str(err.value).startswith(f"--host {('1-' + '9' * 78)!r}: host numbers go up to {MAX_HOST}")
    assert parse_hosts("algo-2,4-5,2") == [2, 4, 5] and len(parse_hosts(f"1-{MAX_HOST}")) == MAX_HOST




def test_logs_for_hosts_the_job_does_not_have_is_refused(jobs_world, run_cli):
    for args in (["--no-follow"], ["--interval", "0.05"]):
        r = run_cli("logs", "eight", "--host", "9", *args)
        assert (r.code, r.out) == (2, ""), r.err
        assert r.err.strip() == "--host 9: eight has 8 hosts, algo-1 to algo-8"
    last = run_cli("logs", "eight", "--host", "8", "--no-follow")  # the job's last host is one of its own
    assert last.code == 0 and last.out and all(ln.startswith("[algo-8]") for ln in last.out.splitlines()), last.err
    some = run_cli("logs", "eight", "--host", "8,9", "--no-follow")
    assert some.code == 0 and "nothing will print for algo-9" in some.err
    assert some.out and all(ln.startswith("[algo-8]") for ln in some.out.splitlines())


# -- submit --wait --interval -----------------------------------------------------------------------------

def test_submit_wait_passes_its_interval_to_the_follow_loop(run_cli, monkeypatch):
    from types import SimpleNamespace

    import launcher.api
    import launcher.submission.create
    from launcher.jobs.logs import FollowResult, LogLine

    started = SimpleNamespace(job_name="fake-1", region="us-west-2", source_uri="s3://b/k", uploaded=True,
                              console_url="https://console", role_check=None, aws_calls=["sagemaker.CreateTrainingJob"],
                              notes=[], warnings=[], to_dict=lambda: {"job_name": "fake-1"})
    monkeypatch.setattr(launcher.submission.create, "submit", lambda *a, **k: started)  # the queue's submit
    followed = {}

    def follow(name, *, clients, interval, on_line, **kw):
        followed.update(name=name, region=clients.region, interval=interval)
        on_line(LogLine(1_800_000_000_000, 1, "fake-1/algo-1-1", "step 1", "1"))
        return FollowResult(name, "Stopped", 5, to_end=True)

    monkeypatch.setattr(launcher.api, "follow", follow)
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--wait", "--interval", "0.25")
    assert r.code == 5 and "started fake-1 in us-west-2" in r.out, r.err
    assert followed == {"name": "fake-1", "region": "us-west-2", "interval": 0.25}
    assert "[algo-1] step 1\n" in r.out and "fake-1 Stopped" in r.err  # printed as text, not as JSON lines
    assert run_cli("submit", str(JOBS / "llama7b.yaml"), "--wait").code == 5 and followed["interval"] == 5.0


# -- notes: the library speaks of arguments, the CLI of flags and commands ----------------------------------

class _OneFreshLine:
    """A Logs client whose every read returns one line written just now."""

    def __init__(self, clock):
        self.clock = clock

    def filter_log_events(self, **_params):
        now = int(self.clock() * 1000)
        return {"events": [{"logStreamName": "j/algo-1-1", "eventId": str(now), "timestamp": now,
                            "ingestionTime": now, "message": "x"}]}


def test_a_late_check_that_falls_behind_names_the_flag_only_on_the_command_line():
    from launcher.cli.logprint import worded
    from launcher.jobs.logrecords import NoteKind
    from launcher.jobs.reader import LogReader

    clock, notes = VirtualClock(), []
    reader = LogReader("j", _OneFreshLine(clock), RateLimiter(100, clock=clock, sleep=clock.sleep), insights=False,
                       clock=clock, sleep=clock.sleep, on_note=notes.append)
    reader.poll()
    clock.t += 1000  # the reads fell 1,000 s behind: the late check skips ahead to the horizon
    reader.poll()
    (behind,) = [n for n in notes if n.kind is NoteKind.CHECK_BEHIND]
    assert "--rate" not in behind.message and "limited by the call rate" in behind.message
    assert worded(behind) == ("the late-line check is 1000s behind (reads limited by --rate); lines more than 300s "
                              "late may be missed")
    assert reader.stats.skipped_s == 1000.0 - 300.0  # all but the horizon behind the newest reads


def test_an_unfinished_final_check_tells_a_shell_user_the_command_to_run_again(clock, monkeypatch):
    from launcher.cli.logprint import worded
    from launcher.jobs.logrecords import NoteKind

    monkeypatch.setattr("launcher.jobs.late_check.FINAL_CHECK_S", 0.0)  # the default drain timeout
    # running for one poll, then over: the arrivals of that poll are left to the end-of-job check
    states = iter(["InProgress"])
    monkeypatch.setattr("launcher.jobs.logs.describe", lambda *_a: {"TrainingJobStatus": next(states, "Completed")})
    notes = []
    logs = types.SimpleNamespace(filter_log_events=_OneFreshLine(clock).filter_log_events,
                                 start_query=lambda **_kw: {"queryId": "q"},
                                 get_query_results=lambda **_kw: {"status": "Running"})
    polling = Polling(clock=clock, sleep=clock.sleep, settle=0.0, limiter=RateLimiter(100, clock=clock,
                                                                                     sleep=clock.sleep))
    result = launcher.jobs.logs.follow("j", types.SimpleNamespace(logs=logs), polling=polling, on_note=notes.append)
    (unchecked,) = [n for n in notes if n.kind is NoteKind.FINAL_UNCHECKED]
    assert "smp-launch" not in unchecked.message and unchecked.args["job"] == "j"
    assert worded(unchecked).startswith("warning: could not finish checking j for lines that reached CloudWatch late (")
    assert worded(unchecked).endswith("s); `smp-launch logs j` again later shows them")
    assert result.to_end and result.stats.unchecked_s > 0


# -- the API prints nothing ---------------------------------------------------------------------------------

def test_the_api_hands_notes_over_and_prints_nothing(sm, clock, capsys, caplog):
    from launcher.jobs.logrecords import NoteKind

    emulator.add_job(emulator.EmulatedJob("fresh"), sm)
    notes = []
    assert list(launcher.logs("fresh", clients=Clients(), on_note=notes.append)) == []
    assert [n.kind for n in notes] == [NoteKind.NO_LINES_YET]
    assert str(notes[0]) == "no log lines yet for fresh (InProgress, Starting)"
    with caplog.at_level("WARNING", logger="launcher.logs"):
        assert list(launcher.logs("fresh", clients=Clients())) == []  # no callback: the logger, not stderr
    assert "no log lines yet for fresh" in caplog.text
    assert capsys.readouterr() == ("", "")


def test_an_ended_job_with_no_lines_in_the_window_does_not_say_yet(sm, clock):
    emulator.add_job(emulator.EmulatedJob("ended", training=2, line_interval=0.5), sm)
    clock.t += AGO  # it ended an hour ago
    result, out, err = run("ended", clock, until_end=False, since=60)
    assert out == "" and "no log lines for ended in the --since window (Completed, Completed); it has ended, so " \
                         "no more will come" in err and "yet" not in err
    emulator.add_job(emulator.EmulatedJob("running", training=600), sm)  # not ended: "yet" is right
    _, out, err = run("running", clock, until_end=False, since=0.001)
    assert out == "" and "no log lines yet for running" in err


def test_the_api_follow_hands_lines_and_status_to_callbacks(sm, clock, capsys):
    emulator.add_job(emulator.EmulatedJob("cb", hosts=2, training=3, decoy=False), sm)
    clock.t += 30
    lines, changes = [], []
    result = launcher.follow("cb", until_end=False, clients=Clients(), on_line=lines.append, on_status=changes.append)
    assert {ln.host for ln in lines} == {1, 2} and all(isinstance(ln, launcher.LogLine) for ln in lines)
    assert result.exit_code == 0 and not result.to_end and not result.interrupted
    assert changes == []  # without until_end the status is not watched
    assert capsys.readouterr() == ("", "")


def test_the_waiting_notices_of_clients_the_api_makes_are_notes_too(sm, clock, monkeypatch, capsys):
    import launcher.api
    from launcher.jobs.logrecords import NoteKind

    made = []

    def connect(profile=None, region=None):
        made.append(Clients(region="us-west-2"))
        return made[-1]

    monkeypatch.setattr(launcher.api, "connect", connect)
    emulator.add_job(emulator.EmulatedJob("slow", hosts=1, training=3, decoy=False), sm)
    clock.t += 30
    notes = []
    launcher.follow("slow", until_end=False, on_note=notes.append)
    made[-1].notify("waiting for logs.us-west-2…")  # what the client factory says when a call hangs
    assert [(n.kind, n.message) for n in notes] == [(NoteKind.WAITING, "waiting for logs.us-west-2…")]
    list(launcher.logs("slow"))
    assert made[-1].notify is None  # no callback given: the client factory's own default is left alone
    assert capsys.readouterr() == ("", "")


def test_follow_many_hands_the_waiting_notices_of_the_clients_it_makes_to_on_note(sm, clock, monkeypatch, capsys):
    import launcher.api
    from launcher.jobs.logrecords import NoteKind

    made = []

    def connect(profile=None, region=None):
        made.append(Clients(region="us-west-2"))
        return made[-1]

    monkeypatch.setattr(launcher.api, "connect", connect)
    for name in ("slow-a", "slow-b"):
        emulator.add_job(emulator.EmulatedJob(name, hosts=1, training=3, decoy=False), sm)
    clock.t += 30
    notes = []
    results = launcher.follow_many(["slow-a", "slow-b"], until_end=False, on_note=notes.append)
    assert [r.exit_code for r in results] == [0, 0]
    made[-1].notify("waiting for logs.us-west-2…")  # what the client factory says when a call hangs
    assert [(n.kind, n.message) for n in notes if n.kind is NoteKind.WAITING] == [
        (NoteKind.WAITING, "waiting for logs.us-west-2…")]
    launcher.follow_many(["slow-a"], until_end=False)
    assert made[-1].notify is None  # no callback given: the client factory's own default is left alone
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("hosts,said", [(1, "has 1 host, algo-1 to algo-1"), (2, "has 2 hosts, algo-1 to algo-2")])
def test_a_host_past_a_small_jobs_last_is_refused_naming_its_hosts(jobs_world, run_cli, hosts, said):
    from tests.emulation import started_ago

    started_ago(jobs_world, 3600, emulator.EmulatedJob(f"small{hosts}", hosts=hosts, training=60, decoy=False))
    r = run_cli("logs", f"small{hosts}", "--host", "3", "--no-follow")
    assert (r.code, r.out, r.err.strip()) == (2, "", f"--host 3: small{hosts} {said}")


def test_a_status_change_in_json_lines_has_its_time_or_null_when_aws_gave_none():
    import io

    from launcher.cli.logprint import Printer
    from launcher.jobs.logrecords import StatusChange

    out = io.StringIO()
    printer = Printer(out=out, err=io.StringIO(), as_json=True)
    printer.status(StatusChange("Training", "Training image download completed", 1_700_000_000.0))
    printer.status(StatusChange("Completed", "", None))
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first == {"type": "status", "status": "Training", "time": "2023-11-14T22:13:20.000Z",
                     "message": "Training image download completed"}
    assert second["time"] is None and second["status"] == "Completed"
