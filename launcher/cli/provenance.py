"""`rerun` and `diff`: a job's stored plan (its source tarball's plan.json and spec.json), submitted again
or compared with another's. `diff` never loads the SageMaker SDK; `rerun` does, as submit does."""
from __future__ import annotations

import sys

import click

from launcher.cli.options import JOB, OUTPUT, aws_options, job_clients


@click.command("rerun")
@JOB
@click.option("--dry-run", is_flag=True, help="Do everything that only reads, then print what would start.")
@click.option("--skip-role-check", is_flag=True, help="Do not simulate the role's permissions first.")
@click.option("--resume", is_flag=True,
              help="Keep JOB's checkpoint S3 URI, so the new job carries on from JOB's last checkpoint.")
@OUTPUT
@aws_options
def rerun(job: str, dry_run: bool, skip_role_check: bool, resume: bool, output: str, profile: str | None,
          region: str | None) -> None:
    """Submit the plan stored with JOB again, under a new job name tagged smp-launch:rerun-of=JOB.

    JOB may be `latest`.
    The new job runs JOB's own source tarball and goes through submit's checks (the role, the
    buckets). With --resume it starts from JOB's checkpoints (a job SageMaker stopped at its max_run).
    A job smp-launch did not launch has no stored plan: exit 2.
    """
    from launcher.api import rerun as rerun_job
    from launcher.api import resolve_job
    from launcher.cli.present import emit_json, safe_data
    from launcher.cli.submit import print_started, warn
    from launcher.core.errors import EXIT_OK

    job, region = resolve_job(job, region)
    result = rerun_job(job, dry_run=dry_run, skip_role_check=skip_role_check,
                       clients=job_clients(profile, region), resume=resume)
    for message in result.warnings:
        warn(message)
    if output == "json":
        emit_json(safe_data({**result.to_dict(), "rerun_of": job}))
    else:
        click.echo(f"rerun of {job}:")
        print_started(result, dry_run)
    sys.exit(EXIT_OK)


@click.command("diff")
@click.argument("a", metavar="JOB_A")
@click.argument("b", metavar="JOB_B")
@click.option("--all", "everything", is_flag=True,
              help="Also show keys that always differ (the job name, the spec hash).")
@click.option("--spec", "spec", is_flag=True, help="Compare the stored specs instead of the plans.")
@click.option("--exit-code", is_flag=True, help="Exit 1 when they differ (as `git diff --exit-code`).")
@OUTPUT
@aws_options
def diff(a: str, b: str, everything: bool, spec: bool, exit_code: bool, output: str, profile: str | None,
         region: str | None) -> None:
    """How two jobs' plans differ, key by key (`path: a -> b`; `+`/`-` for keys only one side has).

    Either side may be `latest` or a spec file (.yaml): its plan as it would be built now. Exits 0 whether or
    not they differ, unless --exit-code.
    """
    from launcher.api import connect, is_spec_file, resolve_job
    from launcher.api import diff as diff_jobs
    from launcher.cli.present import emit_json, safe_data
    from launcher.core.errors import EXIT_JOB_FAILED, EXIT_OK

    refs = []
    for ref in (a, b):
        if not is_spec_file(ref):
            ref, region = resolve_job(ref, region)
        refs.append(ref)
    a, b = refs
    # Two spec files need no AWS: their plans take a region from the specs or the environment.
    clients = connect(profile=profile, region=region) if all(map(is_spec_file, refs)) else job_clients(profile, region)
    changes = diff_jobs(a, b, everything=everything, spec=spec, clients=clients)
    if output == "json":
        emit_json(safe_data([c.to_dict() for c in changes]))
    elif not changes:
        click.echo(f"no difference between the {'specs' if spec else 'plans'} of {a} and {b}")
    else:
        from launcher.cli.present import safe

        click.echo(f"--- {safe(a, 200)}\n+++ {safe(b, 200)}")
        for change in changes:
            click.echo(change.line())
    sys.exit(EXIT_JOB_FAILED if exit_code and changes else EXIT_OK)


COMMANDS = (rerun, diff)
