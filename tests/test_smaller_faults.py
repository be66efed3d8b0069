"""The smaller faults: an IAM simulation that times out, job names with escapes or that SageMaker would refuse,
what the sanitiser neutralises, a queue's status poll that meets a 500, pipeline step names the SDK refuses,
two threads through one Clients, and click's usage errors."""
import subprocess
import sys
import threading
from types import SimpleNamespace

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError

import launcher
import launcher.jobs.status
from launcher.core.aws import AwsError, Clients, explain, recording
from launcher.core.errors import UsageError
from launcher.core.names import check_job_name
from launcher.core.sanitize import clean
from launcher.core.state import resolve_job
from launcher.jobs.status import JobStatus
from launcher.orchestrate.following import POLL_RETRIES
from launcher.orchestrate.queue import run_queue
from launcher.orchestrate.retry import RetryPolicy
from launcher.plan.build import build_plan
from launcher.spec import load_spec
from launcher.submission.role import RoleVerdict, check_role
from tests.conftest import JOBS, REPO


def spec(*overrides):
    return load_spec(JOBS / "llama7b.yaml", ["role=Good", *overrides])


# -- the IAM simulation timing out is "cannot tell" ----------------------------------------------------

class SlowIam:
    """IAM whose simulation times out; the rest is real."""

    def __init__(self, real):
        self.real, self.simulations = real, 0

    def simulate_principal_policy(self, **_):
        self.simulations += 1
        raise ReadTimeoutError(endpoint_url="https://iam.amazonaws.com/")

    def get_paginator(self, name):
        from tests.doubles import one_page_paginator

        return one_page_paginator(getattr(self, name))

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_an_iam_simulation_that_times_out_is_cannot_tell_and_asked_once(moto_world):
    iam = SlowIam(boto3.client("iam"))
    check = check_role(build_plan(spec()), iam, boto3.client("sts"))
    assert check.verdict == RoleVerdict.UNKNOWN and not check.missing
    assert any("ReadTimeoutError" in u for u in check.unknowns)
    assert iam.simulations == 1  # IAM is not answering: the caller's PassRole is not asked for as long again


def test_submit_goes_on_when_the_iam_simulation_times_out(moto_world):
    from launcher.submission.create import submit

    iam = SlowIam(boto3.client("iam"))
    plan = launcher.build_plan(spec(), region="us-west-2")
    result = submit(plan, Clients(overrides={"iam": iam}, region="us-west-2"), dry_run=True)
    assert result.role_check.verdict == RoleVerdict.UNKNOWN
    assert any(w.startswith("role check: cannot tell") for w in result.warnings)


# -- job names ---------------------------------------------------------------------------------------

class NoCalls:
    """A SageMaker client that must not be called."""

    def __getattr__(self, name):
        raise AssertionError(f"an AWS call ({name}) for a name SageMaker would refuse")


@pytest.mark.parametrize("name", ["bad_name", "-lead", "trail-", "x" * 64, "a b", "x\x1b[2Jy", "", "job\u202e"])
def test_a_job_name_sagemaker_would_refuse_is_exit_2_without_a_call(name):
    with pytest.raises(UsageError) as err:
        resolve_job(name, "us-west-2")
    assert err.value.exit_code == 2 and "is not a training job name" in str(err.value)
    assert "\x1b" not in str(err.value) and "\u202e" not in str(err.value)
    with pytest.raises(UsageError):
        launcher.status(name, clients=Clients(overrides={"sagemaker": NoCalls()}, region="us-west-2"))


def test_a_long_bad_name_is_quoted_cut_to_100_characters_so_the_error_stays_one_readable_line():
    with pytest.raises(UsageError) as err:
        check_job_name("x" * 5000)
    assert str(err.value).startswith("'" + "x" * 99 + "…' is not a training job name")


@pytest.mark.parametrize("name", ["a", "llama2-7b-20261201-150930-067", "x" * 63, "A--b", "job-r2"])
def test_names_sagemaker_takes_pass(name):
    assert check_job_name(name) == name and resolve_job(name, None) == (name, None)


