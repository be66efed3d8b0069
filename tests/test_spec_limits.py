"""Values SageMaker or S3 would refuse are refused at validate, with the limit named in words.

Limits from CreateTrainingJob (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateTrainingJob.html)
and S3's bucket naming rules (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
"""
import pytest

from launcher.plan.build import build_plan
from launcher.plan.request import predict_request
from launcher.spec import load_spec
from launcher.spec.models import HYPERPARAMETERS_MAX, SDK_HYPERPARAMETERS
from tests.conftest import MINIMAL
from tests.test_hostile_specs import bounded_error

ROOM = HYPERPARAMETERS_MAX - SDK_HYPERPARAMETERS


def _flow(n: int, value: str = "1", prefix: str = "k") -> str:
    return "{" + ", ".join(f"{prefix}{i}: {value}" for i in range(n)) + "}"


def check(run_cli, write_spec, setting: str):
    return bounded_error(run_cli("validate", str(write_spec(MINIMAL)), "--set", setting))


@pytest.mark.parametrize("setting,path,words", [
    (f"hyperparameters={_flow(ROOM + 1)}", "hyperparameters", f"at most {ROOM} hyperparameters"),
    ("hyperparameters={" + "k" * 257 + ": 1}", "hyperparameters." + "k" * 183 + "…", "1-256 characters"),
    ("hyperparameters={a: " + "x" * 2499 + "}", "hyperparameters.a", "at most 2500 characters"),
    ("hyperparameters={a: .inf}", "hyperparameters.a", "not a finite number"),
    ("hyperparameters={a: .nan}", "hyperparameters.a", "not a finite number"),
    ('hyperparameters={"a\\nb": 1}', "hyperparameters.a\\x0ab", "no control characters"),
    (f"environment={_flow(101, 'x', 'V')}", "environment", "at most 100 environment variables"),
    ("environment={" + "V" * 513 + ": x}", "environment." + "V" * 187 + "…", "at most 512 characters"),
    ("environment={V: " + "x" * 513 + "}", "environment.V", "at most 512 characters"),
    ("environment={1V: x}", "environment.1V", "not an environment variable name"),
    ("training.learning_rate=true", "training.learning_rate", "valid number"),
    ("training.learning_rate='1e-4'", "training.learning_rate", "valid number"),
    ("training.learning_rate=.inf", "training.learning_rate", "finite number"),
    ("training.learning_rate=.nan", "training.learning_rate", "finite number"),
    ("training.weight_decay=-.inf", "training.weight_decay", "finite number"),
    ("training.seed=4294967296", "training.seed", "4294967295"),
    ("smp.random_seed=4294967296", "smp.random_seed", "4294967295"),
    ("training.min_learning_rate=0.001", "training.min_learning_rate", "cannot exceed learning_rate"),
    ("training.warmup_steps=1001", "training.warmup_steps", "cannot exceed max_steps (1000)"),
    ("training.batch_size=1000000000000000000000000000000", "training.batch_size", "1048576"),
    ("model.seq_length=100000000", "model.seq_length", "16777216"),
    ('cluster.kms_key_id="alias/k\\nx"', "cluster.kms_key_id", "KMS key id, key ARN, alias/NAME or alias ARN"),
    ("cluster.kms_key_id=''", "cluster.kms_key_id", "1-2048 letters"),
    ("role=''", "role", "a role name (1-64 letters"),
    ("name=-x", "name", "letters, digits and hyphens"),
    ("cluster.subnets=[subnet-x]", "cluster.subnets.0", "a subnet id such as subnet-0123abcd"),
])
def test_values_sagemaker_refuses(run_cli, write_spec, setting, path, words):
    m = check(run_cli, write_spec, setting)
    assert m["path"] == path and words in m["msg"], m["msg"]
    assert "^" not in m["msg"] and "[a-" not in m["msg"]  # said in words, not as a regex


