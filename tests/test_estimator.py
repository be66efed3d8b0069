"""The SDK backend alone, under moto in-process: what leaves the process, Ctrl-C, the SDK's log line."""
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import boto3
import botocore.client
import pytest
import requests
from botocore.exceptions import ClientError

import emulator
from launcher.core.aws import Clients
from launcher.spec import load_spec
from launcher.submission import estimator
from tests.aws_setup import create_world
from tests.conftest import JOBS, REPO


@pytest.fixture
def moto_plan(monkeypatch, tmp_path):
    for k, v in emulator.FAKE_CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with emulator.mocked():
        arns = create_world(boto3.Session(region_name="us-west-2"))
        clients = Clients(region="us-west-2")
        loaded = load_spec(JOBS / "llama7b.yaml", ["role=Good"])
        from launcher.plan.build import build_plan

        plan = build_plan(loaded)
        yield SimpleNamespace(clients=clients, loaded=loaded, plan=plan, source_uri=plan.source.uri,
                              role=arns["Good"], request=plan.request_for(arns["Good"]))


def start(moto_plan):
    return estimator.start(moto_plan.plan, moto_plan.source_uri, moto_plan.role, moto_plan.clients.session,
                           moto_plan.clients.sagemaker)


@pytest.fixture
def egress(monkeypatch):
    """Record every way out of the process: AWS API calls, telemetry, HTTP through requests, sockets."""
    estimator.import_sdk()
    from sagemaker.telemetry import telemetry_logging

    seen = SimpleNamespace(api=[], telemetry=[], http=[], sockets=[])
    real_call = botocore.client.BaseClient._make_api_call

    def api(client, operation, params):
        seen.api.append(f"{client.meta.service_model.service_name}.{operation}")
        return real_call(client, operation, params)

    def http(_session, request, **_):
        seen.http.append(request.url)
        raise requests.ConnectionError("no network in tests")

    def connect(_sock, address):
        seen.sockets.append(address)
        raise OSError("no network in tests")

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", api)
    monkeypatch.setattr(telemetry_logging, "_send_telemetry_request", lambda *a, **_: seen.telemetry.append(a))
    monkeypatch.setattr(requests.Session, "send", http)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **_: seen.sockets.append(a[:2]) or [])
    return seen


def test_start_sends_create_training_job_and_nothing_else(moto_plan, egress):
    assert start(moto_plan) == moto_plan.plan.job_name
    assert egress.api == ["sagemaker.CreateTrainingJob"]
    assert egress.telemetry == [] and egress.http == [] and egress.sockets == []


def test_a_whole_submit_writes_only_the_tarball_and_the_job(moto_plan, egress):
    from launcher.submission.create import submit

    submit(moto_plan.plan, moto_plan.clients)
    reads = ("Get", "Head", "List", "Describe", "Simulate", "Search")  # Search: the instances the quota holds
    writes = [call for call in egress.api if not call.split(".")[1].startswith(reads)]
    assert writes == ["s3.PutObject", "sagemaker.CreateTrainingJob"], egress.api
    assert egress.telemetry == [] and egress.http == [] and egress.sockets == []


def test_the_egress_spies_do_see_the_sdks_own_fit_send_telemetry(moto_plan, egress):
    """The control for the test above: the SDK's decorated fit, on the same empty config, does send."""
    est = estimator.build(moto_plan.plan, moto_plan.source_uri, moto_plan.role, moto_plan.clients.session,
                          moto_plan.clients.sagemaker)
    est.fit(job_name=moto_plan.plan.job_name + "-control", wait=False, logs=False)
    assert egress.telemetry and "sagemaker.CreateTrainingJob" in egress.api


def test_the_sdk_validates_no_config(moto_plan, monkeypatch):
    """A non-empty SDK config is schema-checked on every lookup (22 per submit, most of submit's time)."""
    import jsonschema

    calls = []
    real = jsonschema.validate
    monkeypatch.setattr(jsonschema, "validate", lambda *a, **k: calls.append(1) or real(*a, **k))
    start(moto_plan)
    assert calls == []


def test_a_users_sdk_defaults_do_not_change_the_request(moto_plan, monkeypatch, tmp_path):
    defaults = tmp_path / "config.yaml"
    defaults.write_text(textwrap.dedent("""\
        SchemaVersion: '1.0'
        SageMaker:
          TrainingJob:
            EnableNetworkIsolation: true
            Tags: [{Key: from-defaults, Value: x}]
        """))
    monkeypatch.setenv("SAGEMAKER_USER_CONFIG_OVERRIDE", str(defaults))
    sent = {}
    moto_plan.clients.session.events.register("provide-client-params.sagemaker.CreateTrainingJob",
                                        lambda params, **_: sent.update(params))
    start(moto_plan)
    assert sent["Tags"] == moto_plan.request["Tags"] and "EnableNetworkIsolation" not in sent
    assert os.environ["SAGEMAKER_USER_CONFIG_OVERRIDE"] == str(defaults)


