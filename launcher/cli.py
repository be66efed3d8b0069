"""The `smp-launch` command line: a thin shell over the library.

Only click is imported at start-up; each command imports what it needs, so `--help`, `validate`,
`plan`, `logs` and `status` never load the SageMaker SDK.
"""
from __future__ import annotations

import sys

import click

from launcher import __version__

OUTPUT = click.option("--output", "output", type=click.Choice(["table", "json"]), default="table",
                      show_default=True, help="table for people, json for pipelines.")
SET = click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE",
                   help="Override a spec value (typed as YAML); repeatable; applied after extends.")


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

    Exit codes: 0 ok; 1 the job failed or a command failed; 2 invalid input; 3 a preflight
    refused; 4 AWS refused or is unreachable; 5 the job was stopped; 130 interrupted.
    """


@cli.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@SET
@OUTPUT
def validate(specs: tuple[str, ...], overrides: tuple[str, ...], output: str) -> None:
    """Check job specs without touching AWS; exit 2 if any is invalid."""
    from launcher.commands import validate_specs

    sys.exit(validate_specs(specs, overrides, output))


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@SET
@OUTPUT
def plan(spec: str, overrides: tuple[str, ...], output: str) -> None:
    """Show everything submit would do, with no AWS call."""
    from launcher.commands import show_plan

    sys.exit(show_plan(spec, overrides, output))


@cli.command("check-role")
@click.argument("spec", type=click.Path(dir_okay=False))
@SET
@click.option("--profile", default=None, help="AWS profile (default: AWS_PROFILE or the default chain).")
@OUTPUT
def check_role(spec: str, overrides: tuple[str, ...], profile: str | None, output: str) -> None:
    """Check that the job's IAM role can run it (read-only); exit 3 when it cannot."""
    from launcher.commands import check_role_command

    sys.exit(check_role_command(spec, overrides, profile, output))


@cli.command()
@click.option("--model", "model", required=True, metavar="PRESET", help="A model preset, e.g. llama2-13b.")
@click.option("--instances", type=click.IntRange(1, 1024), default=None,
              help="Instance count; omit to derive it from --global-batch-tokens.")
@click.option("--seq-length", type=click.IntRange(1), default=4096, show_default=True)
@click.option("--instance-type", default="ml.p4d.24xlarge", show_default=True)
@click.option("--global-batch-tokens", "global_batch", default=None, metavar="N",
              help="Required tokens per step, e.g. 4M (binary: 4M = 4,194,304).")
@click.option("--precision", type=click.Choice(["bf16", "fp16", "fp8"]), default="bf16", show_default=True)
@click.option("--top", type=click.IntRange(1), default=10, show_default=True, help="Rows shown in the table.")
@click.option("--write", "write_to", type=click.Path(dir_okay=False), default=None,
              help="Write a ready job spec for the best configuration.")
@OUTPUT
def advise(model: str, instances: int | None, seq_length: int, instance_type: str, global_batch: str | None,
           precision: str, top: int, write_to: str | None, output: str) -> None:
    """Recommend SMP v2 configurations for a model, ranked as AWS's SMP v2 best practices advise."""
    from launcher.commands import advise_command

    sys.exit(advise_command(model, instances, seq_length, instance_type, global_batch, precision, top,
                            write_to, output))


@cli.command()
@click.option("--output", "output", type=click.Choice(["markdown", "json"]), default="markdown", show_default=True)
def rules(output: str) -> None:
    """List the advisor's rules (ids, severities, sources)."""
    from launcher.output import emit_json
    from launcher.rules.docs import as_json, markdown

    if output == "json":
        emit_json(as_json())
    else:
        sys.stdout.write(markdown())


@cli.command()
@click.option("--write", "write_to", type=click.Path(dir_okay=False), default=None,
              help="Write the schema to this file instead of printing it.")