@pytest.mark.parametrize("bucket,words", [
    ("my..bucket", "two adjacent dots"),
    ("192.168.5.4", "IP address"),
    ("xn--bucket", "xn--"),
    ("sthree-bucket", "sthree-"),
    ("amzn-s3-demo-bucket", "amzn-s3-demo-"),
    ("bucket-s3alias", "-s3alias"),
    ("bucket--ol-s3", "--ol-s3"),
    ("bucket.mrap", ".mrap"),
    ("bucket--x-s3", "--x-s3"),
    ("bucket--table-s3", "--table-s3"),
    ("ab", "an S3 URI"),
    ("My-Bucket", "an S3 URI"),
])
@pytest.mark.parametrize("field", ["output.path", "output.checkpoint_path", "data.train", "data.channels.extra"])
def test_bucket_names_s3_refuses(run_cli, write_spec, bucket, words, field):
    m = check(run_cli, write_spec, f"{field}=s3://{bucket}/prefix")
    assert m["path"] == field and words in m["msg"], m["msg"]


@pytest.mark.parametrize("char", ["\\t", "\\e", "\\x85"])
def test_control_characters_after_the_bucket(run_cli, write_spec, char):
    m = check(run_cli, write_spec, f'data.train="s3://my-bucket/a{char}b"')
    assert m["path"] == "data.train" and "control characters" in m["msg"]
    m = check(run_cli, write_spec, 'data.train="s3://my-bucket/a\\nb"')
    assert m["path"] == "data.train" and "an S3 URI" in m["msg"]


def test_an_s3_uri_longer_than_sagemaker_takes(run_cli, write_spec):
    m = check(run_cli, write_spec, "output.path=s3://my-bucket/" + "p" * 1100)
    assert "at most 1024 characters" in m["msg"]


def test_the_limits_themselves_pass(write_spec):
    spec = load_spec(write_spec(MINIMAL), [
        f"hyperparameters={_flow(ROOM)}", "environment={" + "V" * 512 + ": " + "x" * 512 + "}",
        "training.seed=4294967295", "training.warmup_steps=1000", "training.min_learning_rate=1e-4",
        "cluster.kms_key_id=arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        "output.path=s3://my.bucket-1/x",
    ]).spec
    assert len(spec.hyperparameters) == ROOM and spec.training.seed == 2**32 - 1


def test_the_request_holds_at_most_100_hyperparameters(write_spec):
    """SDK_HYPERPARAMETERS is the number the request adds: a spec at the limit sends exactly 100."""
    loaded = load_spec(write_spec(MINIMAL), [f"hyperparameters={_flow(ROOM)}"])
    request = predict_request(build_plan(loaded), "s3://my-bucket/smp/code/source.tar.gz",
                              "arn:aws:iam::111122223333:role/r")
    assert len(request["HyperParameters"]) == 100  # CreateTrainingJob's own limit, not the module's constant


@pytest.mark.parametrize("tags", [{"équipe": "données"}, {"チーム": "機械学習"}, {"Команда": "Ω 1 ½"},
                                  {"a b": ""}, {"k": "_.:/=+-@"}])
def test_tags_take_letters_of_any_script(write_spec, tags):
    flow = "{" + ", ".join(f"'{k}': '{v}'" for k, v in tags.items()) + "}"
    assert load_spec(write_spec(MINIMAL), [f"tags={flow}"]).spec.tags == tags


@pytest.mark.parametrize("flow,path", [("{'a!': b}", "tags.a!"), ("{a: 'b#c'}", "tags.a"), ("{a: 'b\\tc'}", "tags.a")])
def test_tag_characters_are_named_in_words(run_cli, write_spec, flow, path):
    m = check(run_cli, write_spec, f"tags={flow}")
    assert m["path"] == path and "letters, digits, spaces and _ . : / = + - @" in m["msg"]
    assert "^" not in m["msg"]


def test_tag_lengths(run_cli, write_spec):
    m = check(run_cli, write_spec, "tags={" + "k" * 129 + ": v}")
    assert "at most 128 characters" in m["msg"]
    m = check(run_cli, write_spec, "tags={k: " + "v" * 257 + "}")
    assert m["path"] == "tags.k" and "at most 256 characters" in m["msg"]


# -- the size limit itself ---------------------------------------------------------------------------

