"""Submit never leaves the user wrong about what exists: interrupts, state, region, hangs, IAM, errors."""
import json
import signal
import socket
import time
from datetime import datetime, timezone
from types import SimpleNamespace

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

import emulator
from launcher import api
from launcher.cli.submit import for_shell
from launcher.core.aws import AwsError, Clients
from launcher.core.errors import EXIT_INTERRUPTED, NO_REGION, Interrupted, LauncherError
from launcher.core.state import last_submitted
from launcher.jobs import status as jobs
from launcher.plan.build import build_plan
from launcher.spec import load_spec
from launcher.submission.create import submit as submit_plan
from launcher.submission.role import RoleVerdict, check_role
from tests.conftest import JOBS
from tests.doubles import one_page_paginator


def submit(loaded, clients, *, now=None, **kw):
    """What `smp-launch submit` does: the plan for the clients' region, then submit that plan."""
    plan = api.build_plan(loaded, region=clients.region, profile=clients.profile, env=clients.env, now=now)
    return submit_plan(plan, clients, **kw)

NOW = datetime(2026, 11, 30, 10, 0, 0, tzinfo=timezone.utc)


def spec(*overrides, role="Good"):
    return load_spec(JOBS / "llama7b.yaml", [f"role={role}", *overrides])


def jobs_in(region: str) -> list[str]:
    client = boto3.client("sagemaker", region_name=region)
    return [j["TrainingJobName"] for j in client.list_training_jobs()["TrainingJobSummaries"]]


# -- 1. Ctrl-C during CreateTrainingJob ---------------------------------------------------------------

def real_start_then_interrupt(*args):
    from launcher.submission import backend

    backend.schedule(*args)
    raise KeyboardInterrupt


def interrupt_before_creating(*_args):
    raise KeyboardInterrupt


def test_interrupt_after_the_job_was_created_says_started_and_remembers_it(moto_world):
    with pytest.raises(Interrupted) as err:
        submit(spec(), Clients(), now=NOW, start=real_start_then_interrupt)
    name = err.value.job_name
    assert err.value.started is True and err.value.exit_code == EXIT_INTERRUPTED == 130
    worded = str(for_shell(err.value, "us-west-2"))  # the CLI adds the commands to follow and stop it
    assert f"{name} was started in us-west-2" in str(err.value) and f"smp-launch stop {name}" in worded
    assert "smp-launch" not in str(err.value) and f"smp-launch logs {name} --region us-west-2" in worded
    assert jobs_in("us-west-2") == [name]
    assert last_submitted()["job_name"] == name  # `latest` is a job that exists


def test_interrupt_before_the_job_was_created_says_not_started(moto_world):
    with pytest.raises(Interrupted) as err:
        submit(spec(), Clients(), now=NOW, start=interrupt_before_creating)
    assert err.value.started is False and "was not started" in str(err.value)
    assert jobs_in("us-west-2") == [] and last_submitted() is None


class Unreachable:
    """A SageMaker client whose DescribeTrainingJob cannot reach AWS (everything else real)."""

    def __init__(self, real):
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)

    def describe_training_job(self, **_):
        raise EndpointConnectionError(endpoint_url="https://sagemaker.us-west-2.amazonaws.com")


def test_interrupt_when_nobody_can_tell_gives_the_command_to_check(moto_world):
    clients = Clients(overrides={"sagemaker": Unreachable(boto3.client("sagemaker", region_name="us-west-2"))})
    with pytest.raises(Interrupted) as err:
        submit(spec(), clients, now=NOW, start=interrupt_before_creating)
    name = err.value.job_name
    assert err.value.started is None and "cannot tell whether" in str(err.value)
    assert "smp-launch" not in str(err.value) and "us-west-2" in str(err.value)  # the library names no command
    worded = str(for_shell(err.value, "us-west-2"))  # the CLI does
    assert f"`smp-launch status {name} --region us-west-2`" in worded
    assert "started in" not in worded and "not started" not in worded


