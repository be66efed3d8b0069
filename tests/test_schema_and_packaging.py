"""The committed JSON Schema matches the models; templates ship inside a non-editable install."""
import json
import shutil
import subprocess
import sys
import zipfile

import pytest

from launcher.spec.schema import SCHEMA_FILE, schema_text
from tests.conftest import JOBS, REPO


def test_committed_schema_matches_the_models():
    committed = (REPO / SCHEMA_FILE).read_text()
    assert committed == schema_text(), "schema drifted: run `make schema` and commit the result"


def test_schema_checks_a_spec_like_the_models_do():
    jsonschema = pytest.importorskip("jsonschema")
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
    # Built from a copy: a build in the checkout writes its *.egg-info while other tests run beside it.
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info",
                                                                "__pycache__", ".*_cache", "tests"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "-w", str(wheel_dir), str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = wheel_dir.glob("smp_launch-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "launcher/templates/requirements.txt.j2" in names
    assert "launcher/cli.py" in names and "launcher/spec/loader.py" in names
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, timeout=300)
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import launcher.render as r;"
             "assert r.templates_dir().is_relative_to(sys.argv[1]), r.templates_dir();"
             "print(r.template_names())")
    out = subprocess.run([sys.executable, "-c", probe, str(target)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "requirements.txt.j2" in out.stdout


def test_setup_cfg_lists_every_package():
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    listed = set(cfg["options"]["packages"].split())
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "launcher").rglob("__init__.py")}
    assert found <= listed, f"add to setup.cfg [options] packages: {sorted(found - listed)}"
