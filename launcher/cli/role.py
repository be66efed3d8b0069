"""`check-role`: can the job's IAM role run it? Read-only (IAM's policy simulator)."""
from __future__ import annotations

import sys

import click

from launcher.cli.options import OUTPUT, SET, SPEC, aws_options, backend_option, templates_option


@click.command("check-role")
@SPEC
@SET
@templates_option
@backend_option
@OUTPUT
@aws_options
def check_role_command(spec: str, overrides: tuple[str, ...], output: str, profile: str | None,
                       region: str | None) -> None:
    """Check that the job's IAM role can run it (read-only); exit 3 when it cannot.

    The verdict (pass, fail or unknown: IAM could not tell) is printed on stdout; unknown exits 0,
    as submit then goes on with a warning.
    """
    from launcher.api import build_plan, check_role, connect, load_spec
    from launcher.cli import present
    from launcher.core.errors import EXIT_OK, EXIT_PREFLIGHT

    plan = build_plan(load_spec(spec, overrides), region=region, profile=profile)
    result = check_role(plan, clients=connect(profile=profile, region=plan.region))
    if output == "json":
        present.emit_json(result.as_dict())
    else:
        present.show_role_check(result)
    sys.exit(EXIT_PREFLIGHT if result.verdict == "fail" else EXIT_OK)


COMMANDS = (check_role_command,)
