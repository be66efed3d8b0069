"""`pipeline`: a SageMaker Pipeline of TrainingSteps built by the SDK's workflow classes, upserted to moto.

The contract: each step's Arguments are the plan's predicted CreateTrainingJob request (the one submit's
contract test holds the SDK to), less what a pipeline legitimately decides at run time (see expected_arguments).
"""
import json

import pytest
from botocore.exceptions import ClientError

from launcher.core.aws import AwsError, Clients
from launcher.core.errors import SpecError, UsageError
from launcher.orchestrate.pipeline import _pipeline_error, pipeline_definition, step_names, upsert_pipeline
from launcher.orchestrate.pipeline_params import MAX_STEPS_ENV
from launcher.plan.build import build_plan
from launcher.spec import load_spec
from launcher.submission.role import PIPELINE_JOB_ACTIONS, RoleRefused
from tests.aws_setup import ACCOUNT, BUCKET, TRUST_SAGEMAKER, create_world, job_policy
from tests.conftest import JOBS, refusing
from tests.test_submit import VARIANTS

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


def expected_arguments(p, role_arn):
    """The plan's predicted request as a pipeline step runs it with its parameters' defaults. What the pipeline
    owns:
    - TrainingJobName: the pipeline names each job when it runs (a step has no name of its own to give);
    - HyperParameters.sagemaker_job_name: the SDK writes the job name there only when it names the job;
    - Environment.SMP_LAUNCH_MAX_STEPS: the MaxSteps parameter reaches the script there;
    - HyperParameters.sagemaker_instance_type: the SDK JSON-encodes a plain value there but writes a parameter
      as it is (the training toolkit reads either: a value that is not JSON is taken as the string);
    - CheckpointConfig.S3Uri (only where the spec names no checkpoint_path): the plan's default folder is
      named after its job; a step's is named after the pipeline execution (EXEC here), so a later execution
      does not resume from an earlier one's checkpoints."""
    request = p.request_for(role_arn)
    request.pop("TrainingJobName")
    request["HyperParameters"].pop("sagemaker_job_name")
    request.setdefault("Environment", {})[MAX_STEPS_ENV] = str(p.spec.training.max_steps)
    hp = request["HyperParameters"]
    if "sagemaker_instance_type" in hp:
        hp["sagemaker_instance_type"] = json.loads(hp["sagemaker_instance_type"])
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
        assert step["Type"] == "Training"
        assert resolved(definition, step) == expected_arguments(p, moto_world.arns[PIPELINE_ROLE])
    assert "DependsOn" not in steps[0] and steps[1]["DependsOn"] == ["llama2-7b"]


def test_a_checkpoint_path_the_spec_sets_is_kept(moto_world):
    p = plan(f"output.checkpoint_path=s3://{BUCKET}/ckpt/shared")
    definition = pipeline_definition([p], "kept", role_arn=moto_world.arns[PIPELINE_ROLE],
                                     clients=Clients(region="us-west-2"))
    step = definition["Steps"][0]
    assert step["Arguments"]["CheckpointConfig"]["S3Uri"] == f"s3://{BUCKET}/ckpt/shared"
    assert resolved(definition, step) == expected_arguments(p, moto_world.arns[PIPELINE_ROLE])


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
    assert resolved(definition, definition["Steps"][1]) == expected_arguments(plans[1], moto_world.arns[PIPELINE_ROLE])
    assert definition == pipeline_definition(plans, "from-the-api", role_arn=moto_world.arns[PIPELINE_ROLE],
                                             clients=Clients(region="us-west-2"))


def test_upsert_creates_then_updates_the_pipeline_in_moto(moto_world):
    plans = [plan(), plan(*FINE_TUNE)]
    first = upsert_pipeline(plans, "pretrain-then-tune", clients=Clients(region="us-west-2"))
    writes = [c for c in first.aws_calls if not c.split(".")[1].startswith(("Get", "Head", "List", "Describe",
                                                                             "Simulate"))]
    assert writes == ["s3.PutObject", "s3.PutObject", "sagemaker.CreatePipeline"], first.aws_calls
    described = moto_world.sagemaker.describe_pipeline(PipelineName="pretrain-then-tune")
    assert described["PipelineArn"] == first.arn and described["RoleArn"] == moto_world.arns[PIPELINE_ROLE]
    assert json.loads(described["PipelineDefinition"]) == first.definition
    for p in plans:  # the steps' source tarballs are there
        bucket, key = p.source.uri[5:].split("/", 1)
        assert moto_world.session.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read() == p.source.tarball

    again = upsert_pipeline([plan(), plan("training.batch_size=2")], "pretrain-then-tune",
                            clients=Clients(region="us-west-2"))
    assert again.arn == first.arn and "sagemaker.UpdatePipeline" in again.aws_calls
    assert "s3.PutObject" in again.aws_calls  # only the changed spec's tarball is new
    assert again.aws_calls.count("s3.PutObject") == 1
    described = moto_world.sagemaker.describe_pipeline(PipelineName="pretrain-then-tune")
    assert json.loads(described["PipelineDefinition"]) == again.definition != first.definition
    tags = moto_world.sagemaker.list_tags(ResourceArn=first.arn)["Tags"]
    assert {"Key": "smp-launch:managed", "Value": "true"} in tags


def test_dry_run_writes_nothing(moto_world):
    result = upsert_pipeline([plan()], "dry", dry_run=True, clients=Clients(region="us-west-2"))
    assert result.arn is None and result.definition["Steps"][0]["Name"] == "llama2-7b"
    assert result.region == "us-west-2"
    assert not [c for c in result.aws_calls if c.endswith(("PutObject", "CreatePipeline", "UpdatePipeline"))]
    with pytest.raises(ClientError):
        moto_world.sagemaker.describe_pipeline(PipelineName="dry")


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
    from launcher.submission import estimator

    estimator.import_sdk()
    from sagemaker.telemetry import telemetry_logging

    sent = []
    monkeypatch.setattr(telemetry_logging, "_send_telemetry_request", lambda *a, **_: sent.append(a))
    upsert_pipeline([plan()], "quiet", clients=Clients(region="us-west-2"))
    assert sent == []
    from sagemaker.workflow.pipeline import Pipeline  # the control: the SDK's own create does send

    pipeline = Pipeline(name="loud", steps=[],
                        sagemaker_session=estimator.session(moto_world.session, moto_world.sagemaker, pipeline=True))
    pipeline.create(role_arn=moto_world.arns[PIPELINE_ROLE])
    assert sent
