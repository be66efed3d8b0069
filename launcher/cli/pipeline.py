"""`pipeline`: one SageMaker Pipeline with a TrainingStep per spec, in order (the only other command that
loads the SageMaker SDK besides submit: its workflow classes build the definition)."""
from __future__ import annotations

import sys

import click

from launcher.cli.options import OUTPUT, SET, aws_options, backend_option, templates_option
from launcher.cli.submit import retry_options, retry_policy


@click.command("pipeline")
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="SPEC...")
@click.option("--name", "name", required=True, metavar="NAME", help="The pipeline's name (created, or updated).")
@click.option("--role", default=None, metavar="ROLE",
              help="Role (name or ARN) the pipeline and its jobs run under (default: the first spec's).")
@click.option("--dry-run", is_flag=True, help="Check and build, then print the definition; write nothing.")
@click.option("--skip-role-check", is_flag=True, help="Do not simulate the role's permissions first.")
@click.option("--start", is_flag=True, help="Start an execution once the pipeline is upserted.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="With --start: a pipeline parameter's value for this execution (repeatable); checked against "
                   "its step's plan first.")
@click.option("--notify", "notify", default=None, metavar="TOPIC_ARN",
              help="An SNS topic that gets each execution's end (default: the first spec's notify.sns).")
@retry_options
@SET
@templates_option
@backend_option
@OUTPUT
@aws_options
def pipeline(specs: tuple[str, ...], name: str, role: str | None, dry_run: bool, skip_role_check: bool,
             start: bool, params: tuple[str, ...], notify: str | None, retry: str | None, max_attempts: int,
             retry_backoff: float,
             overrides: tuple[str, ...], output: str, profile: str | None, region: str | None) -> None:
    """Build a SageMaker Pipeline running the specs' jobs one after another, and create or update it.

    Every spec is loaded, validated and planned first, and checked as submit checks it (advisor
    errors, buckets, the role); then each source tarball not yet in S3 is uploaded and the pipeline
    is upserted. --dry-run prints the pipeline definition (JSON) instead.

    Each step has parameters (instance type and count, max steps, output path, data channels) whose defaults
    are the spec's values; --start starts an execution, --param NAME=VALUE sets one for it. --retry names
    the failure classes each step's retry policy covers (SageMaker can retry capacity, internal_error and
    quota).
    """
    from launcher.api import build_plan, connect, load_spec, upsert_pipeline
    from launcher.cli.present import emit_json, safe_data
    from launcher.core.errors import EXIT_OK, UsageError
    from launcher.core.sanitize import quoted

    values: dict[str, str] = {}
    for item in params:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {quoted(item)}: write NAME=VALUE")
        values[key] = value
    if values and not start:
        raise UsageError("--param sets a value for an execution: add --start")
    if start and dry_run:
        raise UsageError("--start and --dry-run contradict each other: a dry run starts nothing")
    policy = retry_policy(retry, max_attempts, retry_backoff) if retry else None
    plans = [build_plan(load_spec(path, overrides), region=region, profile=profile) for path in specs]
    result = upsert_pipeline(plans, name, role=role, dry_run=dry_run, skip_role_check=skip_role_check,
                             clients=connect(profile=profile, region=plans[0].region), retry=policy,
                             start=start, parameters=values, notify=notify)
    for message in result.warnings:
        click.echo(f"warning: {message}", err=True)
    if output == "json":
        emit_json(safe_data(result.to_dict()))
    elif dry_run:
        emit_json(safe_data(result.definition))
        click.echo(f"dry run: pipeline {result.name} in {result.region}, steps {' -> '.join(result.steps)}; "
                   "nothing was written", err=True)
    else:
        click.echo(f"upserted pipeline {result.name} in {result.region}: {result.arn}")
        click.echo(f"  steps:   {' -> '.join(result.steps)}")
        click.echo(f"  role:    {result.role_arn}")
        for uri in result.uploaded:
            click.echo(f"  source:  {uri} (uploaded)")
        click.echo(f"  params:  {', '.join(p.name for p in result.parameters)}")
        if result.notifications:
            click.echo(f"  notify:  EventBridge rule {', '.join(result.notifications)}")
        if result.execution_arn:
            given = ", ".join(f"{k}={v}" for k, v in result.values.items()) or "the defaults"
            click.echo(f"  started: {result.execution_arn} ({given})")
        else:
            from launcher.cli.invoked import name as prog

            click.echo(f"  start:   {prog()} pipeline ... --name {result.name} --start [--param NAME=VALUE]")
    sys.exit(EXIT_OK)


COMMANDS = (pipeline,)
