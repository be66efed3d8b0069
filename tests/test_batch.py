"""AWS Batch queues for SageMaker Training, in-process: the retryStrategy made from the failure classes, the
exact SubmitServiceJob (side by side with SDK v2's TrainingQueue), the queue's checks, the role check, the
emulated queue (capacity, order, Batch's own retries, the retryStrategy), and the job commands on queued jobs."""
from __future__ import annotations

import contextlib
import importlib
import json

import pytest

from emulator import batch as emulated_batch
from emulator import failures as scenarios
from emulator import scenario
from launcher import api
from launcher.core.aws import Clients
from launcher.core.errors import UsageError
from launcher.jobs import queued
from launcher.jobs.logs import FollowResult
from launcher.submission import batch, sdk
from launcher.submission.batch import QueueOptions, retry_strategy
from tests.batch_world import FAIR_QUEUE, QUEUE, create_batch_world, create_queues
from tests.conftest import BACKENDS, JOBS, SDK_MAJOR
from tests.test_fallback import SEVENTY  # llama2-70b that fits p5 and p4de, not p4d

QUICK = dict(starting=1.0, downloading=0.5, training=4.0, uploading=0.5, line_interval=1.0, decoy=False)


@pytest.fixture
def make_world():
    return create_batch_world


def plan_for(*overrides: str, queue: str | None = QUEUE, role: str = "Good"):
    sets = [f"role={role}", *overrides] + ([f"cluster.queue={queue}"] if queue else [])
    return api.build_plan(api.load_spec(str(JOBS / "llama7b.yaml"), sets), region="us-west-2")


def submit(plan, options: QueueOptions | None = None, **kw):
    return batch.submit(plan, Clients(region="us-west-2"), options=options or QueueOptions(), **kw)


# -- the retry strategy -----------------------------------------------------------------------------------------

def test_internal_errors_become_retry_rules_on_the_status_reason_and_everything_else_exits():
    strategy = retry_strategy(["internal_error", "capacity"], 4)
    assert strategy == {"attempts": 4, "evaluateOnExit": [
        {"action": "RETRY", "onStatusReason": "Received status from SageMaker: InternalServerError*"},
        {"action": "RETRY", "onStatusReason": "Received status from SageMaker:InternalServerError*"},
        {"action": "EXIT", "onStatusReason": "*"}]}


def test_capacity_alone_or_one_attempt_needs_no_strategy():
    assert retry_strategy(["capacity"], 3) is None  # Batch retries capacity itself
    assert retry_strategy(["internal_error"], 1) is None


@pytest.mark.parametrize("classes", [["out_of_memory"], ["nccl_timeout", "capacity"], ["exit:1"],
                                     ["spot_interruption"]])
def test_a_class_only_the_log_tells_is_refused_with_why(classes):
    with pytest.raises(UsageError, match="cannot retry .*told from the job's log") as err:
        retry_strategy(classes, 3)
    assert "submit without a queue" in str(err.value) and "internal_error" in str(err.value)


def test_beside_one_batch_can_retry_the_others_are_left_out_with_a_warning():
    """The default classes (capacity, spot, internal_error, hardware): Batch retries capacity and internal
    errors; spot interruptions and hardware are told from the log, and the submit says so."""
    classes = ("capacity", "hardware", "internal_error", "spot_interruption")
    assert retry_strategy(classes, 3) == retry_strategy(["internal_error"], 3)
    (warning,) = batch.retry_warnings(QueueOptions(retry_classes=classes, attempts=3))
    assert warning.startswith("a Batch queue cannot retry hardware, spot_interruption:")
    assert warning.endswith("the others are retried on AWS")
    assert batch.retry_warnings(QueueOptions(retry_classes=("internal_error",), attempts=3)) == []


def test_options_refuse_what_batch_refuses():
    with pytest.raises(UsageError, match="at most 10 attempts"):
        QueueOptions(retry_classes=("internal_error",), attempts=11)
    with pytest.raises(UsageError, match="0 to 9999"):
        QueueOptions(priority=10000)


def test_a_retry_policy_becomes_the_queue_options():
    from launcher.orchestrate.batch import queue_options
    from launcher.orchestrate.retry import RetryPolicy

    options = queue_options(RetryPolicy(classes=frozenset({"capacity"}), max_attempts=5), 7, None)
    assert (options.retry_classes, options.attempts, options.priority) == (("capacity",), 5, 7)
    with pytest.raises(UsageError, match="cannot retry spot_interruption"):
        queue_options(RetryPolicy.parse("capacity,spot"), None, None)
    codes = RetryPolicy(classes=frozenset({"capacity"}))
    object.__setattr__(codes, "exit_codes", frozenset({139}))  # a policy that retries exit codes too
    with pytest.raises(UsageError, match="cannot retry exit:139"):
        queue_options(codes, None, None)


