"""Retries: the policy, the linked attempt names and tags, the pinned checkpoint URI, and the queue applying it."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import launcher
import launcher.jobs.status
from launcher.core.errors import UsageError
from launcher.jobs.failures import Failure
from launcher.jobs.status import JobState, JobStatus, worst_exit_code
from launcher.orchestrate.queue import EventKind, run_queue
from launcher.orchestrate.retry import ATTEMPT_TAG, RETRY_OF_TAG, RetryPolicy, attempt_name, next_attempt
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
    # the head, 8 hex digits of the whole first name's hash, the attempt: exactly 63 characters
    import hashlib
    import re

    cut = attempt_name(long, 12)
    assert re.fullmatch(r"x{50}-[0-9a-f]{8}-r12", cut) and len(cut) == 63
    assert cut.split("-")[-2] == hashlib.sha256(long.encode()).hexdigest()[:8]
    assert attempt_name("x" * 60, 2) == "x" * 60 + "-r2"  # 63: fits as it is; one more is cut and hashed
    assert re.fullmatch(r"x{51}-[0-9a-f]{8}-r2", attempt_name("x" * 61, 2))


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


def retried(plan, policy, outcomes, monkeypatch):
    """The queue of one plan under `policy`, with a fake submit, and statuses that end each job at its first
    poll with the next of `outcomes`: (what was submitted, what was slept, the events, the PlanRun)."""
    outcomes = iter(outcomes)
    monkeypatch.setattr(launcher.jobs.status, "job_status",
                        lambda clients, name, diagnose=False: _status(name, *next(outcomes)))
    submitted, slept, events = [], [], []

    def submit(p, **_):
        submitted.append(p)
        return SimpleNamespace(job_name=p.job_name, dry_run=False, warnings=(), notes=())

    (run,) = run_queue([plan], retry=policy, interval=1, clients=object(), submit=submit, sleep=slept.append,
                       on_event=events.append)
    return submitted, slept, events, run


def test_the_queue_waits_the_backoff_and_stops_at_success(plan, monkeypatch):
    submitted, slept, events, result = retried(plan, RetryPolicy(max_attempts=5, backoff=10),
                                               [("Failed", "capacity"), ("Failed", "capacity"), ("Completed", None)],
                                               monkeypatch)
    assert [p.job_name for p in submitted] == [plan.job_name, f"{plan.job_name}-r2", f"{plan.job_name}-r3"]
    assert slept == [10, 20] and result.exit_code == 0 and result.status.status == "Completed"
    kinds = [e.kind for e in events]
    assert kinds == [EventKind.STARTED, EventKind.ENDED, EventKind.RESUBMIT] * 2 + [EventKind.STARTED, EventKind.ENDED]
    assert [e.backoff_s for e in events if e.kind is EventKind.RESUBMIT] == [10, 20]
    assert [a.to_dict()["failure_class"] for a in result.attempts] == ["capacity", "capacity", None]
    assert [a.to_dict()["backoff_s"] for a in result.attempts] == [0, 10, 20]
    assert result.status.status is JobState.COMPLETED and result.job_name == f"{plan.job_name}-r3"


def test_the_queue_gives_up_after_max_attempts(plan, monkeypatch):
    _, _, _, result = retried(plan, RetryPolicy(max_attempts=2, backoff=0), [("Failed", "capacity")] * 2,
                              monkeypatch)
    assert len(result.attempts) == 2 and result.exit_code == 1 and worst_exit_code([result]) == 1


def test_the_queue_counts_attempts_per_plan_and_stops_at_the_limit(plan, monkeypatch):
    policy = RetryPolicy(classes=frozenset({"capacity"}), max_attempts=3, backoff=0)
    submitted, _, _, run = retried(plan, policy, [("Failed", "capacity")] * 3, monkeypatch)
    second, third = submitted[1:]
    assert (second.job_name, third.job_name) == (f"{plan.job_name}-r2", f"{plan.job_name}-r3")
    assert len(submitted) == 3 and run.status.status == "Failed"  # three attempts in all
    assert third.estimator.checkpoint_s3_uri == plan.estimator.checkpoint_s3_uri
    submitted, _, _, run = retried(plan, policy, [("Failed", "out_of_memory")], monkeypatch)
    assert len(submitted) == 1 and run.exit_code == 1  # a class not retried


def test_a_retry_policy_and_a_hook_are_not_both_given(plan):
    with pytest.raises(UsageError, match="not both"):
        run_queue([plan], retry=RetryPolicy(), on_failure=lambda p, s: None, clients=object())


def test_library_errors_name_arguments_and_the_cli_names_its_flag(run_cli):
    with pytest.raises(UsageError) as err:
        RetryPolicy(max_attempts=0)
    assert "max_attempts 0" in str(err.value) and "--" not in str(err.value)
    with pytest.raises(UsageError) as err:
        RetryPolicy.parse("capacty")
    assert "--" not in str(err.value)
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--retry", "capacty")
    assert r.code == 2 and "--retry 'capacty': 'capacty' is not a failure class; did you mean 'capacity'?" in r.err


def test_ctrl_c_during_a_backoff_says_the_retry_was_not_submitted(plan, monkeypatch):
    from launcher.core.errors import Interrupted

    def sleep(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(launcher.jobs.status, "job_status",
                        lambda clients, name, diagnose=False: _status(name, "Failed", "capacity"))
    submit = lambda p, **_: SimpleNamespace(job_name=p.job_name, dry_run=False, warnings=(), notes=())  # noqa: E731
    (run,) = run_queue([plan], retry=RetryPolicy(backoff=10), clients=object(), submit=submit, sleep=sleep)
    assert isinstance(run.error, Interrupted) and f"before {plan.job_name}-r2 was submitted again" in str(run.error)
    assert worst_exit_code([run]) == 130 and run.job_name == plan.job_name


def test_the_default_set_retries_sagemakers_side_only():
    policy = RetryPolicy()
    assert policy.classes == {"capacity", "spot_interruption", "internal_error", "hardware"}
    for cls in ("internal_error", "hardware", "capacity", "spot_interruption"):
        assert policy.retries(_status("a", "Failed", cls))
    for cls in ("out_of_memory", "host_out_of_memory", "user_error", "permissions", "unknown", "max_runtime"):
        assert not policy.retries(_status("a", "Failed", cls))


def test_any_class_and_exit_codes_parse():
    policy = RetryPolicy.parse("exit:1, exit:139,max_runtime,internal,host_oom,exit:-9")
    assert policy.classes == {"max_runtime", "internal_error", "host_out_of_memory"}
    assert policy.exit_codes == {1, 139, -9}
    assert RetryPolicy.parse("default,exit:1").classes == RetryPolicy().classes
    only_codes = RetryPolicy.parse("exit:139")
    assert only_codes.classes == frozenset() and only_codes.exit_codes == {139}
    for bad, words in (("exit:", "whole number"), ("exit:x", "whole number"), ("exit:256", "between -255 and 255"),
                       ("exit:-256", "between -255 and 255"), ("defualt", "did you mean 'default'")):
        with pytest.raises(UsageError, match=words):
            RetryPolicy.parse(bad)
    assert RetryPolicy.parse("exit:255").exit_codes == {255}


def _coded(name: str, failure_class: str, code: int | None) -> JobStatus:
    status = _status(name, "Failed", failure_class)
    return JobStatus(**{**status.__dict__, "failure": Failure(failure_class, "why", "do this", (), code)})


def test_exit_codes_are_retried_whatever_the_class():
    policy = RetryPolicy.parse("exit:139")
    assert policy.retries(_coded("a", "user_error", 139))
    assert not policy.retries(_coded("a", "user_error", 1))
    assert not policy.retries(_coded("a", "user_error", None))
    assert not policy.retries(_coded("a", "capacity", None))  # no class named
    assert not policy.retries(_status("a", "Completed"))
    assert RetryPolicy.parse("user_error").retries(_coded("a", "user_error", 1))


def test_the_cli_takes_exit_codes_and_names_a_bad_one(run_cli):
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--retry", "exit:one")
    assert r.code == 2 and "--retry 'exit:one': 'exit:one': give an exit code as a whole number" in r.err


@pytest.mark.parametrize("args,words", [
    (["--tiny"], "--tiny applies only with --local (a run here on CPUs)"),
    (["--max-steps", "20", "--nproc", "4"], "--nproc, --max-steps apply only with --local"),
    (["--local", "--wait"], "--wait applies to SageMaker jobs, not to --local"),
    (["--local", "--dry-run", "--retry", "capacity"], "--dry-run, --retry apply to SageMaker jobs, not to --local"),
    (["--max-attempts", "5"], "--max-attempts applies only with --retry"),
    (["--retry-backoff", "1", "--max-attempts", "2"], "--max-attempts, --retry-backoff apply only with --retry"),
    (["--retry", "capacity", "--dry-run", "--set", "role=Good"],
     "--retry submits one spec and waits for it: give one spec and no --dry-run"),
    (["--wait", "--dry-run"], "--wait follows one job: give one spec and no --dry-run"),
])
def test_flags_that_do_not_apply_are_refused_in_one_line(run_cli, args, words):
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), *args)
    assert r.code == 2 and words in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_defaults_are_not_taken_for_flags_given(run_cli, monkeypatch):
    import launcher.cli.submit as submit_cli

    monkeypatch.setattr(submit_cli, "run_here", lambda *a, **k: 0)
    assert run_cli("submit", str(JOBS / "llama7b.yaml"), "--local", "--tiny", "--nproc", "2").code == 0


def test_policy_defaults_and_bounds():
    import dataclasses

    from launcher.orchestrate.retry import RefusalWait, first_name

    assert RetryPolicy().max_attempts == 3 and RetryPolicy(max_attempts=1).max_attempts == 1
    with pytest.raises(UsageError, match="'aaa'"):
        RetryPolicy(classes=frozenset({"zzz", "aaa"}))  # the first unknown class, sorted, is named
    with pytest.raises(dataclasses.FrozenInstanceError):
        RefusalWait().max_refusals = 1
    assert RetryPolicy.parse("exit:-255,exit:255").exit_codes == {-255, 255}
    named = SimpleNamespace(job_name="job-r1")
    assert first_name(named, 1) == "job-r1" and first_name(SimpleNamespace(job_name="job"), 2) == "job"
    assert first_name(SimpleNamespace(job_name="job-r2"), 2) == "job"


@pytest.mark.parametrize("text,cut", [("c" * 100, 80), ("exit:" + "9" * 100, 80), ("exit:x" + "y" * 100, 80)])
def test_a_bad_token_is_quoted_cut_to_eighty_characters(text, cut):
    with pytest.raises(UsageError) as err:
        RetryPolicy.parse(text)
    assert repr(text[:cut]) in str(err.value) and text[:cut + 1] not in str(err.value)


def test_no_class_in_the_text_quotes_it_cut_to_eighty_characters():
    text = " ," * 60
    with pytest.raises(UsageError) as err:
        RetryPolicy.parse(text)
    assert repr(text[:80]) in str(err.value) and repr(text[:81]) not in str(err.value)


def test_a_queue_may_be_told_never_to_wait_a_refusal_out():
    from launcher.orchestrate.retry import RefusalWait

    assert RefusalWait(max_refusals=0).max_refusals == 0
    with pytest.raises(UsageError, match="max_refusals -1"):
        RefusalWait(max_refusals=-1)


def test_a_policy_is_frozen_and_parse_keeps_three_attempts():
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        RetryPolicy().max_attempts = 5
    assert RetryPolicy.parse("capacity").max_attempts == 3 and RetryPolicy.parse("capacity").backoff == 60.0
