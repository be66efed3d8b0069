"""`smp-launch wait`: mixed outcomes, the worst exit code, failure classes in JSON, --timeout, the live table."""
from __future__ import annotations

import json
import re
import sys
from collections import Counter
from types import SimpleNamespace

import boto3
import pytest

import emulator
from emulator import failures as scenarios

QUICK = dict(starting=0.05, downloading=0.05, training=0.3, uploading=0.05, line_interval=0.05, decoy=False)


@pytest.fixture
def sm(monkeypatch, clock):
    """In-process moto, with the jobs and `wait`'s polls and deadline on one virtual clock (conftest's
    `clock`): a poll's sleep moves the jobs on instead of waiting for them."""
    import launcher.jobs.status

    for k, v in emulator.FAKE_CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.setattr(launcher.jobs.status, "time", SimpleNamespace(sleep=clock.sleep, monotonic=clock))
    with emulator.mocked():
        yield boto3.client("sagemaker", region_name="us-west-2")


def _mixed(sm):
    emulator.add_job(emulator.EmulatedJob("m-done", **QUICK), sm)
    emulator.add_job(emulator.EmulatedJob("m-oom", **scenarios.out_of_memory(**QUICK)), sm)
    emulator.add_job(emulator.EmulatedJob("m-cap", **scenarios.capacity_failure(**QUICK)), sm)
    emulator.add_job(emulator.EmulatedJob("m-stop", stop_after=0.2, stopping=0.05, **QUICK), sm)


def test_wait_on_mixed_outcomes_exits_1_with_each_class(sm, run_cli):
    _mixed(sm)
    r = run_cli("wait", "m-done", "m-oom", "m-cap", "m-stop", "--interval", "0.05", "--output", "json")
    assert r.code == 1, r.err
    rows = {row["job_name"]: row for row in json.loads(r.out)}
    assert [row["job_name"] for row in json.loads(r.out)] == ["m-done", "m-oom", "m-cap", "m-stop"]
    assert {k: (v["status"], v["failure_class"]) for k, v in rows.items()} == {
        "m-done": ("Completed", None), "m-oom": ("Failed", "out_of_memory"), "m-cap": ("Failed", "capacity"),
        "m-stop": ("Stopped", None)}
    assert "CapacityError" in rows["m-cap"]["failure_reason"] and "retry" in rows["m-cap"]["remedy"]
    assert "activation_checkpointing" in rows["m-oom"]["remedy"]
    for row in rows.values():
        assert {"job_name", "status", "failure_class", "failure_reason", "remedy", "created", "training_start",
                "training_end", "training_seconds", "billable_seconds"} <= set(row)
    assert rows["m-done"]["training_end"] >= rows["m-done"]["created"]


def test_stopped_is_worse_than_completed(sm, run_cli):
    emulator.add_job(emulator.EmulatedJob("s-done", **QUICK), sm)
    emulator.add_job(emulator.EmulatedJob("s-stop", stop_after=0.2, stopping=0.05, **QUICK), sm)
    assert run_cli("wait", "s-done", "s-stop", "--interval", "0.05").code == 5
    assert run_cli("wait", "s-done", "--interval", "0.05").code == 0


def test_plain_lines_one_per_status_change(sm, run_cli):
    emulator.add_job(emulator.EmulatedJob("p-oom", **scenarios.out_of_memory(**{**QUICK, "training": 1.5})), sm)
    r = run_cli("wait", "p-oom", "--interval", "0.05")
    lines = r.out.splitlines()
    assert r.code == 1
    assert lines[-1].startswith("p-oom: Failed [out_of_memory] a GPU ran out of memory")
    assert len(lines) == len(set(lines))  # a line per change, not per poll
    assert any("(Training)" in line for line in lines)