# -- the request ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", BACKENDS, ids=str)
def test_the_request_is_the_sdk_training_queues_with_our_timeout(moto_world, monkeypatch, kind):
    """The SDK's own TrainingQueue.submit (SDK 2.x's sagemaker.aws_batch, 3.x's sagemaker.train.aws_batch), given
    the backend's Estimator or ModelTrainer for the plan, sends what service_request builds: the same payload
    (CreateTrainingJob without Tags), the tags as the service job's, the same name, queue and priority. (SDK 2.x's
    module imports nest_asyncio, which the SDK does not install; only its `result()` uses it.)"""
    import sys
    import types

    from launcher.plan.request import predict_request
    from launcher.submission import estimator, model_trainer

    monkeypatch.setitem(sys.modules, "nest_asyncio", sys.modules.get("nest_asyncio") or types.ModuleType("nest"))
    where = "sagemaker.aws_batch" if SDK_MAJOR == 2 else "sagemaker.train.aws_batch"
    plan = plan_for("data.train=s3://my-smp-bucket/data/train", "environment={A: b}", f"cluster.backend={kind}")
    role = moto_world.arns["Good"]
    options = QueueOptions(priority=5, retry_classes=("internal_error",), attempts=3)
    ours = batch.service_request(plan, QUEUE, predict_request(plan, plan.source.uri, role), options)

    sent = {}

    class Stub:
        def submit_service_job(self, **kw):
            sent.update(kw)
            return {"jobArn": "arn:aws:batch:us-west-2:123456789012:service-job/x", "jobName": kw["jobName"]}

    if kind == "estimator":
        job = estimator.build(plan, plan.source.uri, role, moto_world.session)
        inputs = estimator.channels(plan) or None
        named = contextlib.nullcontext()
    else:
        api = model_trainer.import_sdk()
        job = model_trainer.build(plan, plan.source.uri, role, Clients(region="us-west-2"), api)
        inputs = [api.InputData(channel_name=n, data_source=u) for n, u in plan.channels.items()]
        named = model_trainer._named(api, plan.job_name)
    helper = importlib.import_module(f"{where}.batch_api_helper")
    monkeypatch.setattr(helper, "get_batch_boto_client", lambda *a, **k: Stub())
    TrainingQueue = importlib.import_module(f"{where}.training_queue").TrainingQueue
    with sdk.sdk_silent(), sdk.no_sdk_defaults(), named:
        TrainingQueue(QUEUE).submit(job, inputs, job_name=plan.job_name, retry_config=ours["retryStrategy"],
                                    priority=5, timeout=ours["timeoutConfig"])
    payload = json.loads(sent.pop("serviceRequestPayload"))
    payload.pop(model_trainer.SPOT_MISSPELT, None)  # SDK 2.x's ModelTrainer: not set without spot
    assert payload == json.loads(ours.pop("serviceRequestPayload"))
    assert sent == ours
    assert "Tags" not in json.loads(batch.service_request(plan, QUEUE, plan.request, options)
                                    ["serviceRequestPayload"])


def test_the_timeout_is_a_backstop_behind_max_run_and_max_wait():
    plan = plan_for("cluster.max_run=3d")
    assert batch.service_request(plan, QUEUE, plan.request, QueueOptions())["timeoutConfig"] == {
        "attemptDurationSeconds": 3 * 86400 + batch.TIMEOUT_MARGIN_S}
    spot = plan_for("cluster.spot=true", "cluster.max_run=1d", "cluster.max_wait=2d")
    assert batch.service_request(spot, QUEUE, spot.request, QueueOptions())["timeoutConfig"] == {
        "attemptDurationSeconds": 2 * 86400 + batch.TIMEOUT_MARGIN_S}


def test_a_dry_run_shows_the_exact_request_and_writes_nothing(moto_world):
    plan = plan_for()
    result = submit(plan, QueueOptions(priority=3), dry_run=True)
    request = result.queue["service_request"]
    assert request["jobName"] == plan.job_name and request["jobQueue"] == QUEUE
    assert request["schedulingPriority"] == 3 and request["serviceJobType"] == "SAGEMAKER_TRAINING"
    assert json.loads(request["serviceRequestPayload"]) == {k: v for k, v in result.to_dict()["request"].items()
                                                            if k != "Tags"}
    assert request["tags"]["smp-launch:managed"] == "true"
    assert result.queue["job_id"] is None and result.to_dict()["queue"]["name"] == QUEUE
    assert result.to_dict()["queue"]["retried_classes"] == [] and result.queue["retry_strategy"] is None
    assert "batch.DescribeJobQueues" in result.aws_calls and "batch.SubmitServiceJob" not in result.aws_calls
    assert "sagemaker.CreateTrainingJob" not in result.aws_calls
    b = moto_world.session.client("batch")
    assert b.list_service_jobs(jobQueue=QUEUE, jobStatus="RUNNABLE")["jobSummaryList"] == []
    assert "Contents" not in moto_world.session.client("s3").list_objects_v2(Bucket="my-smp-bucket")


def test_a_dry_run_says_which_classes_aws_retries_and_warns_of_the_rest(moto_world):
    options = QueueOptions(retry_classes=("capacity", "hardware", "internal_error", "spot_interruption"), attempts=3)
    result = submit(plan_for(), options, dry_run=True)
    assert result.to_dict()["queue"]["retried_classes"] == ["capacity", "internal_error"]
    assert result.to_dict()["queue"]["retry_strategy"] == retry_strategy(["internal_error"], 3)
    assert any(w.startswith("a Batch queue cannot retry hardware, spot_interruption") for w in result.warnings)


def test_the_cli_says_where_it_queued_the_job_and_which_classes_aws_retries(moto_world, run_cli):
    spec = ("submit", str(JOBS / "llama7b.yaml"), "--set", "role=Good", "--queue", QUEUE)
    r = run_cli(*spec, "--dry-run")
    assert r.code == 0, r.err
    first = r.out.splitlines()[0]
    assert first.startswith("dry run: would queue llama2-7b-") and first.endswith(" nothing was written")
    assert f" in Batch queue {QUEUE} in us-west-2 (source s3://my-smp-bucket/" in first
    assert "service job" not in r.out and "retries:" not in r.out  # no retry asked: Batch's own only
    r = run_cli(*spec, "--dry-run", "--retry", "internal_error", "--max-attempts", "4")
    assert r.code == 0, r.err
    assert "  retries: on AWS, internal_error (up to 4 attempts)\n" in r.out
    b = moto_world.session.client("batch")
    assert b.list_service_jobs(jobQueue=QUEUE, jobStatus="RUNNABLE")["jobSummaryList"] == []
    r = run_cli(*spec, "--retry", "capacity")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    name = lines[0].split()[1]
    assert lines[0] == f"queued {name} in Batch queue {QUEUE} in us-west-2" and "dry run" not in r.out
    assert lines[1].startswith("  service job: ")
    assert b.describe_service_job(jobId=lines[1].split()[-1])["jobName"] == name
    assert "  retries: on AWS, capacity (capacity only, as often as needed)" in lines


