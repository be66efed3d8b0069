"""The whole plan as `plan` shows it, table and JSON, for every golden variant (tests/goldens/variants.txt).

The render goldens hold the files a job runs; these hold what a person or a pipeline reads before paying for it:
the predicted speed, time and cost, the memory, the advisories, the request. A change to any figure or row shows
here as a diff to review; `make goldens` rewrites them (SMP_WRITE_GOLDENS=1). What differs from run to run is
masked (the job name's timestamp) or left out (the git commit tag, absent outside a git checkout). Prices come
from the shipped snapshot (us-east-1), never from a developer's cache.
"""
import json
import os
import re

import pytest

from launcher.core.names import GIT_COMMIT_TAG
from tests.conftest import REPO
from tests.test_render import VARIANTS_OF_GOLDENS

PLANS = REPO / "tests" / "plan_goldens"
WRITE = os.environ.get("SMP_WRITE_GOLDENS") == "1"
STAMP = re.compile(r"-\d{8}-\d{6}-\d{3}\b")


def _masked(value):
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list):  # the commit tag is left out: a checkout that is not a git repo has none
        return [_masked(v) for v in value if not (isinstance(v, dict) and v.get("Key") == GIT_COMMIT_TAG)]
    return STAMP.sub("-<time>", value) if isinstance(value, str) else value


def _plan_output(run_cli, monkeypatch, tmp_path, name, *flags):
    spec, sets = VARIANTS_OF_GOLDENS[name]
    for var in ("SMP_LAUNCH_BUCKET", "SMP_LAUNCH_ROLE", "AWS_PROFILE", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(REPO)
    args = ["plan", spec, *(a for s in sets for a in ("--set", s)), *flags]
    result = run_cli(*args, env={"XDG_STATE_HOME": str(tmp_path), "AWS_REGION": "us-east-1", "COLUMNS": "100"})
    assert result.code == 0, result.err
    return result.out


def check_golden(path, text):
    """`text` is the golden file at `path` (written first under SMP_WRITE_GOLDENS=1); a drift fails with its diff."""
    if WRITE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden {path.name}: run `make goldens`"
    golden = path.read_text(encoding="utf-8")
    if text != golden:
        import difflib

        where = path.relative_to(REPO)
        diff = "".join(difflib.unified_diff(golden.splitlines(True), text.splitlines(True), str(where), "now", n=1))
        pytest.fail(f"the output drifted from {where} (review, then `make goldens`):\n{diff[:4000]}")


@pytest.mark.parametrize("name", sorted(VARIANTS_OF_GOLDENS))
def test_the_plans_json_matches_its_golden(name, run_cli, monkeypatch, tmp_path):
    data = json.loads(_plan_output(run_cli, monkeypatch, tmp_path, name, "--output", "json"))
    check_golden(PLANS / f"{name}.json", json.dumps(_masked(data), indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("name", sorted(VARIANTS_OF_GOLDENS))
def test_the_plans_table_matches_its_golden(name, run_cli, monkeypatch, tmp_path):
    text = STAMP.sub("-<time>", _plan_output(run_cli, monkeypatch, tmp_path, name))
    check_golden(PLANS / f"{name}.txt", text)


# `advise` over the layouts it builds: each row's memory, speed, time and cost, and the order they rank in.
ADVICE = {
    "advise-llama2-7b": ["--model", "llama2-7b", "--instances", "2"],
    "advise-llama2-70b-by-cost": ["--model", "llama2-70b", "--instances", "8", "--by", "cost", "--tokens", "300B"],
    "advise-mixtral-p5-practices": ["--model", "mixtral-8x7b", "--instance-type", "ml.p5.48xlarge",
                                    "--global-batch-tokens", "4M", "--by", "practices"],
    "advise-llama3-8b-fp8": ["--model", "llama3-8b", "--instance-type", "ml.p5.48xlarge", "--precision", "fp8",
                             "--seq-length", "8192", "--top", "4", "--instances", "4"],
}


@pytest.mark.parametrize("name", sorted(ADVICE))
def test_advice_matches_its_golden(name, run_cli, monkeypatch, tmp_path):
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    env = {"XDG_STATE_HOME": str(tmp_path), "AWS_REGION": "us-east-1", "COLUMNS": "100"}
    table = run_cli("advise", *ADVICE[name], env=env)
    data = run_cli("advise", *ADVICE[name], "--output", "json", env=env)
    assert table.code == data.code == 0, table.err + data.err
    rows = json.loads(data.out)  # every feasible layout: the first 20 in full, and how many there are
    shown = {"rows": len(rows), "first": rows[:20]}
    check_golden(PLANS / f"{name}.json", json.dumps(shown, indent=1, sort_keys=True) + "\n")
    check_golden(PLANS / f"{name}.txt", table.out)


def test_every_plan_golden_belongs_to_a_variant():
    names = {p.stem for p in PLANS.iterdir()}
    assert names == set(VARIANTS_OF_GOLDENS) | set(ADVICE), "a stale or missing plan golden: run `make goldens`"
