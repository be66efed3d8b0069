"""Pipelines a team runs more than once: parameters, retry policies, caching, a step fed by an earlier step's model,
and executions that run on the emulator (emulator/pipelines.py) with the values they were started with; on either
SDK line (the Estimator's steps on 2.x, ModelTrainer's on 3.x: tests/test_pipeline.py)."""
import json

import pytest

from launcher.core.aws import Clients
from launcher.core.errors import UsageError
from launcher.orchestrate.pipeline import iso_duration, pipeline_definition, upsert_pipeline
from launcher.orchestrate.pipeline_params import MAX_STEPS_ENV, check_values, pipeline_parameters
from launcher.orchestrate.retry import RetryPolicy
from tests.aws_setup import BUCKET
from tests.test_pipeline import FINE_TUNE, PIPELINE_ROLE, drivers_of, needs_v3, pipeline_world, plan

REGION = "us-west-2"


@pytest.fixture
def make_world():
    return pipeline_world


def clients():
    return Clients(region=REGION)


def definition(plans, **kw):
    return pipeline_definition(plans, "runs", role_arn="arn:aws:iam::123456789012:role/R", clients=clients(), **kw)


def params_of(body):
    return {p["Name"]: p for p in body["Parameters"]}


def test_one_step_has_plain_typed_parameters_with_the_specs_values_as_defaults(moto_world):
    p = plan("data.train=s3://smp-launch-test-bucket/tokens/")
    body = definition([p])
    params = params_of(body)
    assert set(params) == {"InstanceType", "InstanceCount", "MaxSteps", "OutputPath", "DataTrain"}
    assert params["InstanceType"]["Type"] == "String" and params["InstanceType"]["DefaultValue"] == "ml.p4d.24xlarge"
    assert params["InstanceType"]["EnumValues"][0] == "ml.p4d.24xlarge"
    assert params["InstanceCount"] == {"Name": "InstanceCount", "Type": "Integer", "DefaultValue": p.instance_count}
    assert params["MaxSteps"]["DefaultValue"] == p.spec.training.max_steps
    assert params["DataTrain"]["DefaultValue"] == "s3://smp-launch-test-bucket/tokens/"
    args = body["Steps"][0]["Arguments"]
    assert args["ResourceConfig"]["InstanceType"] == {"Get": "Parameters.InstanceType"}
    assert args["ResourceConfig"]["InstanceCount"] == {"Get": "Parameters.InstanceCount"}
    assert args["OutputDataConfig"]["S3OutputPath"] == {"Get": "Parameters.OutputPath"}
    assert args["Environment"][MAX_STEPS_ENV] == {"Std:Join": {"On": "", "Values": [{"Get": "Parameters.MaxSteps"}]}}
    train = next(c for c in args["InputDataConfig"] if c["ChannelName"] == "train")
    assert train["DataSource"]["S3DataSource"]["S3Uri"] == {"Get": "Parameters.DataTrain"}


def test_several_steps_prefix_their_parameters_with_the_step_name(moto_world):
    body = definition([plan(), plan(*FINE_TUNE)])
    names = set(params_of(body))
    assert {"llama2-7b-InstanceType", "llama2-7b-2-InstanceType", "llama2-7b-MaxSteps",
            "llama2-7b-2-OutputPath"} <= names
    assert not {"InstanceType", "MaxSteps"} & names
    second = body["Steps"][1]["Arguments"]
    assert second["ResourceConfig"]["InstanceCount"] == {"Get": "Parameters.llama2-7b-2-InstanceCount"}


def test_the_instance_type_offers_only_types_on_which_the_same_script_holds(moto_world):
    p = plan()
    choices = params_of(definition([p]))["InstanceType"]["EnumValues"]
    assert choices[0] == p.instance_type and len(choices) == len(set(choices))
    for other in choices[1:]:  # each offered type plans without an advisor error
        assert check_values([p], ["llama2-7b"], {"InstanceType": other}) == {"InstanceType": other}