@pytest.mark.parametrize("flag", [("--queue", QUEUE), ("--priority", "5"), ("--share", "teamA")])
def test_the_cli_refuses_queue_flags_for_a_run_here(run_cli, monkeypatch, flag):
    import launcher.cli.submit as submit_cli

    ran = []
    monkeypatch.setattr(submit_cli, "run_here", lambda *a, **k: ran.append(a) or 0)
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--local", *flag)
    assert r.code == 2 and r.out == "" and ran == []
    assert r.err == "--local runs one spec here; --queue, --priority and --share are for SageMaker jobs\n"


def test_submit_hands_the_job_to_the_queue_and_starts_no_training_job_itself(moto_world, clock):
    plan = plan_for()
    result = submit(plan, QueueOptions(priority=3))
    assert result.started and result.uploaded and result.remembered
    assert "batch.SubmitServiceJob" in result.aws_calls and "sagemaker.CreateTrainingJob" not in result.aws_calls
    desc = moto_world.session.client("batch").describe_service_job(jobId=result.queue["job_id"])
    assert desc["jobName"] == plan.job_name and desc["jobQueue"].endswith(f"job-queue/{QUEUE}")
    assert json.loads(desc["serviceRequestPayload"]) == json.loads(result.queue["service_request"]
                                                                   ["serviceRequestPayload"])
    assert desc["tags"]["smp-launch:managed"] == "true" and desc["schedulingPriority"] == 3
    # Batch made the training job, under a name of its own, with the job's tags.
    (arn,) = [a["serviceResourceId"]["value"] for a in desc["attempts"]]
    sm = moto_world.session.client("sagemaker")
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
    assert arn.split("/")[-1].startswith("AWSBatch") and tags["smp-launch:managed"] == "true"


def _failing_submit(monkeypatch, clients, error, create_first):
    """Make the clients' SubmitServiceJob raise `error`, after really submitting when `create_first`."""
    batch_client = clients.client("batch")
    real = batch_client.submit_service_job

    def submit_then_fail(**kw):
        if create_first:
            real(**kw)
        raise error

    monkeypatch.setattr(batch_client, "submit_service_job", submit_then_fail)


@pytest.mark.parametrize("create_first", [True, False])
def test_an_answer_lost_on_the_way_back_is_settled_by_asking_the_queue(moto_world, monkeypatch, create_first):
    from botocore.exceptions import EndpointConnectionError

    clients = Clients(region="us-west-2")
    _failing_submit(monkeypatch, clients, EndpointConnectionError(endpoint_url="https://batch"), create_first)
    plan = plan_for()
    if create_first:
        result = batch.submit(plan, clients, options=QueueOptions())
        assert result.queue["job_id"] and result.job_name == plan.job_name
    else:
        with pytest.raises(api.AwsError, match="SubmitServiceJob: cannot reach AWS"):
            batch.submit(plan, clients, options=QueueOptions())


@pytest.mark.parametrize("create_first", [True, False])
def test_ctrl_c_during_the_submit_says_whether_the_queue_has_the_job(moto_world, monkeypatch, create_first):
    clients = Clients(region="us-west-2")
    _failing_submit(monkeypatch, clients, KeyboardInterrupt(), create_first)
    with pytest.raises(api.Interrupted) as err:
        batch.submit(plan_for(), clients, options=QueueOptions())
    assert err.value.started is create_first
    assert ("was queued and will run" if create_first else "was not queued") in str(err.value)


# -- the queue's checks -----------------------------------------------------------------------------------------

def test_a_queue_that_does_not_exist_is_refused_before_anything_is_written(moto_world):
    with pytest.raises(UsageError, match="no such Batch job queue"):
        submit(plan_for(queue="nope"))
    assert "Contents" not in moto_world.session.client("s3").list_objects_v2(Bucket="my-smp-bucket")


class _Queues:
    """A Batch client whose DescribeJobQueues answers what the test says (or fails)."""

    def __init__(self, answer):
        self.answer = answer

    def describe_job_queues(self, **_kw):
        if isinstance(self.answer, Exception):
            raise self.answer
        return {"jobQueues": [self.answer]}


@pytest.mark.parametrize("detail, message", [
    ({"jobQueueType": "EKS"}, "cluster.queue 'q' is a EKS job queue; SageMaker training jobs go to a queue of type "
                              "SAGEMAKER_TRAINING"),
    ({}, "cluster.queue 'q' is a container job queue"),
    ({"jobQueueType": "SAGEMAKER_TRAINING", "state": "DISABLED", "status": "VALID"},
     "cluster.queue 'q' is DISABLED (VALID): it accepts no jobs; enable it first"),
    ({"jobQueueType": "SAGEMAKER_TRAINING", "state": "ENABLED", "status": "INVALID"},
     "cluster.queue 'q' is ENABLED (INVALID): it accepts no jobs"),
])
def test_a_queue_of_another_type_or_not_enabled_is_refused(detail, message):
    with pytest.raises(UsageError) as refused:
        batch.check_queue(plan_for(queue="q"), "q", QueueOptions(), _Queues({"jobQueueName": "q", **detail}))
    assert str(refused.value).startswith(message)


def test_a_queue_that_cannot_be_read_is_one_line_naming_it():
    from botocore.exceptions import ClientError

    from launcher.core.aws import AwsError

    denied = ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"},
                          "ResponseMetadata": {"HTTPStatusCode": 403}}, "DescribeJobQueues")
    with pytest.raises(AwsError, match="reading Batch job queue q"):
        batch.check_queue(plan_for(queue="q"), "q", QueueOptions(), _Queues(denied))


def test_a_queue_given_by_its_arn_is_used_as_it_is(moto_world):
    arn = f"arn:aws:batch:us-west-2:123456789012:job-queue/{QUEUE}"
    result = submit(plan_for(queue=arn), dry_run=True)
    assert result.queue["arn"] == arn and result.queue["service_request"]["jobQueue"] == arn
    assert batch.queue_arn(QUEUE, "us-west-2", "123456789012") == arn