def sdk_create_then(action, monkeypatch):
    """Make the SDK's own CreateTrainingJob call create the job in moto, then suffer `action`."""
    clients = Clients()
    client = clients.sagemaker
    real = client.create_training_job

    def create(**kw):
        answer = real(**kw)
        action()
        return answer

    monkeypatch.setattr(client, "create_training_job", create)
    return clients


def test_a_real_sigint_inside_the_sdk_call_is_not_swallowed(moto_world, monkeypatch, ctrl_c_reaches_python):
    """The SDK's telemetry wrapper discards a KeyboardInterrupt (`finally: return`): a real Ctrl-C
    (SIGINT) during CreateTrainingJob must still end submit with exit 130, not "started" and 0."""
    clients = sdk_create_then(lambda: signal.raise_signal(signal.SIGINT), monkeypatch)
    with pytest.raises(Interrupted) as err:
        submit(spec(), clients, now=NOW)
    assert err.value.started is True and jobs_in("us-west-2") == [err.value.job_name]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is put back


def test_a_keyboard_interrupt_raised_inside_the_sdk_call_is_not_swallowed(moto_world, monkeypatch):
    def interrupt():
        raise KeyboardInterrupt

    clients = sdk_create_then(interrupt, monkeypatch)
    with pytest.raises(Interrupted) as err:
        submit(spec(), clients, now=NOW)
    assert err.value.started is True


def test_the_cli_exits_130_with_one_line_after_an_interrupt(moto_world, run_cli, monkeypatch):
    from launcher.submission import backend

    monkeypatch.setattr(backend, "schedule", interrupt_before_creating)
    r = run_cli("submit", "jobs/llama7b.yaml", "--set", "role=Good")
    assert r.code == 130 and "started" not in r.out
    assert r.err.strip().splitlines()[-1].startswith("interrupted: llama2-7b-") and "was not started" in r.err


def _timed_out():
    from botocore.exceptions import ReadTimeoutError

    return ReadTimeoutError(endpoint_url="https://api.sagemaker.us-west-2.amazonaws.com/")


def test_an_answer_lost_after_the_job_was_created_is_still_started(moto_world):
    def create_then_time_out(*args):
        from launcher.submission import backend

        backend.schedule(*args)
        raise _timed_out()

    result = submit(spec(), Clients(), now=NOW, start=create_then_time_out)
    assert jobs_in("us-west-2") == [result.job_name] and result.remembered
    assert result.notes and "answer was lost" in result.notes[0] and result.job_name in result.notes[0]


def test_an_answer_lost_before_the_job_was_created_is_one_line(moto_world):
    def time_out(*_args):
        raise _timed_out()

    with pytest.raises(AwsError) as err:
        submit(spec(), Clients(), now=NOW, start=time_out)
    assert err.value.exit_code == 4 and "did not answer in time" in str(err.value) and jobs_in("us-west-2") == []


class Throttled(Unreachable):
    """A SageMaker client whose DescribeTrainingJob is refused with an error that says nothing of the job."""

    def describe_training_job(self, **_):
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
                           "ResponseMetadata": {"HTTPStatusCode": 400}}, "DescribeTrainingJob")


def test_an_answer_lost_when_sagemaker_cannot_say_whether_the_job_exists_says_to_look_it_up(moto_world):
    def time_out(*_args):
        raise _timed_out()

    clients = Clients(overrides={"sagemaker": Throttled(boto3.client("sagemaker", region_name="us-west-2"))})
    with pytest.raises(AwsError) as err:
        submit(spec(), clients, now=NOW, start=time_out)
    message = str(err.value)
    assert err.value.exit_code == 4 and "did not answer in time" in message
    assert message.endswith("was started: look it up in us-west-2 before submitting it again")
    assert "; cannot tell whether llama2-7b-" in message and jobs_in("us-west-2") == []


