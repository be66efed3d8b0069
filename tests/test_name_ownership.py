"""A job is reported as started only when this process made it: a name SageMaker already holds is ours only
after one of our own tries may have created it; retry names never collide; SIGTERM during the create says
what exists, like Ctrl-C."""
import os
import re
import signal
import sys
from datetime import datetime, timedelta, timezone

import boto3
import pytest

from launcher import api
from launcher.core.aws import AwsError, Clients
from launcher.core.errors import EXIT_AWS, EXIT_TERMINATED, Interrupted
from launcher.core.state import last_submitted
from launcher.orchestrate.retry import MAX_NAME, attempt_name, first_name
from launcher.plan.build import job_name
from launcher.spec import load_spec
from launcher.submission.create import submit as submit_plan
from tests.conftest import JOBS, REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from faultproxy import FaultProxy, Rule  # noqa: E402

NOW = datetime(2026, 11, 30, 10, 0, 0, tzinfo=timezone.utc)
NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")  # TrainingJobName's pattern (CreateTrainingJob)


def plan_for(clients, *overrides):
    loaded = load_spec(JOBS / "llama7b.yaml", ["role=Good", *overrides])
    return api.build_plan(loaded, region=clients.region or "us-west-2", env=clients.env, now=NOW)


def jobs_in(session) -> list[str]:
    return [j["TrainingJobName"] for j in session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]]


def test_the_emulator_refuses_a_name_in_use_as_sagemaker_does(moto_world):
    plan = plan_for(Clients())
    submit_plan(plan, Clients())
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as err:
        moto_world.sagemaker.create_training_job(
            TrainingJobName=plan.job_name, RoleArn=moto_world.arns["Good"],
            AlgorithmSpecification={"TrainingImage": "x", "TrainingInputMode": "File"},
            OutputDataConfig={"S3OutputPath": "s3://b/o"},
            ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
            StoppingCondition={"MaxRuntimeInSeconds": 60})
    error = err.value.response["Error"]
    assert error["Code"] == "ResourceInUse" and "must be unique" in error["Message"]
    assert f"training-job/{plan.job_name}" in error["Message"]


def test_submitting_one_plan_twice_is_refused_naming_the_first_job(moto_world):
    clients = Clients()
    plan = plan_for(clients)
    first = submit_plan(plan, clients)
    assert first.started
    with pytest.raises(AwsError) as err:
        submit_plan(plan, Clients())
    message = str(err.value)
    assert err.value.exit_code == EXIT_AWS
    assert "did not start" in message and f"training-job/{plan.job_name}" in message
    assert f"{plan.job_name} was not started" in message  # this plan's job, not a whole sweep's
    assert jobs_in(moto_world.session) == [plan.job_name]


def test_the_api_submit_of_one_plan_twice_never_says_started(moto_world):
    plan = plan_for(Clients())
    assert api.submit(plan).started
    with pytest.raises(AwsError) as err:
        api.submit(plan)
    assert err.value.exit_code == 4 and plan.job_name in str(err.value)


def _proxied(server_world, proxy) -> Clients:
    return Clients(env={**os.environ, "AWS_ENDPOINT_URL": proxy.url}, region="us-west-2")


def test_a_name_taken_before_our_first_try_is_given_up_for_a_new_one(server_world):
    """The proxy sends our CreateTrainingJob twice: the first stands for another process (on another machine: no
    claim of it here) that got there first. That job is never reported as ours; the plan starts under a new name."""
    with FaultProxy(server_world.url, [Rule("sagemaker", "CreateTrainingJob", "taken", 1)]) as proxy:
        clients = _proxied(server_world, proxy)
        plan = plan_for(clients)
        result = submit_plan(plan, clients)
    assert result.started and result.job_name != plan.job_name
    assert sorted(jobs_in(server_world.session)) == sorted([plan.job_name, result.job_name])
    assert any(f"{plan.job_name} was taken" in n for n in result.notes), result.notes
    assert last_submitted()["job_name"] == result.job_name
    assert result.request["TrainingJobName"] == result.job_name
    assert result.request["CheckpointConfig"]["S3Uri"].endswith(f"/checkpoints/{result.job_name}")


