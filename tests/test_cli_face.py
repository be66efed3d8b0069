"""The CLI as a user meets it: its shape, flags where a user looks for them, one-line errors, start-up that
loads only what a command needs, and that it goes through the Python API only."""
import errno
import json
import os
import re
import subprocess
import sys

import pytest

import emulator
from launcher.spec.loader import _display as shown
from tests.conftest import JOBS, MINIMAL, REPO, plan_rows

LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<path>\S+): (?P<msg>.+)$")


# -- check-role: --region, and the verdict on stdout ----------------------------------------------------

def test_check_role_takes_region_and_prints_its_verdict_on_stdout(moto_world, run_cli):
    r = run_cli("check-role", str(JOBS / "llama7b.yaml"), "--set", "role=NoPerms", "--region", "eu-west-1")
    assert r.code == 3, r.err
    lines = r.out.splitlines()
    assert lines[0] == "role arn:aws:iam::123456789012:role/NoPerms: fail"
    assert "  missing ecr:BatchGetImage on arn:aws:ecr:eu-west-1:658645717510:repository/smdistributed-modelparallel " \
           "(implicitDeny)" in lines  # the flag's region, not the spec's us-west-2
    good = run_cli("check-role", str(JOBS / "llama7b.yaml"), "--set", "role=Good", "--region", "us-west-2")
    assert (good.code, good.out.splitlines()[0], good.err) == (0, "role arn:aws:iam::123456789012:role/Good: pass", "")
    data = json.loads(run_cli("check-role", str(JOBS / "llama7b.yaml"), "--set", "role=Good", "--output",
                              "json").out)
    assert data["verdict"] == "pass" and data["actions_checked"] > 10


# -- list without a region ---------------------------------------------------------------------------------

def test_every_command_without_a_region_gives_the_one_hint_and_exit_2(run_cli, monkeypatch, tmp_path):
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    empty = tmp_path / "config"
    empty.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    from launcher.core.errors import NO_REGION

    said = set()
    for args in (["list"], ["status", "some-job"], ["prices"], ["submit", str(JOBS / "llama7b.yaml"), "--set",
                 "cluster.region=null", "--set", "role=x"], ["advise", "--model", "llama2-7b", "--instances", "1"]):
        r = run_cli(*args)
        assert (r.code, r.out) == (2, ""), (args, r.err)
        said.add(r.err)
    flag = NO_REGION.format(region="--region") + "\n"
    assert said == {flag, flag.replace("--region", "--price-region")}  # one hint everywhere, no default region


# -- advise: the note column says what sets each row apart ------------------------------------------------

# A row: #, shard, tp, ckpt, offload, batch, GB/GPU, tokens/step, tok/s/GPU, MFU, bound, time (`6h 55m`), cost, note.
ADVICE_ROW = re.compile(r"^\s*(\d+)\s+\d+\s+\d+\s+(?:yes|no)\s+(?:yes|no)\s+\d+\s+[\d.]+\s+[\d.]+(?: \(tight\))?\s+"
                        r"[\d,]+\s+[\d,]+\s+"
                        r"[\d.]+%\s+(?:compute|communication)\s+(?:[\d,]+d \d+h|\d+h \d+m|\d+m \d+s|\d+ s|-)\s+"
                        r"(?:\$[\d,]+|-)(.*)$")


def test_the_advise_note_column_is_filled(run_cli):
    r = run_cli("advise", "--model", "llama2-7b", "--instances", "1", "--top", "12", "--by", "practices",
                env={"COLUMNS": "250"})  # wide enough that no note folds onto a second line
    assert r.code == 0, r.err
    rows = [m for m in map(ADVICE_ROW.match, r.out.splitlines()) if m]
    assert len(rows) == 12
    notes = {int(m.group(1)): m.group(2).strip() for m in rows}
    assert notes[1] == ""  # the best has nothing against it
    assert all(notes[i] for i in range(2, 13)), notes
    assert "AWS reference" in notes[9] and "shards over 8 GPUs, not 4" in notes[9]
    assert "offloads activations" in notes[3]


