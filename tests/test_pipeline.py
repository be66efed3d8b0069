"""`pipeline`: a SageMaker Pipeline of TrainingSteps built by the SDK's workflow classes, upserted to moto.

On whichever SDK line is installed: the PyTorch Estimator's steps in `sagemaker.workflow` on 2.x, ModelTrainer's
in `sagemaker.mlops.workflow` on 3.x (PIPELINE_BACKEND, what `cluster.backend: auto` is there); ModelTrainer on 2.x,
and two backends in one pipeline, are refused.

The contract: each step's Arguments are the plan's predicted CreateTrainingJob request (the one submit's
contract test holds the SDK to), less what a pipeline legitimately decides at run time (see expected_arguments).
"""
import json
import re

import pytest
from botocore.exceptions import ClientError

from launcher.core.aws import AwsError, Clients
from launcher.core.errors import SpecError, UsageError
from launcher.core.sdk import BackendKind
from launcher.orchestrate.pipeline import _pipeline_error, pipeline_definition, step_names, upsert_pipeline
from launcher.orchestrate.pipeline_params import MAX_STEPS_ENV
from launcher.plan.build import build_plan
from launcher.plan.request import MT_DRIVERS_CHANNEL
from launcher.spec import load_spec
from launcher.submission.role import PIPELINE_JOB_ACTIONS, RoleRefused
from tests.aws_setup import ACCOUNT, BUCKET, TRUST_SAGEMAKER, create_world, job_policy
from tests.conftest import BACKENDS, JOBS, SDK_MAJOR, TELEMETRY, needs_v2, refusing
from tests.test_submit import VARIANTS

# The backend that builds a pipeline's steps on this SDK line (SDK 2.x's ModelTrainer cannot: see the refusals).
PIPELINE_BACKEND = BackendKind.ESTIMATOR if SDK_MAJOR == 2 else BackendKind.MODEL_TRAINER
needs_v3 = pytest.mark.skipif(SDK_MAJOR < 3, reason="ModelTrainer builds pipeline steps on SageMaker SDK 3.x only")
DRIVER_FILES = 5  # at least: sm_train.sh, sourcecode.json, distributed.json, environment.py, torchrun_driver.py

FINE_TUNE = ["smp.tensor_parallel_degree=2", "smp.hybrid_shard_degree=4"]


PIPELINE_ROLE = "SMPPipelineRole"


