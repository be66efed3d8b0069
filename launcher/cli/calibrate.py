"""`calibrate`: measure finished jobs' steady speed and keep this account's factor for later plans."""
from __future__ import annotations

import sys

import click

from launcher.cli.options import OUTPUT, aws_options, job_clients


@click.command("calibrate")
@click.argument("jobs", nargs=-1, required=True, metavar="JOB...")
@OUTPUT
@aws_options
def calibrate_jobs(jobs: tuple[str, ...], output: str, profile: str | None, region: str | None) -> None:
    """Measure finished jobs' steady tokens/s (their SMP_PROGRESS lines, warm-up and checkpoint steps left out)
    against the published prediction, and store this account's factor per instance type beside the state:
    later plans on that instance type use it and say so. JOB may be `latest`. Reads only from AWS.
    """
    from launcher.api import calibrate, resolve_job
    from launcher.cli.present import emit_json, safe, show_calibration
    from launcher.core.errors import EXIT_OK

    names = []
    for job in jobs:
        name, job_region = resolve_job(job, region)
        names.append(name)
        region = region or job_region
    result = calibrate(names, clients=job_clients(profile, region))
    if output == "json":
        emit_json(result.to_dict())
    else:
        show_calibration(result)
        click.echo(safe(f"stored in {result.path}"))
    sys.exit(EXIT_OK)


COMMANDS = (calibrate_jobs,)
