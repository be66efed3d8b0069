"""The `smp-launch` group, its entry point and how errors and closed pipes become exit codes.

Only click is imported at start-up; each command imports what it needs, so `--help`, `validate`,
`plan`, `logs` and `status` never load the SageMaker SDK.
"""
from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

import click

from launcher import __version__
from launcher.cli import calibrate, jobs, pipeline, prices, provenance, role, spec, submit
from launcher.cli import wait as wait_command


class _PipeClosed(Exception):
    """stdout's reader went away; raised past click, whose own EPIPE handling exits 1."""


class _Group(click.Group):
    """Lets a closed stdout (EPIPE) reach `main` whether it happens in a command or in --help."""

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except OSError as exc:
            if _is_closed_pipe(exc):
                raise _PipeClosed from None
            raise

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except OSError as exc:
            if _is_closed_pipe(exc):
                raise _PipeClosed from None
            raise


def _is_closed_pipe(exc: BaseException) -> bool:
    import errno

    return isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="smp-launch")
def cli() -> None:
    """Plan, check and launch SageMaker model parallelism v2 (SMP v2) training jobs.

    Exit codes: 0 ok; 1 the job failed or a command failed; 2 invalid input; 3 the account lacks
    what the job needs (bucket, role or permission, quota, instance type, input data) or a local run's
    check failed; 4 AWS refused a call or is unreachable; 5 the job was stopped; 124 `wait --timeout`
    ran out; 130 interrupted; 143 SIGTERM while submit was creating the job.
    """


for _command in (*spec.COMMANDS, *role.COMMANDS, *submit.COMMANDS, *jobs.COMMANDS, *wait_command.COMMANDS,
                 *provenance.COMMANDS, *pipeline.COMMANDS, *calibrate.COMMANDS, *prices.COMMANDS):
    cli.add_command(_command)


class _Stderr(logging.Handler):
    """Each warning of the library (e.g. "waiting for sagemaker.us-west-2…") as one line on the stderr of the
    moment (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            print(record.getMessage(), file=sys.stderr, flush=True)


@contextlib.contextmanager
def _library_warnings_to_stderr() -> Iterator[None]:
    """While a command runs, the library's warnings print on stderr (and go no further up)."""
    library = logging.getLogger("launcher")
    handler, propagate = _Stderr(logging.WARNING), library.propagate
    library.addHandler(handler)
    library.propagate = False
    try:
        yield
    finally:
        library.removeHandler(handler)
        library.propagate = propagate


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; turn LauncherErrors into one line per problem on stderr and their exit code."""
    with _library_warnings_to_stderr():
        _run(argv)


def _run(argv: list[str] | None) -> None:
    from launcher.cli.invoked import as_run, program_name
    from launcher.cli.options import shell_lines
    from launcher.core.errors import EXIT_INTERRUPTED, LauncherError

    try:
        cli.main(args=argv, prog_name=program_name(argv), standalone_mode=False)
    except LauncherError as err:
        for line in shell_lines(err):
            click.echo(as_run(line), err=True)
        sys.exit(err.exit_code)
    except click.exceptions.Abort:
        sys.exit(EXIT_INTERRUPTED)
    except click.exceptions.NoArgsIsHelpError as err:  # `smp-launch` alone: the help, as before
        err.show()
        sys.exit(err.exit_code)
    except click.ClickException as err:
        click.echo(_one_line(err), err=True)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except _PipeClosed:
        _quiet_broken_pipe()
    except OSError as exc:
        if not _is_closed_pipe(exc):
            raise
        _quiet_broken_pipe()
    except SystemExit as done:
        _flush_or_quiet()
        raise done
    _flush_or_quiet()
    sys.exit(0)


def _one_line(err: click.ClickException) -> str:
    """A usage error as every other error is said: one line (the command, what is wrong, where help is), not
    click's four (usage, a hint, a blank line, the error)."""
    from launcher.core.sanitize import MESSAGE_LIMIT, clean

    ctx = getattr(err, "ctx", None)
    where = f"{ctx.command_path}: " if ctx is not None else ""
    hint = f" (see `{ctx.command_path} --help`)" if ctx is not None and isinstance(err, click.UsageError) else ""
    return f"{clean(where)}{clean(' '.join(err.format_message().split()), MESSAGE_LIMIT)}{clean(hint)}"


def _flush_or_quiet() -> None:
    """Flush stdout now, while a closed pipe can still be caught (at exit Python would print a warning)."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        if not _is_closed_pipe(exc):
            raise
        _quiet_broken_pipe()


def _quiet_broken_pipe() -> None:
    """`smp-launch ... | head` closed our stdout: exit 0 quietly, as awslogs does (whatever command)."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(0)