def pipeline_world(session) -> dict[str, str]:
    """create_world plus a role that may also run a pipeline's jobs (tests.aws_setup's Good may not)."""
    arns = create_world(session)
    iam = session.client("iam")
    policy = job_policy()
    policy["Statement"] += [
        {"Effect": "Allow", "Action": list(PIPELINE_JOB_ACTIONS), "Resource": "arn:aws:sagemaker:*:*:training-job/*"},
        {"Effect": "Allow", "Action": "iam:PassRole", "Resource": f"arn:aws:iam::{ACCOUNT}:role/{PIPELINE_ROLE}",
         "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}}]
    arns[PIPELINE_ROLE] = iam.create_role(RoleName=PIPELINE_ROLE,
                                          AssumeRolePolicyDocument=json.dumps(TRUST_SAGEMAKER))["Role"]["Arn"]
    iam.put_role_policy(RoleName=PIPELINE_ROLE, PolicyName="job", PolicyDocument=json.dumps(policy))
    return arns


@pytest.fixture
def make_world():
    return pipeline_world  # conftest's `moto_world` builds this account


def plan(*overrides, job="llama7b.yaml"):
    return build_plan(load_spec(JOBS / job, [f"role={PIPELINE_ROLE}", *overrides]), region="us-west-2")


def drivers_of(step):
    """Where a ModelTrainer step's `sm_drivers` channel reads its drivers (None: a step without one)."""
    found = [c["DataSource"]["S3DataSource"]["S3Uri"] for c in step["Arguments"].get("InputDataConfig", [])
             if c["ChannelName"] == MT_DRIVERS_CHANNEL]
    return found[0] if found else None


def expected_arguments(p, role_arn, drivers=None):
    """The plan's predicted request as a pipeline step runs it with its parameters' defaults. What the pipeline
    owns, on both backends:
    - TrainingJobName: the pipeline names each job when it runs (a step has no name of its own to give);
    - Environment.SMP_LAUNCH_MAX_STEPS: the MaxSteps parameter reaches the script there;
    - CheckpointConfig.S3Uri (only where the spec names no checkpoint_path): the plan's default folder is
      named after its job; a step's is named after the pipeline execution (EXEC here), so a later execution
      does not resume from an earlier one's checkpoints.
    The Estimator's (SDK 2.x):
    - HyperParameters.sagemaker_job_name: the SDK writes the job name there only when it names the job;
    - HyperParameters.sagemaker_instance_type: the SDK JSON-encodes a plain value there but writes a parameter
      as it is (the training toolkit reads either: a value that is not JSON is taken as the string).
    ModelTrainer's (SDK 3.x):
    - InputDataConfig's sm_drivers S3Uri (`drivers`, checked here for its form): a job's drivers lie under its
      job name; a step's, in a folder of the code location named after their content
      (`<code location>/<24 hex digits>/sm_drivers`), the same for every build of the same step."""
    request = p.request_for(role_arn)
    request.pop("TrainingJobName")
    request.setdefault("Environment", {})[MAX_STEPS_ENV] = str(p.spec.training.max_steps)
    hp = request["HyperParameters"]
    if p.backend.kind is BackendKind.ESTIMATOR:
        hp.pop("sagemaker_job_name")
        hp["sagemaker_instance_type"] = json.loads(hp["sagemaker_instance_type"])
    else:
        code = re.escape(p.estimator.code_location.rstrip("/"))
        assert re.fullmatch(rf"{code}/[0-9a-f]{{24}}/{MT_DRIVERS_CHANNEL}", str(drivers)), drivers
        channel = next(c for c in request["InputDataConfig"] if c["ChannelName"] == MT_DRIVERS_CHANNEL)
        channel["DataSource"]["S3DataSource"]["S3Uri"] = drivers
    if not p.spec.output.checkpoint_path:
        base = f"{p.spec.output.path.rstrip('/')}/checkpoints/{p.base_job_name}"
        request["CheckpointConfig"]["S3Uri"] = f"{base}/EXEC"
    return request


def resolved(definition, step):
    """A step's arguments with every parameter at its default, in an execution whose id is EXEC (as the emulator
    resolves them when the execution runs)."""
    from emulator.pipelines import ExecutionRun, resolve

    values = {p["Name"]: p.get("DefaultValue") for p in definition.get("Parameters", [])}
    run = ExecutionRun(arn="arn:aws:sagemaker:us-west-2:123456789012:pipeline/x/execution/EXEC", pipeline="x",
                       values=values, steps=[])
    return resolve(step["Arguments"], run, {})


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_each_step_is_the_plans_predicted_request(moto_world, variant):
    plans = [plan(*VARIANTS[variant]), plan(*VARIANTS[variant], *FINE_TUNE)]
    definition = pipeline_definition(plans, "contract", role_arn=moto_world.arns[PIPELINE_ROLE],
                                 clients=Clients(region="us-west-2"))
    steps = definition["Steps"]
    assert [s["Name"] for s in steps] == step_names(plans) == ["llama2-7b", "llama2-7b-2"]
    for p, step in zip(plans, steps, strict=True):
        assert step["Type"] == "Training" and p.backend.kind is PIPELINE_BACKEND
        assert resolved(definition, step) == expected_arguments(p, moto_world.arns[PIPELINE_ROLE], drivers_of(step))
    assert "DependsOn" not in steps[0] and steps[1]["DependsOn"] == ["llama2-7b"]


def test_a_checkpoint_path_the_spec_sets_is_kept(moto_world):
    p = plan(f"output.checkpoint_path=s3://{BUCKET}/ckpt/shared")
    definition = pipeline_definition([p], "kept", role_arn=moto_world.arns[PIPELINE_ROLE],
                                     clients=Clients(region="us-west-2"))
    step = definition["Steps"][0]
    assert step["Arguments"]["CheckpointConfig"]["S3Uri"] == f"s3://{BUCKET}/ckpt/shared"
    assert resolved(definition, step) == expected_arguments(p, moto_world.arns[PIPELINE_ROLE], drivers_of(step))


def test_steps_run_in_the_order_given(moto_world):
    plans = [plan(), plan(*FINE_TUNE), plan("training.batch_size=2")]
    steps = pipeline_definition(plans, "order", role_arn=moto_world.arns[PIPELINE_ROLE],
                                 clients=Clients(region="us-west-2"))["Steps"]
    assert [s.get("DependsOn") for s in steps] == [None, ["llama2-7b"], ["llama2-7b-2"]]
    assert json.loads(steps[1]["Arguments"]["HyperParameters"]["mp_parameters"])["tensor_parallel_degree"] == 2


def test_the_api_gives_the_definition_it_would_upsert(moto_world):
    import launcher

    plans = [plan(), plan(*FINE_TUNE)]
    definition = launcher.pipeline_definition(plans, "from-the-api", role_arn=moto_world.arns[PIPELINE_ROLE],
                                              clients=Clients(region="us-west-2"))
    assert [s["Name"] for s in definition["Steps"]] == ["llama2-7b", "llama2-7b-2"]
    second = definition["Steps"][1]
    assert resolved(definition, second) == expected_arguments(plans[1], moto_world.arns[PIPELINE_ROLE],
                                                              drivers_of(second))
    assert definition == pipeline_definition(plans, "from-the-api", role_arn=moto_world.arns[PIPELINE_ROLE],
                                             clients=Clients(region="us-west-2"))


def driver_keys(s3, uri):
    """The object keys under a drivers folder, relative to it."""
    bucket, prefix = uri[len("s3://"):].split("/", 1)
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/").get("Contents", [])
    return {o["Key"][len(prefix) + 1:] for o in listed}


def test_a_definition_makes_no_aws_call_and_is_the_same_every_time(moto_world):
    from launcher.core.aws import recording

    clients = Clients(region="us-west-2")
    plans = [plan(), plan(*FINE_TUNE)]
    with recording(clients) as calls:
        first = pipeline_definition(plans, "pure", role_arn=moto_world.arns[PIPELINE_ROLE], clients=clients)
        again = pipeline_definition(plans, "pure", role_arn=moto_world.arns[PIPELINE_ROLE], clients=clients)
    assert calls == [] and first == again
    objects = moto_world.session.client("s3").list_objects_v2(Bucket=BUCKET).get("Contents", [])
    assert objects == []


def test_upsert_creates_then_updates_the_pipeline_in_moto(moto_world):
    s3 = moto_world.session.client("s3")
    plans = [plan(), plan(*FINE_TUNE)]
    first = upsert_pipeline(plans, "pretrain-then-tune", clients=Clients(region="us-west-2"))
    writes = [c for c in first.aws_calls if not c.split(".")[1].startswith(("Get", "Head", "List", "Describe",
                                                                             "Simulate"))]
    # ModelTrainer's drivers too (each step's: its SMP config differs), before the pipeline that reads them
    folders = [drivers_of(s) for s in first.definition["Steps"] if drivers_of(s)]
    drivers = sum(len(driver_keys(s3, f)) for f in set(folders))
    assert len(set(folders)) == (2 if PIPELINE_BACKEND is BackendKind.MODEL_TRAINER else 0)
    assert drivers == 0 or drivers >= 2 * DRIVER_FILES
    assert writes == ["s3.PutObject"] * (2 + drivers) + ["sagemaker.CreatePipeline"], first.aws_calls
    assert set(first.uploaded) == {p.source.uri for p in plans} | set(folders)
    described = moto_world.sagemaker.describe_pipeline(PipelineName="pretrain-then-tune")
    assert described["PipelineArn"] == first.arn and described["RoleArn"] == moto_world.arns[PIPELINE_ROLE]
    assert json.loads(described["PipelineDefinition"]) == first.definition
    for p in plans:  # the steps' source tarballs are there
        bucket, key = p.source.uri[5:].split("/", 1)
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == p.source.tarball

    again = upsert_pipeline([plan(), plan("training.batch_size=2")], "pretrain-then-tune",
                            clients=Clients(region="us-west-2"))
    assert again.arn == first.arn and "sagemaker.UpdatePipeline" in again.aws_calls
    # only the changed spec's tarball is new, and on ModelTrainer the drivers naming it (sourcecode.json does);
    # the unchanged step's drivers are there already
    new = {drivers_of(s) for s in again.definition["Steps"] if drivers_of(s)} - set(folders)
    assert len(new) == len(set(folders)) // 2
    assert not folders or drivers_of(again.definition["Steps"][0]) == folders[0]
    assert again.aws_calls.count("s3.PutObject") == 1 + sum(len(driver_keys(s3, f)) for f in new)
    assert set(again.uploaded) == {plan("training.batch_size=2").source.uri} | new
    for folder in folders:  # an execution of the earlier definition still finds its drivers
        assert "sm_train.sh" in driver_keys(s3, folder)
    described = moto_world.sagemaker.describe_pipeline(PipelineName="pretrain-then-tune")
    assert json.loads(described["PipelineDefinition"]) == again.definition != first.definition
    tags = moto_world.sagemaker.list_tags(ResourceArn=first.arn)["Tags"]
    assert {"Key": "smp-launch:managed", "Value": "true"} in tags


def test_dry_run_writes_nothing(moto_world):
    result = upsert_pipeline([plan()], "dry", dry_run=True, clients=Clients(region="us-west-2"))
    assert result.arn is None and result.definition["Steps"][0]["Name"] == "llama2-7b"
    assert result.region == "us-west-2" and result.uploaded == ()
    assert not [c for c in result.aws_calls if c.endswith(("PutObject", "CreatePipeline", "UpdatePipeline"))]
    with pytest.raises(ClientError):
        moto_world.sagemaker.describe_pipeline(PipelineName="dry")
    objects = moto_world.session.client("s3").list_objects_v2(Bucket=BUCKET).get("Contents", [])
    assert objects == []  # no tarball, no driver


@needs_v3
def test_a_dry_run_names_the_drivers_the_upsert_then_puts_there(moto_world):
    """ModelTrainer writes its drivers while its request is built: in a dry run they stay in memory, and the
    definition already names the folder the real upsert puts them in (the same definition, byte for byte)."""
    s3 = moto_world.session.client("s3")
    dry = upsert_pipeline([plan()], "drivers", dry_run=True, clients=Clients(region="us-west-2"))
    folder = drivers_of(dry.definition["Steps"][0])
    assert driver_keys(s3, folder) == set()
    real = upsert_pipeline([plan()], "drivers", clients=Clients(region="us-west-2"))
    assert real.definition == dry.definition and folder in real.uploaded
    keys = driver_keys(s3, folder)
    assert {"sm_train.sh", "sourcecode.json", "distributed.json"} <= keys and len(keys) >= DRIVER_FILES
    assert not [k for k in keys if "__pycache__" in k]
    again = upsert_pipeline([plan()], "drivers", clients=Clients(region="us-west-2"))
    assert again.definition == real.definition and again.uploaded == ()  # content-identical: not put twice
    assert again.aws_calls.count("s3.PutObject") == 0


@needs_v3
def test_a_steps_drivers_are_the_ones_submit_uploads_for_the_same_plan(moto_world):
    """The drivers are ModelTrainer's own: the files submit's request puts under the job's name are the step's,
    less the SDK's compiled __pycache__ copies."""
    from launcher.plan.request import drivers_uri
    from launcher.submission import model_trainer

    s3 = moto_world.session.client("s3")
    p = plan()
    clients = Clients(region="us-west-2")
    result = upsert_pipeline([p], "same-drivers", clients=clients)
    model_trainer.build_request(p, p.source.uri, result.role_arn, clients)  # uploads submit's drivers

    def files(uri):
        bucket, prefix = uri[len("s3://"):].split("/", 1)
        return {k: s3.get_object(Bucket=bucket, Key=f"{prefix}/{k}")["Body"].read() for k in driver_keys(s3, uri)}

    submitted = {k: v for k, v in files(drivers_uri(p)).items() if "__pycache__" not in k}
    assert files(drivers_of(result.definition["Steps"][0])) == submitted and len(submitted) >= DRIVER_FILES


@needs_v3
def test_drivers_go_up_with_the_specs_kms_key(moto_world):
    result = upsert_pipeline([plan("cluster.kms_key_id=alias/smp")], "kms", skip_role_check=True,
                             clients=Clients(region="us-west-2"))
    folder = drivers_of(result.definition["Steps"][0])
    bucket, prefix = folder[len("s3://"):].split("/", 1)
    head = moto_world.session.client("s3").head_object(Bucket=bucket, Key=f"{prefix}/sm_train.sh")
    assert head["ServerSideEncryption"] == "aws:kms" and head["SSEKMSKeyId"].endswith("alias/smp")


# -- which backend builds a pipeline, on which SDK line ----------------------------------------------------------

@pytest.mark.parametrize("kind", BACKENDS, ids=str)
def test_a_backend_builds_a_pipeline_or_says_which_line_it_needs(moto_world, kind):
    """On SDK 2.x the Estimator builds steps and ModelTrainer is refused; on 3.x ModelTrainer builds them."""
    p = plan(f"cluster.backend={kind}")
    clients = Clients(region="us-west-2")
    if kind is PIPELINE_BACKEND:
        steps = pipeline_definition([p], "lines", role_arn=moto_world.arns[PIPELINE_ROLE], clients=clients)["Steps"]
        assert (drivers_of(steps[0]) is not None) == (kind is BackendKind.MODEL_TRAINER)
        return
    with pytest.raises(UsageError) as refused:
        upsert_pipeline([p], "lines", clients=clients)
    text = str(refused.value)
    assert refused.value.exit_code == 2 and "\n" not in text
    assert text.startswith(f"{p.spec_file}: cluster.backend: model-trainer cannot build a pipeline step on "
                           "sagemaker 2.")
    assert "set cluster.backend: estimator, or install SageMaker SDK 3.x" in text


def test_nothing_is_read_or_written_before_a_backend_is_refused(moto_world):
    from launcher.core.aws import recording

    other = BackendKind.MODEL_TRAINER if PIPELINE_BACKEND is BackendKind.ESTIMATOR else BackendKind.ESTIMATOR
    clients = Clients(region="us-west-2")
    with recording(clients) as calls, pytest.raises(UsageError):
        upsert_pipeline([plan(f"cluster.backend={other}")], "refused", clients=clients)
    assert calls == []
    assert moto_world.sagemaker.list_pipelines()["PipelineSummaries"] == []


@needs_v2
def test_two_backends_in_one_pipeline_are_refused(moto_world):
    plans = [plan(), plan("cluster.backend=model-trainer", *FINE_TUNE)]
    with pytest.raises(UsageError) as refused:
        pipeline_definition(plans, "mixed", role_arn=moto_world.arns[PIPELINE_ROLE],
                            clients=Clients(region="us-west-2"))
    assert str(refused.value) == (
        f"{plans[1].spec_file}: cluster.backend: model-trainer here but estimator in {plans[0].spec_file}: one "
        "backend builds every step of a pipeline; set the same cluster.backend in every spec")


@pytest.mark.skipif(SDK_MAJOR < 3, reason="the Estimator is missing only from SageMaker SDK 3.x")
def test_the_estimator_on_sdk3_is_refused_naming_the_backend_that_builds(moto_world, run_cli):
    result = run_cli("pipeline", str(JOBS / "llama7b.yaml"), "--name", "estimator", "--set", f"role={PIPELINE_ROLE}",
                     "--set", "cluster.backend=estimator", "--dry-run")
    assert result.code == 2 and "Traceback" not in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1 and "set cluster.backend: model-trainer" in result.err


@needs_v2
def test_cli_refuses_model_trainer_on_sdk2_in_one_line(moto_world, run_cli):
    result = run_cli("pipeline", str(JOBS / "llama7b.yaml"), "--name", "mt", "--set", f"role={PIPELINE_ROLE}",
                     "--set", "cluster.backend=model-trainer")
    assert result.code == 2 and "Traceback" not in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1 and "cluster.backend: estimator" in result.err
    assert moto_world.sagemaker.list_pipelines()["PipelineSummaries"] == []


def test_a_plan_the_advisor_refuses_stops_the_pipeline_before_any_write(moto_world):
    with pytest.raises(SpecError, match="SMP002"):
        upsert_pipeline([plan(), plan("smp.tensor_parallel_degree=2")], "refused", clients=Clients(region="us-west-2"))
    assert moto_world.sagemaker.list_pipelines()["PipelineSummaries"] == []


def test_the_role_flag_is_checked_and_used_for_every_step(moto_world):
    result = upsert_pipeline([plan(), plan(*FINE_TUNE)], "roles", role="NoTrust", dry_run=True,
                             skip_role_check=True, clients=Clients(region="us-west-2"))
    assert result.role_arn == moto_world.arns["NoTrust"]
    assert {s["Arguments"]["RoleArn"] for s in result.definition["Steps"]} == {moto_world.arns["NoTrust"]}
    with pytest.raises(RoleRefused):
        upsert_pipeline([plan()], "roles", role="NoTrust", clients=Clients(region="us-west-2"))


def test_a_role_that_can_run_jobs_but_not_a_pipeline_is_refused_before_any_write(moto_world):
    """Good passes submit's role check (the control) but may not create jobs or pass itself."""
    from launcher.submission.create import check_account

    assert check_account(plan("role=Good"), Clients(region="us-west-2")).role_check.verdict == "pass"
    with pytest.raises(RoleRefused) as refused:
        upsert_pipeline([plan()], "roles", role="Good", clients=Clients(region="us-west-2"))
    text = str(refused.value)
    assert "sagemaker:CreateTrainingJob (pipeline)" in text and "iam:PassRole (pipeline)" in text
    assert moto_world.sagemaker.list_pipelines()["PipelineSummaries"] == []
    ok = upsert_pipeline([plan()], "roles", dry_run=True, clients=Clients(region="us-west-2"))
    assert [c.verdict for c in ok.role_checks] == ["pass", "pass"]


def test_credentials_that_expire_during_the_pipeline_role_check_stop_it_saying_so(moto_world):
    """The jobs' role check passes; IAM then refuses the pipeline role's own simulation for expired credentials."""
    clients = Clients(region="us-west-2")

    def expire(params, **_kw):
        if "sagemaker:CreateTrainingJob" in params["ActionNames"]:
            raise ClientError({"Error": {"Code": "ExpiredToken", "Message": "expired"},
                               "ResponseMetadata": {"HTTPStatusCode": 403}}, "SimulatePrincipalPolicy")

    clients.session.events.register("provide-client-params.iam.SimulatePrincipalPolicy", expire)
    with pytest.raises(AwsError) as err:
        upsert_pipeline([plan()], "expired", clients=clients)
    assert str(err.value).startswith("checking the pipeline role: your AWS session token has expired")
    assert err.value.exit_code == 4 and "\n" not in str(err.value)
    assert moto_world.sagemaker.list_pipelines()["PipelineSummaries"] == []


def _failing_create_pipeline(monkeypatch, error):
    import botocore.client

    real = botocore.client.BaseClient._make_api_call

    def create(client, operation, params):
        if operation == "CreatePipeline":
            raise error
        return real(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", create)


def test_an_error_already_worded_while_upserting_reaches_the_caller_as_it_is(moto_world, monkeypatch):
    worded = AwsError("CreatePipeline: the endpoint gave no whole answer within 50 s")
    _failing_create_pipeline(monkeypatch, worded)
    with pytest.raises(AwsError) as err:
        upsert_pipeline([plan()], "worded", clients=Clients(region="us-west-2"))
    assert err.value is worded  # not reworded as the SDK's refusal


def test_an_sdk_failure_while_upserting_that_is_not_aws_is_one_line_naming_the_sdk(moto_world, monkeypatch):
    from launcher.core.errors import LauncherError

    _failing_create_pipeline(monkeypatch, ValueError("the definition did not serialise"))
    with pytest.raises(LauncherError) as err:
        upsert_pipeline([plan()], "sdk", clients=Clients(region="us-west-2"))
    assert str(err.value) == "the SageMaker SDK refused the pipeline: the definition did not serialise"
    assert type(err.value) is LauncherError


@pytest.mark.parametrize("name", ["has space", "-leading", "a" * 257, "under_score"])
def test_bad_pipeline_names_are_refused(moto_world, name):
    with pytest.raises(UsageError, match="pipeline name"):
        upsert_pipeline([plan()], name, clients=Clients(region="us-west-2"))


def test_a_pipeline_needs_specs_of_one_region_and_values_only_with_start(moto_world):
    clients = Clients(region="us-west-2")
    with pytest.raises(UsageError, match="a pipeline needs at least one spec"):
        upsert_pipeline([], "empty", clients=clients)
    east = build_plan(load_spec(JOBS / "llama7b.yaml", [f"role={PIPELINE_ROLE}"]), region="us-east-1")
    with pytest.raises(UsageError, match=r"one region \(got us-east-1, us-west-2\)"):
        upsert_pipeline([plan(), east], "split", clients=clients)
    with pytest.raises(UsageError, match="parameter values are for an execution: give them with start"):
        upsert_pipeline([plan()], "later", parameters={"MaxSteps": 10}, clients=clients)




@pytest.mark.parametrize("operation, code, doing", [
    ("s3.PutObject", "AccessDenied", "uploading a source tarball"),
    ("sagemaker.StartPipelineExecution", "AccessDeniedException", "starting an execution of pipeline refused"),
    ("iam.SimulatePrincipalPolicy", "ExpiredToken", "your AWS session token has expired"),  # not a "cannot tell"
    ("sagemaker.CreatePipeline", "AccessDeniedException", "upserting the pipeline"),
])
def test_a_refused_call_is_one_line_saying_what_was_being_done(moto_world, operation, code, doing):
    clients = refusing(Clients(region="us-west-2"), operation, code)
    with pytest.raises(AwsError) as refused:
        upsert_pipeline([plan()], "refused", clients=clients, start=True, skip_role_check=operation.startswith("s3"))
    assert doing in str(refused.value) and "\n" not in str(refused.value)


def test_the_notify_rule_of_a_dry_run_is_named_not_put(moto_world):
    topic = f"arn:aws:sns:us-west-2:{ACCOUNT}:training-alerts"
    result = upsert_pipeline([plan()], "quiet", clients=Clients(region="us-west-2"), dry_run=True, notify=topic)
    assert result.notifications == ("smp-launch-quiet-executions",)
    assert moto_world.session.client("events").list_rules()["Rules"] == []


def test_an_endpoint_without_the_pipelines_api_says_cannot_tell():
    from botocore.parsers import ResponseParserError

    exc = ClientError({"Error": {"Code": "500", "Message": "Internal Server Error"},
                       "ResponseMetadata": {"HTTPStatusCode": 500}}, "CreatePipeline")
    for error in (_pipeline_error(exc), _pipeline_error(ResponseParserError("<html>500</html>"))):
        assert isinstance(error, AwsError) and "cannot tell" in str(error) and "CreatePipeline" in str(error)


def test_an_upsert_the_endpoint_cannot_answer_is_one_line_and_exit_4(moto_world, run_cli, monkeypatch):
    """What a server without CreatePipeline does (moto answers it; a plain 500 is what a missing one sends)."""
    import botocore.client

    real = botocore.client.BaseClient._make_api_call

    def no_pipelines(client, operation, params):
        if operation in ("CreatePipeline", "UpdatePipeline"):
            raise ClientError({"Error": {"Code": "500", "Message": "<html>Internal Server Error</html>"},
                               "ResponseMetadata": {"HTTPStatusCode": 500}}, operation)
        return real(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", no_pipelines)
    result = run_cli("pipeline", str(JOBS / "llama7b.yaml"), "--name", "missing", "--set", f"role={PIPELINE_ROLE}")
    assert result.code == 4 and "cannot tell" in result.err and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_cli_dry_run_prints_the_definition(moto_world, run_cli):
    result = run_cli("pipeline", str(JOBS / "llama7b.yaml"), str(JOBS / "llama7b.yaml"), "--name", "cli",
                     "--dry-run", "--set", f"role={PIPELINE_ROLE}", "--skip-role-check")
    assert result.code == 0, result.err
    definition = json.loads(result.out)
    assert [s["Name"] for s in definition["Steps"]] == ["llama2-7b", "llama2-7b-2"]
    assert "nothing was written" in result.err
    with pytest.raises(ClientError):
        moto_world.sagemaker.describe_pipeline(PipelineName="cli")


def test_cli_upserts_and_reports_json(moto_world, run_cli):
    result = run_cli("pipeline", str(JOBS / "llama7b.yaml"), "--name", "cli", "--set", f"role={PIPELINE_ROLE}",
                     "--output", "json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["arn"] == moto_world.sagemaker.describe_pipeline(PipelineName="cli")["PipelineArn"]
    assert data["steps"] == ["llama2-7b"] and data["dry_run"] is False


def test_cli_bad_spec_is_exit_2_and_nothing_happens(moto_world, run_cli, write_spec):
    bad = write_spec("name: x\nmodel: {preset: nope}\n")
    result = run_cli("pipeline", str(bad), "--name", "bad")
    assert result.code == 2 and "Traceback" not in result.err
    assert moto_world.sagemaker.list_pipelines()["PipelineSummaries"] == []


def test_without_role_the_first_specs_role_runs_every_step(moto_world):
    result = upsert_pipeline([plan(), plan("role=Good", *FINE_TUNE)], "first-role", dry_run=True,
                             clients=Clients(region="us-west-2"))
    assert {s["Arguments"]["RoleArn"] for s in result.definition["Steps"]} == {moto_world.arns[PIPELINE_ROLE]}


def test_no_telemetry_leaves_while_building_and_upserting(moto_world, monkeypatch):
    import importlib

    from launcher.submission import estimator, model_trainer, sdk

    if SDK_MAJOR == 2:
        estimator.import_sdk()
        from sagemaker.workflow.pipeline import Pipeline

        session = estimator.session(moto_world.session, moto_world.sagemaker, pipeline=True)
    else:
        model_trainer.import_sdk()
        from sagemaker.core.workflow.pipeline_context import PipelineSession
        from sagemaker.mlops.workflow.pipeline import Pipeline

        with sdk.no_sdk_defaults():
            session = PipelineSession(boto_session=moto_world.session, sagemaker_client=moto_world.sagemaker)
    telemetry_logging = importlib.import_module(TELEMETRY)
    sent = []
    monkeypatch.setattr(telemetry_logging, "_send_telemetry_request", lambda *a, **_: sent.append(a))
    upsert_pipeline([plan()], "quiet", clients=Clients(region="us-west-2"))
    assert sent == []
    pipeline = Pipeline(name="loud", steps=[], sagemaker_session=session)  # the control: the SDK's own create sends
    monkeypatch.setenv("SAGEMAKER_VALIDATE_ROLE", "false")
    pipeline.create(role_arn=moto_world.arns[PIPELINE_ROLE])
    assert sent