def test_values_are_checked_against_the_steps_plan_before_anything_starts(moto_world):
    plans, steps = [plan()], ["llama2-7b"]
    with pytest.raises(UsageError, match="did you mean 'MaxSteps'"):
        check_values(plans, steps, {"MaxStep": "10"})
    with pytest.raises(UsageError, match="give an integer"):
        check_values(plans, steps, {"MaxSteps": "ten"})
    with pytest.raises(UsageError, match="may run on"):
        check_values(plans, steps, {"InstanceType": "ml.g5.48xlarge"})
    with pytest.raises(UsageError, match="InstanceCount=3"):  # 24 GPUs do not hold the spec's hybrid shard degree
        check_values([plan("smp.hybrid_shard_degree=16", "cluster.instance_count=2")], steps, {"InstanceCount": "3"})
    assert check_values(plans, steps, {"MaxSteps": "50", "InstanceCount": "4"}) == {"MaxSteps": 50,
                                                                                    "InstanceCount": 4}
    with pytest.raises(UsageError, match="MaxSteps"):
        upsert_pipeline(plans, "refused", clients=clients(), start=True, parameters={"MaxSteps": "0"})
    assert moto_world.sagemaker.list_pipelines()["PipelineSummaries"] == []


def test_retry_policies_come_from_the_retry_setting(moto_world):
    default = definition([plan()])["Steps"][0]["RetryPolicies"]
    assert {"ExceptionType": ["Step.SERVICE_FAULT", "Step.THROTTLING"]}.items() <= default[0].items()
    assert default[1]["ExceptionType"] == ["SageMaker.CAPACITY_ERROR", "SageMaker.JOB_INTERNAL_ERROR"]
    assert default[1]["MaxAttempts"] == RetryPolicy().max_attempts - 1
    chosen = definition([plan()], retry=RetryPolicy.parse("capacity,quota", max_attempts=5, backoff=30))
    job = chosen["Steps"][0]["RetryPolicies"][1]
    assert sorted(job["ExceptionType"]) == ["SageMaker.CAPACITY_ERROR", "SageMaker.RESOURCE_LIMIT"]
    assert job["MaxAttempts"] == 4 and job["IntervalSeconds"] == 30
    once = definition([plan()], retry=RetryPolicy.parse("capacity", max_attempts=1))["Steps"][0]["RetryPolicies"]
    assert [p["ExceptionType"] for p in once] == [["Step.SERVICE_FAULT", "Step.THROTTLING"]]


def test_a_step_a_pipeline_cannot_retry_is_named_in_a_warning(moto_world):
    quiet = upsert_pipeline([plan()], "warns", dry_run=True, clients=clients())  # no retry asked for: no warning
    assert not any("cannot retry" in w for w in quiet.warnings), quiet.warnings
    result = upsert_pipeline([plan()], "warns", dry_run=True, clients=clients(), retry=RetryPolicy())
    assert any("cannot retry hardware, spot_interruption:" in w for w in result.warnings), result.warnings
    codes = upsert_pipeline([plan()], "warns", dry_run=True, clients=clients(),
                            retry=RetryPolicy.parse("capacity,exit:139"))
    assert any("cannot retry exit:139:" in w for w in codes.warnings), codes.warnings


@pytest.mark.parametrize("seconds, text", [(30 * 86400, "P30D"), (3600, "PT1H"), (86400 + 5400, "P1DT1H30M"),
                                           (59, "PT1M"), (86400, "P1D")])
def test_cache_expiry_is_an_iso_duration(seconds, text):
    assert iso_duration(seconds) == text


def test_a_cached_step_keys_its_checkpoints_on_the_spec_not_the_execution(moto_world):
    p = plan("pipeline.cache=true", "pipeline.cache_expire_after=2d", "data.train=s3://smp-launch-test-bucket/t/")
    step = definition([p])["Steps"][0]
    assert step["CacheConfig"] == {"Enabled": True, "ExpireAfter": "P2D"}
    uri = json.dumps(step["Arguments"]["CheckpointConfig"]["S3Uri"])
    assert "PipelineExecutionId" not in uri and p.spec_hash[:16] in uri
    assert "DataTrain" not in params_of(definition([p]))  # a cached step's data is fixed
    plain = definition([plan()])["Steps"][0]
    assert "CacheConfig" not in plain
    assert "PipelineExecutionId" in json.dumps(plain["Arguments"]["CheckpointConfig"]["S3Uri"])


def test_a_step_starts_from_an_earlier_steps_model(moto_world):
    body = definition([plan("output.save_final_model=full"), plan(*FINE_TUNE, "model.from_step=llama2-7b")])
    channels = {c["ChannelName"]: c for c in body["Steps"][1]["Arguments"]["InputDataConfig"]}
    assert channels["from_step"]["DataSource"]["S3DataSource"]["S3Uri"] == {
        "Get": "Steps.llama2-7b.ModelArtifacts.S3ModelArtifacts"}