def test_json_still_reports_the_jobs_started_before_an_interrupt(moto_world, run_cli, monkeypatch):
    from launcher.submission import backend

    real = backend.schedule
    starts = iter([real, interrupt_before_creating])
    monkeypatch.setattr(backend, "schedule", lambda *a: next(starts)(*a))
    r = run_cli("submit", "jobs/llama7b.yaml", "jobs/llama7b.yaml", "--set", "role=Good", "--output", "json")
    assert r.code == 130 and "was not started" in r.err
    reported = json.loads(r.out)  # one object per plan: the first started, the second did not
    assert [x["job_name"] for x in reported if x["started"]] == jobs_in("us-west-2") and len(reported) == 2
    assert reported[1]["state"] == "error" and "was not started" in reported[1]["error"]


# -- 2. state that cannot be written ------------------------------------------------------------------

def test_an_unwritable_state_folder_is_a_warning_after_the_jobs_name(moto_world, run_cli, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the state folder should be")
    r = run_cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", env={"XDG_STATE_HOME": str(blocker)})
    assert r.code == 0, r.err
    name = r.out.splitlines()[0].split()[1]
    assert r.out.startswith(f"started {name} in us-west-2") and jobs_in("us-west-2") == [name]
    assert "Traceback" not in r.err
    warning = [ln for ln in r.err.splitlines() if "latest" in ln]
    assert len(warning) == 1 and warning[0].startswith(f"warning: {name} is running, but it could not be remembered")


def test_json_output_says_whether_latest_was_remembered(moto_world, run_cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = run_cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--output", "json",
                env={"XDG_STATE_HOME": str(blocker)})
    data = json.loads(r.out)
    assert r.code == 0 and data["remembered"] is False and data["notes"] and "could not be remembered" in r.err


# -- 3. one region ------------------------------------------------------------------------------------

@pytest.fixture
def eu_bucket(moto_world):
    boto3.client("s3", region_name="eu-west-1").create_bucket(
        Bucket="eu-smp-bucket", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    return "s3://eu-smp-bucket/smp"


@pytest.mark.parametrize("spec_region", ["us-west-2", "null"])
def test_region_flag_is_the_region_of_everything(moto_world, eu_bucket, run_cli, spec_region):
    r = run_cli("submit", "jobs/llama7b.yaml", "--region", "eu-west-1", "--set", "role=Good", "--skip-role-check",
                "--set", f"cluster.region={spec_region}", "--set", f"output.path={eu_bucket}", "--output", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    name = data["job_name"]
    assert jobs_in("eu-west-1") == [name] and jobs_in("us-west-2") == []
    assert data["region"] == "eu-west-1" and "region=eu-west-1" in data["console_url"]
    assert ".eu-west-1." in data["request"]["AlgorithmSpecification"]["TrainingImage"]
    assert last_submitted() == {**last_submitted(), "job_name": name, "region": "eu-west-1"}
    desc = boto3.client("sagemaker", region_name="eu-west-1").describe_training_job(TrainingJobName=name)
    assert ".eu-west-1." in desc["AlgorithmSpecification"]["TrainingImage"]


def test_region_order_flag_spec_env(moto_world, eu_bucket, monkeypatch):
    from launcher.plan.build import resolve_region

    env = {"AWS_REGION": "ap-south-1", "AWS_DEFAULT_REGION": "ca-central-1"}
    assert resolve_region("us-east-1", env, flag="eu-west-1") == "eu-west-1"
    assert resolve_region("us-east-1", env) == "us-east-1"
    assert resolve_region(None, env) == "ap-south-1"
    assert resolve_region(None, {"AWS_DEFAULT_REGION": "ca-central-1"}) == "ca-central-1"
    clients = Clients(region="eu-west-1")
    result = submit(spec(f"output.path={eu_bucket}"), clients, now=NOW, dry_run=True, skip_role_check=True)
    assert result.region == clients.region == clients.s3.meta.region_name == "eu-west-1"


def test_a_us_bucket_with_region_flag_eu_is_refused_naming_eu(moto_world, run_cli):
    r = run_cli("submit", "jobs/llama7b.yaml", "--region", "eu-west-1", "--set", "role=Good", "--dry-run")
    assert r.code == 3 and "is in us-west-2 but the job runs in eu-west-1" in r.err


# -- 4. an endpoint that never answers ----------------------------------------------------------------

@pytest.fixture
def silent_endpoint():
    """A loopback socket that accepts connections (the kernel's backlog) and never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def test_a_silent_endpoint_fails_in_one_line_after_saying_what_it_waits_for(silent_endpoint, monkeypatch):
    """The notice's delay passes (virtually: `_Timers`) once the request is sent, however long the machine
    takes to get there; the endpoint never answers."""
    import threading

    from launcher.core import aws as aws_module

    for k, v in emulator.FAKE_CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    timers = _Timers()
    monkeypatch.setattr(aws_module, "threading", SimpleNamespace(Timer=timers.Timer, get_ident=threading.get_ident))
    said = []
    env = {"AWS_ENDPOINT_URL": silent_endpoint}
    clients = Clients(region="us-west-2", env=env, connect_timeout=0.5, read_timeout=0.5, max_attempts=1,
                      wait_notice_s=0.2, notify=said.append)
    clients.sagemaker.meta.events.register("before-send.sagemaker.DescribeTrainingJob", lambda **_: timers.elapse())
    begun = time.monotonic()
    with pytest.raises(AwsError) as err:
        jobs.describe(clients, "any-job")
    spent = time.monotonic() - begun
    assert err.value.exit_code == 4 and "\n" not in str(err.value)
    assert "did not answer in time" in str(err.value) and silent_endpoint in str(err.value)
    assert said == ["waiting for sagemaker.us-west-2…"]
    print(f"2 tries of 0.5 s read timeout: gave up after {spent:.2f} s")


class _Timers:
    """threading.Timer for launcher.core.aws on a virtual clock: `elapse()` fires every timer started and not
    cancelled, as if its delay had passed (the notice of a call that never answered)."""

    def __init__(self):
        self.made = []

    def Timer(self, delay, fire):  # noqa: N802 (threading's name)
        timer = SimpleNamespace(delay=delay, fire=fire, daemon=False, started=False, cancelled=False, fired=False)
        timer.start = lambda: setattr(timer, "started", True)
        timer.cancel = lambda: setattr(timer, "cancelled", True)
        self.made.append(timer)
        return timer

    def elapse(self):
        for t in self.made:
            if t.started and not t.cancelled and not t.fired:
                t.fired = True
                t.fire()


def test_a_call_that_answers_says_nothing(moto_world, monkeypatch):
    """The notice's timer starts with each call and is cancelled by its answer: once the notice delay has
    passed (virtually), a call that answered has said nothing; a call still waiting would have."""
    import threading

    from launcher.core import aws as aws_module

    timers = _Timers()
    monkeypatch.setattr(aws_module, "threading", SimpleNamespace(Timer=timers.Timer, get_ident=threading.get_ident))
    said = []
    clients = Clients(region="us-west-2", wait_notice_s=2.0, notify=said.append)
    clients.sagemaker.list_training_jobs()
    clients.sagemaker.list_training_jobs()
    assert [(t.delay, t.started, t.cancelled) for t in timers.made] == [(2.0, True, True)] * 2
    timers.elapse()
    assert said == []
    # The same timers do speak for a call that has not answered when the delay passes (here: while its
    # request is being built).
    clients.sagemaker.meta.events.register("request-created.sagemaker.ListTrainingJobs", lambda **_: timers.elapse())
    clients.sagemaker.list_training_jobs()
    assert said == ["waiting for sagemaker.us-west-2…"]


def test_without_notify_the_library_logs_the_notice_and_prints_nothing(moto_world, monkeypatch, capsys):
    """The core never prints: with no `notify`, a call still waiting is a warning of the `launcher` logger
    (which only the CLI sends to stderr)."""
    import logging
    import threading

    from launcher.core import aws as aws_module

    timers = _Timers()
    monkeypatch.setattr(aws_module, "threading", SimpleNamespace(Timer=timers.Timer, get_ident=threading.get_ident))
    clients = Clients(region="us-west-2", wait_notice_s=2.0)
    clients.sagemaker.meta.events.register("request-created.sagemaker.ListTrainingJobs", lambda **_: timers.elapse())
    records: list[logging.LogRecord] = []
    heard = logging.Handler()
    heard.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("launcher.core.aws")
    logger.addHandler(heard)
    try:
        clients.sagemaker.list_training_jobs()
    finally:
        logger.removeHandler(heard)
    assert [(r.levelno, r.getMessage()) for r in records] == [(logging.WARNING, "waiting for sagemaker.us-west-2…")]
    assert capsys.readouterr() == ("", "")


def test_status_against_a_silent_endpoint_through_the_cli(silent_endpoint, run_cli, monkeypatch):
    """The notice's delay passes at once (its timer fires as it starts): `status` makes one call, and it never
    answers, so the notice comes before the error however slow the machine is."""
    import threading

    from launcher.core import aws

    def fires_at_once(_delay, fire):
        return SimpleNamespace(daemon=False, start=fire, cancel=lambda: None)

    monkeypatch.setattr(aws, "threading", SimpleNamespace(Timer=fires_at_once, get_ident=threading.get_ident))
    monkeypatch.setattr(aws, "READ_TIMEOUT", 0.5)
    monkeypatch.setattr(aws, "TRIES", 2)
    monkeypatch.setattr(aws, "WAIT_NOTICE_S", 0.2)
    r = run_cli("status", "some-job", env={**emulator.FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": silent_endpoint})
    lines = r.err.strip().splitlines()
    assert r.code == 4 and lines[0] == "waiting for sagemaker.us-west-2…" and len(lines) == 2
    assert lines[1].startswith("describing some-job: http://127.0.0.1:") and "Traceback" not in r.err


def test_the_default_budget_per_call_is_under_a_minute(shipped_wait_notice):
    from launcher.core import aws

    worst = aws.TRIES * max(aws.READ_TIMEOUT, aws.CONNECT_TIMEOUT) + 2 ** aws.TRIES
    assert worst < 60 and aws.WAIT_NOTICE_S == shipped_wait_notice < 10
    config = Clients(region="us-west-2").sagemaker.meta.config
    assert config.retries["total_max_attempts"] == aws.TRIES  # botocore's max_attempts counts retries
    assert (config.read_timeout, config.connect_timeout) == (aws.READ_TIMEOUT, aws.CONNECT_TIMEOUT)


# -- 5. IAM that cannot answer ------------------------------------------------------------------------

class BadIam:
    """An IAM client whose simulation (or everything) fails in a chosen way; the rest is real."""

    def __init__(self, real, error, everything=False):
        self.real, self.error, self.everything = real, error, everything

    def __getattr__(self, name):
        if self.everything and name != "meta":
            return self._fail
        return getattr(self.real, name)

    def _fail(self, **_):
        raise self.error

    simulate_principal_policy = _fail

    def get_paginator(self, name):
        return one_page_paginator(getattr(self, name))


def _server_error(status=500):
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": str(status), "Message": "<!doctype html><title>500</title>"},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, "SimulatePrincipalPolicy")


def _unparseable():
    from botocore.parsers import ResponseParserError

    return ResponseParserError("Unable to parse response, invalid XML received:\nb'<!doctype html>...'")


@pytest.mark.parametrize("error", [_server_error(), _server_error(503), _unparseable(),
                                   ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "x"}}, "Sim")],
                         ids=["500", "503", "unparseable", "unavailable"])
def test_iam_that_cannot_simulate_is_cannot_tell(moto_world, error):
    plan = build_plan(spec())
    check = check_role(plan, BadIam(boto3.client("iam"), error), boto3.client("sts"))
    assert check.verdict == RoleVerdict.UNKNOWN and check.unknowns and not check.missing
    assert not any("<" in u or "\n" in u for u in check.unknowns)
    assert check.role_arn == moto_world.arns["Good"]


def test_an_unparseable_get_role_is_cannot_tell(moto_world):
    check = check_role(build_plan(spec()), BadIam(boto3.client("iam"), _unparseable(), everything=True),
                       boto3.client("sts"))
    assert check.verdict == RoleVerdict.UNKNOWN and "ResponseParserError" in check.unknowns[0]


@pytest.mark.parametrize("everything", [True, False], ids=["get-role", "simulation"])
@pytest.mark.parametrize("code", ["InvalidClientTokenId", "ExpiredToken", "SignatureDoesNotMatch"])
def test_refused_credentials_stay_exit_4(moto_world, code, everything):
    error = ClientError({"Error": {"Code": code, "Message": "The security token included in the request is "
                                                            "invalid."}}, "GetRole")
    iam = BadIam(boto3.client("iam"), error, everything=everything)
    with pytest.raises(ClientError):  # not a verdict of "unknown"
        check_role(build_plan(spec()), iam, boto3.client("sts"))
    with pytest.raises(AwsError) as err:
        submit(spec(), Clients(overrides={"iam": iam}), now=NOW, dry_run=True)
    assert err.value.exit_code == 4 and code in str(err.value)


def test_a_role_from_another_account_still_fails(moto_world):
    assert check_role(build_plan(spec(role="arn:aws:iam::999999999999:role/Good")), boto3.client("iam"),
                      boto3.client("sts")).verdict == RoleVerdict.FAIL
    assert check_role(build_plan(spec()), boto3.client("iam"), boto3.client("sts")).verdict == RoleVerdict.PASS


# -- 6. one line when SageMaker refuses; an unknown profile -------------------------------------------

@pytest.mark.parametrize("command", [["submit", "--dry-run"], ["submit"], ["check-role"]])
def test_an_unknown_profile_is_one_line(moto_world, run_cli, tmp_path, command):
    config = tmp_path / "config"
    config.write_text("[default]\nregion = us-west-2\n")
    r = run_cli(*command, "jobs/llama7b.yaml", "--set", "role=Good", "--profile", "nosuch",
                env={"AWS_CONFIG_FILE": str(config)})
    assert r.code == 4 and r.err.strip().splitlines() == [
        "The config profile (nosuch) could not be found; check AWS_PROFILE and ~/.aws/config"]


def test_a_client_of_an_unknown_profile_is_the_same_one_line_error(tmp_path, monkeypatch):
    """The first client a library caller asks for says what is wrong; no half-made client is handed back."""
    from launcher.core.errors import LauncherError

    config = tmp_path / "config"
    config.write_text("[default]\nregion = us-west-2\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    clients = Clients(profile="nosuch", region="us-west-2")
    for _ in range(2):  # asked again, it says so again
        with pytest.raises(LauncherError) as err:
            clients.sagemaker  # noqa: B018 - the attribute makes the client
        assert str(err.value) == "The config profile (nosuch) could not be found; check AWS_PROFILE and ~/.aws/config"
        assert err.value.exit_code == 4


def test_a_client_with_no_region_anywhere_is_one_line_saying_where_to_set_one(tmp_path, monkeypatch):
    empty = tmp_path / "config"
    empty.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(LauncherError) as err:
        Clients().sagemaker  # noqa: B018
    assert str(err.value) == NO_REGION.format(region="region") and err.value.exit_code == 2  # input, not AWS

def test_a_service_the_factory_does_not_make_is_no_attribute():
    clients = Clients(region="us-west-2")
    with pytest.raises(AttributeError, match="^ec2$"):
        clients.ec2  # noqa: B018
    assert not hasattr(clients, "ecr") and hasattr(clients, "sagemaker")
