"""The committed JSON Schema matches the models and takes every shipped file as written (a standard validator,
as editors run it); templates ship inside a non-editable install, the test emulator does not."""
import json
import shutil
import subprocess
import sys
import zipfile

import jsonschema
import pytest
import yaml
from jsonschema.exceptions import best_match
from packaging.specifiers import SpecifierSet

from launcher.spec.schema import SCHEMA_FILE, modeline, schema_text
from tests.conftest import JOBS, REPO


def _first_error(document: dict) -> jsonschema.ValidationError | None:
    """What `check-jsonschema` reports for a file: the committed schema, jsonschema's best match."""
    schema = json.loads((REPO / SCHEMA_FILE).read_text())
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    return best_match(validator(schema).iter_errors(document))


@pytest.mark.parametrize("spec", sorted(JOBS.rglob("*.yaml")), ids=lambda p: str(p.relative_to(JOBS)))
def test_every_shipped_job_passes_the_schema_as_written(spec):
    """`extends` brings the required keys; `${SMP_LAUNCH_BUCKET:-...}` stands where the loader expands it."""
    error = _first_error(yaml.safe_load(spec.read_text()))
    assert error is None, f"{spec.name}: {'.'.join(map(str, error.absolute_path))}: {error.message}"


COMPLETE = {"name": "x", "model": {"preset": "llama2-7b"}, "output": {"path": "s3://b-1/x"}}


@pytest.mark.parametrize("document", [
    {"name": "x", "extends": "base.yaml", "output": {"checkpoint_path": "s3://b-1/c"}},  # the rest from the base
    {"cluster": {"instance_type": "ml.p4d.24xlarge"}},  # a base file: a fragment without a name
    {**COMPLETE, "cluster": {"instance_count": "${NODES:-2}", "spot": "${SPOT}", "region": "${REGION}"},
     "training": {"precision": "${PRECISION:-bf16}", "learning_rate": "${LR}"},
     "data": {"train": "s3://${BUCKET}/tokens/", "channels": {"extra": "s3://${BUCKET}/x"}},
     "tags": {"owner": "${USER}"}, "hyperparameters": {"epochs": "${EPOCHS:-1}"}},
], ids=["extends", "base-fragment", "references"])
def test_files_as_written_pass(document):
    error = _first_error(document)
    assert error is None, f"{'.'.join(map(str, error.absolute_path))}: {error.message}"


@pytest.mark.parametrize("document,path,message", [
    ({"name": "x", "output": {"path": "s3://b-1/x"}}, "", "'model' is a required property"),
    ({"name": "x", "model": {}, "output": {}}, "output", "'path' is a required property"),
    ({**COMPLETE, "bogus": 1}, "", "Additional properties are not allowed ('bogus' was unexpected)"),
    ({**COMPLETE, "output": {"path": "http://b-1/x"}}, "output.path", "'http://b-1/x' does not match '^s3://"),
    ({**COMPLETE, "cluster": {"instance_count": 0}}, "cluster.instance_count", "0 is less than the minimum of 1"),
    ({**COMPLETE, "cluster": {"instance_count": "many"}}, "cluster.instance_count",
     "'many' is not of type 'integer'"),
    ({**COMPLETE, "cluster": {"instance_count": "$NODES"}}, "cluster.instance_count",
     "'$NODES' is not of type 'integer'"),
    ({**COMPLETE, "training": {"precision": "bf17"}}, "training.precision",
     "'bf17' is not one of ['bf16', 'fp16', 'fp8']"),
    ({**COMPLETE, "cluster": {"region": "mars"}}, "cluster.region", "'mars' does not match"),
], ids=["no-model", "no-output-path", "unknown-key", "s3-path", "minimum", "type", "not-a-reference", "enum",
        "region"])
def test_invalid_files_fail_with_the_values_own_message(document, path, message):
    error = _first_error(document)
    assert error is not None
    assert ".".join(map(str, error.absolute_path)) == path and error.message.startswith(message), error.message


