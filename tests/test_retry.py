"""Retries: the policy, the linked attempt names and tags, the pinned checkpoint URI, and the loop."""
from __future__ import annotations

import pytest

import launcher
from launcher.core.errors import UsageError
from launcher.jobs.failures import Failure
from launcher.jobs.status import JobStatus
from launcher.orchestrate.retry import (
    ATTEMPT_TAG,
    RETRY_OF_TAG,
    RetryPolicy,
    attempt_name,
    next_attempt,
    submit_with_retries,
)
from tests.conftest import JOBS


def _status(name: str, status: str, failure_class: str | None = None) -> JobStatus:
    failure = Failure(failure_class, "why", "do this") if failure_class else None
    return JobStatus(job_name=name, arn=None, status=status, secondary_status=status, transitions=(),
                     instance_type="ml.p4d.24xlarge", instance_count=1, image=None, created=None,
                     training_start=None, training_end=None, training_seconds=None, billable_seconds=None,
                     failure_reason="why" if failure else None, model_artifacts=None, failure=failure)


@pytest.fixture
def plan():
    return launcher.build_plan(launcher.load_spec(str(JOBS / "llama7b.yaml"), ["role=Good"]), region="us-west-2")


def test_policy_parses_classes_and_aliases():
    policy = RetryPolicy.parse("capacity, spot", max_attempts=4)
    assert policy.classes == {"capacity", "spot_interruption"} and policy.max_attempts == 4
    with pytest.raises(UsageError, match="did you mean 'capacity'"):
        RetryPolicy.parse("capacty")
    with pytest.raises(UsageError):
        RetryPolicy.parse(" , ")


def test_backoff_doubles_up_to_its_cap():
    policy = RetryPolicy(backoff=60, max_backoff=200)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [60, 120, 200, 200]


def test_attempt_names_link_to_the_first_and_fit_sagemakers_limit():
    assert attempt_name("llama2-7b-20261201-150930-067", 2) == "llama2-7b-20261201-150930-067-r2"
    long = "x" * 60 + "-yz"
    assert len(attempt_name(long, 12)) <= 63 and attempt_name(long, 12).endswith("-r12")


def test_next_attempt_links_the_name_and_tag_and_pins_the_checkpoint_uri(plan):
    first = plan.job_name
    second = next_attempt(plan, _status(first, "Failed", "capacity"), 1, RetryPolicy())
    assert second.job_name == f"{first}-r2"
    tags = {t["Key"]: t["Value"] for t in second.estimator.tags}
    assert tags[RETRY_OF_TAG] == first and tags[ATTEMPT_TAG] == "2"
    assert second.estimator.checkpoint_s3_uri == plan.estimator.checkpoint_s3_uri
    assert second.estimator.checkpoint_s3_uri.endswith(f"/checkpoints/{first}")
    assert second.request["TrainingJobName"] == f"{first}-r2"
    assert second.request["CheckpointConfig"]["S3Uri"] == plan.request["CheckpointConfig"]["S3Uri"]
    third = next_attempt(second, _status(second.job_name, "Stopped", "spot_interruption"), 2, RetryPolicy())
    assert third.job_name == f"{first}-r3"  # named after the first, not `-r2-r3`
    tags = [t for t in third.estimator.tags if t["Key"] == RETRY_OF_TAG]
    assert tags == [{"Key": RETRY_OF_TAG, "Value": f"{first}-r2"}]
    assert third.estimator.checkpoint_s3_uri == plan.estimator.checkpoint_s3_uri


def test_next_attempt_refuses_other_classes_success_and_the_last_attempt(plan):
    policy = RetryPolicy(max_attempts=2)
    assert next_attempt(plan, _status("a", "Failed", "out_of_memory"), 1, policy) is None
    assert next_attempt(plan, _status("a", "Completed"), 1, policy) is None
    assert next_attempt(plan, _status("a", "Failed", "capacity"), 2, policy) is None
    assert next_attempt(plan, _status("a", "Failed", "capacity"), 1, policy) is not None


def test_submit_with_retries_waits_the_backoff_and_stops_at_success(plan):
    outcomes = iter([("Failed", "capacity"), ("Failed", "capacity"), ("Completed", None)])
    submitted, slept, events = [], [], []
    result = submit_with_retries(
        plan, RetryPolicy(max_attempts=5, backoff=10), clients=None,
        submit=lambda p: submitted.append(p) or p.job_name,
        wait=lambda names: [_status(names[0], *next(outcomes))],
        sleep=slept.append, on_event=lambda kind, value: events.append(kind))
    assert [p.job_name for p in submitted] == [plan.job_name, f"{plan.job_name}-r2", f"{plan.job_name}-r3"]
    assert slept == [10, 20] and result.exit_code == 0 and result.final.status == "Completed"
    assert events == ["submitted", "ended", "backoff"] * 2 + ["submitted", "ended"]
    assert [a["failure_class"] for a in result.to_dict()["attempts"]] == ["capacity", "capacity", None]


def test_submit_with_retries_gives_up_after_max_attempts(plan):
    result = submit_with_retries(plan, RetryPolicy(max_attempts=2, backoff=0), clients=None,
                                 submit=lambda p: p.job_name,
                                 wait=lambda names: [_status(names[0], "Failed", "capacity")], sleep=lambda s: None)
    assert len(result.attempts) == 2 and result.exit_code == 1


def test_the_queue_hook_counts_attempts_per_plan_and_stops_at_the_limit(plan):
    from launcher.orchestrate.retry import retrying

    hook = retrying(RetryPolicy(classes=frozenset({"capacity"}), max_attempts=3))
    second = hook(plan, _status(plan.job_name, "Failed", "capacity"))
    third = hook(second, _status(second.job_name, "Failed", "capacity"))
    assert (second.job_name, third.job_name) == (f"{plan.job_name}-r2", f"{plan.job_name}-r3")
    assert hook(third, _status(third.job_name, "Failed", "capacity")) is None  # three attempts in all
    assert hook(plan, _status(plan.job_name, "Failed", "out_of_memory")) is None  # a class not retried
    assert third.estimator.checkpoint_s3_uri == plan.estimator.checkpoint_s3_uri
