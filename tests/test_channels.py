"""Every S3 input channel holds an object before the job is asked for (launcher/submission/channels.py), in-process
against moto: the check a dry run and a submit make, its one ListObjectsV2 per channel, and its refusal (exit 3)."""
from datetime import datetime, timezone

import pytest

from launcher import api
from launcher.core.aws import AwsError, Clients
from launcher.core.errors import EXIT_PREFLIGHT
from launcher.spec import load_spec
from launcher.submission.channels import EmptyChannel, check_channels
from launcher.submission.create import submit
from tests.aws_setup import BUCKET
from tests.conftest import JOBS

NOW = datetime(2026, 11, 30, 10, 0, 0, tzinfo=timezone.utc)
TRAIN = f"s3://{BUCKET}/data/train/"
VALIDATION = f"s3://{BUCKET}/data/val"


def _plan(*overrides, clients):
    loaded = load_spec(JOBS / "llama7b.yaml", ["role=Good", *overrides])
    return api.build_plan(loaded, region=clients.region, env=clients.env, now=NOW)


def _put(session, key: str) -> None:
    session.client("s3").put_object(Bucket=BUCKET, Key=key, Body=b"[1, 2, 3]\n")


def test_a_dry_run_lists_each_channel_once_and_goes_on_when_every_one_holds_objects(moto_world):
    _put(moto_world.session, "data/train/part-0.jsonl")
    _put(moto_world.session, "data/val-0.jsonl")  # a prefix, not a folder: SageMaker's S3Prefix matches it
    clients = Clients(region="us-west-2")
    plan = _plan(f"data.train={TRAIN}", f"data.validation={VALIDATION}", clients=clients)
    result = submit(plan, clients, dry_run=True)
    assert result.aws_calls.count("s3.ListObjectsV2") == 2
    assert result.aws_calls.index("s3.ListObjectsV2") > result.aws_calls.index("s3.GetBucketLocation")
    assert "sagemaker.CreateTrainingJob" not in result.aws_calls


def test_an_empty_channel_is_refused_naming_it_and_its_prefix_before_anything_is_written(moto_world):
    _put(moto_world.session, "data/train/part-0.jsonl")
    clients = Clients(region="us-west-2")
    plan = _plan(f"data.train={TRAIN}", f"data.validation={VALIDATION}", clients=clients)
    with pytest.raises(EmptyChannel) as refused:
        submit(plan, clients)
    message = str(refused.value)
    assert refused.value.exit_code == EXIT_PREFLIGHT == 3
    assert "input channel 'validation' (data.validation)" in message
    assert f"bucket {BUCKET}, prefix data/val" in message and VALIDATION in message
    assert moto_world.sagemaker.list_training_jobs()["TrainingJobSummaries"] == []
    assert [o["Key"] for o in moto_world.session.client("s3").list_objects_v2(Bucket=BUCKET)["Contents"]] == [
        "data/train/part-0.jsonl"]  # no source tarball was uploaded


def test_a_channel_of_data_channels_is_named_by_its_spec_field(moto_world):
    clients = Clients(region="us-west-2")
    plan = _plan(f"data.channels={{tokenizer: s3://{BUCKET}/tok/}}", clients=clients)
    with pytest.raises(EmptyChannel, match=r"input channel 'tokenizer' \(data.channels.tokenizer\)"):
        submit(plan, clients, dry_run=True)


def test_synthetic_data_has_no_channel_and_lists_nothing(moto_world):
    clients = Clients(region="us-west-2")
    plan = _plan(clients=clients)
    assert dict(plan.channels) == {}
    result = submit(plan, clients, dry_run=True)
    assert "s3.ListObjectsV2" not in result.aws_calls


class _S3:
    def __init__(self, answer=None, error=None):
        self.answer, self.error, self.asked = answer, error, []

    def list_objects_v2(self, **kw):
        self.asked.append(kw)
        if self.error:
            raise self.error
        return self.answer


def _client_error(code: str, operation: str = "ListObjectsV2"):
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": code}}, operation)


def test_one_call_per_channel_of_at_most_one_key_with_the_prefix_as_given():
    s3 = _S3({"KeyCount": 1, "Contents": [{"Key": "d/x"}]})
    assert check_channels({"train": "s3://b/d/", "extra": "s3://b/e"}, s3) == []
    assert s3.asked == [{"Bucket": "b", "Prefix": "d/", "MaxKeys": 1}, {"Bucket": "b", "Prefix": "e", "MaxKeys": 1}]


@pytest.mark.parametrize("answer", [{"KeyCount": 0}, {}, {"KeyCount": 0, "Contents": []}])
def test_no_key_is_an_empty_channel(answer):
    with pytest.raises(EmptyChannel, match=r"'train' \(data.train\) has no S3 objects under s3://b/d/ "
                                           r"\(bucket b, prefix d/\)"):
        check_channels({"train": "s3://b/d/"}, _S3(answer))


def test_a_pipelines_empty_channel_is_a_warning_for_each_one():
    """A pipeline's channels may be given other prefixes per execution: empty now is said, not refused."""
    said = check_channels({"train": "s3://b/d/", "extra": "s3://b/e/"}, _S3({"KeyCount": 0}), refuse_empty=False)
    assert [w.split(" has no S3 objects")[0] for w in said] == ["input channel 'train' (data.train)",
                                                               "input channel 'extra' (data.channels.extra)"]
    assert all("an execution with this value would fail" in w for w in said)


def test_a_whole_bucket_channel_says_it_has_no_prefix():
    with pytest.raises(EmptyChannel, match=r"prefix \(none\)"):
        check_channels({"train": "s3://b"}, _S3({"KeyCount": 0}))


def test_a_caller_who_may_not_list_gets_a_warning_and_other_refusals_are_explained():
    warned = check_channels({"train": "s3://b/d/"}, _S3(error=_client_error("AccessDenied")))
    assert warned == ["input channel 'train': cannot tell whether s3://b/d/ holds objects (s3:ListBucket refused "
                      "to you)"]
    with pytest.raises(AwsError, match="listing input channel 'train'"):
        check_channels({"train": "s3://b/d/"}, _S3(error=_client_error("InternalError")))


def test_a_hostile_uri_is_bounded_and_escaped_in_the_refusal():
    uri = "s3://b/" + "\x1b[31m" + "k" * 5000
    with pytest.raises(EmptyChannel) as refused:
        check_channels({"train": uri}, _S3({"KeyCount": 0}))
    assert "\x1b" not in str(refused.value) and len(str(refused.value)) < 1200