@pytest.mark.parametrize("specs, message", [
    ([("model.from_step=llama2-7b",)], "it is the first step"),
    ([(), ("model.from_step=pretrain",)], "not an earlier step"),
    ([("output.save_final_model=false",), ("model.from_step=llama2-7b",)], "save_final_model: full"),
    ([("output.save_final_model=sharded",), ("model.from_step=llama2-7b",)], "save_final_model: full"),
])
def test_from_step_must_name_an_earlier_step(moto_world, specs, message):
    with pytest.raises(UsageError, match=message):
        definition([plan(*s) for s in specs])


def test_from_step_and_pretrained_are_exclusive_and_submit_refuses_from_step(moto_world):
    from launcher.core.errors import SpecError
    from launcher.submission.create import submit

    with pytest.raises(SpecError, match="not both"):
        plan("model.from_step=a", "model.pretrained=meta-llama/Llama-2-7b-hf")
    p = plan("model.from_step=pretrain")
    assert p.spec.model.pretrained == "from_step" and p.decisions.backend == "nccl"  # planned as a fine-tune
    with pytest.raises(UsageError, match="runs only in a pipeline"):
        submit(p, clients(), dry_run=True)


# -- executions on the emulator ------------------------------------------------------------------------------


def _steps(sm, arn):
    return sm.list_pipeline_execution_steps(PipelineExecutionArn=arn)["PipelineExecutionSteps"]


def _job(sm, arn, step):
    found = next(s for s in _steps(sm, arn) if s["StepName"] == step)
    return sm.describe_training_job(TrainingJobName=found["Metadata"]["TrainingJob"]["Arn"].split("/")[-1])


def _run_to_end(sm, arn, clock, limit=200):
    for _ in range(limit):
        status = sm.describe_pipeline_execution(PipelineExecutionArn=arn)["PipelineExecutionStatus"]
        if status != "Executing":
            return status
        clock.sleep(5)
    raise AssertionError("the execution did not end")


def test_an_execution_runs_each_step_and_feeds_the_next_the_model(moto_world, clock):
    import emulator
    from emulator.sagemaker import received

    emulator.set_default({})
    sm = moto_world.sagemaker
    plans = [plan("output.save_final_model=full"), plan(*FINE_TUNE, "model.from_step=llama2-7b")]
    first = upsert_pipeline(plans, "pretrain-then-tune", clients=clients(), start=True)
    assert first.execution_arn and first.values == {}
    assert _run_to_end(sm, first.execution_arn, clock) == "Succeeded"
    pretrain, tune = _job(sm, first.execution_arn, "llama2-7b"), _job(sm, first.execution_arn, "llama2-7b-2")
    assert pretrain["ResourceConfig"]["InstanceType"] == plans[0].instance_type
    assert pretrain["ResourceConfig"]["InstanceCount"] == plans[0].instance_count
    assert received(pretrain["TrainingJobName"])["Environment"][MAX_STEPS_ENV] == str(plans[0].spec.training.max_steps)
    assert tune["CreationTime"] >= pretrain["TrainingEndTime"]
    fed = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in tune["InputDataConfig"]}
    assert fed["from_step"] == pretrain["ModelArtifacts"]["S3ModelArtifacts"]
    ckpt = pretrain["CheckpointConfig"]["S3Uri"]
    assert ckpt.endswith(first.execution_arn.rsplit("/", 1)[1])

    second = upsert_pipeline(plans, "pretrain-then-tune", clients=clients(), start=True,
                             parameters={"llama2-7b-InstanceCount": "4", "llama2-7b-MaxSteps": "50",
                                         "llama2-7b-2-MaxSteps": "20"})
    assert second.execution_arn != first.execution_arn
    assert _run_to_end(sm, second.execution_arn, clock) == "Succeeded"
    again = _job(sm, second.execution_arn, "llama2-7b")
    assert again["ResourceConfig"]["InstanceCount"] == 4
    assert received(again["TrainingJobName"])["Environment"][MAX_STEPS_ENV] == "50"
    assert received(_job(sm, second.execution_arn, "llama2-7b-2")["TrainingJobName"])["Environment"][
        MAX_STEPS_ENV] == "20"
    assert again["TrainingJobName"] != pretrain["TrainingJobName"]
    assert again["CheckpointConfig"]["S3Uri"] != ckpt  # a new execution does not resume the last one's checkpoints
    given = sm.list_pipeline_parameters_for_execution(PipelineExecutionArn=second.execution_arn)
    assert {p["Name"]: p["Value"] for p in given["PipelineParameters"]}["llama2-7b-MaxSteps"] == "50"