def test_the_advise_note_names_the_rules_that_warn(run_cli):
    from launcher.cli.present import advice_note
    from launcher.rules import advise

    ranked = advise.advise("llama2-7b", "ml.p4d.24xlarge", 1)
    warned = next(c for c in ranked if c.warnings)
    note = advice_note(warned, ranked[0])
    assert all(w.split(":")[0] in note for w in warned.warnings) and note.split(", ")[0].startswith("SMP")


# -- validate and plan: problems, structured and printed one way ------------------------------------------

def test_validate_json_gives_structured_problems(run_cli, write_spec):
    typo = write_spec(MINIMAL + "smp:\n  hybrid_shard_degre: 8\n", "typo.yaml")
    layout = write_spec(MINIMAL + "smp:\n  tensor_parallel_degree: 3\n", "layout.yaml")
    r = run_cli("validate", str(JOBS / "llama7b.yaml"), str(typo), str(layout), "--output", "json")
    assert r.code == 2
    typo, layout = shown(typo), shown(layout)  # as the loader names files: relative when that is shorter
    good, bad, refused = json.loads(r.out)
    assert good["valid"] and good["problems"] == []
    assert bad["problems"] == [{"file": typo, "line": 9, "column": 3, "path": "smp.hybrid_shard_degre",
                                "message": bad["problems"][0]["message"]}]
    assert "did you mean 'hybrid_shard_degree'" in bad["problems"][0]["message"]
    first = refused["problems"][0]
    assert (first["file"], first["line"], first["column"], first["path"]) == (layout, 9, 27,
                                                                              "smp.tensor_parallel_degree")
    assert first["message"].startswith("SMP001 ")
    assert refused["errors"][0] == f"{layout}:9:27: smp.tensor_parallel_degree: {first['message']}"


def test_validate_json_marks_an_unreadable_file_at_its_start(run_cli, tmp_path):
    given = str(tmp_path / "absent.yaml")
    absent = shown(tmp_path / "absent.yaml")  # relative to the working folder when that is shorter
    r = run_cli("validate", given, "--output", "json")
    (row,) = json.loads(r.out)
    assert r.code == 2 and row["valid"] is False
    assert row["problems"] == [{"file": absent, "line": 1, "column": 1, "path": "",
                                "message": f"cannot read {absent}: No such file or directory"}]
    assert row["errors"] == [f"{absent}:1:1: (spec): cannot read {absent}: No such file or directory"]


def test_plan_prints_advisor_errors_like_validate_and_no_made_up_numbers(run_cli):
    args = ("plan", str(JOBS / "llama70b.yaml"), "--set", "cluster.instance_count=16")
    r = run_cli(*args)
    assert r.code == 2
    errors = r.err.strip().splitlines()
    assert len(errors) == 2 and all(LINE.match(ln) for ln in errors), errors
    line = next(n for n, text in enumerate((JOBS / "llama70b.yaml").read_text().splitlines(), 1)
                if text.strip().startswith("hybrid_shard_degree:"))
    expected = f"jobs/llama70b.yaml:{line}:24: smp.hybrid_shard_degree: SMP001 hybrid_shard_degree 256 "
    assert errors[0].startswith(expected)
    assert errors == run_cli("validate", *args[1:]).err.strip().splitlines()
    assert "SMP001" not in r.out and "2 errors (on stderr)" in r.out
    table = plan_rows(r.out)
    assert table["world size"] == "128 GPUs"  # a fact of the cluster
    for derived in ("data-parallel degree", "global batch", "GPU memory"):
        assert table[derived].startswith("- (the layout is invalid"), (derived, table[derived])
    assert table["sharding"].startswith("HYBRID_SHARD over 256 GPUs")  # as set: the errors say why it is wrong
    ok = run_cli(*args, "--set", "smp.hybrid_shard_degree=128")
    assert ok.code == 0 and ok.err == "" and "GB per GPU (fits)" in ok.out
    one = run_cli("plan", str(JOBS / "llama7b.yaml"), "--set", "training.batch_size=100000")
    assert one.code == 2 and len(one.err.strip().splitlines()) == 1
    assert "\n1 error (on stderr): submit refuses this plan\n" in one.out


