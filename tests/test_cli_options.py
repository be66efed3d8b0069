"""Every command's options as a user meets them, checked over the whole command tree so a new command gets
the same checks: `--help` shows the default a command really uses, a flag works in flag form and is off
unless given, and a path option refuses a path of the wrong kind with one line and exit 2 before anything
runs."""
import re

import click
import pytest

from launcher.cli import cli
from tests.conftest import JOBS


def commands() -> list[tuple[str, click.Command]]:
    return sorted(cli.commands.items())


def required_args(command: click.Command) -> list[str]:
    """The least a command line needs to parse: a value for each required argument and option."""
    out: list[str] = []
    for p in command.params:
        if isinstance(p, click.Argument) and p.required:
            out.append(str(JOBS / "llama7b.yaml") if isinstance(p.type, click.Path) else "some-job")
        elif isinstance(p, click.Option) and p.required:
            out += [p.opts[0], "x"]
    return out


def parsed(name: str, command: click.Command, args: list[str]) -> dict:
    """The values the command would be called with for `args` (click parses; the command does not run)."""
    with command.make_context(name, list(args)) as ctx:  # click consumes the list it parses
        return ctx.params


def help_entries(text: str) -> dict[str, str]:
    """`--help`'s Options section as {first flag: its help text, whitespace joined}."""
    entries: dict[str, str] = {}
    current = None
    for line in text.split("Options:", 1)[1].splitlines():
        m = re.match(r"^  (-[^ ,/]+)", line)
        if m:
            current = m.group(1)
            entries[current] = line
        elif current:
            entries[current] += " " + line
    return {k: " ".join(v.split()) for k, v in entries.items()}


def shown_default(option: click.Option, value) -> str:
    if option.is_flag and option.secondary_opts:  # --follow/--no-follow shows the name of the one in force
        return (option.opts if value else option.secondary_opts)[0].lstrip("-")
    return str(value)


def option(name: str, flag: str) -> click.Option:
    (found,) = [p for p in cli.commands[name].params if isinstance(p, click.Option) and flag in p.opts]
    return found


# The defaults --help shows, as docs/commands.md promises them (every other option says its default in words).
OUTPUT = {"--output": "table"}
DEFAULTS = {
    "advise": {"--seq-length": "4096", "--instance-type": "ml.p4d.24xlarge", "--precision": "bf16", "--top": "10",
               "--by": "time", **OUTPUT},
    "calibrate": OUTPUT, "check-role": OUTPUT, "diff": OUTPUT, "plan": OUTPUT, "prices": OUTPUT, "render": OUTPUT,
    "rerun": OUTPUT, "status": OUTPUT, "stop": OUTPUT, "validate": OUTPUT,
    "list": {"--limit": "50", **OUTPUT},
    "logs": {"--follow": "follow", "--rate": "2.0", "--interval": "5.0", "--late-horizon": "5m", **OUTPUT},
    "metrics": {"--since": "1h", **OUTPUT},
    "pipeline": {"--max-attempts": "3", "--retry-backoff": "60.0", **OUTPUT},
    "rules": {"--output": "markdown"},
    "schema": {"--output": "json"},
    "submit": {"--nproc": "2", "--interval": "5.0", "--max-attempts": "3", "--retry-backoff": "60.0", "--by": "time",
               "--resume": "resume", **OUTPUT},
    "wait": {"--interval": "5.0", **OUTPUT},
}
# The on/off flags, each off unless given (but --follow and --resume, on unless --no-follow, --no-resume).
FLAGS = {
    "advise": ["--force"], "schema": ["--force"],
    "diff": ["--all", "--spec", "--exit-code"], "list": ["--running"], "logs": ["--follow"],
    "pipeline": ["--dry-run", "--skip-role-check", "--start"], "prices": ["--refresh"],
    "rerun": ["--dry-run", "--skip-role-check", "--resume"], "stop": ["--yes", "--foreign"],
    "submit": ["--local", "--tiny", "--dry-run", "--wait", "--skip-role-check", "--strict", "--resume"],
}
PLANNING = ("check-role", "pipeline", "plan", "render", "submit", "validate")  # the commands that take a spec


def test_the_command_tree_is_the_packages_cli_attribute():
    """`launcher.cli.cli` is the click group (for click's own tools); it loads on first use."""
    import launcher.cli

    assert isinstance(launcher.cli.cli, click.Group) and {"submit", "plan", "logs"} <= set(cli.commands)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        launcher.cli.nothing  # noqa: B018


