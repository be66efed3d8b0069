"""Team templates are code for the job, never for the machine that validates or plans it: they render in
Jinja's sandbox, a template that is a link out of its folder is refused, and what they render is scanned for
credentials as spec values are.

Jinja's sandbox: https://jinja.palletsprojects.com/en/3.1.x/sandbox/ (a template reaching `__class__`,
`__globals__` or `__subclasses__` raises SecurityError instead of running Python).
"""
import os
from pathlib import Path

import pytest

from launcher.plan.build import build_plan
from launcher.render.templates import TemplateError, load_templates, shipped
from launcher.spec import load_spec
from tests.conftest import JOBS

HF_TOKEN = "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"
ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"  # AWS's own documentation example
# The well-known ways out of an unsandboxed Jinja template into Python (and from there a shell).
ESCAPES = {
    "cycler globals": "{{ cycler.__init__.__globals__.os.system('touch MARK') }}",
    "self's module": "{{ self.__init__.__globals__.__builtins__.__import__('os').system('touch MARK') }}",
    "subclasses of object": "{% for c in ''.__class__.__mro__[1].__subclasses__() %}{% if c.__name__ == "
                            "'Popen' %}{{ c(['touch', 'MARK']) }}{% endif %}{% endfor %}",
    "a filter's globals": "{{ (1|attr('__class__')).__mro__ }}{{ lipsum.__globals__['os'].system('touch MARK') }}",
}


def _team(folder: Path, texts: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("escape", sorted(ESCAPES))
@pytest.mark.parametrize("command", ["validate", "plan"])
def test_a_template_reaching_python_internals_runs_nothing_here(escape, command, tmp_path, run_cli):
    mark = tmp_path / "ran"
    text = shipped()["train.py.j2"].text + "\n# " + ESCAPES[escape].replace("MARK", str(mark)) + "\n"
    team = _team(tmp_path / "team", {"train.py.j2": text})
    r = run_cli(command, str(JOBS / "llama7b.yaml"), "--templates", str(team))
    assert not mark.exists(), "the template ran a command on this machine"
    assert r.code == 2 and "Traceback" not in r.err
    (line,) = r.err.strip().splitlines()
    assert "train.py.j2" in line and "does not render" in line


def test_the_shipped_templates_render_the_same_in_the_sandbox():
    from launcher.render import templates

    env = templates.environment(shipped())
    import jinja2.sandbox

    assert isinstance(env, jinja2.sandbox.SandboxedEnvironment)
    plan = build_plan(load_spec(JOBS / "llama7b.yaml"))
    assert "import" in plan.source.files["train.py"]


def test_a_template_that_links_out_of_its_folder_is_refused(tmp_path, run_cli):
    secret = tmp_path / "home" / ".aws" / "credentials"
    secret.parent.mkdir(parents=True)
    secret.write_text(f"[default]\naws_access_key_id = {ACCESS_KEY}\n")
    team = tmp_path / "team"
    team.mkdir()
    (team / "requirements.txt.j2").symlink_to(secret)
    with pytest.raises(TemplateError) as err:
        load_templates(team)
    assert "requirements.txt.j2" in str(err.value) and "link" in str(err.value) and "outside" in str(err.value)
    assert ACCESS_KEY not in str(err.value)
    r = run_cli("plan", str(JOBS / "llama7b.yaml"), "--templates", str(team))
    assert r.code == 2 and ACCESS_KEY not in r.out + r.err


def test_a_link_within_the_folder_is_a_template_like_any_other(tmp_path):
    team = _team(tmp_path / "team", {"shared.txt": "torch\n"})
    (team / "requirements.txt.j2").symlink_to("shared.txt")
    assert load_templates(team)["requirements.txt.j2"].text == "torch\n"


def test_a_folder_reached_through_a_link_is_still_one_folder(tmp_path):
    real = _team(tmp_path / "real", {"requirements.txt.j2": "torch\n"})
    os.symlink(real, tmp_path / "alias")
    assert load_templates(tmp_path / "alias")["requirements.txt.j2"].text == "torch\n"


@pytest.mark.parametrize("value", [HF_TOKEN, ACCESS_KEY])
def test_a_credential_a_template_writes_is_refused_without_an_echo(value, tmp_path, run_cli):
    text = shipped()["requirements.txt.j2"].text + f"# token {value}\n"
    team = _team(tmp_path / "team", {"requirements.txt.j2": text})
    r = run_cli("plan", str(JOBS / "llama7b.yaml"), "--templates", str(team))
    assert r.code == 2 and "Traceback" not in r.err
    assert value not in r.out + r.err
    (line,) = r.err.strip().splitlines()
    assert "requirements.txt.j2" in line and "credential" in line


def test_a_credential_from_an_included_template_is_blamed_on_the_file(tmp_path):
    team = _team(tmp_path / "team", {"train_secrets.py.j2": f"TOKEN = {HF_TOKEN!r}\n"})
    with pytest.raises(TemplateError) as err:
        build_plan(load_spec(JOBS / "llama7b.yaml", [f"templates={team}"]))
    assert "train_secrets.py" in str(err.value) and HF_TOKEN not in str(err.value)