def test_submit_into_a_queue_needs_a_queue_and_a_plan_without_errors(moto_world):
    with pytest.raises(UsageError, match="jobs/llama7b.yaml: no Batch job queue: set cluster.queue"):
        submit(plan_for(queue=None))
    from launcher.core.errors import SpecError

    wrong = plan_for("smp.tensor_parallel_degree=3")  # the advisor's errors refuse it before any AWS call
    with pytest.raises(SpecError, match="SMP001"):
        submit(wrong)
    assert "Contents" not in moto_world.session.client("s3").list_objects_v2(Bucket="my-smp-bucket")


def test_a_retry_strategy_holds_at_most_batchs_five_rules(monkeypatch):
    # Two classes SageMaker names, each matched with and without a space after the prefix, and the final EXIT:
    # exactly Batch's 5 rules. A third class would need 7.
    monkeypatch.setattr(batch, "REASON_STARTS", {"internal_error": ("InternalServerError",), "x": ("X",)})
    assert len(retry_strategy(["internal_error", "x"], 3)["evaluateOnExit"]) == 5
    monkeypatch.setattr(batch, "REASON_STARTS", {**batch.REASON_STARTS, "y": ("Y",)})
    with pytest.raises(UsageError, match="takes at most 5 rules; internal_error, x, y need 7: retry fewer classes"):
        retry_strategy(["internal_error", "x", "y"], 3)


def test_a_job_bigger_than_the_service_environment_is_refused_not_left_waiting_forever(moto_world):
    with pytest.raises(UsageError, match="hold at most 2 instances, so the job would wait in RUNNABLE forever"):
        submit(plan_for("cluster.instance_count=4", "smp.hybrid_shard_degree=32"))


def test_a_fair_share_queue_needs_a_share_and_a_fifo_queue_takes_none(moto_world):
    with pytest.raises(UsageError, match="fair-share scheduling policy: give a share identifier"):
        submit(plan_for(queue=FAIR_QUEUE))
    with pytest.raises(UsageError, match="takes no share identifier"):
        submit(plan_for(), QueueOptions(share="teamA"))
    assert submit(plan_for(queue=FAIR_QUEUE), QueueOptions(share="teamA")).queue["share_identifier"] == "teamA"


def test_the_role_check_covers_submitting_to_the_queue(moto_world):
    clients = Clients(region="us-west-2")
    assert api.check_role(plan_for(), clients=clients).verdict == "pass"
    moto_world.session.client("iam").delete_user_policy(UserName="moto", PolicyName="batch")
    check = api.check_role(plan_for(), clients=Clients(region="us-west-2"))
    assert check.verdict == "fail"
    assert {"action": "batch:SubmitServiceJob (caller)",
            "resource": f"arn:aws:batch:us-west-2:123456789012:job-queue/{QUEUE}",
            "decision": "implicitDeny"} in [dict(m) for m in check.missing]
    assert api.check_role(plan_for(queue=None), clients=Clients(region="us-west-2")).verdict == "pass"


def test_submit_many_hands_queued_plans_to_their_queue_and_starts_the_others_itself(moto_world, clock):
    queued_plan, direct_plan = plan_for(), plan_for("training.learning_rate=2e-4", queue=None)
    runs = api.submit_many([queued_plan, direct_plan], clients=Clients(region="us-west-2"))
    (into_queue,), (started,) = (r.submissions for r in runs)
    assert into_queue.queue["job_id"] and "sagemaker.CreateTrainingJob" not in into_queue.aws_calls
    assert "sagemaker.CreateTrainingJob" in started.aws_calls and "batch.SubmitServiceJob" not in started.aws_calls
    sm = moto_world.session.client("sagemaker")
    assert sm.describe_training_job(TrainingJobName=started.job_name)["TrainingJobStatus"] == "InProgress"


@pytest.mark.parametrize("given", ["factory", "shared", "none"])
def test_waiting_follows_queued_and_direct_jobs_to_their_ends_and_says_as_each_ends(moto_world, clock, monkeypatch,
                                                                                    given):
    # Queued jobs and one started here that moved to its next instance type (two attempts) are all waited for,
    # each in its plan's region, with the clients given (a factory, one Clients, or none: made per region).
    from emulator import quotas as fake_quotas
    from launcher.orchestrate.batch import submit_queued
    from launcher.orchestrate.queue import EventKind

    scenario.set_default({**QUICK, "starting": 20.0})  # the jobs started here take 20 s to get instances...
    scenario.expect_attempts("AWSBatch", [QUICK, QUICK])  # ...so the queued ones end while the queue watches
    fake_quotas.no_capacity("ml.p5.48xlarge")
    moved = api.build_plan(api.load_spec(str(JOBS / "llama70b.yaml"), SEVENTY), region="us-west-2")
    plans = [plan_for("training.learning_rate=1e-4"), plan_for("training.learning_rate=2e-4"), moved]
    asked, events = [], []

    def clients_for(region):
        asked.append(region)
        return Clients(region=region)

    clients = {"factory": clients_for, "shared": Clients(region="us-west-2"), "none": None}[given]
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # the plans' region, not the default, holds the jobs
    monkeypatch.delenv("AWS_REGION", raising=False)
    runs = submit_queued(plans, dry_run=False, wait=True, interval=1.0, skip_role_check=False, clients=clients,
                         on_event=events.append, sleep=clock.sleep)
    assert [r.attempts[-1].status.status.value for r in runs] == ["Completed"] * 3
    assert [r.attempts[-1].status.job_name for r in runs] == [p.job_name for p in plans[:2]] + [
        f"{moved.job_name}-r2"]
    assert len(runs[2].attempts) == 2 and runs[2].attempts[0].job_name == moved.job_name  # the first one kept
    ended = [e for e in events if e.kind is EventKind.ENDED]
    assert sorted((e.index, e.job_name) for e in ended) == sorted(
        [(i, r.job_name) for i, r in enumerate(runs)] + [(2, moved.job_name)])  # p5 had no capacity: it ended
    assert [e.running for e in ended] == [2, 2, 1, 0]  # jobs still running after each end, each end said once
    if given == "factory":
        assert set(asked) == {"us-west-2"}
    scenario.set_default({})