def test_a_name_taken_by_our_own_try_whose_answer_was_lost_is_ours(server_world):
    """The first try creates the job and its answer is lost; botocore's retry meets the name in use."""
    with FaultProxy(server_world.url, [Rule("sagemaker", "CreateTrainingJob", "reset_after", 1)]) as proxy:
        clients = _proxied(server_world, proxy)
        plan = plan_for(clients)
        result = submit_plan(plan, clients)
        tries = proxy.counts()["sagemaker:CreateTrainingJob"]
    assert tries == 2 and result.started and result.remembered
    assert result.notes and "answer was lost" in result.notes[0]
    assert jobs_in(server_world.session) == [plan.job_name]


def test_a_throttled_first_try_does_not_make_a_taken_name_ours(server_world):
    """A throttled try never reached SageMaker's create: a name in use on the retry is still another's, and the
    plan goes on under a new name."""
    rules = [Rule("sagemaker", "CreateTrainingJob", "throttle", 1), Rule("sagemaker", "CreateTrainingJob", "taken", 1)]
    with FaultProxy(server_world.url, rules) as proxy:
        clients = _proxied(server_world, proxy)
        plan = plan_for(clients)
        result = submit_plan(plan, clients)
    assert result.job_name != plan.job_name and any("was taken" in n for n in result.notes)


def test_names_lost_again_and_again_end_in_one_line(server_world):
    from launcher.submission.create import MAX_RENAMES

    rules = [Rule("sagemaker", "CreateTrainingJob", "taken", MAX_RENAMES + 1)]
    with FaultProxy(server_world.url, rules) as proxy:
        clients = _proxied(server_world, proxy)
        plan = plan_for(clients)
        with pytest.raises(AwsError) as err:
            submit_plan(plan, clients)
    assert err.value.exit_code == EXIT_AWS and "did not start" in str(err.value)
    assert len(jobs_in(server_world.session)) == MAX_RENAMES + 1  # each another's: none reported, none ours
    assert last_submitted() is None


@pytest.mark.parametrize("length", range(35, 44))
def test_retry_names_of_first_names_a_millisecond_apart_never_collide(length):
    base = ("a" * length)[:length]
    t = datetime(2026, 12, 1, 15, 9, 30, 67000, tzinfo=timezone.utc)
    firsts = [job_name(base, t + timedelta(milliseconds=ms)) for ms in range(3)]
    for attempt in (2, 3, 9, 10, 12):
        names = [attempt_name(f, attempt) for f in firsts]
        assert len(set(names)) == len(names), names
        assert all(len(n) <= MAX_NAME and NAME.match(n) and n.endswith(f"-r{attempt}") for n in names)
    # a short first name keeps the plain link: `<first>-r2`
    assert attempt_name("llama-20261201-150930-067", 2) == "llama-20261201-150930-067-r2"


def test_a_shortened_retry_name_stays_linked_through_later_attempts():
    first = job_name("b" * 43, NOW)
    second = attempt_name(first, 2)

    class P:
        job_name = second

    third = attempt_name(first_name(P, 2), 3)  # type: ignore[arg-type]
    assert third != second and third.endswith("-r3") and third[:-3] == second[:-3]


class _Ended(Exception):
    pass


def test_sigterm_during_the_create_says_the_job_exists_records_it_and_exits_143(moto_world):
    def ended(*_):
        raise _Ended  # the old behaviour of a SIGTERM: the process ends, nothing said or recorded

    previous = signal.signal(signal.SIGTERM, ended)
    try:
        def create_then_terminated(*args):
            from launcher.submission import backend

            backend.schedule(*args)
            os.kill(os.getpid(), signal.SIGTERM)

        clients = Clients()
        plan = plan_for(clients)
        with pytest.raises(Interrupted) as err:
            submit_plan(plan, clients, start=create_then_terminated)
        assert signal.getsignal(signal.SIGTERM) is ended  # put back after the create
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert err.value.exit_code == EXIT_TERMINATED == 143 and err.value.started is True
    assert str(err.value).startswith(f"terminated, but {plan.job_name} was started")
    assert last_submitted()["job_name"] == plan.job_name


def test_sigterm_before_the_create_reached_sagemaker_says_not_started(moto_world):
    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(_Ended()))
    try:
        def terminated(*_args):
            os.kill(os.getpid(), signal.SIGTERM)

        with pytest.raises(Interrupted) as err:
            submit_plan(plan_for(Clients()), Clients(), start=terminated)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert err.value.exit_code == 143 and err.value.started is False and "was not started" in str(err.value)
    assert jobs_in(boto3.Session(region_name="us-west-2")) == []
