"""Secrets by value, not only by name: a value from a secret-looking variable, or shaped like a credential,
stands only where it is redacted; anywhere else the spec is refused naming the field, never the value."""
import json

import pytest

from launcher.core.errors import SpecError
from launcher.spec import load_spec
from launcher.spec.secrets import REDACTED, credential_kind
from tests.conftest import JOBS

SESSION = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLXdlc3QtMiJHMEUCIQD" + "x" * 300
ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"  # AWS's own documentation example
LONG_TOKEN = "hf_" + "Ab1" * 199  # 600 characters
CREDENTIALS = {
    "an AWS access key id": ACCESS_KEY,
    "an AWS session token": SESSION,
    "a Hugging Face token": "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",
    "a GitHub token": "ghp_" + "Z9" * 18,
    "a Slack token": "xoxb-123456789012-abcdefABCDEF",
    "an API key": "sk-proj-" + "Ab3xY9" * 8,
}


def load(*overrides, env=None):
    return load_spec(JOBS / "llama7b.yaml", ["role=Good", *overrides], env=env or {})


def refused(*overrides, env=None) -> str:
    with pytest.raises(SpecError) as err:
        load(*overrides, env=env)
    assert err.value.exit_code == 2
    return str(err.value)


@pytest.mark.parametrize("kind, value", sorted(CREDENTIALS.items()))
def test_each_credential_shape_is_known(kind, value):
    assert credential_kind(value) == kind
    assert credential_kind(f"Bearer {value}") == kind


@pytest.mark.parametrize("text", ["hf_llama_7b_finetune", "sk-learn", "scikit-learn-toolkit-1234567890123",
                                  "sk-learn-model-version-2024-01-and-more-words", "hf_modelcheckpoint2024abcdefghijkl",
                                  "TOKENIZERS_PARALLELISM", "AKIAIOSFODNN7EXAMPLEX", "llama2-7b-20261201-150930-067",
                                  "s3://bucket/ASIA/prefix"])
def test_ordinary_text_is_not_a_credential(text):
    assert credential_kind(text) is None


@pytest.mark.parametrize("where", ["hyperparameters.token", "tags.owner", "environment.SESSION", "description"])
def test_a_session_token_from_its_variable_is_refused_where_it_would_be_in_clear(where):
    message = refused(f"{where}=${{AWS_SESSION_TOKEN}}", env={"AWS_SESSION_TOKEN": SESSION})
    assert f"{where}: holds the value of ${{AWS_SESSION_TOKEN}}, a secret" in message
    assert SESSION[:12] not in message and "secrets:" in message


@pytest.mark.parametrize("kind, value", sorted(CREDENTIALS.items()))
@pytest.mark.parametrize("where", ["hyperparameters.key", "tags.team"])
def test_a_literal_credential_in_a_hyperparameter_or_tag_is_refused(where, kind, value):
    message = refused(f"{where}='{value}'")
    assert f"{where}: holds {kind}" in message and value[:8] not in message.split("holds")[1]


def test_a_credential_under_a_plain_environment_name_is_refused_with_a_hint():
    message = refused(f"environment.MY_VAR={ACCESS_KEY}")
    assert "environment.MY_VAR: holds an AWS access key id" in message
    assert "`secrets:`" in message and "MY_VAR_TOKEN" in message and ACCESS_KEY not in message


def test_a_secret_under_a_secret_name_is_allowed_and_redacted_everywhere(run_cli):
    from launcher.plan.build import build_plan

    loaded = load("environment.HF_TOKEN=${AWS_SESSION_TOKEN}", env={"AWS_SESSION_TOKEN": SESSION})
    plan = build_plan(loaded, region="us-west-2")
    assert plan.estimator.to_dict()["environment"]["HF_TOKEN"] == SESSION  # what CreateTrainingJob must get
    shown = json.dumps(plan.to_dict())
    assert SESSION[:20] not in shown and REDACTED in shown
    assert all(SESSION[:20] not in text for text in plan.source.files.values())


def test_a_numeric_secret_stays_text_and_is_never_typed_or_echoed(run_cli):
    loaded = load("environment.DB_PASSWORD=${DB_PASSWORD}", env={"DB_PASSWORD": "31337421"})
    assert loaded.spec.environment["DB_PASSWORD"] == "31337421"  # a password is text, even all digits
    message = refused("cluster.instance_count=${DB_PASSWORD}", env={"DB_PASSWORD": "31337421"})
    assert "cluster.instance_count: holds the value of ${DB_PASSWORD}, a secret" in message
    assert "31337421" not in message


def test_a_long_secret_in_its_place_fails_its_length_check_without_an_echo():
    message = refused("environment.HF_TOKEN=${HF_TOKEN}", env={"HF_TOKEN": LONG_TOKEN})
    assert "environment.HF_TOKEN: string should have at most 512 characters (got <redacted>)" in message
    assert LONG_TOKEN[:10] not in message and "Ab1Ab1" not in message


def test_the_cli_never_prints_a_secret_in_an_error(run_cli, monkeypatch):
    monkeypatch.setenv("DB_PASSWORD", "31337421")
    monkeypatch.setenv("HF_TOKEN", LONG_TOKEN)
    for override in ("training.seed=${DB_PASSWORD}", "environment.HF_TOKEN=${HF_TOKEN}",
                     "hyperparameters.pw=${DB_PASSWORD}"):
        result = run_cli("validate", "jobs/llama7b.yaml", "--set", override, "--output", "json")
        assert result.code == 2 and "31337421" not in result.out + result.err
        assert "Ab1Ab1" not in result.out + result.err and "Traceback" not in result.err


def test_a_secret_in_a_spec_file_is_refused_at_its_line(write_spec):
    text = f"extends: {JOBS / 'llama7b.yaml'}\nhyperparameters:\n  aws_key: {ACCESS_KEY}\n"
    path = write_spec(text)
    with pytest.raises(SpecError) as err:
        load_spec(path, ["role=Good"], env={})
    problem = err.value.problems[0]
    assert problem.path == "hyperparameters.aws_key" and (problem.line, problem.column) == (3, 12)
    assert ACCESS_KEY not in str(err.value)


def test_a_default_is_not_a_secret():
    loaded = load("hyperparameters.note=${HF_TOKEN:-none}")
    assert loaded.spec.hyperparameters["note"] == "none"


def test_a_credential_used_as_a_key_is_refused_at_that_key_without_an_echo(write_spec):
    path = write_spec(f"extends: {JOBS / 'llama7b.yaml'}\nhyperparameters:\n  {ACCESS_KEY}: x\n")
    with pytest.raises(SpecError) as err:
        load_spec(path, ["role=Good"], env={})
    problem = err.value.problems[0]
    assert problem.path == "hyperparameters" and (problem.line, problem.column) == (3, 3)
    assert problem.message == "a key here holds an AWS access key id; a secret is never a key"
    assert ACCESS_KEY not in str(err.value)