def test_a_queued_plan_with_instance_types_is_left_to_the_queue_not_followed_for_capacity(moto_world, clock):
    # Batch keeps a job queued until it has capacity: submit hands it over and returns, as for any queued plan.
    plan = plan_for("cluster.instance_types=[ml.p4d.24xlarge, ml.p4de.24xlarge]")
    assert plan.alternatives
    result = api.submit(plan, clients=Clients(region="us-west-2"))
    assert result.queue["job_id"] and result.job_name == plan.job_name and clock.slept == 0


def test_a_plan_refused_by_its_check_leaves_nothing_started_and_nothing_to_wait_for(moto_world, clock):
    from launcher.orchestrate.batch import submit_queued
    from launcher.orchestrate.queue import PlanState

    runs = submit_queued([plan_for(queue="nope"), plan_for("training.learning_rate=2e-4")], dry_run=False,
                         wait=True, interval=1.0, skip_role_check=False, clients=Clients(region="us-west-2"),
                         sleep=clock.sleep)
    assert [r.state for r in runs] == [PlanState.ERROR, PlanState.NOT_STARTED] and clock.slept == 0
    assert "no such Batch job queue" in str(runs[0].error) and runs[1].attempts == () and runs[1].error is None


def test_api_submit_of_a_plan_naming_a_queue_hands_it_there_or_raises_why_not(moto_world):
    clients = Clients(region="us-west-2")
    queued_job = api.submit(plan_for(), priority=2, clients=clients)
    assert queued_job.queue["name"] == QUEUE and queued_job.queue["job_id"]
    assert "sagemaker.CreateTrainingJob" not in queued_job.aws_calls
    with pytest.raises(UsageError, match="no such Batch job queue"):
        api.submit(plan_for(queue="nope"), clients=clients)


def test_a_retry_policy_needs_every_plan_in_a_queue(moto_world):
    from launcher.orchestrate.retry import RetryPolicy

    with pytest.raises(UsageError, match="a retry policy goes to the Batch queue with the plans"):
        api.submit_many([plan_for(), plan_for("training.learning_rate=2e-4", queue=None)],
                        retry=RetryPolicy(classes=frozenset({"capacity"})), clients=Clients(region="us-west-2"))
    assert "Contents" not in moto_world.session.client("s3").list_objects_v2(Bucket="my-smp-bucket")


def test_an_on_failure_hook_is_refused_for_plans_in_a_queue(moto_world):
    """Batch retries by the queue's retryStrategy; a hook this process would run is refused, nothing written."""
    with pytest.raises(UsageError, match=r"^on_failure decides in this process; a Batch queue retries by its "
                                         r"retryStrategy \(give retry\)$"):
        api.submit_many([plan_for()], on_failure=lambda plan, status: None, dry_run=True,
                        clients=Clients(region="us-west-2"))
    with pytest.raises(UsageError, match="^on_failure decides in this process"):
        api.submit_many([plan_for(), plan_for(queue=None)], on_failure=lambda plan, status: None,
                        clients=Clients(region="us-west-2"))
    assert "Contents" not in moto_world.session.client("s3").list_objects_v2(Bucket="my-smp-bucket")
    assert moto_world.session.client("batch").list_service_jobs(jobQueue=QUEUE)["jobSummaryList"] == []


def test_priority_or_share_without_a_queue_is_refused(moto_world):
    with pytest.raises(UsageError, match="for a Batch queue"):
        api.submit(plan_for(queue=None), priority=4, clients=Clients(region="us-west-2"))
    with pytest.raises(UsageError, match="max_concurrent"):
        api.submit_many([plan_for()], max_concurrent=2, clients=Clients(region="us-west-2"))


# -- the emulated queue -----------------------------------------------------------------------------------------

def _payload(name: str, instances: int = 1) -> str:
    return json.dumps({"TrainingJobName": name, "RoleArn": "arn:aws:iam::123456789012:role/Good",
                       "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
                       "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": instances,
                                          "VolumeSizeInGB": 10},
                       "OutputDataConfig": {"S3OutputPath": "s3://my-smp-bucket/o"},
                       "StoppingCondition": {"MaxRuntimeInSeconds": 100}})


def _submit(b, name, queue=QUEUE, **kw):
    return b.submit_service_job(jobName=name, jobQueue=queue, serviceJobType="SAGEMAKER_TRAINING",
                                serviceRequestPayload=_payload(name), **kw)["jobId"]


def test_the_environment_holds_jobs_runnable_until_capacity_frees(moto_world, clock):
    scenario.set_default(QUICK)
    b = moto_world.session.client("batch")
    ids = [_submit(b, f"j{i}") for i in range(5)]
    statuses = [b.describe_service_job(jobId=i)["status"] for i in ids]
    assert statuses == ["SCHEDULED", "SCHEDULED", "RUNNABLE", "RUNNABLE", "RUNNABLE"]
    clock.sleep(6.5)  # the first two end at 6 s; the next two were placed then
    assert [b.describe_service_job(jobId=i)["status"] for i in ids] == [
        "SUCCEEDED", "SUCCEEDED", "SCHEDULED", "SCHEDULED", "RUNNABLE"]
    third = b.describe_service_job(jobId=ids[2])
    assert third["attempts"][0]["startedAt"] == third["createdAt"] + 6000  # placed the moment capacity freed
    clock.sleep(60)
    assert {b.describe_service_job(jobId=i)["status"] for i in ids} == {"SUCCEEDED"}
    scenario.set_default({})


