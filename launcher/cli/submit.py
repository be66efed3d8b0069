"""`submit`: start SageMaker training jobs (optionally follow one), or run one job's script here on CPUs."""
from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from launcher.cli.options import OUTPUT, SET, aws_options, templates_option
from launcher.cli.retrying import retry_options, submit_retrying


def start_job(loaded: Any, clients: Any, *, dry_run: bool, skip_role_check: bool) -> Any:
    """The one call into the submit code (it loads the SageMaker SDK): the region is decided once
    (--region, the spec, the environment, the profile), then the API submits the plan built for it."""
    from launcher.api import submit
    from launcher.submission.create import plan_for

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
    from launcher.core.errors import EXIT_OK, LauncherError, UsageError

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
        from launcher.jobs.tail import Polling, follow

        clients = connect(profile=profile, region=results[0].region)
        return follow(results[0].job_name, clients, as_json=output == "json",
                      polling=Polling(interval=interval)).exit_code
    return EXIT_OK


def _overrides_text(candidate: Any, many_specs: bool) -> str:
    parts = [f"{key}={value}" for key, value in candidate.overrides.items()]
    if many_specs or not parts:
        from pathlib import Path

        parts.insert(0, Path(candidate.spec_file).name)
    return " ".join(parts)


def _short(reason: str, limit: int = 90) -> str:
    """A reason without its position (the full line is on stderr), cut for a table cell."""
    parts = reason.split(": ", 2)
    text = parts[-1] if len(parts) == 3 else reason
    return text if len(text) <= limit else text[:limit - 3] + "..."


def show_sweep(candidates: Sequence[Any], runs: dict[int, Any], many_specs: bool, title: str) -> None:
    """The plans, ranked: what each sweeps, its memory and tokens per step, its job, or why it was refused."""
    from launcher.cli.present import STATUS_STYLES, _table, _text, console, show

    t = _table("#", "plan", "status", "GB/GPU", "headroom GB", "tokens/step", "job", "reason", title=title,
               right=("#", "GB/GPU", "headroom GB", "tokens/step"))
    for c in candidates:
        mem = c.plan.memory if c.plan else None
        run = runs.get(c.index)
        job = run.job_name if run is not None else (c.plan.job_name if c.ok else None)
        state = c.status if run is None or c.status != "ok" else run.state
        if run is not None and run.status is not None:
            state = run.status.status
        if c.reasons:
            reason = _short(c.reasons[0]) + (f" (+{len(c.reasons) - 1} more)" if len(c.reasons) > 1 else "")
        else:
            reason = _short(str(run.error)) if run is not None and run.error else ""
        style = "bold red" if not c.ok else STATUS_STYLES.get(state, "")
        t.add_row(str(c.rank) if c.rank else "-", _text(_overrides_text(c, many_specs)), _text(state, style),
                  f"{mem.per_gpu_gb:.1f}" if mem else "-", f"{c.headroom_gb:.1f}" if c.headroom_gb is not None else "-",
                  f"{c.tokens_per_step:,}" if c.tokens_per_step else "-", _text(job), _text(reason))
    show(console(), t)


def submit_many_plans(specs: Sequence[str], overrides: Sequence[str], sweeps: Sequence[str], *, dry_run: bool,
                      wait: bool, interval: float, max_concurrent: int | None, strict: bool, skip_role_check: bool,
                      output: str, profile: str | None, region: str | None, retry: Any = None) -> int:
    """Plan every spec x sweep value first; refuse what cannot work; submit the rest, best first, at most
    `max_concurrent` running. Exit 2 when nothing could start (all refused, or --strict and any refused).
    With a `retry` policy (launcher.orchestrate.retry.RetryPolicy), a job failing in a retried class is resubmitted."""
    from launcher.api import connect, plan_sweep, submit_many
    from launcher.cli.present import emit_json, safe, safe_data
    from launcher.core.errors import EXIT_INVALID
    from launcher.orchestrate.queue import worst_exit_code
    from launcher.plan.sweep import warm_pool_notes

    as_json = output == "json"
    candidates = plan_sweep(specs, overrides, sweeps, region=region)
    many_specs = len(set(specs)) > 1
    ok = [c for c in candidates if c.ok]
    refused = [c for c in candidates if not c.ok]
    for c in refused:
        for reason in c.reasons:
            click.echo(f"{reason} [refused: {_overrides_text(c, many_specs)}]", err=True)
    blocked = not ok or (strict and refused)
    if not as_json:
        what = "would start" if dry_run else "to start"
        show_sweep(candidates, {}, many_specs,
                   f"{len(candidates)} plans: {len(ok)} {what}, {len(refused)} refused; ranked: fits, then most "
                   f"tokens per step, then most memory headroom")
    if blocked:
        why = "every plan was refused" if not ok else f"--strict: {len(refused)} of {len(candidates)} refused"
        if as_json:
            emit_json([safe_data({**c.to_dict(), "state": "not_started"}) for c in candidates])
        click.echo(f"nothing was submitted: {why}", err=True)
        return EXIT_INVALID
    for note in warm_pool_notes([c.plan for c in ok], max_concurrent):
        warn(note)

    def clients_for(plan_region: str) -> Any:
        return connect(profile=profile, region=plan_region)

    def on_event(event: Any) -> None:
        if as_json:
            return
        if event.kind == "started":
            click.echo(safe(f"started {event.job_name} ({event.running} running)"))
        elif event.kind == "ended":
            click.echo(safe(f"{event.job_name} {event.status.status} ({event.running} running)"))
        elif event.kind == "resubmit":
            click.echo(safe(f"resubmitting as {event.job_name}"))

    from launcher.orchestrate.retry import retrying

    runs = submit_many([c.plan for c in ok], max_concurrent=max_concurrent, dry_run=dry_run, wait=wait,
                       interval=interval, skip_role_check=skip_role_check, clients=clients_for, on_event=on_event,
                       on_failure=retrying(retry) if retry else None)
    by_index = {c.index: run for c, run in zip(ok, runs, strict=True)}
    for run in runs:
        for message in (m for s in run.submissions for m in (*s.warnings, *s.notes)):
            warn(message)
    errors = [run.error for run in runs if run.error is not None]
    for err in dict.fromkeys(errors):  # an interrupt while waiting is one error shared by the plans it stopped
        for line in err.lines():
            click.echo(safe(line), err=True)
    if as_json:
        out = []
        for c in candidates:
            run = by_index.get(c.index)
            out.append(safe_data({**c.to_dict(), **(run.to_dict() if run else {"state": "not_started"})}))
        emit_json(out)
    elif dry_run:
        checked = sum(run.state == "dry_run" for run in runs)
        click.echo(f"dry run: {checked} of {len(ok)} plans passed the account checks (buckets, role); "
                   "nothing was written")
    else:
        show_sweep(candidates, by_index, many_specs, "jobs")
    return worst_exit_code(runs)


