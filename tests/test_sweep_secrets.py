"""A secret given as a `--sweep` value is refused like one given with --set, and is never printed: not in the
refusal line, not in the sweep table, not in the JSON `overrides`. A secret-looking environment entry, which a
plan carries redacted, is shown redacted there too."""
import json

import pytest

from launcher.spec.secrets import REDACTED
from tests.conftest import JOBS

SPEC = str(JOBS / "llama7b.yaml")
HF = "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"
AKIA = "AKIAIOSFODNN7EXAMPLE"  # AWS's own documentation example
GHP = "ghp_" + "Z9" * 18


@pytest.mark.parametrize("output", ["table", "json"])
@pytest.mark.parametrize("key,secret", [("hyperparameters.token", HF), ("tags.owner", AKIA),
                                        ("hyperparameters.gh", GHP)])
def test_a_secret_sweep_value_is_refused_and_never_printed(key, secret, output, moto_world, run_cli):
    r = run_cli("submit", SPEC, "--set", "role=Good", "--sweep", f"{key}={secret},plain-value", "--dry-run",
                "--output", output)
    assert "Traceback" not in r.err
    assert secret not in r.out and secret not in r.err, "the secret was printed"
    assert secret[:8] not in r.out + r.err
    refusals = [ln for ln in r.err.splitlines() if "[refused:" in ln]
    assert len(refusals) == 1 and f"{key}={REDACTED}" in refusals[0]
    if output == "json":
        data = json.loads(r.out)
        assert sorted(d["overrides"][key] for d in data) == sorted([REDACTED, "plain-value"])


def test_a_secret_environment_entry_is_swept_but_shown_redacted(moto_world, run_cli):
    r = run_cli("submit", SPEC, "--set", "role=Good", "--sweep", f"environment.HF_TOKEN={HF},{GHP}", "--dry-run",
                "--output", "json")
    assert r.code == 0, r.err
    assert HF not in r.out + r.err and GHP not in r.out + r.err
    data = json.loads(r.out)
    assert [d["overrides"] for d in data] == [{"environment.HF_TOKEN": REDACTED}] * 2


def test_a_malformed_sweep_flag_holding_a_secret_does_not_echo_it(run_cli):
    r = run_cli("submit", SPEC, "--sweep", f"hyperparameters.token:{HF}")
    assert r.code == 2 and HF not in r.err and HF[:8] not in r.err


def test_a_secret_variable_in_a_sweep_value_is_refused_without_its_value(moto_world, run_cli, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", HF)
    r = run_cli("submit", SPEC, "--set", "role=Good", "--sweep", "hyperparameters.t=${HF_TOKEN},x", "--dry-run",
                "--output", "json")
    assert HF not in r.out + r.err
    assert "secret" in r.err
