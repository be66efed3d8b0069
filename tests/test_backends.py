"""The backends alone, under moto in-process: what leaves the process, the request each builds against the plan's,
Ctrl-C, the SDK's log lines; on whichever SDK line is installed (the Estimator only on 2.x)."""
import contextlib
import importlib
import logging
import os
import signal
import socket
import subprocess
import sys
from types import SimpleNamespace

import boto3
import botocore.client
import pytest
import requests
from botocore.exceptions import ClientError

import emulator
from launcher.core.aws import Clients
from launcher.core.errors import LauncherError
from launcher.core.sdk import BackendKind
from launcher.spec import load_spec
from launcher.submission import backend, estimator, model_trainer, sdk
from tests.aws_setup import create_world
from tests.conftest import BACKENDS, JOBS, REPO, SDK_MAJOR, TELEMETRY, needs_v2

DRIVER_FILES = 5  # at least: sm_train.sh, sourcecode.json, distributed.json, environment.py, torchrun_driver.py


def _world(monkeypatch, kind):
    """moto in-process with the test world, and the reference job planned for backend `kind`."""
    for k, v in emulator.FAKE_CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with emulator.mocked():
        arns = create_world(boto3.Session(region_name="us-west-2"))
        clients = Clients(region="us-west-2")
        loaded = load_spec(JOBS / "llama7b.yaml", ["role=Good", f"cluster.backend={kind}"])
        from launcher.plan.build import build_plan

        plan = build_plan(loaded)
        yield SimpleNamespace(clients=clients, loaded=loaded, plan=plan, source_uri=plan.source.uri,
                              role=arns["Good"], request=plan.request_for(arns["Good"]), kind=BackendKind(kind))


@pytest.fixture(params=BACKENDS, ids=str)
def moto_plan(request, monkeypatch):
    """The job planned for each backend the installed SDK line has."""
    yield from _world(monkeypatch, request.param)


@pytest.fixture
def trainer_plan(monkeypatch):
    """The job planned for ModelTrainer (both lines have it)."""
    yield from _world(monkeypatch, BackendKind.MODEL_TRAINER)


@pytest.fixture
def estimator_plan(monkeypatch):
    """The job planned for the PyTorch Estimator (SDK 2.x only: its tests are marked needs_v2)."""
    yield from _world(monkeypatch, BackendKind.ESTIMATOR)


def start(moto_plan):
    return backend.schedule(moto_plan.plan, moto_plan.source_uri, moto_plan.role, moto_plan.clients)


def sent_requests(clients):
    sent = {}
    clients.session.events.register("provide-client-params.sagemaker.CreateTrainingJob",
                                    lambda params, **_: sent.update(params))
    return sent


@pytest.fixture
def egress(monkeypatch):
    """Record every way out of the process: AWS API calls, telemetry, HTTP through requests, sockets."""
    (estimator if SDK_MAJOR == 2 else model_trainer).import_sdk()
    telemetry_logging = importlib.import_module(TELEMETRY)

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
    """The Estimator writes nothing but the job; ModelTrainer also uploads its drivers, in this thread, then lists
    their folder (nothing but them may be there: launcher.submission.model_trainer.only_ours)."""
    assert start(moto_plan) == moto_plan.plan.job_name
    assert egress.api[-1] == "sagemaker.CreateTrainingJob"
    before = egress.api[:-1]
    if moto_plan.kind is BackendKind.ESTIMATOR:
        assert before == []
    else:
        assert before[-1] == "s3.ListObjectsV2"
        assert set(before[:-1]) == {"s3.PutObject"} and len(before) - 1 >= DRIVER_FILES
    assert egress.telemetry == [] and egress.http == [] and egress.sockets == []


def test_a_whole_submit_writes_only_the_tarball_the_drivers_and_the_job(moto_plan, egress):
    from launcher.submission.create import submit

    result = submit(moto_plan.plan, moto_plan.clients)
    reads = ("Get", "Head", "List", "Describe", "Simulate", "Search")  # Search: the instances the quota holds
    writes = [call for call in egress.api if not call.split(".")[1].startswith(reads)]
    drivers = 0 if moto_plan.kind is BackendKind.ESTIMATOR else writes.count("s3.PutObject") - 1
    assert writes == ["s3.PutObject"] * (1 + drivers) + ["sagemaker.CreateTrainingJob"], egress.api
    assert drivers == 0 or drivers >= DRIVER_FILES
    assert result.aws_calls.count("s3.PutObject") == 1 + drivers  # the record shows the SDK's uploads too
    assert egress.telemetry == [] and egress.http == [] and egress.sockets == []


