"""`check-role`: can the job's IAM role run it? Read-only (IAM's policy simulator)."""
from __future__ import annotations

import sys

import click

from launcher.cli.options import OUTPUT, SET, SPEC, aws_options, templates_option


@click.command("check-role")
@SPEC
@SET
@templates_option
@OUTPUT
@aws_options
def check_role(spec: str, overrides: tuple[str, ...], output: str, profile: str | None, region: str | None) -> None:
    """Check that the job's IAM role can run it (read-only); exit 3 when it cannot.

    The verdict (pass, fail or unknown: IAM could not tell) is printed on stdout; unknown exits 0,
    as submit then goes on with a warning.
    """
    from launcher.api import build_plan, connect, load_spec
    from launcher.cli import present
    from launcher.core.aws import explain
    from launcher.core.errors import EXIT_OK, EXIT_PREFLIGHT, LauncherError
    from launcher.plan.build import require_region, resolve_region
    from launcher.submission.role import FAIL
    from launcher.submission.role import check_role as check

    loaded = load_spec(spec, overrides)
    clients = connect(profile=profile)
    resolved = resolve_region(loaded.spec.cluster.region, clients.env, flag=region, profile=profile)
    plan = build_plan(loaded, region=resolved)
    clients.region = require_region(plan)
    try:
        result = check(plan, clients.iam, clients.sts)
    except LauncherError:
        raise
    except Exception as exc:
        raise explain(exc, "checking the role") from None
    if output == "json":
        present.emit_json(result.as_dict())
    else:
        present.show_role_check(result)
    sys.exit(EXIT_PREFLIGHT if result.verdict == FAIL else EXIT_OK)


COMMANDS = (check_role,)