def test_timeout_exits_124_with_the_running_job_as_last_seen(sm, run_cli):
    emulator.add_job(emulator.EmulatedJob("t-done", **QUICK), sm)
    emulator.add_job(emulator.EmulatedJob("t-long", **{**QUICK, "training": 600}), sm)
    r = run_cli("wait", "t-done", "t-long", "--timeout", "0.6", "--interval", "0.05", "--output", "json")
    assert r.code == 124
    rows = json.loads(r.out)
    assert [(x["status"], x["terminal"]) for x in rows] == [("Completed", True), ("InProgress", False)]
    r = run_cli("wait", "t-long", "--timeout", "0.1", "--interval", "0.05")
    assert r.code == 124 and "timed out after 0.1 s; still running: t-long" in r.err


def test_failed_beats_a_timeout(sm, run_cli):
    emulator.add_job(emulator.EmulatedJob("f-oom", **scenarios.out_of_memory(**QUICK)), sm)
    emulator.add_job(emulator.EmulatedJob("f-long", **{**QUICK, "training": 600}), sm)
    assert run_cli("wait", "f-oom", "f-long", "--timeout", "1.5", "--interval", "0.05").code == 1


def test_live_table_on_a_terminal(sm, run_cli, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    emulator.add_job(emulator.EmulatedJob("l-nccl", **scenarios.nccl_timeout(**QUICK)), sm)
    r = run_cli("wait", "l-nccl", "--interval", "0.05", env={"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1"})
    assert r.code == 1
    # drawn at the start (no job seen yet), again at each change and once more at the end, in place
    assert r.out.count("job ") >= 3 and "\x1b[" in r.out, repr(r.out[:2000])
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", r.out)  # its colours and cursor moves left out
    assert re.search(r"l-nccl +\.\.\. +- +- +-", shown), shown
    assert re.search(r"l-nccl +Failed +Failed +nccl_timeout +a collective", shown), shown


def test_unknown_job_is_refused(sm, run_cli):
    r = run_cli("wait", "nobody", "--interval", "0.05")
    assert r.code == 2 and "no training job named 'nobody'" in r.err


def test_status_shows_the_class_and_remedy(sm, run_cli):
    emulator.add_job(emulator.EmulatedJob("st-usr", **scenarios.user_error(**QUICK)), sm)
    run_cli("wait", "st-usr", "--interval", "0.05")
    r = run_cli("status", "st-usr")
    rows = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in r.out.splitlines() if ":" in line}
    assert r.code == 1 and rows["failure class"] == "user_error" and rows["remedy"].startswith("the training")
    assert "exit code 1" in r.out and "KeyError: 'input_ids'" in r.out
    data = json.loads(run_cli("status", "st-usr", "--output", "json").out)
    assert data["failure_class"] == "user_error" and "KeyError" in data["remedy"]


def test_hostile_failure_text_is_escaped_in_lines_and_json(sm, run_cli):
    reason = "CapacityError: \x1b]52;c;ZXZpbA==\x07\x1b[2J\u202e" + "B" * 50_000
    emulator.add_job(emulator.EmulatedJob("h-cap", **scenarios.capacity_failure(**{**QUICK, "failure_reason": reason})),
                     sm)
    r = run_cli("wait", "h-cap", "--interval", "0.05")
    assert r.code == 1 and "[capacity]" in r.out
    assert "\x1b" not in r.out + r.err and "\u202e" not in r.out
    (row,) = json.loads(run_cli("wait", "h-cap", "--interval", "0.05", "--output", "json").out)
    assert row["failure_class"] == "capacity" and "\x1b" not in row["failure_reason"]
    assert len(row["failure_reason"]) <= 1000


def test_timeout_takes_a_duration_as_since_and_max_run_do(sm, run_cli):
    emulator.add_job(emulator.EmulatedJob("d-done", **QUICK), sm)
    r = run_cli("wait", "d-done", "--timeout", "2h", "--interval", "0.05", "--output", "json")
    assert r.code == 0 and json.loads(r.out)[0]["status"] == "Completed"
    emulator.add_job(emulator.EmulatedJob("d-long", **{**QUICK, "training": 600}), sm)
    r = run_cli("wait", "d-long", "--timeout", "0.1s", "--interval", "0.05")
    assert r.code == 124 and "timed out after 0.1 s" in r.err
    bad = run_cli("wait", "d-done", "--timeout", "soon")
    assert bad.code == 2 and "'soon' is not a duration; use e.g. 1d, 12h, 90m" in bad.err and "Traceback" not in bad.err
    assert run_cli("wait", "d-done", "--timeout", "-5").code == 2