def test_a_step_whose_channel_is_empty_fails_as_create_training_job_refuses_it(moto_world, clock):
    """The emulator holds each step's S3 channels to what SageMaker checks: objects under the prefix. The control:
    the same pipeline runs once the data is there."""
    import emulator

    emulator.set_default({})
    sm, s3 = moto_world.sagemaker, moto_world.session.client("s3")
    result = upsert_pipeline([plan(f"data.train=s3://{BUCKET}/tokens/")], "empty", clients=clients(), start=True)
    assert any(f"has no S3 objects under s3://{BUCKET}/tokens/ now" in w for w in result.warnings)
    assert _run_to_end(sm, result.execution_arn, clock) == "Failed"
    reason = sm.describe_pipeline_execution(PipelineExecutionArn=result.execution_arn)["FailureReason"]
    assert f'No S3 objects found under S3 URL "s3://{BUCKET}/tokens/" given in input data source' in reason
    assert "Metadata" not in _steps(sm, result.execution_arn)[0]  # no job was started
    s3.put_object(Bucket=BUCKET, Key="tokens/part-0.bin", Body=b"tokens")
    again = upsert_pipeline([plan(f"data.train=s3://{BUCKET}/tokens/")], "empty", clients=clients(), start=True)
    assert _run_to_end(sm, again.execution_arn, clock) == "Succeeded"


@needs_v3
def test_a_model_trainer_step_runs_only_with_its_drivers_in_place(moto_world, clock):
    """A ModelTrainer step reads its drivers from the folder its definition names: an execution that finds them
    gone fails there, so the executions above that succeed had theirs."""
    import emulator

    emulator.set_default({})
    sm, s3 = moto_world.sagemaker, moto_world.session.client("s3")
    result = upsert_pipeline([plan()], "drivers", clients=clients())
    folder = drivers_of(result.definition["Steps"][0])
    bucket, prefix = folder[len("s3://"):].split("/", 1)
    for obj in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]:
        s3.delete_object(Bucket=bucket, Key=obj["Key"])
    arn = sm.start_pipeline_execution(PipelineName="drivers")["PipelineExecutionArn"]
    assert _run_to_end(sm, arn, clock) == "Failed"
    reason = sm.describe_pipeline_execution(PipelineExecutionArn=arn)["FailureReason"]
    assert f'No S3 objects found under S3 URL "{folder}"' in reason
    assert upsert_pipeline([plan()], "drivers", clients=clients()).uploaded == (folder,)  # put again
    arn = sm.start_pipeline_execution(PipelineName="drivers")["PipelineExecutionArn"]
    assert _run_to_end(sm, arn, clock) == "Succeeded"


def test_a_capacity_failure_is_retried_by_the_steps_retry_policy(moto_world, clock):
    import emulator

    emulator.set_default({})
    emulator.expect_attempts("pipelines-", [{"outcome": "Failed", "fail_in": "Starting", "failure_reason":
                                             "CapacityError: Unable to provision requested ML compute capacity. "
                                             "Please retry using a different ML instance type."}])
    sm = moto_world.sagemaker
    result = upsert_pipeline([plan()], "retried", clients=clients(), start=True,
                             retry=RetryPolicy.parse("capacity", max_attempts=3, backoff=10))
    assert _run_to_end(sm, result.execution_arn, clock) == "Succeeded"
    step = _steps(sm, result.execution_arn)[0]
    assert step["AttemptCount"] == 2 and step["StepStatus"] == "Succeeded"


def test_without_a_policy_for_its_class_a_failed_step_fails_the_execution(moto_world, clock):
    import emulator

    emulator.set_default({})
    emulator.expect_attempts("pipelines-", [{"outcome": "Failed", "fail_in": "Starting", "failure_reason":
                                             "CapacityError: Unable to provision requested ML compute capacity."}])
    sm = moto_world.sagemaker
    result = upsert_pipeline([plan()], "not-retried", clients=clients(), start=True,
                             retry=RetryPolicy.parse("capacity", max_attempts=1))
    assert _run_to_end(sm, result.execution_arn, clock) == "Failed"
    assert "CapacityError" in sm.describe_pipeline_execution(PipelineExecutionArn=result.execution_arn)["FailureReason"]