def test_the_tables_below_cover_every_option_that_shows_a_default_and_every_flag():
    shows = {n: {p.opts[0] for p in c.params if isinstance(p, click.Option) and p.show_default} for n, c in commands()}
    flags = {n: [p.opts[0] for p in c.params if isinstance(p, click.Option) and p.is_flag] for n, c in commands()}
    assert {n: set(d) for n, d in DEFAULTS.items()} == {n: s for n, s in shows.items() if s}
    assert FLAGS == {n: f for n, f in flags.items() if f}


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_help_shows_the_default_each_option_really_takes(name, run_cli):
    command = cli.commands[name]
    r = run_cli(name, "--help")
    assert r.code == 0, r.err
    entries = help_entries(r.out)
    used = parsed(name, command, required_args(command))
    for flag, promised in DEFAULTS[name].items():
        assert re.search(rf"\[default: {re.escape(promised)}[;\]]", entries[flag]), (flag, entries[flag])
        assert shown_default(option(name, flag), used[option(name, flag).name]) == promised, flag


FLAG_CASES = [(n, f) for n, fs in sorted(FLAGS.items()) for f in fs]


@pytest.mark.parametrize("name,flag", FLAG_CASES, ids=[f"{n} {f}" for n, f in FLAG_CASES])
def test_a_flag_works_in_flag_form_and_is_off_unless_given(name, flag):
    command, opt = cli.commands[name], option(name, flag)
    base = required_args(command)
    if opt.secondary_opts:  # --follow / --no-follow: on unless turned off
        assert parsed(name, command, base)[opt.name] is True
        assert parsed(name, command, [*base, opt.secondary_opts[0]])[opt.name] is False
        assert parsed(name, command, [*base, flag])[opt.name] is True
    else:
        assert parsed(name, command, base)[opt.name] is False
        assert parsed(name, command, [*base, flag])[opt.name] is True  # last on the line: it takes no value


def path_line(name: str, param: click.Parameter, path: str) -> list[str]:
    """A command line with `path` given to `param`, everything else valid."""
    command = cli.commands[name]
    args = [a if a != str(JOBS / "llama7b.yaml") or isinstance(param, click.Option) else path
            for a in required_args(command)]
    if isinstance(param, click.Option):
        args = [a for i, a in enumerate(args) if not (i > 0 and args[i - 1] in param.opts)]
        args = [a for a in args if a not in param.opts] + [param.opts[0], path]
    return [name, *args]


def param(name: str, flag: str) -> click.Parameter:
    (found,) = [p for p in cli.commands[name].params if flag in p.opts]
    return found


MUST_EXIST = [(n, param(n, "--templates")) for n in PLANNING]


@pytest.mark.parametrize("name,param", MUST_EXIST, ids=[f"{n} {p.name}" for n, p in MUST_EXIST])
def test_a_path_that_must_exist_is_refused_when_missing(name, param, run_cli, tmp_path):
    missing = str(tmp_path / "no-such-dir")
    r = run_cli(*path_line(name, param, missing))
    assert (r.code, r.out) == (2, ""), r.err
    (line,) = r.err.strip().splitlines()
    assert line.startswith(f"smp-launch {name}: Invalid value for '{param.opts[0]}'") and missing in line
    assert "does not exist" in line, line


NO_FILE = [*MUST_EXIST, ("render", param("render", "--out"))]
NO_DIR = [(n, param(n, "specs" if n in ("pipeline", "submit", "validate") else "spec")) for n in PLANNING] + [
    (n, param(n, "--write")) for n in ("advise", "schema")]


