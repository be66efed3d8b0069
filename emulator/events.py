"""SageMaker's state-change events on EventBridge, and EventBridge delivering to SNS topics.

moto's EventBridge matches rules and transforms input, but nothing in moto puts SageMaker's events on the bus
and its rules cannot target SNS (NotImplementedError). Here:
- an emulated training job that reaches Completed, Failed or Stopped puts one "SageMaker Training Job State
  Change" event on its account's default bus, its detail the job as DescribeTrainingJob shows it
  (https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html);
- a pipeline execution that ends (emulator.pipelines) puts "SageMaker Model Building Pipeline Execution Status
  Change";
- TestEventPattern answers with moto's own matcher (the one its rules use);
- a rule whose target is an SNS topic publishes the (transformed) event to it, so a test reads it from an SQS
  queue subscribed to the topic.
"""
from __future__ import annotations

import functools
import json
from typing import Any

from emulator import core

TERMINAL = ("Completed", "Failed", "Stopped")
_SEEN: dict[str, str] = {}  # job ARN -> the status last announced


def forget_all() -> None:
    with core.lock():
        _SEEN.clear()


def put_event(account: str, region: str, detail_type: str, detail: dict[str, Any], resources: list[str]) -> None:
    """One aws.sagemaker event on the account's default bus (rules matched, targets sent)."""
    from moto.events.models import events_backends

    backend = events_backends[account][region]
    backend.put_events([{"Source": "aws.sagemaker", "DetailType": detail_type, "Detail": json.dumps(detail),
                         "Resources": resources, "EventBusName": "default"}])


def transform(event: dict[str, Any], transformer: dict[str, Any] | None) -> str:
    """An InputTransformer applied as EventBridge applies it, for the simple `$.a.b` paths: each <name> in the
    template becomes the value at its path (a string as it is, anything else as JSON; a missing one as null).
    No transformer: the event as JSON."""
    if not transformer:
        return json.dumps(event)
    out = str(transformer.get("InputTemplate", ""))
    for name, path in (transformer.get("InputPathsMap") or {}).items():
        node: Any = event
        for key in str(path).removeprefix("$.").split("."):
            node = node.get(key) if isinstance(node, dict) else None
        text = node if isinstance(node, str) else json.dumps(node)
        out = out.replace(f"<{name}>", json.dumps(text)[1:-1] if out.startswith('"') else text)
    if out.startswith('"') and out.endswith('"'):
        return str(json.loads(out))
    return out


def _announce_job(job: Any) -> None:
    status = job.training_job_status
    if status not in TERMINAL or _SEEN.get(job.arn) == status:
        return
    _SEEN[job.arn] = status
    account, region = job.arn.split(":")[4], job.arn.split(":")[3]
    detail = {"TrainingJobName": job.training_job_name, "TrainingJobArn": job.arn, "TrainingJobStatus": status,
              "SecondaryStatus": getattr(job, "secondary_status", status)}
    if getattr(job, "failure_reason", None):
        detail["FailureReason"] = job.failure_reason
    put_event(account, region, "SageMaker Training Job State Change", detail, [job.arn])


def announce_execution(arn: str, pipeline_arn: str, status: str, previous: str) -> None:
    """The status-change event of a pipeline execution (called by emulator.pipelines when it ends)."""
    account, region = arn.split(":")[4], arn.split(":")[3]
    put_event(account, region, "SageMaker Model Building Pipeline Execution Status Change",
              {"pipelineArn": pipeline_arn, "pipelineExecutionArn": arn, "currentPipelineExecutionStatus": status,
               "previousPipelineExecutionStatus": previous}, [pipeline_arn, arn])


def _apply() -> None:
    from moto.events import models as events
    from moto.sns.models import sns_backends
    from moto.utilities.arns import parse_arn

    from emulator import sagemaker

    original_send = events.Rule.send_to_targets

    @functools.wraps(original_send)
    def send_to_targets(self: Any, event: Any, transform_input: bool = True) -> None:
        to_sns = [t for t in self.targets if parse_arn(t["Arn"]).service == "sns"]
        if to_sns and self.event_pattern.matches_event(event):
            for target in to_sns:
                body = transform(event, target.get("InputTransformer"))
                arn = parse_arn(target["Arn"])
                topic = sns_backends[arn.account][arn.region].topics.get(target["Arn"])
                if topic is not None:
                    topic.publish(body if isinstance(body, str) else json.dumps(body))
        rest = [t for t in self.targets if t not in to_sns]
        if rest:
            kept = self.targets
            self.targets = rest
            try:
                original_send(self, event, transform_input)
            finally:
                self.targets = kept

    events.Rule.send_to_targets = send_to_targets

    from moto.events import responses

    def test_event_pattern(self: Any) -> tuple[str, dict[str, Any]]:
        raw = self._get_param("EventPattern")
        pattern = events.EventPattern(raw, events.EventPatternParser(raw).parse())
        matched = pattern.matches_event(json.loads(self._get_param("Event")))
        return json.dumps({"Result": bool(matched)}), self.response_headers

    responses.EventsHandler.test_event_pattern = test_event_pattern

    original_refresh = sagemaker.refresh

    @functools.wraps(original_refresh)
    def refresh(job: Any) -> None:
        original_refresh(job)
        if job is not None and getattr(job, "arn", None):
            _announce_job(job)

    sagemaker.refresh = refresh


core.register_patch("events:sagemaker-and-sns", _apply)
core.register_reset(forget_all)
