"""The README is the front door: the two set-up commands, a first real submit with the bucket and the role
it needs, the exit codes, and links to the rest. Its examples run in tests/test_docs_examples.py with every
other page's."""
import re

from launcher.core import errors
from tests.conftest import REPO
from tests.doc_blocks import blocks, shell_lines
from tests.test_docs_examples import CLI, verb

README = REPO / "README.md"
TEXT = README.read_text(encoding="utf-8")


def readme_commands() -> list[str]:
    return [line for b in blocks(README) if b.lang == "sh" for line in shell_lines(b)]


def test_the_readme_shows_the_two_set_up_commands():
    assert {"make demo", "make test"} <= set(readme_commands())


def test_the_readme_shows_a_first_submit_and_its_commands_run_with_the_others():
    shown = [c for c in readme_commands() if c.startswith(".venv/bin/smp-launch ")]
    assert {"validate", "plan", "schema", "check-role", "submit", "logs", "status"} <= {verb(c) for c in shown}
    assert set(shown) <= set(CLI)  # tests/test_docs_examples.py runs each of them


def test_the_readme_says_what_the_bucket_and_role_variables_are():
    common = (REPO / "jobs" / "base" / "common.yaml").read_text()
    assert "${SMP_LAUNCH_BUCKET" in common  # the example jobs take their bucket from it
    for name in ("SMP_LAUNCH_BUCKET", "SMP_LAUNCH_ROLE"):
        assert f"export {name}=" in TEXT and f"`{name}` " in TEXT, name
    assert "iam:PassRole" in TEXT and "sagemaker.amazonaws.com" in TEXT


def test_the_exit_code_table_is_the_cli_s():
    table = {int(code) for code in re.findall(r"^\| (\d+) \|", TEXT, flags=re.M)}
    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    assert table == codes, (table, codes)


def test_the_readme_is_a_front_door_whose_links_resolve():
    assert len(TEXT.splitlines()) <= 170
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", TEXT)
    local = [link for link in links if "://" not in link]
    assert "docs/index.md" in local and "docs/api.md" in local
    missing = [link for link in local if not (REPO / link).exists()]
    assert not missing, missing