@pytest.mark.parametrize("name,param", NO_FILE, ids=[f"{n} {p.name}" for n, p in NO_FILE])
def test_a_folder_option_refuses_a_file(name, param, run_cli, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    r = run_cli(*path_line(name, param, str(a_file)))
    assert (r.code, r.out) == (2, ""), r.err
    (line,) = r.err.strip().splitlines()
    assert f"Invalid value for '{param.opts[0]}'" in line and "is a file" in line, line


@pytest.mark.parametrize("name,param", NO_DIR, ids=[f"{n} {p.name}" for n, p in NO_DIR])
def test_a_file_argument_refuses_a_folder(name, param, run_cli, tmp_path):
    r = run_cli(*path_line(name, param, str(tmp_path)))
    assert (r.code, r.out) == (2, ""), r.err
    (line,) = r.err.strip().splitlines()
    shown = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
    assert f"Invalid value for '{shown}" in line and "is a directory" in line, line


# What each command cannot do without, as its usage line names it.
NEEDS = {"calibrate": "argument 'JOB...'", "check-role": "argument 'SPEC'", "diff": "argument 'JOB_A'",
         "logs": "argument 'JOB...'", "metrics": "argument 'JOB'", "pipeline": "argument 'SPEC...'",
         "plan": "argument 'SPEC'", "render": "argument 'SPEC'", "rerun": "argument 'JOB'", "status": "argument 'JOB'",
         "stop": "argument 'JOB'", "submit": "argument 'SPEC...'", "validate": "argument 'SPECS...'",
         "wait": "argument 'JOB...'", "advise": "option '--model'"}
NEEDS_WITH_A_SPEC = {"pipeline": "option '--name'", "render": "option '--out'"}


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_a_command_missing_what_it_needs_says_so_in_one_line_with_exit_2(name, run_cli):
    cases = [([name], NEEDS[name])]
    if name in NEEDS_WITH_A_SPEC:
        cases.append(([name, str(JOBS / "llama7b.yaml")], NEEDS_WITH_A_SPEC[name]))
    for args, missing in cases:
        r = run_cli(*args)
        assert (r.code, r.out) == (2, ""), (args, r.err)
        assert r.err == f"smp-launch {name}: Missing {missing}. (see `smp-launch {name} --help`)\n", args


@pytest.mark.parametrize("name", ["plan", "submit", "validate"])
def test_max_cost_takes_any_positive_amount_and_refuses_zero(name, run_cli):
    command = cli.commands[name]
    spec = str(JOBS / "llama7b.yaml")
    assert parsed(name, command, [spec, "--max-cost", "0.5"])["max_cost"] == 0.5
    r = run_cli(name, spec, "--max-cost", "0")
    assert (r.code, r.out) == (2, "")
    assert r.err.startswith(f"smp-launch {name}: Invalid value for '--max-cost': 0.0 is not in the range x>0."), r.err


def test_help_stops_at_100_columns_however_wide_the_terminal(run_cli):
    """A wide terminal still gets help paragraphs a person can read: at most 100 columns of text."""
    narrow = run_cli("submit", "--help", env={"COLUMNS": "100"}).out
    wide = run_cli("submit", "--help", env={"COLUMNS": "240"}).out
    assert wide == narrow and max(len(line) for line in wide.splitlines()) <= 100
    assert run_cli("submit", "--help", env={"COLUMNS": "90"}).out != narrow, "the terminal's width is honoured below"


def test_a_short_flag_means_one_thing_on_every_command():
    """No command has a short flag of its own (`render -o` was an output folder where `-o` reads as --output):
    -h, help, is the only one, on every command."""
    shorts = {(name, o) for name, command in cli.commands.items() for p in command.params
              for o in (*p.opts, *p.secondary_opts) if o.startswith("-") and not o.startswith("--")}
    assert shorts == set()
    assert cli.context_settings["help_option_names"] == ["-h", "--help"]


def test_hints_name_the_command_as_it_was_run(tmp_path, monkeypatch):
    """`smp-launch` where PATH finds this very program, else the path typed, else `python -m launcher`."""
    from launcher.cli import invoked

    script = tmp_path / "bin" / "smp-launch"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert invoked.from_argv(".venv/bin/smp-launch") == ".venv/bin/smp-launch"
    monkeypatch.setenv("PATH", str(script.parent))
    assert invoked.from_argv(str(script)) == "smp-launch"
    assert invoked.from_argv(".venv/bin/smp-launch") == ".venv/bin/smp-launch"  # another file of that name
    assert invoked.from_argv("/x/launcher/__main__.py", [".venv/bin/python", "-m", "launcher"]) == \
        ".venv/bin/python -m launcher"
    try:
        invoked.remember(".venv/bin/smp-launch")
        assert invoked.as_run("run `smp-launch logs JOB` again") == "run `.venv/bin/smp-launch logs JOB` again"
    finally:
        invoked.remember(None)
    assert invoked.as_run("run `smp-launch logs JOB` again") == "run `smp-launch logs JOB` again"


def test_every_command_that_polls_a_job_polls_as_often_by_default():
    """`wait`, `logs` and `submit` (--wait, a sweep's queue) share one poll interval, the API's too."""
    import inspect

    import launcher

    defaults = {name: next(p.default for p in cli.commands[name].params if p.name == "interval")
                for name in ("wait", "logs", "submit")}
    assert set(defaults.values()) == {launcher.POLL_S}, defaults
    for function in (launcher.wait, launcher.submit, launcher.submit_many, launcher.follow):
        assert inspect.signature(function).parameters["interval"].default == launcher.POLL_S, function
