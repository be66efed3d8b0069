"""`notify: {sns: ARN}`: EventBridge rules this tool names announce each job's (and pipeline execution's) end,
with the failure class and its remedy decided by the rules' patterns; proven end to end on the emulator, which
puts SageMaker's events on the bus and delivers rule targets to SNS."""
import json

import pytest

from launcher.core.aws import Clients
from launcher.orchestrate.notify import MARKERS, RULE_NAME_MAX, check_topic, job_rules, rule_name
from tests.conftest import refusing
from tests.test_pipeline import pipeline_world, plan

REGION = "us-west-2"
ACCOUNT = "123456789012"
TOPIC = f"arn:aws:sns:{REGION}:{ACCOUNT}:training-alerts"
JOB = "llama2-7b-2026-12-02-07-00-00-000"


@pytest.fixture
def make_world():
    return pipeline_world


def event(status, reason=None, name=JOB):
    detail = {"TrainingJobName": name, "TrainingJobStatus": status}
    if reason is not None:
        detail["FailureReason"] = reason
    return {"id": "1", "account": ACCOUNT, "region": REGION, "time": "2026-12-02T07:00:00Z", "source":
            "aws.sagemaker", "detail-type": "SageMaker Training Job State Change", "resources": [], "detail": detail}


def matching(events_client, ev):
    return [r.name for r in job_rules("llama2-7b")
            if events_client.test_event_pattern(EventPattern=json.dumps(r.pattern), Event=json.dumps(ev))["Result"]]


REAL_REASONS = [
    ("AlgorithmError: ExecuteUserScriptError: ExitCode 1 ErrorMessage \"torch.OutOfMemoryError: CUDA out of memory. "
     "Tried to allocate 2.00 GiB\"", "out-of-memory"),
    ("CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance "
     "type.", "capacity"),
    ("ResourceLimitExceeded: The account-level service limit 'ml.p4d.24xlarge for training job usage' is 0 "
     "Instances", "quota"),
    ("InternalServerError: We encountered an internal error. Please try again.", "internal-error"),
    ("AlgorithmError: ExecuteUserScriptError: ExitCode 1 ErrorMessage \"ValueError: bad config\"", "failed"),
]


@pytest.mark.parametrize("reason, kind", REAL_REASONS)
def test_each_failure_reaches_exactly_one_rule_the_one_for_its_class(moto_world, reason, kind):
    events = moto_world.session.client("events")
    assert matching(events, event("Failed", reason)) == [rule_name("llama2-7b", kind)]


def test_ends_that_are_not_failures_and_failures_without_a_reason(moto_world):
    events = moto_world.session.client("events")
    assert matching(events, event("Completed")) == [rule_name("llama2-7b", "done")]
    assert matching(events, event("Stopped")) == [rule_name("llama2-7b", "done")]
    assert matching(events, event("Failed")) == [rule_name("llama2-7b", "failed")]
    assert matching(events, event("InProgress")) == []
    assert matching(events, event("Failed", "CapacityError: x", name="other-2026-12-02")) == []


def test_rule_names_fit_eventbridges_limit_and_stay_distinct():
    base = "a" * 43
    names = [r.name for r in job_rules(base)]
    assert all(len(n) <= RULE_NAME_MAX for n in names) and len(set(names)) == len(names) == len(MARKERS) + 2
    assert rule_name("short", "done") == "smp-launch-short-done"


def test_a_rule_name_of_eventbridges_64_characters_is_kept_and_one_more_is_shortened_to_64():
    kept = rule_name("s" * 48, "done")  # PutRule's Name is 1 to 64 characters
    assert kept == "smp-launch-" + "s" * 48 + "-done" and len(kept) == 64
    cut = rule_name("s" * 49, "done")
    assert len(cut) == 64 and cut.startswith("smp-launch-sss") and cut.endswith("-done") and cut != kept


def _topic_and_queue(session, allow_events=True):
    sns, sqs = session.client("sns"), session.client("sqs")
    topic = sns.create_topic(Name="training-alerts")["TopicArn"]
    if allow_events:
        sns.set_topic_attributes(TopicArn=topic, AttributeName="Policy", AttributeValue=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"},
                                                    "Action": "sns:Publish", "Resource": topic}]}))
    queue = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    return topic, queue


def _messages(session, queue):
    got = session.client("sqs").receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"])["Message"] for m in got]