def test_a_cached_step_is_reused_with_the_same_values_and_rerun_with_others(moto_world, clock):
    import emulator

    emulator.set_default({})
    sm = moto_world.sagemaker
    plans = [plan("pipeline.cache=true")]
    first = upsert_pipeline(plans, "cached", clients=clients(), start=True)
    assert _run_to_end(sm, first.execution_arn, clock) == "Succeeded"
    same = upsert_pipeline(plans, "cached", clients=clients(), start=True)
    assert _run_to_end(sm, same.execution_arn, clock) == "Succeeded"
    hit = _steps(sm, same.execution_arn)[0]
    assert hit["CacheHitResult"]["SourcePipelineExecutionArn"] == first.execution_arn and "Metadata" not in hit
    other = upsert_pipeline(plans, "cached", clients=clients(), start=True, parameters={"InstanceCount": "4"})
    assert _run_to_end(sm, other.execution_arn, clock) == "Succeeded"
    assert "CacheHitResult" not in _steps(sm, other.execution_arn)[0]


def test_an_execution_id_in_the_checkpoint_folder_defeats_the_cache(moto_world, clock):
    """What a per-execution checkpoint folder would do to a cached step: every execution's key differs."""
    import emulator

    emulator.set_default({})
    sm = moto_world.sagemaker
    result = upsert_pipeline([plan("pipeline.cache=true")], "per-exec", clients=clients())
    body = json.loads(sm.describe_pipeline(PipelineName="per-exec")["PipelineDefinition"])
    body["Steps"][0]["Arguments"]["CheckpointConfig"]["S3Uri"] = {"Std:Join": {"On": "/", "Values": [
        "s3://smp-launch-test-bucket/ckpt", {"Get": "Execution.PipelineExecutionId"}]}}
    sm.update_pipeline(PipelineName="per-exec", PipelineDefinition=json.dumps(body), RoleArn=result.role_arn)
    arns = [sm.start_pipeline_execution(PipelineName="per-exec")["PipelineExecutionArn"] for _ in range(2)]
    for arn in arns:
        assert _run_to_end(sm, arn, clock) == "Succeeded"
    assert all("CacheHitResult" not in _steps(sm, arn)[0] for arn in arns)


def test_cli_starts_an_execution_with_params_and_reports_json(moto_world, run_cli, clock):
    import emulator

    emulator.set_default({})
    result = run_cli("pipeline", "jobs/llama7b.yaml", "--name", "cli-run", "--set", f"role={PIPELINE_ROLE}",
                     "--region", REGION, "--start", "--param", "MaxSteps=30", "--output", "json")
    assert result.code == 0, result.err
    out = json.loads(result.out)
    assert out["execution_arn"] and out["values"] == {"MaxSteps": 30}
    assert {p["name"] for p in out["parameters"]} >= {"InstanceType", "MaxSteps"}
    given = moto_world.sagemaker.list_pipeline_parameters_for_execution(PipelineExecutionArn=out["execution_arn"])
    assert {p["Name"]: p["Value"] for p in given["PipelineParameters"]} == {"MaxSteps": "30"}


@pytest.mark.parametrize("args, message", [
    (["--param", "MaxSteps=3"], "add --start"),
    (["--start", "--param", "MaxSteps"], "write NAME=VALUE"),
    (["--start", "--dry-run"], "contradict"),
    (["--start", "--param", "MaxStep=3"], "did you mean 'MaxSteps'"),
    (["--start", "--param", "M" * 500], f"--param '{'M' * 80}': write NAME=VALUE"),  # quoted cut short
    (["--start", "--param", "Q" * 100 + "=3"], f"--param {'Q' * 80!r}: no such pipeline parameter; the parameters "),
])
def test_cli_bad_params_are_one_line_and_exit_2(moto_world, run_cli, args, message):
    result = run_cli("pipeline", "jobs/llama7b.yaml", "--name", "bad", "--set", f"role={PIPELINE_ROLE}",
                     "--region", REGION, *args)
    assert result.code == 2 and message in result.err and len(result.err.strip().splitlines()) == 1, result.err
    assert moto_world.sagemaker.list_pipelines()["PipelineSummaries"] == []


def test_parameters_list_every_step(moto_world):
    plans = [plan(), plan(*FINE_TUNE)]
    params = pipeline_parameters(plans, ["a", "b"])
    assert [p.step for p in params].count("a") == [p.step for p in params].count("b") == 4
