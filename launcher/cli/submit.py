"""`submit`: start SageMaker training jobs (optionally follow one), or run one job's script here on CPUs."""
from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from launcher.cli.options import OUTPUT, SET, aws_options
from launcher.cli.retrying import retry_options, submit_retrying


def start_job(loaded: Any, clients: Any, *, dry_run: bool, skip_role_check: bool) -> Any:
    """The one call into the submit code (it loads the SageMaker SDK): the region is decided once
    (--region, the spec, the environment, the profile), then the API submits the plan built for it."""
    from launcher.api import submit
    from launcher.submission import plan_for

    return submit(plan_for(loaded, clients), dry_run=dry_run, skip_role_check=skip_role_check, clients=clients)


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


def print_started(result: Any, dry_run: bool) -> None:
    if dry_run:
        click.echo(f"dry run: would start {result.job_name} in {result.region} "
                   f"(source {result.source_uri}); nothing was written")
    else:
        click.echo(f"started {result.job_name} in {result.region}")
        click.echo(f"  source:  {result.source_uri} ({'uploaded' if result.uploaded else 'already uploaded'})")
        click.echo(f"  console: {result.console_url}")
        click.echo(f"  follow:  smp-launch logs {result.job_name}")
    if result.role_check:
        role = result.role_check.as_dict()  # sanitised
        click.echo(f"  role:    {role['role_arn'] or role['role']}: {role['verdict']}")
    click.echo(f"  AWS calls ({len(result.aws_calls)}): {', '.join(result.aws_calls)}")
    for note in result.notes:
        warn(note)


def submit_to_sagemaker(specs: Sequence[str], overrides: Sequence[str], *, dry_run: bool, wait: bool,
                        interval: float, skip_role_check: bool, output: str, profile: str | None,
                        region: str | None) -> int:
    """Submit each spec (all are loaded and validated first, so a bad one stops them all); with `wait`,
    follow the one job to its end and exit with its outcome."""
    from launcher.api import connect, load_spec
    from launcher.cli.present import emit_json, safe_data
    from launcher.errors import EXIT_OK, LauncherError, UsageError

    if wait and (dry_run or len(specs) != 1):
        raise UsageError("--wait follows one job: give one spec and no --dry-run")
    loaded = [load_spec(path, overrides) for path in specs]
    results = []
    for spec in loaded:
        clients = connect(profile=profile, region=region)  # submit resolves flag > spec > env > profile
        try:
            result = start_job(spec, clients, dry_run=dry_run, skip_role_check=skip_role_check)
        except LauncherError:
            if output == "json" and results:  # the jobs already started must still be reported
                emit_json([safe_data(r.to_dict()) for r in results])
            raise
        for message in result.warnings:
            warn(message)
        results.append(result)
        if output != "json":
            print_started(result, dry_run)
    if output == "json":
        data = [safe_data(r.to_dict()) for r in results]
        emit_json(data[0] if len(data) == 1 else data)
        for note in (n for r in results for n in r.notes):
            warn(note)
    if wait:
        from launcher.tail import follow

        clients = connect(profile=profile, region=results[0].region)
        return follow(results[0].job_name, clients, as_json=output == "json", interval=interval).exit_code
    return EXIT_OK


def run_here(specs: Sequence[str], overrides: Sequence[str], *, tiny: bool, nproc: int, max_steps: int | None,
             output: str) -> int:
    """The local CPU run of one spec; in json mode the script's lines go to stderr and the report to stdout."""
    from launcher.cli.present import emit_json
    from launcher.errors import UsageError
    from launcher.local_run import changes_summary, run_local

    if len(specs) != 1:
        raise UsageError("--local runs one spec at a time")
    as_json = output == "json"
    result = run_local(specs[0], overrides, tiny=tiny, nproc=nproc, max_steps=max_steps,
                       echo=lambda line: click.echo(line, err=as_json))
    if as_json:
        emit_json(result.as_dict())
        return result.exit_code
    click.echo(f"\nLocal run of {result.spec_file}: {result.nproc} processes, CPU, gloo"
               f"{', tiny model' if result.tiny else ''}")
    if result.local_changes:
        click.echo("  changed for this machine: " + changes_summary(result.local_changes))
    for note in result.notes:
        click.echo(f"  note: {note}")
    for check in result.checks:
        verdict = {True: "PASS", False: "FAIL", None: "n/a "}[check.ok]
        click.echo(f"  {verdict} {check.name}: {check.detail}")
    for item in result.not_exercised:
        click.echo(f"  NOT EXERCISED {item['feature']}: {item['reason']}")
    click.echo("  wall time: " + ", ".join(f"run {i} {r.wall_s:.1f} s (exit {r.exit_code})"
                                          for i, r in enumerate(result.runs, 1)))
    return result.exit_code


@click.command("submit")
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="SPEC...")
@click.option("--local", is_flag=True, help="Run the rendered script here on CPUs (torchrun, gloo) instead.")
@click.option("--tiny", is_flag=True, help="Local: shrink the model's dimensions, keeping its architecture type.")
@click.option("--nproc", type=click.IntRange(min=1), default=2, show_default=True, help="Local: processes.")
@click.option("--max-steps", type=click.IntRange(min=3), default=None,
              help="Local: training steps (default 10); the run checkpoints part-way and resumes.")
@click.option("--dry-run", is_flag=True, help="Do everything that only reads, then print what would start.")
@click.option("--wait", is_flag=True, help="Follow the job's logs until it ends; exit with its outcome.")
@click.option("--interval", type=click.FloatRange(min=0.05), default=5.0, show_default=True,
              help="With --wait: seconds between polls (as `logs --interval`).")
@click.option("--skip-role-check", is_flag=True, help="Do not simulate the role's permissions first.")
@retry_options
@SET
@OUTPUT
@aws_options
def submit_jobs(specs: tuple[str, ...], local: bool, tiny: bool, nproc: int, max_steps: int | None, dry_run: bool,
                wait: bool, interval: float, skip_role_check: bool, retry: str | None, max_attempts: int,
                retry_backoff: float, overrides: tuple[str, ...], output: str, profile: str | None,
                region: str | None) -> None:
    """Start SageMaker training jobs, or with --local run one job's script on this machine first.

    --local exits with the script's exit code, or 3 when one of its checks fails.
    """
    if local:
        sys.exit(run_here(specs, overrides, tiny=tiny, nproc=nproc, max_steps=max_steps, output=output))
    # --retry (helper 13b): wait for the job, resubmit it after a retryable failure (launcher/cli/retrying.py).
    if retry:
        sys.exit(submit_retrying(specs, overrides, retry, max_attempts, retry_backoff, dry_run=dry_run,
                                 interval=interval, skip_role_check=skip_role_check, output=output,
                                 profile=profile, region=region))
    sys.exit(submit_to_sagemaker(specs, overrides, dry_run=dry_run, wait=wait, interval=interval,
                                 skip_role_check=skip_role_check, output=output, profile=profile, region=region))


COMMANDS = (submit_jobs,)