def test_plan_shows_a_global_batch_under_one_kibi_token_as_its_plain_count(run_cli):
    """Below 1,024 tokens a step's batch has no Ki or Mi unit: the count alone."""
    for seq, expected in ((8, "8 sequences, 64 tokens"), (128, "8 sequences, 1,024 (1 Ki) tokens")):
        r = run_cli("plan", str(JOBS / "llama7b.yaml"), "--set", f"model.seq_length={seq}",
                    "--set", "training.batch_size=1", "--set", "cluster.instance_count=1")
        assert r.code == 0, r.err
        table = plan_rows(r.out)
        assert table["global batch"] == expected


# -- the package --------------------------------------------------------------------------------------------

def test_the_presentation_module_is_cheap_for_the_log_printer():
    """The log printer may take its colours and sanitising from launcher.cli.present without click or rich."""
    code = ("import sys; from launcher.cli.present import HOST_COLOURS, host_colour, safe\n"
            "print(sorted(m for m in ('click', 'rich', 'boto3') if m in sys.modules), host_colour(1), host_colour(7),"
            " safe('a\\x1b[2Jb'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["[]", "36", "36", "a\\x1b[2Jb"], out.stderr


def test_the_console_entry_point_is_the_package():
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    assert "smp-launch = launcher.cli:main" in cfg["options.entry_points"]["console_scripts"]
    from launcher.cli import main

    assert callable(main)


class Unwritable:
    """A stdout whose writes (or only its flushes) fail with `error`."""

    def __init__(self, error, *, only_flush=False):
        self.error, self.only_flush = error, only_flush

    def write(self, text):
        if not self.only_flush:
            raise self.error
        return len(text)

    def flush(self):
        if self.only_flush:
            raise self.error

    def fileno(self):
        raise ValueError("no file")


@pytest.mark.parametrize("when", ["help", "command", "exit"])
@pytest.mark.parametrize("error,code", [(BrokenPipeError(errno.EPIPE, "Broken pipe"), 0),
                                        (BrokenPipeError(errno.ESHUTDOWN, "Cannot send after shutdown"), 0),
                                        (OSError(errno.ENOSPC, "No space left on device"), None)],
                         ids=["closed pipe", "shut socket", "disk full"])
def test_only_a_closed_pipe_is_a_quiet_exit(when, error, code, run_cli, monkeypatch):
    """`| head` closing stdout ends the command quietly (exit 0), whether it closes during `--help`, during a
    command's output or before the last flush; any other error writing is not taken for it."""
    from types import SimpleNamespace

    from launcher.cli import app

    monkeypatch.setattr(os, "dup2", lambda *_: None)  # the quiet exit points stdout at /dev/null: not the runner's
    if when == "exit":  # the output went out; the flush at exit is what fails
        stdout = Unwritable(error, only_flush=True)
        monkeypatch.setattr(app, "sys", SimpleNamespace(stdout=stdout, stderr=sys.stderr, exit=sys.exit))
    else:
        monkeypatch.setattr(sys, "stdout", Unwritable(error))
    args = ["--help"] if when == "help" else ["rules", "--output", "json"]
    if code is None:
        with pytest.raises(OSError, match="No space left on device"):
            run_cli(*args)
    else:
        assert run_cli(*args).code == code


def test_the_librarys_warnings_print_once_on_stderr_and_go_no_further(run_cli, monkeypatch):
    """A program that runs `main` with its own root handlers does not get each warning a second time."""
    import logging

    from launcher.cli import present

    monkeypatch.setattr(present, "emit_json", lambda data: logging.getLogger("launcher.x").warning("careful"))
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logging.getLogger().addHandler(handler)
    try:
        r = run_cli("rules", "--output", "json")
    finally:
        logging.getLogger().removeHandler(handler)
    assert (r.code, r.err, seen) == (0, "careful\n", [])


def test_a_usage_error_quoting_a_huge_value_is_cut_to_500_characters(run_cli):
    r = run_cli("plan", str(JOBS / "llama7b.yaml"), "--output", "x" * 5000)
    assert r.code == 2
    prefix, hint = "smp-launch plan: ", " (see `smp-launch plan --help`)\n"
    assert r.err.startswith(prefix + "Invalid value for '--output': 'xxx") and r.err.endswith(hint)
    message = r.err[len(prefix):-len(hint)]
    assert len(message) == 500 and message.endswith("x…")


def test_a_click_error_raised_outside_any_command_is_still_one_line():
    import click

    from launcher.cli.app import _one_line

    assert _one_line(click.UsageError("bad usage")) == "bad usage"
    assert _one_line(click.ClickException("it broke")) == "it broke"


# -- the API is the face ------------------------------------------------------------------------------------

def test_no_internal_module_imports_the_api_and_the_runtime_stands_alone():
    """Two of setup.cfg's import contracts (`make lint` checks them all)."""
    lint = [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--no-cache", "--contract", "api-is-the-face", "--contract", "runtime-stands-alone"]
    out = subprocess.run(lint, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "2 kept, 0 broken" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]


def test_the_cli_marks_a_bad_set_value_with_the_flag(run_cli):
    r = run_cli("plan", str(JOBS / "llama7b.yaml"), "--set", "role=Good", "--set", "training.batch_size=many")
    assert r.code == 2 and r.err.startswith("--set:2:") and "overrides" not in r.err




def test_stop_says_what_it_did_in_the_commands_json(jobs_world, run_cli):
    emulator.add_job(emulator.EmulatedJob("face-stop", training=600), jobs_world)
    r = run_cli("stop", "face-stop", "--yes", "--output", "json")
    assert r.code == 0 and json.loads(r.out) == {
        "job_name": "face-stop", "stopped": True, "status": "Stopping",
        "message": "face-stop is Stopping; SageMaker uploads what the job saved, then marks it Stopped "
                   "(follow with `smp-launch logs face-stop`)"}
    again = json.loads(run_cli("stop", "face-stop", "--yes", "--output", "json").out)
    assert again["stopped"] is False and again["message"] == "face-stop is Stopping; nothing to stop"


def test_schema_takes_output_json_and_an_unwritable_path_is_one_line(run_cli, tmp_path):
    printed = run_cli("schema", "--output", "json")
    assert printed.code == 0 and json.loads(printed.out)["title"] == "smp-launch job spec"
    target = tmp_path / "no-such-folder" / "schema.json"
    r = run_cli("schema", "--write", str(target))
    assert (r.code, r.out) == (2, "") and not target.exists()
    assert r.err.strip().splitlines() == [f"--write {target}: cannot write it (No such file or directory)"]
    deep = tmp_path / ("d" * 250) / "schema.json"  # a path of any length is named cut to 200 characters
    r = run_cli("schema", "--write", str(deep))
    assert r.code == 2 and r.err == f"--write {str(deep)[:199]}…: cannot write it (No such file or directory)\n"


@pytest.mark.parametrize("advisories,errors,shown_", [
    ([], 0, "no advisories"),
    ([{"severity": "warning", "rule": "SMP062", "message": "predicted peak 39.2 of 40 GB"}], 0,
     "warning SMP062 predicted peak 39.2 of 40 GB"),
    ([], 2, "2 errors (on stderr): submit refuses this plan"),  # never "no advisories" beside errors
])
def test_advisories_print_one_line_each_and_none_says_so_only_without_errors(advisories, errors, shown_):
    import io

    from rich.console import Console

    from launcher.cli.present import show_advisories

    buffer = io.StringIO()
    show_advisories(advisories, out=Console(file=buffer, width=200), errors=errors)
    assert buffer.getvalue().strip() == shown_


def test_a_late_horizon_under_ten_seconds_is_refused_before_any_call(run_cli):
    r = run_cli("logs", "some-job", "--late-horizon", "5s")
    assert (r.code, r.out) == (2, "")
    assert r.err.strip() == "--late-horizon '5s': give at least 10s (lines up to 2s late print anyway)"