def test_a_fair_share_queue_places_higher_priorities_first(moto_world, clock):
    scenario.set_default(QUICK)
    b = moto_world.session.client("batch")
    first = _submit(b, "first", FAIR_QUEUE, shareIdentifier="a", schedulingPriority=1)  # takes the one slot
    low = _submit(b, "low", FAIR_QUEUE, shareIdentifier="a", schedulingPriority=1)
    high = _submit(b, "high", FAIR_QUEUE, shareIdentifier="a", schedulingPriority=50)
    clock.sleep(6.5)
    assert [b.describe_service_job(jobId=i)["status"] for i in (first, low, high)] == [
        "SUCCEEDED", "RUNNABLE", "SCHEDULED"]
    scenario.set_default({})


def test_a_capacity_failure_goes_back_in_the_queue_without_using_an_attempt(moto_world, clock):
    scenario.expect_attempts("AWSBatch", [scenarios.capacity_failure(**QUICK), dict(QUICK)])
    b = moto_world.session.client("batch")
    job = _submit(b, "cap")  # no retryStrategy: one attempt allowed
    clock.sleep(1.1)
    desc = b.describe_service_job(jobId=job)
    assert (desc["status"], desc["statusReason"]) == ("RUNNABLE", emulated_batch.CAPACITY_WAIT)
    clock.sleep(1.2)
    desc = b.describe_service_job(jobId=job)
    assert desc["status"] in ("SCHEDULED", "STARTING", "RUNNING") and len(desc["attempts"]) == 2
    assert desc["attempts"][0]["statusReason"].startswith("Received status from SageMaker: CapacityError")
    clock.sleep(10)
    assert b.describe_service_job(jobId=job)["status"] == "SUCCEEDED"


def test_a_job_blocked_for_capacity_holds_its_queue_and_says_why(moto_world, clock):
    scenario.expect_attempts("AWSBatch", [scenarios.capacity_failure(**QUICK), dict(QUICK), dict(QUICK)])
    b = moto_world.session.client("batch")
    b.create_service_environment(serviceEnvironmentName="tiny", serviceEnvironmentType="SAGEMAKER_TRAINING",
                                 capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}])
    b.create_job_queue(jobQueueName="tiny-q", priority=1, jobQueueType="SAGEMAKER_TRAINING",
                       serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "tiny"}])
    held = _submit(b, "held", "tiny-q")
    behind = _submit(b, "behind", "tiny-q")
    clock.sleep(1.1)  # the first attempt failed for capacity at 1 s: the capacity is free, yet nothing passes it
    runnable = b.list_service_jobs(jobQueue="tiny-q", jobStatus="RUNNABLE")["jobSummaryList"]
    assert {s["jobName"]: s.get("statusReason") for s in runnable} == {
        "held": emulated_batch.CAPACITY_WAIT, "behind": None}
    status = api.status("held", clients=Clients(region="us-west-2"))
    assert status.queue.line() == f"RUNNABLE in queue tiny-q: {emulated_batch.CAPACITY_WAIT}"
    clock.sleep(1.0)
    assert [b.describe_service_job(jobId=i)["status"] for i in (held, behind)] == ["SCHEDULED", "RUNNABLE"]


def test_a_job_too_big_for_every_environment_says_so_and_blocks_its_queue(moto_world, clock):
    b = moto_world.session.client("batch")
    big = b.submit_service_job(jobName="big", jobQueue=QUEUE, serviceJobType="SAGEMAKER_TRAINING",
                               serviceRequestPayload=_payload("big", instances=3))["jobId"]
    small = _submit(b, "small")
    clock.sleep(5)
    assert b.describe_service_job(jobId=big)["statusReason"] == emulated_batch.TOO_BIG
    assert b.describe_service_job(jobId=small)["status"] == "RUNNABLE"


def test_the_retry_strategy_decides_on_the_status_reason(moto_world, clock):
    internal = dict(QUICK, outcome="Failed", fail_in="Training",
                    failure_reason="InternalServerError: We encountered an internal error. Please try again.")
    scenario.expect_attempts("AWSBatch", [internal, internal, dict(QUICK), scenarios.user_error(**QUICK)])
    b = moto_world.session.client("batch")
    strategy = retry_strategy(["internal_error"], 3)
    retried = _submit(b, "retried", retryStrategy=strategy)
    clock.sleep(30)
    desc = b.describe_service_job(jobId=retried)
    assert desc["status"] == "SUCCEEDED" and len(desc["attempts"]) == 3
    exits = _submit(b, "exits", retryStrategy=strategy)
    clock.sleep(30)
    desc = b.describe_service_job(jobId=exits)
    assert desc["status"] == "FAILED" and len(desc["attempts"]) == 1
    assert desc["statusReason"].startswith("Received status from SageMaker: AlgorithmError")


def test_attempts_bound_the_retries(moto_world, clock):
    internal = dict(QUICK, outcome="Failed", fail_in="Training", failure_reason="InternalServerError: boom")
    scenario.expect_attempts("AWSBatch", [internal] * 3)
    b = moto_world.session.client("batch")
    job = _submit(b, "twice", retryStrategy=retry_strategy(["internal_error"], 2))
    clock.sleep(60)
    desc = b.describe_service_job(jobId=job)
    assert desc["status"] == "FAILED" and len(desc["attempts"]) == 2


# -- the job commands on queued jobs ----------------------------------------------------------------------------

def test_status_says_where_a_queued_job_waits_and_follows_its_training_job(moto_world, clock):
    scenario.set_default(QUICK)
    b = moto_world.session.client("batch")
    for name in ("a", "b"):
        _submit(b, name)
    _submit(b, "c")
    clients = Clients(region="us-west-2")
    waiting = api.status("c", clients=clients)
    assert waiting.status == "InProgress" and waiting.secondary_status == "RUNNABLE" and not waiting.terminal
    assert waiting.queue.queue == QUEUE and waiting.queue.training_job is None
    assert waiting.to_dict()["queue"]["status"] == "RUNNABLE" and waiting.instance_count == 1
    clock.sleep(8.0)  # placed at 6 s; Training from 7.5 s
    running = api.status("c", clients=clients)
    assert running.queue.training_job.startswith("AWSBatchc") and running.secondary_status == "Training"
    assert running.job_name == "c"
    clock.sleep(60)
    done = api.wait(["c"], clients=clients, interval=1)
    assert done[0].status == "Completed" and done[0].queue.status == "SUCCEEDED"
    scenario.set_default({})