def test_a_job_stopped_at_its_max_runtime_says_so_and_how_to_go_on(sm, run_cli):
    emulator.add_job(emulator.EmulatedJob("mr", **scenarios.max_runtime(**QUICK)), sm)
    r = run_cli("wait", "mr", "--interval", "0.05", "--output", "json")
    (row,) = json.loads(r.out)
    assert r.code == 5 and (row["status"], row["failure_class"]) == ("Stopped", "max_runtime")
    assert "raise cluster.max_run" in row["remedy"] and "smp-launch rerun JOB" in row["remedy"]
    emulator.add_job(emulator.EmulatedJob("hm", **scenarios.host_out_of_memory(**QUICK)), sm)
    r = run_cli("wait", "hm", "--interval", "0.05")
    assert r.code == 1 and r.out.splitlines()[-1].startswith("hm: Failed [host_out_of_memory] the instance ran out")


def _two_hundred(sm, prefix):
    """200 jobs with long names (many `In` filters): most run on, every 25th ends (some fail), at staggered times."""
    from emulator import quotas

    quotas.set_quota("ml.p4d.24xlarge", 10_000)  # more jobs than the default quota's 256 instances hold
    names = []
    for i in range(200):
        name = f"{prefix}-{i:03d}-{'x' * 40}"
        if i % 25:
            script = {**QUICK, "training": 600}
        elif i % 50:
            script = scenarios.out_of_memory(**{**QUICK, "training": 0.5 + i / 400})
        else:
            script = {**QUICK, "training": 0.5 + i / 400}
        emulator.add_job(emulator.EmulatedJob(name, **script), sm)
        names.append(name)
    return names


def _counted_wait(clock, names, use_search):
    from launcher.core.aws import Clients
    from launcher.jobs import status as jobs

    clients = Clients(region="us-west-2")
    calls, polls, changes = Counter(), [], []
    clients.sagemaker.meta.events.register("before-call.sagemaker", lambda model, **_kw: calls.update([model.name]))

    def sleep(seconds):
        polls.append(dict(calls))
        calls.clear()
        clock.sleep(seconds)

    done = jobs.wait(clients, names, timeout=3.0, interval=0.5, sleep=sleep, clock=clock, use_search=use_search,
                     on_change=lambda s: changes.append((s.job_name.split("-", 1)[1], s.status, s.secondary_status,
                                                         s.failure.failure_class if s.failure else None)))
    polls.append(dict(calls))
    return done, polls, changes


def test_wait_on_200_jobs_takes_at_most_3_sagemaker_calls_a_poll_with_the_same_output(sm, clock):
    from emulator import search

    start = clock.t
    names = _two_hundred(sm, "srch")
    plain = _two_hundred(sm, "desc")
    done, polls, changes = _counted_wait(clock, names, use_search=True)
    clock.t = start  # the same jobs, from the same moment, the old way: one describe a job a poll
    done_d, polls_d, changes_d = _counted_wait(clock, plain, use_search=False)
    assert changes == changes_d and len(changes) > 200  # the same changes seen, in the same order
    def strip(status):  # the same job but for its name
        return json.dumps(status.to_dict()).replace("srch-", "").replace("desc-", "")

    assert [strip(s) for s in done] == [strip(s) for s in done_d]
    assert all(p.get("DescribeTrainingJob", 0) == 200 for p in polls_d[:2])  # 200 calls a poll before
    # Search pages of 100, and a describe only for the few jobs whose status changed in that poll
    quiet = [p for p in polls[1:] if not p.get("DescribeTrainingJob")]
    assert len(quiet) >= 3 and all(sum(p.values()) <= 3 for p in quiet), polls
    assert all(p.get("Search", 0) <= 2 for p in polls) and polls[0].get("DescribeTrainingJob", 0) == 0
    assert search.calls["Search"] >= len(polls)