def test_an_sdk_that_reads_its_defaults_anyway_is_refused_before_any_request(moto_plan, monkeypatch, tmp_path):
    import contextlib

    from launcher.core.errors import LauncherError

    defaults = tmp_path / "config.yaml"
    defaults.write_text("SchemaVersion: '1.0'\nSageMaker:\n  TrainingJob:\n    EnableNetworkIsolation: true\n")
    monkeypatch.setenv("SAGEMAKER_USER_CONFIG_OVERRIDE", str(defaults))
    monkeypatch.setattr(estimator, "_no_sdk_defaults", contextlib.nullcontext)  # as if the variables were ignored
    with pytest.raises(LauncherError, match="loaded a defaults config despite SAGEMAKER_ADMIN_CONFIG_OVERRIDE and "
                                            "SAGEMAKER_USER_CONFIG_OVERRIDE; refusing to submit"):
        start(moto_plan)


def test_a_client_the_sdk_should_never_use_says_so_loudly():
    from launcher.core.errors import LauncherError

    with pytest.raises(LauncherError, match=r"used its sagemaker-runtime client \(invoke_endpoint\) while starting"):
        estimator._Unused("sagemaker-runtime").invoke_endpoint  # noqa: B018


def test_the_plans_image_is_what_the_sdk_sends(moto_plan):
    sent = {}
    moto_plan.clients.session.events.register("provide-client-params.sagemaker.CreateTrainingJob",
                                        lambda params, **_: sent.update(params))
    start(moto_plan)
    assert sent["AlgorithmSpecification"]["TrainingImage"] == moto_plan.plan.framework.image_uri


def interrupted(*_a, **_k):
    raise KeyboardInterrupt


def sigint(*_a, **_k):
    signal.raise_signal(signal.SIGINT)
    raise AssertionError("SIGINT did not interrupt")


@pytest.mark.parametrize("create", [interrupted, sigint], ids=["KeyboardInterrupt", "SIGINT"])
def test_ctrl_c_during_create_training_job_comes_out_of_start(moto_plan, monkeypatch, create):
    monkeypatch.setattr(moto_plan.clients.sagemaker, "create_training_job", create)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            start(moto_plan)
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_refused_create_training_job_raises_and_the_sdk_logs_nothing(moto_plan, monkeypatch, caplog):
    refused = ClientError({"Error": {"Code": "ValidationException", "Message": "no"}}, "CreateTrainingJob")

    def create(**_):
        raise refused

    monkeypatch.setattr(moto_plan.clients.sagemaker, "create_training_job", create)
    caplog.set_level(logging.DEBUG)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    with pytest.raises(ClientError) as err:
        start(moto_plan)
    assert err.value is refused
    sdk_lines = [r.getMessage() for r in caplog.records
                 if r.name.startswith("sagemaker") and r.levelno >= logging.WARNING]
    assert sdk_lines == []
    assert root.handlers == handlers and root.level == level


FAILING_START = """
import atexit, gc
atexit.register(lambda: print("frozen at exit" if gc.get_freeze_count() else "collected at exit"))
import boto3
from botocore.exceptions import ClientError
import emulator
from launcher.core.aws import Clients
from launcher.submission import estimator
from launcher.plan.build import build_plan
from launcher.spec import load_spec
from tests.aws_setup import create_world

def refuse(**_):
    raise ClientError({"Error": {"Code": "ValidationException", "Message": "no"}}, "CreateTrainingJob")

with emulator.mocked():
    role = create_world(boto3.Session(region_name="us-west-2"))["Good"]
    clients = Clients(region="us-west-2")
    loaded = load_spec("jobs/llama7b.yaml", ["role=Good"])
    plan = build_plan(loaded)
    clients.sagemaker.create_training_job = refuse
    try:
        estimator.start(plan, plan.source.uri, role, clients.session, clients.sagemaker)
    except ClientError:
        print("refused")
"""


def test_in_a_real_process_no_sdk_line_reaches_stderr_and_exit_skips_the_collection(tmp_path):
    """CreateTrainingJob refused: stderr stays empty (smp-launch reports it); the heap is frozen at exit.

    A malformed SDK defaults file of the user's is ignored too (the SDK's import would print its schema errors).
    """
    bad_defaults = tmp_path / "config.yaml"
    bad_defaults.write_text("SchemaVersion: '1.0'\nSageMaker:\n  Bogus: 1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SMP_LAUNCH_"))}
    env.update(emulator.FAKE_CREDENTIALS, AWS_DEFAULT_REGION="us-west-2", XDG_STATE_HOME=str(tmp_path),
               SAGEMAKER_USER_CONFIG_OVERRIDE=str(bad_defaults))
    out = subprocess.run([sys.executable, "-c", FAILING_START], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.stdout.split() == ["refused", "frozen", "at", "exit"], out.stderr
    assert out.stderr == ""


def test_an_sdk_built_differently_is_refused(monkeypatch):
    estimator.import_sdk()
    from sagemaker.estimator import EstimatorBase

    def fit(self, *a, **k):
        raise AssertionError("not called")

    monkeypatch.setattr(EstimatorBase, "fit", fit)
    from launcher.core.errors import LauncherError

    with pytest.raises(LauncherError, match="SDK version is not supported"):
        estimator.untracked_fit()