@pytest.mark.parametrize("payload", ["{not json", "[1, 2]"])
def test_a_waiting_job_whose_request_cannot_be_read_still_has_a_status(payload):
    desc = {"jobName": "odd", "jobId": "j-1", "jobQueue": f"arn:aws:batch:us-west-2:123456789012:job-queue/{QUEUE}",
            "status": "RUNNABLE", "serviceRequestPayload": payload}
    status = queued.status_of(Clients(region="us-west-2"), desc)
    assert (status.job_name, status.status.value, status.secondary_status) == ("odd", "InProgress", "RUNNABLE")
    assert (status.instance_type, status.instance_count, status.image) == ("?", 0, None)
    assert status.queue.queue == QUEUE and not status.terminal


def test_metrics_of_a_queued_job_are_its_training_jobs(moto_world, clock):
    scenario.set_default(QUICK)
    _submit(moto_world.session.client("batch"), "m")
    clock.sleep(3.0)
    clients = Clients(region="us-west-2")
    training = api.status("m", clients=clients).queue.training_job
    assert api.metrics("m", clients=clients).job_name == training
    scenario.set_default({})


def test_rerun_of_a_queued_job_reads_its_training_job_and_goes_to_the_queue_again(moto_world, clock):
    scenario.set_default(QUICK)
    clients = Clients(region="us-west-2")
    first = submit(plan_for())
    clock.sleep(30)
    again = api.rerun(first.job_name, clients=clients)
    assert again.queue["name"] == QUEUE and again.queue["job_id"] and again.job_name != first.job_name
    assert "batch.SubmitServiceJob" in again.aws_calls and "sagemaker.CreateTrainingJob" not in again.aws_calls
    assert api.diff(first.job_name, again.job_name, clients=clients) == []  # the job's own source, run again
    scenario.set_default({})


def test_a_name_nobody_knows_is_still_not_found(moto_world):
    with pytest.raises(api.JobNotFound, match="nor in any SageMaker training job queue"):
        api.status("nobody", clients=Clients(region="us-west-2"))


def test_stop_terminates_a_waiting_job_and_list_shows_the_waiting_ones(moto_world, clock):
    scenario.set_default(QUICK)
    b = moto_world.session.client("batch")
    for name in ("a", "b", "c", "d"):
        _submit(b, name, tags={"smp-launch:managed": "true"})
    clients = Clients(region="us-west-2")
    rows = api.list_jobs(clients=clients)
    assert {(r.job_name, r.secondary_status, r.queue) for r in rows if r.queue} == {
        ("c", "RUNNABLE", QUEUE), ("d", "RUNNABLE", QUEUE)}
    stopped = api.stop("c", clients=clients)
    assert stopped.status == "Stopped" and stopped.queue.status == "FAILED"
    assert b.describe_service_job(jobId=stopped.queue.job_id)["isTerminated"] is True
    assert api.worst_exit_code([stopped]) == 5
    clock.sleep(6.5)  # c no longer holds its place: d runs after a and b
    assert api.status("d", clients=clients).queue.status in ("SCHEDULED", "STARTING")
    scenario.set_default({})


def test_stop_of_a_running_queued_job_stops_its_training_job(moto_world, clock):
    scenario.set_default(QUICK)
    b = moto_world.session.client("batch")
    _submit(b, "run", tags={"smp-launch:managed": "true"})
    clock.sleep(3.0)
    clients = Clients(region="us-west-2")
    api.stop("run", clients=clients)
    clock.sleep(5.0)
    after = api.status("run", clients=clients)
    assert after.status == "Stopped" and after.queue.status == "FAILED" and after.queue.training_job
    assert queued.STOP_REASON in after.queue.reason
    scenario.set_default({})


def _follow_queued(name, clock, follow_job=None, until_end=True):
    """launcher.jobs.queued.follow on the virtual clock, each training job followed by the log follower."""
    from launcher.jobs.logs import Polling, follow
    from launcher.jobs.ratelimit import RateLimiter

    clients, notes = Clients(region="us-west-2"), []
    polling = Polling(interval=1.0, clock=clock, sleep=clock.sleep,
                      limiter=RateLimiter(10.0, clock=clock, sleep=clock.sleep))
    follow_job = follow_job or (lambda job: follow(job, clients, polling=polling, until_end=until_end))
    desc = queued.locate(clients, name)
    return queued.follow(name, clients, desc, follow_job, notes.append, until_end=until_end, interval=1.0,
                         sleep=clock.sleep), notes


def test_following_a_queued_job_waits_in_the_queue_then_follows_its_training_job_to_the_end(moto_world, clock):
    scenario.set_default(QUICK)
    b = moto_world.session.client("batch")
    for name in ("a", "b", "c"):
        _submit(b, name)
    result, notes = _follow_queued("c", clock)  # c waits for a and b to end
    assert (result.job, result.status, result.exit_code, result.to_end) == ("c", "Completed", 0, True)
    assert notes[0].startswith("c is RUNNABLE in queue smp-queue")
    assert notes[0].endswith("; waiting for Batch to start it")
    scenario.set_default({})


def test_following_a_job_stopped_before_batch_made_a_training_job_ends_with_batchs_state(moto_world, clock):
    scenario.set_default(QUICK)
    b = moto_world.session.client("batch")
    for name in ("a", "b", "c"):
        _submit(b, name, tags={"smp-launch:managed": "true"})
    clients = Clients(region="us-west-2")
    api.stop("c", clients=clients)
    result, _ = _follow_queued("c", clock)
    assert (result.job, result.status, result.exit_code, result.to_end) == ("c", "Stopped", 5, True)
    scenario.set_default({})