def test_a_failed_job_is_announced_with_its_class_and_remedy(moto_world, clock):
    import emulator
    from launcher.api import status, submit

    topic, queue = _topic_and_queue(moto_world.session)
    emulator.set_default({"outcome": "Failed"})  # the emulator's default reason: a CUDA out-of-memory error
    p = plan(f"notify.sns={topic}")
    clients = Clients(region=REGION)
    done = submit(p, clients=clients)
    assert any("EventBridge rules" in n for n in done.notes), done.notes
    assert not done.warnings
    rules = moto_world.session.client("events").list_rules(NamePrefix="smp-launch-llama2-7b-")["Rules"]
    assert len(rules) == len(MARKERS) + 2
    for _ in range(60):
        clock.sleep(5)
        if status(done.job_name, clients=clients, diagnose=False).status.value == "Failed":
            break
    (message,) = _messages(moto_world.session, queue)
    assert message.startswith(f"smp-launch: training job {done.job_name} failed: out_of_memory. What to do: ")
    assert "CUDA out of memory" in message


def test_submit_again_replaces_the_rules_and_a_dry_run_only_names_them(moto_world):
    from launcher.api import submit

    topic, _ = _topic_and_queue(moto_world.session)
    clients = Clients(region=REGION)
    dry = submit(plan(f"notify.sns={topic}"), dry_run=True, clients=clients)
    assert f"notify: would put {len(MARKERS) + 2} EventBridge rules (smp-launch-llama2-7b-done, ...) sending to " \
           f"{topic}" in dry.notes
    events = moto_world.session.client("events")
    assert events.list_rules(NamePrefix="smp-launch-")["Rules"] == []
    for _ in range(2):
        submit(plan(f"notify.sns={topic}"), clients=clients)
    assert len(events.list_rules(NamePrefix="smp-launch-llama2-7b-")["Rules"]) == len(MARKERS) + 2


def test_a_topic_eventbridge_may_not_publish_to_is_a_warning_with_the_fix(moto_world):
    topic, _ = _topic_and_queue(moto_world.session, allow_events=False)
    (warning,) = check_topic(Clients(region=REGION), topic)
    assert "events.amazonaws.com" in warning and "sns:Publish" in warning
    (missing,) = check_topic(Clients(region=REGION), TOPIC.replace("training-alerts", "nope"))
    assert "does not exist" in missing




def test_a_topic_that_cannot_be_read_is_a_warning_naming_why(moto_world):
    clients = refusing(Clients(region=REGION), "sns.GetTopicAttributes", "AuthorizationError")
    assert check_topic(clients, TOPIC) == [
        f"notify: cannot tell whether EventBridge may publish to {TOPIC} (AuthorizationError)"]


def test_rules_that_cannot_be_put_leave_the_job_running_with_a_warning(moto_world, clock):
    """On the virtual clock: the emulated job cannot end while the test looks, however slow the machine."""
    from launcher.api import submit

    topic, _ = _topic_and_queue(moto_world.session)
    clients = refusing(Clients(region=REGION), "events.PutRule", "AccessDeniedException")
    done = submit(plan(f"notify.sns={topic}"), clients=clients)
    (warning,) = done.warnings
    assert warning.startswith("notify: the job runs, but its end will not be announced: ")
    assert "creating the EventBridge rule smp-launch-llama2-7b-done: access denied for PutRule" in warning
    assert not any("EventBridge rules" in n for n in done.notes)
    status = moto_world.sagemaker.describe_training_job(TrainingJobName=done.job_name)["TrainingJobStatus"]
    assert status == "InProgress"


def test_a_pipeline_execution_that_ends_is_announced(moto_world, clock):
    import emulator
    from launcher.orchestrate.pipeline import upsert_pipeline

    emulator.set_default({})
    topic, queue = _topic_and_queue(moto_world.session)
    result = upsert_pipeline([plan()], "announced", clients=Clients(region=REGION), start=True, notify=topic)
    assert result.notifications == (rule_name("announced", "executions"),)
    sm = moto_world.sagemaker
    for _ in range(60):
        clock.sleep(5)
        if sm.describe_pipeline_execution(PipelineExecutionArn=result.execution_arn)[
                "PipelineExecutionStatus"] != "Executing":
            break
    (message,) = _messages(moto_world.session, queue)
    assert message.startswith(f"smp-launch: pipeline execution {result.execution_arn} is Succeeded.")


def test_the_spec_field_is_checked():
    from launcher.core.errors import SpecError

    with pytest.raises(SpecError, match="notify.sns"):
        plan("notify.sns=not-an-arn")
    assert plan(f"notify.sns={TOPIC}").spec.notify.sns == TOPIC


def test_the_pipeline_command_names_its_rule_only_when_it_put_one(moto_world, run_cli):
    from tests.test_pipeline import PIPELINE_ROLE

    topic, _ = _topic_and_queue(moto_world.session)
    base = ("pipeline", "jobs/llama7b.yaml", "--set", f"role={PIPELINE_ROLE}")
    quiet = run_cli(*base, "--name", "quiet")
    assert quiet.code == 0 and "  params:" in quiet.out and "notify:" not in quiet.out, quiet.err
    told = run_cli(*base, "--name", "told", "--notify", topic)
    assert told.code == 0, told.err
    assert f"  notify:  EventBridge rule {rule_name('told', 'executions')}" in told.out.splitlines()
