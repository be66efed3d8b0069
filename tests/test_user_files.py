"""A command that writes a file the user names (`advise --write`, `schema --write`) never replaces what is there
unless told to (`--force`), and never writes through a link into its target: a hand-written spec is not lost,
and a link planted at the name cannot point the write at another file."""
import json
import os

import pytest

ADVISE = ("advise", "--model", "llama2-7b", "--instances", "1")
COMMANDS = {"advise": ADVISE, "schema": ("schema",)}
HAND_WRITTEN = "# my own spec, by hand\nname: mine\n"


def write(run_cli, command: str, path, *flags: str):
    return run_cli(*COMMANDS[command], "--write", str(path), *flags)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_new_file_is_written(command, run_cli, tmp_path):
    target = tmp_path / "out.yaml"
    r = write(run_cli, command, target)
    assert r.code == 0, r.err
    assert target.is_file() and not target.is_symlink() and target.read_text().strip()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_existing_file_is_kept_without_force(command, run_cli, tmp_path):
    target = tmp_path / "mine.yaml"
    target.write_text(HAND_WRITTEN)
    r = write(run_cli, command, target)
    assert (r.code, r.out) == (2, "") and "Traceback" not in r.err
    (line,) = r.err.strip().splitlines()
    assert line == f"--write {target}: the file exists; --force replaces it"
    assert target.read_text() == HAND_WRITTEN


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_force_replaces_an_existing_file(command, run_cli, tmp_path):
    target = tmp_path / "mine.yaml"
    target.write_text(HAND_WRITTEN)
    r = write(run_cli, command, target, "--force")
    assert r.code == 0, r.err
    assert target.read_text() != HAND_WRITTEN and not target.is_symlink()


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_link_at_the_name_is_never_followed(command, force, run_cli, tmp_path):
    victim = tmp_path / "elsewhere" / "precious.txt"
    victim.parent.mkdir()
    victim.write_text("precious\n")
    link = tmp_path / "out.yaml"
    link.symlink_to(victim)
    r = write(run_cli, command, link, *(["--force"] if force else []))
    assert victim.read_text() == "precious\n", "the write went through the link"
    if force:  # the link itself is replaced by the file
        assert r.code == 0 and not link.is_symlink() and link.read_text() != "precious\n"
    else:
        assert r.code == 2 and link.is_symlink()
        assert "--force replaces it" in r.err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_dangling_link_is_not_followed_to_create_its_target(command, run_cli, tmp_path):
    target = tmp_path / "created-elsewhere.txt"
    link = tmp_path / "out.yaml"
    link.symlink_to(target)
    r = write(run_cli, command, link)
    assert r.code == 2 and not target.exists()


def test_nothing_is_left_behind_when_the_write_is_refused(run_cli, tmp_path):
    target = tmp_path / "mine.yaml"
    target.write_text(HAND_WRITTEN)
    write(run_cli, "advise", target)
    assert sorted(os.listdir(tmp_path)) == ["mine.yaml"]


def test_advise_json_output_is_unchanged_by_where_it_writes(run_cli, tmp_path):
    r = write(run_cli, "advise", tmp_path / "a.yaml", "--output", "json")
    assert r.code == 0 and json.loads(r.out)
