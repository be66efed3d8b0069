"""Options several commands share, and the AWS clients of a command that names no spec."""
from __future__ import annotations

import click

OUTPUT = click.option("--output", "output", type=click.Choice(["table", "json"]), default="table",
                      show_default=True, help="table for people, json for pipelines.")
SET = click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE",
                   help="Override a spec value (typed as YAML); repeatable; applied after extends.")
JOB = click.argument("job", metavar="JOB")
SPEC = click.argument("spec", type=click.Path(dir_okay=False))


def aws_options(f):
    """`--profile` and `--region`, for every command that talks to AWS."""
    f = click.option("--region", default=None, metavar="REGION",
                     help="AWS region (default: AWS_REGION, AWS_DEFAULT_REGION or the profile's).")(f)
    return click.option("--profile", default=None, metavar="NAME", help="AWS profile (default: AWS_PROFILE).")(f)


def job_clients(profile: str | None, region: str | None):
    """Clients for a command about jobs already launched: the region from --region, AWS_REGION /
    AWS_DEFAULT_REGION or the profile; there is no spec to take it from, so a missing one says so."""
    import os

    from launcher.api import connect
    from launcher.core.errors import UsageError

    clients = connect(profile=profile, region=region or os.environ.get("AWS_REGION") or None)
    if not clients.region:
        clients.region = clients.session.region_name  # AWS_DEFAULT_REGION or the profile's
    if not clients.region:
        raise UsageError("no AWS region: pass --region, set AWS_REGION (or AWS_DEFAULT_REGION), "
                         "or give your profile a region (`aws configure set region REGION`)")
    return clients
