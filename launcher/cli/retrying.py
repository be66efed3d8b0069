"""`submit --retry CLASSES --max-attempts N`: submit one spec, wait, and resubmit after a retryable failure."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click


def retry_options(f):
    """`--retry`, `--max-attempts` and `--retry-backoff`, for `submit`."""
    f = click.option("--retry-backoff", type=click.FloatRange(min=0), default=60.0, show_default=True,
                     metavar="SECONDS", help="With --retry: seconds before the second attempt, doubling after each "
                                             "(at most 900).")(f)
    f = click.option("--max-attempts", type=click.IntRange(min=1, max=20), default=3, show_default=True,
                     help="With --retry: attempts in all, the first included.")(f)
    return click.option("--retry", "retry", default=None, metavar="CLASSES",
                        help="Wait for the job and resubmit it when it fails in one of these failure classes "
                             "(comma-separated: capacity, spot, ...); a spot job resumes from its checkpoints.")(f)


def submit_retrying(specs: Sequence[str], overrides: Sequence[str], retry: str, max_attempts: int, backoff: float,
                    *, dry_run: bool, interval: float, skip_role_check: bool, output: str, profile: str | None,
                    region: str | None) -> int:
    """One spec, submitted and waited for; resubmitted while it fails in a retried class. Exit: the last job's
    outcome (0 Completed, 1 Failed, 5 Stopped)."""
    from launcher.api import connect, load_spec
    from launcher.cli.present import emit_json, safe, safe_data
    from launcher.core.errors import UsageError
    from launcher.orchestrate.retry import RetryPolicy, submit_with_retries
    from launcher.submission.create import plan_for

    if dry_run or len(specs) != 1:
        raise UsageError("--retry submits one spec and waits for it: give one spec and no --dry-run")
    policy = RetryPolicy.parse(retry, max_attempts=max_attempts, backoff=backoff)
    loaded = load_spec(specs[0], overrides)
    clients = connect(profile=profile, region=region)
    plan = plan_for(loaded, clients)
    as_json = output == "json"

    def say(kind: str, value: Any) -> None:
        if kind == "submitted":
            for message in value.warnings:
                click.echo(f"warning: {message}", err=True)
            text = f"started {value.job_name} in {value.region}"
        elif kind == "ended":
            failure = value.failure
            text = f"{value.job_name}: {value.status}" + (
                f" [{failure.failure_class}] {failure.remedy}" if failure else "")
        else:
            text = f"retrying in {value:g} s"
        click.echo(safe(text), err=as_json)

    result = submit_with_retries(plan, policy, clients, skip_role_check=skip_role_check, interval=interval,
                                 on_event=say)
    if as_json:
        emit_json(safe_data(result.to_dict()))
    return result.exit_code