def test_a_spec_of_exactly_the_size_limit_loads(tmp_path):
    """Kills loader: a spec of exactly MAX_BYTES refused as too big (the limit is "at most")."""
    from launcher.core.errors import SpecError
    from launcher.spec.loader import MAX_BYTES

    body = MINIMAL.lstrip("\n")
    at_limit = tmp_path / "at-limit.yaml"
    at_limit.write_bytes((body + "#" * (MAX_BYTES - len(body) - 1) + "\n").encode())
    assert at_limit.stat().st_size == MAX_BYTES
    assert load_spec(at_limit).spec.name == "demo"
    over = tmp_path / "over.yaml"
    over.write_bytes(at_limit.read_bytes() + b"\n")
    with pytest.raises(SpecError) as err:
        load_spec(over)
    assert f"at most {MAX_BYTES}" in err.value.problems[0].message


def _long_path(tmp_path):
    folder = tmp_path / ("d" * 120)
    folder.mkdir()
    return folder / ("a-long-name-" + "s" * 100 + ".yaml")


def _shown(path) -> str:
    """A path as a message shows it (relative to the working folder when that is shorter), cut to 200 characters."""
    from launcher.spec.loader import _display

    assert len(_display(path)) > 200
    return _display(path)[:199] + "…"


def test_a_spec_that_grows_after_it_was_measured_is_still_cut_at_the_limit(tmp_path, monkeypatch):
    """The size is checked again on what was read: a file written to between fstat and read (a log, another
    process) cannot slip a larger spec past the limit."""
    import os

    from launcher.core.errors import SpecError
    from launcher.spec import loader

    grown = _long_path(tmp_path)
    grown.write_bytes(MINIMAL.encode() + b"#" * loader.MAX_BYTES)
    real_fstat = os.fstat
    monkeypatch.setattr(loader.os, "fstat", lambda fd: os.stat_result((*real_fstat(fd)[:6], 100, *real_fstat(fd)[7:])))
    with pytest.raises(SpecError) as err:
        load_spec(grown)
    assert err.value.problems[0].message == (f"{_shown(grown)} is more than {loader.MAX_BYTES} bytes; a spec may "
                                             f"have at most {loader.MAX_BYTES}")


def test_a_spec_that_cannot_be_read_is_one_error_naming_the_os_reason(tmp_path, monkeypatch):
    from launcher.core.errors import SpecError
    from launcher.spec import loader

    spec = _long_path(tmp_path)
    spec.write_text(MINIMAL)

    def failing_dup(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(loader.os, "dup", failing_dup)
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    assert err.value.problems[0].message == f"cannot read {_shown(spec)}: Input/output error"


@pytest.mark.parametrize("text,tokens", [("500k", 500_000), ("2M", 2_000_000), ("1.5B", 1_500_000_000),
                                         ("1G", 10**9), ("2t", 2 * 10**12), ("300", 300)])
def test_a_token_budget_takes_decimal_unit_letters(text, tokens):
    from launcher.spec.models import parse_token_count

    assert parse_token_count(text) == tokens


@pytest.mark.parametrize("override,path,words", [
    ("model.hidden_width=1048577", "model.hidden_width", "less than or equal to 1048576"),
    ("templates=" + "t" * 4097, "templates", "at most 4096 characters"),
    ("model.hidden_width=0", "model.hidden_width", "greater than or equal to 1"),
    ("templates=''", "templates", "at least 1 character"),
])
def test_size_bounds_one_past_each_end(run_cli, write_spec, override, path, words):
    m = check(run_cli, write_spec, override)
    assert m["path"] == path and words in m["msg"]


def test_a_templates_path_of_exactly_4096_characters_passes_its_length_check(write_spec):
    from launcher.core.errors import SpecError

    with pytest.raises(SpecError) as err:
        load_spec(write_spec(MINIMAL), ["templates=" + "t" * 4096])
    assert "is not a folder of templates" in str(err.value)


@pytest.mark.parametrize("field,bound", [("hidden_width", 2**20), ("num_layers", 4096)])
def test_an_architecture_dimension_is_bounded_at_its_limit_and_not_below(field, bound):
    from pydantic import ValidationError

    from launcher.spec.models import ModelSpec

    whole = {"type": "llama", "num_layers": 32, "hidden_width": 4096, "num_heads": 32, "intermediate_size": 11008,
             "vocab_size": 32000}
    assert getattr(ModelSpec.model_validate({**whole, field: bound}), field) == bound
    with pytest.raises(ValidationError, match=f"less than or equal to {bound}"):
        ModelSpec.model_validate({**whole, field: bound + 1})