def _two_hundred_ended(sm, prefix):
    """200 jobs that have all ended by the first poll: Completed, Failed out of memory, and Stopped."""
    names = []
    for i in range(200):
        name = f"{prefix}-{i:03d}-{'x' * 40}"
        if i % 3 == 0:
            script = scenarios.out_of_memory(**QUICK)
        elif i % 3 == 1:
            script = {**QUICK, "stop_after": 0.2, "stopping": 0.05}
        else:
            script = dict(QUICK)
        emulator.add_job(emulator.EmulatedJob(name, **script), sm)
        names.append(name)
    return names


def test_wait_on_200_ended_jobs_takes_one_poll_of_search_alone_with_the_same_diagnoses(sm, clock):
    """Search's records carry what wait prints for any ended job: no describe at all, and each Failed job still
    gets its failure class from its log tail, as a describe would have given it."""
    from emulator import quotas

    quotas.set_quota("ml.p4d.24xlarge", 1000)  # 400 jobs of 2 hosts at once
    start = clock.t
    names = _two_hundred_ended(sm, "srch")
    plain = _two_hundred_ended(sm, "desc")
    clock.sleep(5.0)  # every job has ended before wait starts
    done, polls, _ = _counted_wait(clock, names, use_search=True)
    clock.t = start + 5.0
    done_d, polls_d, _ = _counted_wait(clock, plain, use_search=False)

    def strip(status):
        return json.dumps(status.to_dict()).replace("srch-", "").replace("desc-", "")

    assert [strip(s) for s in done] == [strip(s) for s in done_d]
    assert {s.status for s in done} == {"Completed", "Failed", "Stopped"}
    assert sum(1 for s in done if s.failure and s.failure.failure_class == "out_of_memory") == 67
    assert polls == [{"Search": 2}]  # one poll, two pages of 100, not one describe
    assert polls_d[0]["DescribeTrainingJob"] == 200


def test_list_running_filters_in_the_search_expression_one_call(sm, clock):
    from emulator import quotas
    from launcher.core.aws import Clients
    from launcher.jobs import status as jobs

    quotas.set_quota("ml.p4d.24xlarge", 10_000)  # 151 two-instance jobs starting together
    for i in range(150):
        emulator.add_job(emulator.EmulatedJob(f"done-{i:03d}", **QUICK), sm)
    emulator.add_job(emulator.EmulatedJob("live-1", **{**QUICK, "training": 600}), sm)
    clock.t += 5  # all but one ended
    clients = Clients(region="us-west-2")
    calls = Counter()
    clients.sagemaker.meta.events.register("before-call.sagemaker", lambda model, **_kw: calls.update([model.name]))
    rows = jobs.list_jobs(clients, running=True)
    assert [r.job_name for r in rows] == ["live-1"] and calls == {"Search": 1}


def test_a_job_stopped_at_its_max_run_says_the_step_it_reached_and_how_to_carry_on(sm, run_cli):
    """SageMaker stopped it at MaxRuntimeInSeconds: `max_runtime`, the step of algo-1's last progress line, the
    checkpoint it saved and the rerun that resumes from it."""
    stopped = scenarios.max_runtime(**{**QUICK, "checkpoint_after": 0.1, "checkpoint_step": 2})
    emulator.add_job(emulator.EmulatedJob("mr-run", **stopped), sm)
    run_cli("wait", "mr-run", "--interval", "0.05")
    data = json.loads(run_cli("status", "mr-run", "--output", "json").out)
    assert data["failure_class"] == "max_runtime"
    reached = re.search(r"at step (\d+)", data["remedy"])
    assert reached, data["remedy"]
    assert "its last checkpoint is of step 2" in data["remedy"]
    assert "`smp-launch rerun JOB --resume` carries on from it" in data["remedy"]
    assert "(decided by SecondaryStatus: MaxRuntimeExceeded)" in data["remedy"] and int(reached.group(1)) > 2