def run_here(specs: Sequence[str], overrides: Sequence[str], *, tiny: bool, nproc: int, max_steps: int | None,
             output: str) -> int:
    """The local CPU run of one spec; in json mode the script's lines go to stderr and the report to stdout."""
    from launcher.cli.present import emit_json
    from launcher.core.errors import UsageError
    from launcher.local.run import changes_summary, run_local

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
@click.option("--wait", is_flag=True,
              help="Follow the job's logs until it ends (several plans: wait for every job); exit with its outcome.")
@click.option("--interval", type=click.FloatRange(min=0.05), default=5.0, show_default=True,
              help="With --wait or --max-concurrent: seconds between polls (as `logs --interval`).")
@click.option("--skip-role-check", is_flag=True, help="Do not simulate the role's permissions first.")
@retry_options
@click.option("--sweep", "sweeps", multiple=True, metavar="KEY.PATH=V1,V2",
              help="Submit one plan per value (typed as YAML, like --set); several --sweep: every combination.")
@click.option("--max-concurrent", type=click.IntRange(min=1), default=None,
              help="Many plans: at most N jobs running; the next starts when one ends (polled every --interval).")
@click.option("--strict", is_flag=True, help="Many plans: submit nothing if any plan is refused.")
@SET
@templates_option
@OUTPUT
@aws_options
def submit_jobs(specs: tuple[str, ...], local: bool, tiny: bool, nproc: int, max_steps: int | None, dry_run: bool,
                wait: bool, interval: float, skip_role_check: bool, retry: str | None, max_attempts: int,
                retry_backoff: float, sweeps: tuple[str, ...], max_concurrent: int | None, strict: bool,
                overrides: tuple[str, ...], output: str, profile: str | None, region: str | None) -> None:
    """Start SageMaker training jobs, or with --local run one job's script on this machine first.

    --local exits with the script's exit code, or 3 when one of its checks fails. With several specs or
    --sweep, every plan is checked before any job starts: refused plans are listed (exit 2 only when
    nothing could start, or with --strict), the rest start best first; --wait waits for them all.
    """
    if local:
        if sweeps or max_concurrent or strict:
            from launcher.core.errors import UsageError

            raise UsageError("--local runs one spec here; --sweep, --max-concurrent and --strict are for "
                             "SageMaker jobs")
        sys.exit(run_here(specs, overrides, tiny=tiny, nproc=nproc, max_steps=max_steps, output=output))
    if len(specs) > 1 or sweeps or max_concurrent or strict:
        from launcher.orchestrate.retry import RetryPolicy

        policy = RetryPolicy.parse(retry, max_attempts=max_attempts, backoff=retry_backoff) if retry else None
        sys.exit(submit_many_plans(specs, overrides, sweeps, dry_run=dry_run, wait=wait, interval=interval,
                                   max_concurrent=max_concurrent, strict=strict, skip_role_check=skip_role_check,
                                   output=output, profile=profile, region=region, retry=policy))
    # --retry: wait for the job, resubmit it after a retryable failure (launcher/cli/retrying.py).
    if retry:
        sys.exit(submit_retrying(specs, overrides, retry, max_attempts, retry_backoff, dry_run=dry_run,
                                 interval=interval, skip_role_check=skip_role_check, output=output,
                                 profile=profile, region=region))
    sys.exit(submit_to_sagemaker(specs, overrides, dry_run=dry_run, wait=wait, interval=interval,
                                 skip_role_check=skip_role_check, output=output, profile=profile, region=region))


COMMANDS = (submit_jobs,)