def test_the_cli_refuses_a_bad_job_name_in_one_line(run_cli):
    result = run_cli("status", "bad_name", "--region", "us-west-2")
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1 and "not a training job name" in result.err


def test_an_action_naming_a_job_with_escapes_is_printed_safely():
    error = explain(RuntimeError("boom"), "describing x\x1b]0;owned\x07y")
    assert "\x1b" not in str(error) and "\x07" not in str(error) and "describing x\\x1b]0;owned\\x07y" in str(error)


# -- the sanitiser -----------------------------------------------------------------------------------

@pytest.mark.parametrize("char", ["\u200e", "\u200f", "\u061c", "\u2028", "\u2029", "\u200b", "\u200c", "\u200d",
                                  "\u2060", "\ufeff", "\U000e0041", "\U000e007f", "\U000e0001"])
def test_invisible_and_reordering_characters_are_shown_as_escapes(char):
    shown = clean(f"a{char}b")
    assert char not in shown and shown.isprintable() and shown.startswith("a\\") and shown.endswith("b")


def test_an_escape_in_a_log_line_cannot_be_forged_from_literal_text():
    real, forged = clean("x\x1by", unambiguous=True), clean("x\\x1by", unambiguous=True)
    assert real == "x\\x1by" and forged == "x\\\\x1by" and real != forged
    assert clean("\\\x1b", unambiguous=True) != forged  # a backslash before a real ESC is not the forgery either
    assert clean("C:\\data\\run", unambiguous=True) == "C:\\data\\run"  # no escape to mistake: left alone


def test_log_lines_are_shown_unambiguously():
    from launcher.jobs.logrecords import Notes, Stats
    from launcher.jobs.shaping import Shaper

    shaper = Shaper("j", Stats(), Notes(lambda note: None))
    out = []
    for i, message in enumerate(["real \x1b[2J", "forged \\x1b[2J", "plain text"]):
        shaper.emit("j/algo-1-1", i, message, str(i), out)
    assert [line.message for line in out] == ["real \\x1b[2J", "forged \\\\x1b[2J", "plain text"]


# -- a queue's status poll that meets a 500 --------------------------------------------------------------

def _status(name, state):
    return JobStatus(job_name=name, arn=None, status=state, secondary_status=state, transitions=(),
                     instance_type="ml.p4d.24xlarge", instance_count=1, image=None, created=None,
                     training_start=None, training_end=None, training_seconds=None, billable_seconds=None,
                     failure_reason=None, model_artifacts=None, failure=None)


def _queue(monkeypatch, failures: int):
    plan = launcher.build_plan(launcher.load_spec(str(JOBS / "llama7b.yaml"), ["role=Good"]), region="us-west-2")
    polls = []

    def job_status(clients, name, diagnose=False):
        polls.append(name)
        if len(polls) <= failures:
            raise AwsError("describing x: DescribeTrainingJob failed: InternalFailure: We encountered an error")
        return _status(name, "Completed")

    monkeypatch.setattr(launcher.jobs.status, "job_status", job_status)
    slept = []

    def submit(p, **_):
        return SimpleNamespace(job_name=p.job_name, dry_run=False, warnings=(), notes=())

    (run,) = run_queue([plan], retry=RetryPolicy(max_attempts=2, backoff=0), interval=1, clients=object(),
                       submit=submit, sleep=slept.append)
    return run, polls, slept


def test_a_status_poll_that_fails_for_a_moment_is_asked_again(monkeypatch):
    run, polls, slept = _queue(monkeypatch, failures=2)
    assert run.error is None and run.status.status == "Completed" and len(polls) == 3
    assert slept[:2] == [1.0, 2.0]


def test_a_status_poll_that_keeps_failing_still_ends_the_queue_with_the_error(monkeypatch):
    run, polls, _ = _queue(monkeypatch, failures=POLL_RETRIES + 1)
    assert isinstance(run.error, AwsError) and len(polls) == POLL_RETRIES + 1


# -- pipeline step names -------------------------------------------------------------------------------

