"""Announcing terminal states on SNS through EventBridge rules this tool creates and names (`notify: {sns: ARN}`).

Nothing of ours runs when a job ends (the laptop may be closed), so the failure class is decided by EventBridge:
SageMaker puts a "SageMaker Training Job State Change" event on the account's default bus at every status
change (https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html), and a rule
per failure class matches the FailureReason with wildcard patterns
(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html), its target an input
transformer whose message names the class and its remedy. A reason no class's pattern matches goes to one
`failed` rule (anything-but those patterns); Completed and Stopped to a `done` rule. Pipeline executions get one
rule on the pipeline's ARN ("SageMaker Model Building Pipeline Execution Status Change").

The rules are keyed on the spec's name (every job of the spec, retries included, starts with it), so submitting
again replaces them (PutRule and PutTargets are upserts). The topic's access policy must let
events.amazonaws.com publish: `check_topic` says so when it does not, with the statement to add.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from launcher.core.aws import Clients, explain
from launcher.jobs.failures import REMEDIES, FailureClass

RULE_PREFIX = "smp-launch-"
RULE_NAME_MAX = 64  # PutRule's Name: [\.\-_A-Za-z0-9]+, 1-64
JOB_EVENT = "SageMaker Training Job State Change"
PIPELINE_EVENT = "SageMaker Model Building Pipeline Execution Status Change"

# FailureReason markers per class, as SageMaker words them (case matters to EventBridge's wildcard).
MARKERS: dict[str, tuple[str, ...]] = {
    "capacity": ("*CapacityError*", "*InsufficientInstanceCapacity*", "*insufficient capacity*"),
    "quota": ("*ResourceLimitExceeded*",),
    "internal_error": ("*InternalServerError*",),
    "host_out_of_memory": ("*Please use an instance type with more memory*",),
    "out_of_memory": ("*CUDA out of memory*", "*OutOfMemoryError*", "*CUDA error: out of memory*"),
    "nccl_timeout": ("*Watchdog caught collective operation timeout*", "*NCCL communicator was aborted*"),
    "permissions": ("*AccessDenied*", "*is not authorized to perform*"),
    "image": ("*CannotPullContainerError*", "*failed to pull*"),
}


@dataclass(frozen=True)
class NotifyRule:
    """One EventBridge rule and its SNS target, as PutRule and PutTargets take them."""

    name: str
    pattern: dict[str, Any]
    template: str
    paths: dict[str, str]
    description: str


def rule_name(subject: str, kind: str) -> str:
    """`smp-launch-<subject>-<kind>`, shortened with a hash of the subject where it passes 64 characters."""
    name = f"{RULE_PREFIX}{subject}-{kind}"
    if len(name) <= RULE_NAME_MAX:
        return name
    digest = hashlib.sha256(subject.encode()).hexdigest()[:8]
    room = RULE_NAME_MAX - len(RULE_PREFIX) - len(kind) - len(digest) - 2
    return f"{RULE_PREFIX}{subject[:room]}-{digest}-{kind}"


def _remedy(failure_class: str) -> str:
    known = {c.value: c for c in FailureClass}
    found = REMEDIES.get(known[failure_class]) if failure_class in known else None
    return str(found or "see `smp-launch status JOB` for what to do")


def _template(*parts: str) -> str:
    """An input template that is one JSON string: literal text escaped (its < and > too, which would read as
    placeholders), `<name>` parts kept as the placeholders they are."""
    out = []
    for part in parts:
        if part.startswith("<") and part.endswith(">") and part[1:-1].isidentifier():
            out.append(part)
        else:
            out.append(json.dumps(part)[1:-1].replace("<", "(").replace(">", ")"))
    return '"' + "".join(out) + '"'


def job_rules(base_job_name: str) -> list[NotifyRule]:
    """The rules that announce every terminal state of the spec's jobs (names starting `<base>-`)."""
    detail = {"TrainingJobName": [{"prefix": f"{base_job_name}-"}]}
    paths = {"job": "$.detail.TrainingJobName", "status": "$.detail.TrainingJobStatus",
             "reason": "$.detail.FailureReason"}
    rules = [NotifyRule(
        rule_name(base_job_name, "done"),
        {"source": ["aws.sagemaker"], "detail-type": [JOB_EVENT],
         "detail": {**detail, "TrainingJobStatus": ["Completed", "Stopped"]}},
        _template("smp-launch: training job ", "<job>", " is ", "<status>", "."),
        {k: paths[k] for k in ("job", "status")},
        f"smp-launch: {base_job_name} jobs that end")]
    for failure_class, markers in MARKERS.items():
        template = _template("smp-launch: training job ", "<job>", f" failed: {failure_class}. What to do: "
                             f"{_remedy(failure_class)} SageMaker said: ", "<reason>")
        rules.append(NotifyRule(
            rule_name(base_job_name, failure_class.replace("_", "-")),
            {"source": ["aws.sagemaker"], "detail-type": [JOB_EVENT],
             "detail": {**detail, "TrainingJobStatus": ["Failed"],
                        "FailureReason": [{"wildcard": m} for m in markers]}},
            template, paths,
            f"smp-launch: {base_job_name} jobs that fail: {failure_class}"))
    every = [m for markers in MARKERS.values() for m in markers]
    rules.append(NotifyRule(
        rule_name(base_job_name, "failed"),
        {"source": ["aws.sagemaker"], "detail-type": [JOB_EVENT],
         "detail": {**detail, "TrainingJobStatus": ["Failed"],
                    "$or": [{"FailureReason": [{"exists": False}]},
                            {"FailureReason": [{"anything-but": {"wildcard": every}}]}]}},
        _template("smp-launch: training job ", "<job>", " failed; its reason names no class smp-launch knows: "
                  "`smp-launch status ", "<job>", "` reads its log for one. SageMaker said: ", "<reason>"), paths,
        f"smp-launch: {base_job_name} jobs that fail otherwise"))
    return rules