def schema(write_to: str | None) -> None:
    """Print the job spec's JSON Schema (for editors and CI)."""
    from launcher.spec.schema import schema_text

    text = schema_text()
    if write_to:
        with open(write_to, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def aws_options(f):
    """`--profile` and `--region`, for every command that talks to AWS."""
    f = click.option("--region", default=None, metavar="REGION",
                     help="AWS region (default: AWS_REGION, AWS_DEFAULT_REGION or the profile's).")(f)
    return click.option("--profile", default=None, metavar="NAME", help="AWS profile (default: AWS_PROFILE).")(f)


JOB = click.argument("job", metavar="JOB")


@cli.command()
@JOB
@click.option("--follow/--no-follow", default=True, show_default=True,
              help="Keep printing until the job ends, or print what exists and exit.")
@click.option("--host", "hosts", default=None, metavar="N[,N]", help="Only these hosts (algo-N): 1,3 or 2-4.")
@click.option("--since", default=None, metavar="DURATION", help="Start this far back: 30s, 10m, 1h (default: all).")
@click.option("--grep", default=None, metavar="REGEX", help="Only lines matching this Python regular expression.")
@click.option("--rate", type=click.FloatRange(min=0.1, max=25.0), default=2.0, show_default=True,
              help="At most this many CloudWatch Logs reads a second (the quota is shared by the account).")
@click.option("--interval", type=click.FloatRange(min=0.05), default=5.0, show_default=True,
              help="Seconds between polls.")
@OUTPUT
@aws_options
def logs(job: str, follow: bool, hosts: str | None, since: str | None, grep: str | None, rate: float,
         interval: float, output: str, profile: str | None, region: str | None) -> None:
    """Print a job's logs from all hosts, labelled [algo-N]; JOB may be `latest`.

    Follows until the job ends: exit 0 Completed, 1 Failed, 5 Stopped. Ctrl-C stops following
    (exit 130) and leaves the job running. `--output json` prints JSON lines.
    """
    from launcher.job_commands import logs as run

    sys.exit(run(job, follow, hosts, since, grep, output, rate, interval, profile, region))


@cli.command()
@JOB
@OUTPUT
@aws_options
def status(job: str, output: str, profile: str | None, region: str | None) -> None:
    """A job's status, transitions, instances, image, billable seconds and failure reason.

    Exit 0 while running or Completed, 1 Failed, 5 Stopped.
    """
    from launcher.job_commands import status as run

    sys.exit(run(job, output, profile, region))


@cli.command("list")
@click.option("--running", is_flag=True, help="Only jobs in progress (or stopping).")
@click.option("--name-contains", default=None, metavar="TEXT", help="Only jobs whose name contains TEXT.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="The newest N jobs.")
@OUTPUT
@aws_options
def list_(running: bool, name_contains: str | None, limit: int, output: str, profile: str | None,
          region: str | None) -> None:
    """The jobs smp-launch launched (those carrying its tag), newest first."""
    from launcher.job_commands import list_jobs as run

    sys.exit(run(running, name_contains, limit, output, profile, region))


@cli.command()
@JOB
@click.option("--yes", is_flag=True, help="Do not ask first.")
@OUTPUT
@aws_options
def stop(job: str, yes: bool, output: str, profile: str | None, region: str | None) -> None:
    """Stop a running job (asks first unless --yes); JOB may be `latest`."""
    from launcher.job_commands import stop as run

    sys.exit(run(job, yes, output, profile, region))


@cli.command()
@JOB
@click.option("--since", default="1h", show_default=True, metavar="DURATION", help="How far back: 30m, 1h, 1d.")
@OUTPUT
@aws_options
def metrics(job: str, since: str, output: str, profile: str | None, region: str | None) -> None:
    """Per-host GPU, GPU memory, CPU and memory utilisation as sparklines (per device, 0-100)."""
    from launcher.job_commands import metrics as run

    sys.exit(run(job, since, output, profile, region))


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Write the source dir here (created if needed).")
@SET
@OUTPUT
def render(spec: str, out_dir: str, overrides: tuple[str, ...], output: str) -> None:
    """Write the job's source dir: entry script, helper modules, requirements.txt, distribution.json, plan.json."""
    from launcher.commands import render_spec

    sys.exit(render_spec(spec, overrides, out_dir, output))


@cli.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="SPEC...")
@click.option("--local", is_flag=True, help="Run the rendered script here on CPUs (torchrun, gloo) instead.")
@click.option("--tiny", is_flag=True, help="Local: shrink the model's dimensions, keeping its architecture type.")
@click.option("--nproc", type=click.IntRange(min=1), default=2, show_default=True, help="Local: processes.")
@click.option("--max-steps", type=click.IntRange(min=3), default=None,
              help="Local: training steps (default 10); the run checkpoints part-way and resumes.")
@click.option("--dry-run", is_flag=True, help="Do everything that only reads, then print what would start.")
@click.option("--wait", is_flag=True, help="Follow the job's logs until it ends; exit with its outcome.")
@click.option("--skip-role-check", is_flag=True, help="Do not simulate the role's permissions first.")
@SET
@OUTPUT
@aws_options
def submit(specs: tuple[str, ...], local: bool, tiny: bool, nproc: int, max_steps: int | None, dry_run: bool,
           wait: bool, skip_role_check: bool, overrides: tuple[str, ...], output: str, profile: str | None,
           region: str | None) -> None:
    """Start SageMaker training jobs, or with --local run one job's script on this machine first.

    --local exits with the script's exit code, or 3 when a preflight check fails.
    """
    from launcher import commands

    if local:
        sys.exit(commands.submit_local(specs, overrides, tiny=tiny, nproc=nproc, max_steps=max_steps,
                                       output=output))
    sys.exit(commands.submit_cloud(specs, overrides, dry_run=dry_run, wait=wait, skip_role_check=skip_role_check,
                                   output=output, profile=profile, region=region))


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; turn LauncherErrors into one line per problem on stderr and their exit code."""
    from launcher.errors import EXIT_INTERRUPTED, LauncherError

    try:
        cli.main(args=argv, prog_name="smp-launch", standalone_mode=False)
    except LauncherError as err:
        for line in err.lines():
            click.echo(line, err=True)
        sys.exit(err.exit_code)
    except click.exceptions.Abort:
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as err:
        err.show()
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