def test_step_names_never_repeat():
    from launcher.orchestrate.pipeline import step_names

    plans = [SimpleNamespace(base_job_name=n) for n in ("x-3", "x", "x", "x-4", "x")]
    names = step_names(plans)  # type: ignore[arg-type]
    assert len(set(names)) == len(names) and names[:2] == ["x-3", "x"]


def test_a_pipeline_the_sdk_refuses_is_one_line():
    from launcher.orchestrate.pipeline import definition

    class Refused:
        def definition(self):
            raise ValueError("Pipeline steps cannot have duplicate names. In addition, steps added\nin the "
                             "ConditionStep cannot be added in the Pipeline steps list.")

    with pytest.raises(UsageError) as err:
        definition(Refused())
    assert err.value.exit_code == 2 and "\n" not in str(err.value) and "duplicate names" in str(err.value)


def test_importing_the_sdk_leaves_the_exception_hook_alone():
    code = ("import sys; hook = sys.excepthook; from launcher.submission.estimator import import_sdk; import_sdk(); "
            "import sagemaker.workflow.pipeline; print(sys.excepthook is hook)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "True", out.stderr[-2000:]


def test_a_pipeline_of_specs_whose_names_collide_is_defined(moto_world, run_cli, write_spec):
    base = JOBS / "llama7b.yaml"
    specs = [write_spec(f"extends: {base}\nname: {n}\n", f"s{i}.yaml") for i, n in enumerate(("x-3", "x", "x"))]
    result = run_cli("pipeline", *map(str, specs), "--name", "collide", "--dry-run", "--set", "role=Good",
                     "--skip-role-check")
    assert result.code == 0, result.err
    assert "Traceback" not in result.out + result.err and "╭" not in result.out


# -- two threads through one Clients -------------------------------------------------------------------

def test_two_threads_through_one_clients_each_record_their_own_calls(moto_world):
    clients = Clients(region="us-west-2")
    clients.sagemaker  # noqa: B018 - made before the threads share it
    barrier = threading.Barrier(2)
    records = {}

    def work(who, call):
        with recording(clients) as calls:
            barrier.wait()
            for _ in range(5):
                call()
            barrier.wait()
        records[who] = list(calls)

    a = threading.Thread(target=work, args=("a", lambda: clients.sagemaker.list_training_jobs()))
    b = threading.Thread(target=work, args=("b", lambda: clients.s3.list_buckets()))
    a.start()
    b.start()
    a.join(60)
    b.join(60)
    assert records["a"] == ["sagemaker.ListTrainingJobs"] * 5
    assert records["b"] == ["s3.ListBuckets"] * 5


# -- click's usage errors -------------------------------------------------------------------------------

@pytest.mark.parametrize("args, said", [(["submit", "--nope"], "No such option '--nope'"),
                                        (["status"], "Missing argument 'JOB'"),
                                        (["logs", "x", "--interval", "abc"], "Invalid value for '--interval'"),
                                        (["nosuch"], "No such command 'nosuch'")])
def test_a_usage_error_is_one_line(run_cli, args, said):
    result = run_cli(*args)
    assert result.code == 2 and result.out == ""
    assert len(result.err.strip().splitlines()) == 1 and said in result.err and "--help`" in result.err


def test_no_command_still_prints_the_help(run_cli):
    result = run_cli()
    assert "Usage: smp-launch" in result.out + result.err


def test_an_aws_errors_code_and_message_are_cut_to_100_and_500_characters():
    from botocore.exceptions import ClientError

    code, message = "C" * 100, "m" * 500
    whole = str(explain(ClientError({"Error": {"Code": code, "Message": message}}, "DescribeTrainingJob"), "x"))
    assert f"DescribeTrainingJob failed: {code}: {message}" in whole, "at the limits nothing is cut"
    cut = str(explain(ClientError({"Error": {"Code": code + "C", "Message": message + "m"}}, "DescribeTrainingJob"),
                      "x"))
    assert f"failed: {'C' * 99}…: {'m' * 499}…" in cut


def test_what_was_being_done_is_cut_to_300_characters_in_an_aws_error():
    action = "describing " + "j" * 400
    said = str(explain(RuntimeError("boom"), action))
    assert said.startswith(action[:299] + "…: ") and action[:300] not in said