def test_a_spec_advise_writes_names_the_schema_as_the_jobs_do(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside the repository: the schema of the checkout the tool runs from
    assert modeline(JOBS / "new.yaml") == (JOBS / "llama7b.yaml").read_text().splitlines()[0]
    assert modeline(JOBS / "base" / "new.yaml") == (JOBS / "base" / "common.yaml").read_text().splitlines()[0]
    out = tmp_path / "best.yaml"
    assert run_cli("advise", "--model", "llama2-7b", "--instances", "1", "--write", str(out)).code == 0
    first = out.read_text().splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=")
    assert (out.parent / first.split("$schema=", 1)[1]).resolve() == (REPO / SCHEMA_FILE).resolve()


def test_committed_schema_matches_the_models():
    committed = (REPO / SCHEMA_FILE).read_text()
    assert committed == schema_text(), "schema drifted: run `make schema` and commit the result"


def test_schema_checks_a_spec_like_the_models_do():
    schema = json.loads(schema_text())
    jsonschema.validate({"name": "x", "model": {"preset": "llama2-7b"}, "output": {"path": "s3://b-1/x"},
                         "cluster": {"max_run": "1d"}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "x", "model": {}, "output": {"path": "s3://b-1/x"}, "bogus": 1}, schema)


@pytest.mark.parametrize("spec", sorted(JOBS.rglob("*.yaml")), ids=lambda p: str(p.relative_to(JOBS)))
def test_every_job_names_the_schema_in_a_modeline(spec):
    first = spec.read_text().splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=")
    target = (spec.parent / first.split("$schema=", 1)[1]).resolve()
    assert target == (REPO / SCHEMA_FILE).resolve()


def test_a_wheel_install_finds_the_templates(tmp_path):
    wheel_dir, target, source = tmp_path / "wheel", tmp_path / "site", tmp_path / "source"
    # Built from a copy: a build in the checkout writes its *.egg-info while other tests run beside it. The copy
    # leaves out every virtual environment (.venv-sdk3 is a gigabyte), and where this environment has
    # pyproject.toml's build requirements (setuptools, wheel) the build uses them instead of installing them into a
    # fresh one: the same wheel, without half a minute of copying and installing.
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info",
                                                                "__pycache__", ".*_cache", "tests"))
    import importlib.util

    here = all(importlib.util.find_spec(name) for name in ("setuptools", "wheel"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *(["--no-build-isolation"] if here else []),
                    "-q", "-w", str(wheel_dir), str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = wheel_dir.glob("smp_launch-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "launcher/templates/requirements.txt.j2" in names
    assert {f"launcher/templates/{p.name}" for p in (REPO / "templates").glob("*.j2")} <= set(names)
    assert "launcher/templates/distribution.json.j2" in names
    assert "launcher/cli/__init__.py" in names and "launcher/spec/loader.py" in names
    assert "launcher/py.typed" in names, "the PEP 561 marker is missing, so type checkers ignore our hints"
    assert "launcher/catalog/prices_snapshot.json" in names, "plans made from a wheel would have no prices"
    assert not [n for n in names if "activation_measure" in n], "a developer tool ships"
    assert not [n for n in names if n.startswith("emulator/") or "/emulator/" in n], "the test emulator ships"
    runtime = {f"launcher/runtime/{name}" for name in ("train_data.py", "train_checkpoint.py", "tsm_local.py")}
    assert runtime <= set(names)
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, timeout=300)
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import launcher.render.files as r;"
             "assert r.templates_dir().is_relative_to(sys.argv[1]), r.templates_dir();"
             "print(r.template_names(), r.runtime_source('tsm_local.py').splitlines()[0]);"
             "import launcher.catalog.prices as p; print(p.hourly_price('ml.p4d.24xlarge', 'us-east-1', spot=False,"
             " env={'XDG_STATE_HOME': sys.argv[1]}))")
    out = subprocess.run([sys.executable, "-c", probe, str(target)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "requirements.txt.j2" in out.stdout and "distribution.json.j2" in out.stdout
    assert "torch.sagemaker" in out.stdout
    assert "usd_per_hour=25.251" in out.stdout, out.stdout


def test_setup_cfg_lists_every_package():
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    listed = set(cfg["options"]["packages"].split())
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "launcher").rglob("__init__.py")}
    assert found <= listed, f"add to setup.cfg [options] packages: {sorted(found - listed)}"


def test_the_local_extra_runs_the_transformers_every_smp_image_installs():
    """The CPU preflight's transformers and accelerate (the `local` extra) lie inside the requirements.txt range
    of every image whose range starts at 4.40.1 (PyTorch 2.2.0 to 2.5.1), so the preflight runs the script on a
    version the job itself installs; transformers 5.24.0, pinned before, lay outside all of them."""
    import configparser

    from packaging.requirements import Requirement

    from launcher.catalog.smp import FRAMEWORKS, requirements

    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    pins = {r.name: r.specifier for r in map(Requirement, cfg["options.extras_require"]["local"].split())}
    images = [v for v in FRAMEWORKS if "4.40.1" in SpecifierSet(requirements(v)["transformers"])]
    assert images == ["2.2.0", "2.3.1", "2.4.1", "2.5.1"]
    for name in ("transformers", "accelerate"):
        (pin,) = pins[name]
        assert pin.operator == "==", (name, pin)
        for version in images:
            assert pin.version in SpecifierSet(requirements(version)[name]), (name, pin, version)


def test_an_editable_install_is_a_plain_path_entry_and_prints_no_warning(tmp_path):
    """`make demo`/`make test` install editable: a .pth naming the repository, not setuptools' import finder
    (which warns on every install that folders named like the package may shadow it)."""
    build = "import sys; from setuptools.build_meta import build_editable; print(build_editable(sys.argv[1]))"
    out = subprocess.run([sys.executable, "-c", build, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "InformationOnly" not in out.stderr and "meta path finder" not in out.stdout + out.stderr
    wheel = zipfile.ZipFile(tmp_path / out.stdout.split()[-1])
    (pth,) = [n for n in wheel.namelist() if n.endswith(".pth")]
    assert wheel.read(pth).decode().split() == [str(REPO)]