def test_ctrl_c_while_following_a_queued_job_is_an_interrupted_follow(moto_world, clock):
    scenario.set_default(QUICK)
    _submit(moto_world.session.client("batch"), "intr")
    clock.sleep(3.0)  # its training job exists

    def interrupted(_job):
        raise KeyboardInterrupt

    result, _ = _follow_queued("intr", clock, follow_job=interrupted)
    assert (result.job, result.status, result.exit_code, result.interrupted) == ("intr", None, 130, True)
    scenario.set_default({})


def test_following_a_queued_job_not_to_its_end_is_its_training_jobs_follow_under_the_queued_name(moto_world, clock):
    scenario.set_default(QUICK)
    _submit(moto_world.session.client("batch"), "peek")
    clock.sleep(3.0)  # its training job exists and runs
    seen = []

    def follow_job(job):
        seen.append(job)
        return FollowResult(job, "InProgress", 0)

    result, _ = _follow_queued("peek", clock, follow_job=follow_job, until_end=False)
    assert len(seen) == 1 and seen[0] != "peek"  # Batch's training job, followed once
    assert (result.job, result.status, result.exit_code, result.interrupted) == ("peek", "InProgress", 0, False)
    scenario.set_default({})


def test_a_service_job_is_found_by_its_arn_and_a_vanished_one_is_not_found(moto_world, clock):
    scenario.set_default(QUICK)
    job_id = _submit(moto_world.session.client("batch"), "byarn")
    clients = Clients(region="us-west-2")
    arn = moto_world.session.client("batch").describe_service_job(jobId=job_id)["jobArn"]
    assert api.status(arn, clients=clients).queue.job_id == job_id
    with pytest.raises(api.JobNotFound, match="no service job named 'gone' in this region's SageMaker training"):
        next(queued.Attempts(clients, "gone").training_jobs(lambda _note: None, True))
    scenario.set_default({})


def test_a_name_batch_holds_twice_is_its_newest_service_job_whatever_order_batch_lists_them(moto_world, clock):
    scenario.set_default(QUICK)
    b = moto_world.session.client("batch")
    older = _submit(b, "twice")
    clock.sleep(2.0)
    newer = _submit(b, "twice")
    clients = Clients(region="us-west-2")
    assert queued.locate(clients, "twice")["jobId"] == newer != older  # Batch lists the newer first here
    scenario.set_default({})


def test_stop_of_a_queued_job_batch_is_done_with_leaves_it_alone(moto_world, clock):
    scenario.set_default(QUICK)
    _submit(moto_world.session.client("batch"), "over")
    clock.sleep(30)
    clients = Clients(region="us-west-2")
    result = queued.stop(clients, "over", queued.locate(clients, "over"))
    assert (result.stopped, result.status, result.message) == (False, "Completed", "over is Completed; nothing to stop")
    assert api.stop("over", clients=clients).status == "Completed"
    scenario.set_default({})


def test_a_refused_terminate_or_describe_of_a_service_job_is_one_line(moto_world, clock):
    from botocore.exceptions import ClientError

    from launcher.core.aws import AwsError

    scenario.set_default(QUICK)
    job_id = _submit(moto_world.session.client("batch"), "held", tags={"smp-launch:managed": "true"})
    clients = Clients(region="us-west-2")
    desc = queued.locate(clients, "held")

    def refuse(**_kw):
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"},
                           "ResponseMetadata": {"HTTPStatusCode": 403}}, "Op")

    clients = Clients(region="us-west-2")  # refusing before its Batch client exists: the refusal comes first
    for operation in ("TerminateServiceJob", "DescribeServiceJob"):
        clients.session.events.register(f"before-send.batch.{operation}", refuse)
    with pytest.raises(AwsError, match="terminating service job held"):
        queued.stop(clients, "held", desc)
    with pytest.raises(AwsError, match=f"describing service job {job_id}"):
        queued.describe_service_job(clients, job_id)
    scenario.set_default({})


def test_list_still_shows_sagemaker_jobs_where_batch_cannot_be_read(moto_world, clock):
    from botocore.exceptions import ClientError

    clients = Clients(region="us-west-2")
    api.submit(plan_for(queue=None), clients=clients)  # a SageMaker training job, started here

    def refuse(**_kw):
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"},
                           "ResponseMetadata": {"HTTPStatusCode": 403}}, "DescribeJobQueues")

    clients.session.events.register("before-send.batch.DescribeJobQueues", refuse)
    rows = api.list_jobs(clients=clients)
    assert [r.queue for r in rows] == [None] and rows[0].job_name.startswith("llama2-7b-")


def test_names_of_queues_and_environments_are_taken_once(moto_world):
    from botocore.exceptions import ClientError

    b = moto_world.session.client("batch")
    with pytest.raises(ClientError, match="Service environment smp-env already exists"):
        create_queues(moto_world.session)
    with pytest.raises(ClientError, match=f"Job queue {QUEUE} already exists"):
        b.create_job_queue(jobQueueName=QUEUE, priority=1, jobQueueType="SAGEMAKER_TRAINING",
                           serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "smp-env"}])


def test_waiting_jobs_are_listed_newest_first_with_the_time_batch_took_them(moto_world, clock):
    scenario.set_default(QUICK)
    b = moto_world.session.client("batch")
    ids = {}
    for name in ("w1", "w2", "w3", "w4"):
        ids[name] = _submit(b, name, tags={"smp-launch:managed": "true"})
        clock.sleep(1.0)
    rows = [r for r in api.list_jobs(clients=Clients(region="us-west-2")) if r.queue]
    assert [r.job_name for r in rows] == ["w4", "w3"]  # w1 and w2 hold the environment's capacity
    for row in rows:
        assert row.created == b.describe_service_job(jobId=ids[row.job_name])["createdAt"] / 1000
    scenario.set_default({})