def pipeline_rules(pipeline_name: str, pipeline_arn: str) -> list[NotifyRule]:
    """The rule that announces every execution of the pipeline that ends."""
    return [NotifyRule(
        rule_name(pipeline_name, "executions"),
        {"source": ["aws.sagemaker"], "detail-type": [PIPELINE_EVENT],
         "detail": {"pipelineArn": [pipeline_arn],
                    "currentPipelineExecutionStatus": ["Succeeded", "Failed", "Stopped"]}},
        _template("smp-launch: pipeline execution ", "<execution>", " is ", "<status>", ". Its steps: aws sagemaker "
                  "list-pipeline-execution-steps --pipeline-execution-arn ", "<execution>"),
        {"execution": "$.detail.pipelineExecutionArn", "status": "$.detail.currentPipelineExecutionStatus"},
        f"smp-launch: executions of pipeline {pipeline_name} that end")]


def put_rules(clients: Clients, rules: Sequence[NotifyRule], topic_arn: str) -> list[str]:
    """PutRule and PutTargets for each rule (both upserts); returns the rules' ARNs."""
    arns = []
    events = clients.client("events")
    for rule in rules:
        try:
            arn = events.put_rule(Name=rule.name, EventPattern=json.dumps(rule.pattern), State="ENABLED",
                                  Description=rule.description[:512])["RuleArn"]
            events.put_targets(Rule=rule.name, Targets=[{
                "Id": "sns", "Arn": topic_arn,
                "InputTransformer": {"InputPathsMap": rule.paths, "InputTemplate": rule.template}}])
        except Exception as exc:
            raise explain(exc, f"creating the EventBridge rule {rule.name}") from None
        arns.append(str(arn))
    return arns


def check_topic(clients: Clients, topic_arn: str) -> list[str]:
    """Warnings about the topic: missing, or a policy that does not let EventBridge publish (with the fix)."""
    try:
        attributes = clients.client("sns").get_topic_attributes(TopicArn=topic_arn)["Attributes"]
    except Exception as exc:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
        if code in ("NotFound", "NotFoundException"):
            return [f"notify: SNS topic {topic_arn} does not exist: create it, or nothing is announced"]
        return [f"notify: cannot tell whether EventBridge may publish to {topic_arn} ({code or type(exc).__name__})"]
    policy = attributes.get("Policy") or "{}"
    try:
        statements = json.loads(policy).get("Statement", [])
    except ValueError:
        statements = []
    for s in statements if isinstance(statements, list) else [statements]:
        principal = json.dumps(s.get("Principal", ""))
        actions = s.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if s.get("Effect") == "Allow" and "events.amazonaws.com" in principal and (
                "sns:Publish" in actions or "sns:*" in actions):
            return []
    statement = {"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"}, "Action": "sns:Publish",
                 "Resource": topic_arn}
    return [f"notify: the access policy of {topic_arn} does not let EventBridge publish, so nothing will arrive; "
            f"add the statement {json.dumps(statement)}"]


def announce_jobs(plan: Any, clients: Clients, *, dry_run: bool) -> tuple[list[str], list[str]]:
    """Set up the rules for a plan whose spec has `notify` (with dry_run: only say which): (warnings, notes).

    Called once a job of the plan exists: a failure here is a warning (the job runs, unannounced), never an
    error that would hide the job."""
    topic = plan.spec.notify.sns
    rules = job_rules(plan.base_job_name)
    if dry_run:
        return [], [f"notify: would put {len(rules)} EventBridge rules ({rules[0].name}, ...) sending to {topic}"]
    try:
        warnings = check_topic(clients, topic)
        put_rules(clients, rules, topic)
    except Exception as exc:
        return [f"notify: the job runs, but its end will not be announced: {exc}"], []
    return warnings, [f"notify: {len(rules)} EventBridge rules ({RULE_PREFIX}{plan.base_job_name}-*) send its end "
                      f"to {topic}"]