def test_the_drivers_lie_where_the_plan_says(trainer_plan):
    from launcher.plan.request import drivers_uri

    start(trainer_plan)
    bucket, prefix = drivers_uri(trainer_plan.plan)[len("s3://"):].split("/", 1)
    keys = [o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
    names = {k.rsplit("/", 1)[-1] for k in keys}
    assert {"sm_train.sh", "torchrun_driver.py", "environment.py", "distributed.json", "sourcecode.json"} <= names


@needs_v2
def test_the_egress_spies_do_see_the_sdks_own_fit_send_telemetry(estimator_plan, egress):
    """The control for the tests above: the SDK's decorated fit, on the same empty config, does send."""
    est = estimator.build(estimator_plan.plan, estimator_plan.source_uri, estimator_plan.role,
                          estimator_plan.clients.session, estimator_plan.clients.sagemaker)
    est.fit(job_name=estimator_plan.plan.job_name + "-control", wait=False, logs=False)
    assert egress.telemetry and "sagemaker.CreateTrainingJob" in egress.api


def test_the_sdk_validates_no_config(moto_plan, monkeypatch):
    """A non-empty SDK config is schema-checked on every lookup (22 per submit, most of submit's time)."""
    import jsonschema

    calls = []
    real = jsonschema.validate
    monkeypatch.setattr(jsonschema, "validate", lambda *a, **k: calls.append(1) or real(*a, **k))
    start(moto_plan)
    assert calls == []


DEFAULTS = """\
SchemaVersion: '1.0'
SageMaker:
  TrainingJob:
    EnableNetworkIsolation: true
    Tags: [{Key: from-defaults, Value: x}]
"""


def test_a_users_sdk_defaults_do_not_change_the_request(moto_plan, monkeypatch, tmp_path):
    defaults = tmp_path / "config.yaml"
    defaults.write_text(DEFAULTS)
    monkeypatch.setenv("SAGEMAKER_USER_CONFIG_OVERRIDE", str(defaults))
    sent = sent_requests(moto_plan.clients)
    start(moto_plan)
    assert sent["Tags"] == moto_plan.request["Tags"] and "EnableNetworkIsolation" not in sent
    assert os.environ["SAGEMAKER_USER_CONFIG_OVERRIDE"] == str(defaults)


@needs_v2
def test_an_sdk_that_reads_its_defaults_anyway_is_refused_before_any_request(estimator_plan, monkeypatch, tmp_path):
    """The Estimator's session says so itself (for either backend, the seam also refuses a request that differs)."""
    defaults = tmp_path / "config.yaml"
    defaults.write_text("SchemaVersion: '1.0'\nSageMaker:\n  TrainingJob:\n    EnableNetworkIsolation: true\n")
    monkeypatch.setenv("SAGEMAKER_USER_CONFIG_OVERRIDE", str(defaults))
    monkeypatch.setattr(estimator, "_no_sdk_defaults", contextlib.nullcontext)  # as if the variables were ignored
    with pytest.raises(LauncherError, match="loaded a defaults config despite SAGEMAKER_ADMIN_CONFIG_OVERRIDE and "
                                            "SAGEMAKER_USER_CONFIG_OVERRIDE; refusing to submit"):
        start(estimator_plan)


def test_a_request_the_sdk_changed_is_refused_naming_where_and_nothing_is_created(moto_plan, monkeypatch):
    """The SDK builds a request with a field the plan did not predict (as a newer SDK might, or a defaults file it
    read despite us): the seam says where they differ, never the values, and sends nothing."""
    module = backend.backend_module(moto_plan.plan)
    real = module.build_request

    def with_isolation(*args, **kwargs):
        request = real(*args, **kwargs)
        request["EnableNetworkIsolation"] = True
        request["Environment"] = {**request.get("Environment", {}), "NCCL_DEBUG": "s3cr3t-looking"}
        return request

    monkeypatch.setattr(module, "build_request", with_isolation)
    sent = sent_requests(moto_plan.clients)
    with pytest.raises(LauncherError, match=r"built a request for .* that is not the one the plan shows \(it differs "
                                            r"at EnableNetworkIsolation, Environment.NCCL_DEBUG\); nothing was "
                                            r"started") as err:
        start(moto_plan)
    assert "s3cr3t" not in str(err.value)
    assert sent == {}
    assert moto_plan.clients.sagemaker.list_training_jobs()["TrainingJobSummaries"] == []


def test_a_client_the_sdk_should_never_use_says_so_loudly():
    with pytest.raises(LauncherError, match=r"used its sagemaker-runtime client \(invoke_endpoint\) while building"):
        sdk.Unused("sagemaker-runtime").invoke_endpoint  # noqa: B018


def test_the_plans_image_is_what_the_sdk_sends(moto_plan):
    sent = sent_requests(moto_plan.clients)
    start(moto_plan)
    assert sent["AlgorithmSpecification"]["TrainingImage"] == moto_plan.plan.framework.image_uri


def test_the_sdk_sends_the_predicted_request_for_this_backend(moto_plan):
    sent = sent_requests(moto_plan.clients)
    start(moto_plan)
    assert sent == moto_plan.request
    if moto_plan.kind is BackendKind.MODEL_TRAINER:
        assert [c["ChannelName"] for c in sent["InputDataConfig"]] == ["code", "sm_drivers"]
        assert sent["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] == moto_plan.source_uri
        assert "sagemaker_program" not in sent["HyperParameters"]
    else:
        assert sent["HyperParameters"]["sagemaker_program"] == '"train.py"'


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
                 if r.name.startswith("sagemaker") and r.levelno >= logging.INFO]
    assert sdk_lines == []
    assert root.handlers == handlers and root.level == level


FAILING_START = """
import atexit, gc, sys
atexit.register(lambda: print("frozen at exit" if gc.get_freeze_count() else "collected at exit"))
import boto3
from botocore.exceptions import ClientError
import emulator
from launcher.core.aws import Clients
from launcher.submission import backend
from launcher.plan.build import build_plan
from launcher.spec import load_spec
from tests.aws_setup import create_world

def refuse(**_):
    raise ClientError({"Error": {"Code": "ValidationException", "Message": "no"}}, "CreateTrainingJob")

with emulator.mocked():
    role = create_world(boto3.Session(region_name="us-west-2"))["Good"]
    clients = Clients(region="us-west-2")
    loaded = load_spec("jobs/llama7b.yaml", ["role=Good", "cluster.backend=" + sys.argv[1]])
    plan = build_plan(loaded)
    clients.sagemaker.create_training_job = refuse
    try:
        backend.schedule(plan, plan.source.uri, role, clients)
    except ClientError:
        print("refused")
"""


@pytest.mark.parametrize("kind", BACKENDS, ids=str)
def test_in_a_real_process_no_sdk_line_reaches_stderr_and_exit_skips_the_collection(tmp_path, kind):
    """CreateTrainingJob refused: stdout and stderr carry nothing of the SDK's (smp-launch reports it); the heap
    is frozen at exit. A malformed SDK defaults file of the user's is ignored too (the SDK's import would print
    its schema errors)."""
    bad_defaults = tmp_path / "config.yaml"
    bad_defaults.write_text("SchemaVersion: '1.0'\nSageMaker:\n  Bogus: 1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SMP_LAUNCH_"))}
    env.update(emulator.FAKE_CREDENTIALS, AWS_DEFAULT_REGION="us-west-2", XDG_STATE_HOME=str(tmp_path),
               SAGEMAKER_USER_CONFIG_OVERRIDE=str(bad_defaults))
    out = subprocess.run([sys.executable, "-c", FAILING_START, str(kind)], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.stdout.split() == ["refused", "frozen", "at", "exit"], out.stderr
    assert out.stderr == ""


@needs_v2
def test_an_sdk_built_differently_is_refused(monkeypatch):
    estimator.import_sdk()
    from sagemaker.estimator import EstimatorBase

    def fit(self, *a, **k):
        raise AssertionError("not called")

    monkeypatch.setattr(EstimatorBase, "fit", fit)
    with pytest.raises(LauncherError, match="SDK version is not supported"):
        estimator.untracked_fit()


def test_a_model_trainer_without_the_namer_it_needs_is_refused(trainer_plan, monkeypatch):
    api = model_trainer.import_sdk()
    monkeypatch.delattr(api.module, model_trainer.NAMER)
    with pytest.raises(LauncherError, match="SDK version is not supported: its ModelTrainer builds a request"):
        start(trainer_plan)


def test_the_spot_key_is_spelt_as_create_training_job_takes_it(moto_plan, monkeypatch):
    """SDK 2.x's ModelTrainer misspells EnableManagedSpotTraining in its boto3-style request; sent as is,
    CreateTrainingJob's parameter validation would refuse the job."""
    loaded = load_spec(JOBS / "llama7b.yaml", ["role=Good", f"cluster.backend={moto_plan.kind}", "cluster.spot=true"])
    from launcher.plan.build import build_plan

    plan = build_plan(loaded)
    sent = sent_requests(moto_plan.clients)
    backend.schedule(plan, plan.source.uri, moto_plan.role, moto_plan.clients)
    assert sent["EnableManagedSpotTraining"] is True and "EnableManagedSotTraining" not in sent
    assert sent == plan.request_for(moto_plan.role)


def test_a_backend_this_sdk_lacks_is_refused_before_anything(monkeypatch):
    from launcher.core.sdk import InstalledSdk, choose_backend

    choice = choose_backend("estimator", InstalledSdk("3.27.0"))
    assert choice.problem and "exists only in SageMaker SDK 2.x" in choice.problem
    assert "cluster.backend: model-trainer" in choice.problem
    assert choose_backend("auto", InstalledSdk("3.27.0")).kind is BackendKind.MODEL_TRAINER
    assert choose_backend("auto", InstalledSdk("2.257.7")).kind is BackendKind.ESTIMATOR
    assert choose_backend("model-trainer", InstalledSdk("2.257.7")).problem is None
    assert "older than smp-launch supports" in (choose_backend("auto", InstalledSdk("2.200.0")).problem or "")
    assert "no SageMaker SDK" in (choose_backend("auto", InstalledSdk(None)).problem or "")

