"""`submit`: start SageMaker training jobs (optionally follow one), or run one job's script here on CPUs."""
from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from launcher.api import POLL_S
from launcher.cli.options import OUTPUT, SET, aws_options, backend_option, max_cost_option, templates_option


def retry_options(f: Any) -> Any:
    """`--retry`, `--max-attempts` and `--retry-backoff`, for `submit`."""
    f = click.option("--retry-backoff", type=click.FloatRange(min=0), default=60.0, show_default=True,
                     metavar="SECONDS", help="With --retry: seconds before the second attempt, doubling after each "
                                             "(at most 900).")(f)
    f = click.option("--max-attempts", type=click.IntRange(min=1, max=20), default=3, show_default=True,
                     help="With --retry: attempts in all, the first included.")(f)
    return click.option("--retry", "retry", default=None, metavar="CLASSES",
                        help="Wait for the job and resubmit it when it fails in one of these failure classes or "
                             "exit codes (comma-separated: any class, e.g. capacity, spot, internal_error, "
                             "hardware; 'default' for those four; exit:CODE, e.g. exit:1,exit:139); it resumes "
                             "from its checkpoints.")(f)


def retry_policy(retry: str | None, max_attempts: int, backoff: float) -> Any:
    """The RetryPolicy `--retry CLASSES` asks for (None without it); a bad class is named with its flag."""
    if not retry:
        return None
    from launcher import RetryPolicy
    from launcher.core.errors import UsageError
    from launcher.core.sanitize import quoted

    try:
        return RetryPolicy.parse(retry, max_attempts=max_attempts, backoff=backoff)
    except UsageError as err:
        raise UsageError(f"--retry {quoted(retry)}: {err}") from None


def queue_options(f: Any) -> Any:
    """`--queue`, `--priority` and `--share`, for `submit`: hand the jobs to an AWS Batch queue."""
    f = click.option("--share", "share", default=None, metavar="ID",
                     help="With a queue: the fair-share identifier (a queue with a scheduling policy needs one).")(f)
    f = click.option("--priority", type=click.IntRange(min=0, max=9999), default=None,
                     help="With a queue: the scheduling priority, 0-9999 (higher first on a fair-share queue).")(f)
    return click.option("--queue", "queue", default=None, metavar="NAME",
                        help="Hand the jobs to this AWS Batch job queue (type SAGEMAKER_TRAINING; as --set "
                             "cluster.queue=NAME): Batch starts them as its capacity frees and retries them "
                             "on AWS (--retry), with no process of yours running.")(f)


def with_queue(overrides: Sequence[str], queue: str | None) -> tuple[str, ...]:
    """The overrides with `--queue NAME` as the last one (it is the spec's cluster.queue, given here)."""
    import json

    return (*overrides, f"cluster.queue={json.dumps(queue)}") if queue else tuple(overrides)


def queued_to(result: Any) -> str | None:
    """The Batch queue a Submission went (or would go) to, or None."""
    queue = getattr(result, "queue", None)
    return queue["name"] if queue else None


def for_shell(err: Any, region: str | None) -> Any:
    """The error with the commands that settle what it leaves open: a job an interrupt left running (follow
    it, stop it) or left unknown (look it up)."""
    from launcher.core.errors import Interrupted

    if not isinstance(err, Interrupted) or not err.job_name or err.started is False:
        return err
    from launcher.cli.invoked import name as prog

    name, where = err.job_name, f" --region {region}" if region else ""
    if err.started:
        hint = (f": follow it with `{prog()} logs {name}{where}`, stop it with `{prog()} stop {name}{where}`")
    else:
        hint = f" (`{prog()} status {name}{where}`)"
    return Interrupted(f"{err}{hint}", name, err.started, err.exit_code)


def warn(message: str) -> None:
    from launcher.cli.invoked import as_run

    click.echo(as_run(f"warning: {message}"), err=True)


def size_text(n: int) -> str:
    """Bytes as people read them: 812 B, 22.6 KiB, 4.1 MiB."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def print_started(result: Any, dry_run: bool, source_bytes: int | None = None) -> None:
    from launcher.cli.invoked import name as prog

    size = f"{size_text(source_bytes)}, " if source_bytes is not None else ""
    sent = f"({size}{'uploaded' if result.uploaded else 'already uploaded'})"
    queue = queued_to(result)
    if queue:
        info = result.queue
        if dry_run:
            click.echo(f"dry run: would queue {result.job_name} in Batch queue {queue} in {result.region} "
                       f"(source {result.source_uri}); nothing was written")
        else:
            click.echo(f"queued {result.job_name} in Batch queue {queue} in {result.region}")
            click.echo(f"  service job: {info['job_id']}")
            click.echo(f"  source:  {result.source_uri} {sent}")
            click.echo(f"  follow:  {prog()} logs {result.job_name} (or `{prog()} wait {result.job_name}`)")
        if info.get("retried_classes"):
            strategy = info.get("retry_strategy") or {}
            attempts = f"up to {strategy['attempts']} attempts" if strategy else "capacity only, as often as needed"
            click.echo(f"  retries: on AWS, {', '.join(info['retried_classes'])} ({attempts})")
    elif dry_run:
        click.echo(f"dry run: would start {result.job_name} in {result.region} "
                   f"(source {result.source_uri}{', ' + size_text(source_bytes) if source_bytes else ''}); nothing "
                   "was written")
    else:
        click.echo(f"started {result.job_name} in {result.region}")
        click.echo(f"  source:  {result.source_uri} {sent}")
        click.echo(f"  console: {result.console_url}")
        click.echo(f"  follow:  {prog()} logs {result.job_name}")
    if result.role_check:
        role = result.role_check.as_dict()  # sanitised
        click.echo(f"  role:    {role['role_arn'] or role['role']}: {role['verdict']}")
    click.echo(f"  AWS calls ({len(result.aws_calls)}): {', '.join(result.aws_calls)}")
    for note in result.notes:
        warn(note)


def attempt_printer(as_json: bool) -> Callable[[Any], None]:
    """`submit --retry`'s progress, one line per event (on stderr with --output json): each job started, how
    it ended (with its failure class and remedy), and the backoff before the next attempt."""
    from launcher import EventKind
    from launcher.cli.invoked import as_run
    from launcher.cli.present import safe

    def say(event: Any) -> None:
        if event.kind is EventKind.STARTED:
            for message in event.submission.warnings:
                warn(message)
            text = f"started {event.job_name} in {event.submission.region}"
            if queued_to(event.submission):
                text = f"queued {event.job_name} in Batch queue {queued_to(event.submission)}"
        elif event.kind is EventKind.ENDED:
            failure = event.status.failure
            text = f"{event.job_name}: {event.status.status}" + (
                f" [{failure.failure_class}] {as_run(failure.remedy)}" if failure else "")
        elif event.kind is EventKind.RESUBMIT:
            text = event.message or f"retrying in {event.backoff_s:g} s"
        elif event.kind is EventKind.WAIT:
            text = event.message
        else:
            return
        click.echo(safe(text), err=as_json)

    return say


def fallback_printer(event: Any) -> None:
    """A plan with other instance types: on stderr, a job that failed for capacity and the type tried next."""
    from launcher import EventKind
    from launcher.cli.present import safe

    if event.kind is EventKind.ENDED and event.status.failure is not None:
        click.echo(safe(f"{event.job_name}: {event.status.status} [{event.status.failure.failure_class}]"), err=True)
    elif event.kind is EventKind.RESUBMIT and event.message:
        click.echo(safe(event.message), err=True)


def submit_to_sagemaker(spec_file: str, overrides: Sequence[str], *, dry_run: bool, wait: bool, interval: float,
                        skip_role_check: bool, output: str, profile: str | None, region: str | None,
                        retry: Any = None, priority: int | None = None, share: str | None = None) -> int:
    """Submit one spec: one call to its backend (api.submit). With `wait`, follow the job's logs to its end; with
    a `retry` policy (launcher.orchestrate.retry.RetryPolicy), wait for it and resubmit it while it fails in a
    retried class (a queue of one). Exit with the (last) job's outcome when it was waited for, else 0."""
    from launcher.api import build_plan, connect, load_spec, submit, submit_many, worst_exit_code
    from launcher.cli.present import emit_json, safe_data
    from launcher.core.errors import EXIT_OK, LauncherError, UsageError

    if wait and dry_run:
        raise UsageError("--wait follows one job: give one spec and no --dry-run")
    as_json = output == "json"
    plan = build_plan(load_spec(spec_file, overrides), region=region, profile=profile)  # flag > spec > env > profile
    queued = bool(plan.spec.cluster.queue)
    if retry is not None and dry_run and not queued:
        raise UsageError("--retry submits one spec and waits for it: give one spec and no --dry-run")
    clients = connect(profile=profile, region=plan.region)
    if retry is not None and not queued:  # this process retries (a queue's retries run on AWS): a queue of one
        (run,) = submit_many([plan], dry_run=dry_run, interval=interval, skip_role_check=skip_role_check,
                             clients=clients, retry=retry, on_event=attempt_printer(as_json))
        if run.error is not None:
            raise for_shell(run.error, plan.region)
        if as_json:
            emit_json(safe_data({"job_name": run.job_name, "status": run.status.status.value if run.status else None,
                                 "attempts": [a.to_dict() for a in run.attempts]}))
        return worst_exit_code([run])
    if retry is not None:  # a Batch queue retries on AWS, by the policy's classes
        (run,) = submit_many([plan], dry_run=dry_run, interval=interval, skip_role_check=skip_role_check,
                             clients=clients, retry=retry, priority=priority, share=share)
        if run.error is not None:
            raise for_shell(run.error, plan.region)
        result = run.submissions[-1]
    else:
        try:  # after a capacity fallback: the job that got instances
            result = submit(plan, dry_run=dry_run, skip_role_check=skip_role_check, clients=clients,
                            priority=priority, share=share, interval=interval,
                            on_event=fallback_printer if plan.alternatives else None)
        except LauncherError as err:
            raise for_shell(err, plan.region) from None
    for message in result.warnings:
        warn(message)
    if as_json:
        emit_json(safe_data(result.to_dict()))
        for note in result.notes:
            warn(note)
    else:
        print_started(result, dry_run, len(plan.source.tarball))
    if wait:
        from launcher.api import follow
        from launcher.cli.logprint import Printer

        clients = connect(profile=profile, region=result.region)
        printer = Printer(as_json=output == "json")
        clients.notify = printer.note
        followed = follow(result.job_name, interval=interval, clients=clients, **printer.hooks())
        printer.finish(followed)
        return followed.exit_code
    return EXIT_OK


def _overrides_text(candidate: Any, many_specs: bool) -> str:
    parts = [f"{key}={value}" for key, value in candidate.overrides.items()]
    if many_specs or not parts:
        from pathlib import Path

        parts.insert(0, Path(candidate.spec_file).name)
    return " ".join(parts)


def _plan_cell(candidate: Any, many_specs: bool) -> str:
    """A plan in the sweep's table: its swept values in the order of the keys the title names (the spec's file name
    first when there are several specs), so the table stays narrow."""
    parts = [str(value) for value in candidate.overrides.values()]
    if many_specs or not parts:
        from pathlib import Path

        parts.insert(0, Path(candidate.spec_file).name)
    return ", ".join(parts)


def _swept_keys(candidates: Sequence[Any]) -> list[str]:
    return list(dict.fromkeys(key for c in candidates for key in c.overrides))


def shell_reasons(candidate: Any) -> list[str]:
    """A refused plan's reasons as a shell reads them: values from --set and --sweep marked by their flags."""
    from launcher.cli.options import shell_problem

    worded = [str(shell_problem(p)) for p in candidate.problems]
    return worded + list(candidate.reasons[len(worded):])


def show_sweep(candidates: Sequence[Any], runs: dict[int, Any], many_specs: bool, title: str,
               ranked: str = "time") -> None:
    """The plans, ranked: what each sweeps, its status, memory and tokens per step, the figure they are ranked by (time
    or cost per million tokens trained, beside the totals) and its job; why a plan was refused is on stderr."""
    from launcher.cli.present import STATUS_STYLES, console, new_table, show, span, styled

    key = {"time": "time/Mtok", "cost": "$/Mtok"}.get(ranked)
    keys = _swept_keys(candidates)
    if keys:
        title += f"; plan: {', '.join(keys)}"
    # Each plan's job name (a dry run's: the name its job would get, which later messages quote). A refused plan's
    # reasons, and a failed submit's error, are on stderr in full, one line each, not cut short in a cell here.
    job_column = any(c.ok for c in candidates)
    columns = ("#", "plan", "status", "GB/GPU", "free GB", "tok/step", *([key] if key else ()), "time", "cost",
               *(["job"] if job_column else []))
    t = new_table(*columns, title=title, right=("#", "GB/GPU", "free GB", "tok/step", *([key] if key else ()),
                                                "time", "cost"))
    for c in candidates:
        mem = c.plan.memory if c.plan else None
        run = runs.get(c.index)
        job = run.job_name if run is not None else (c.plan.job_name if c.ok else None)
        state = c.status if run is None or c.status != "ok" else run.state
        if run is not None and run.status is not None:
            state = run.status.status
        style = "bold red" if not c.ok else STATUS_STYLES.get(state, "")
        time, usd = c.time_to_train_seconds, c.usd
        per = c.per_million_tokens(ranked) if key else None
        shown_per = [] if not key else ["-" if per is None else span(per) if ranked == "time" else f"${per:,.2f}"]
        t.add_row(str(c.rank) if c.rank else "-", styled(_plan_cell(c, many_specs)), styled(state, style),
                  f"{mem.per_gpu_gb:.1f}" if mem else "-", f"{c.headroom_gb:.1f}" if c.headroom_gb is not None else "-",
                  f"{c.global_batch_tokens:,}" if c.global_batch_tokens else "-", *shown_per,
                  span(time) if time is not None else "-", f"${usd:,.0f}" if usd is not None else "-",
                  *([styled(job)] if job_column else []))
    show(console(), t)


SKIPPED = "skipped"  # the `state` of a plan an earlier, unfinished run of the same sweep started


def skipped_run(job_name: str) -> Any:
    """What the table and the JSON show for a plan an earlier run of the sweep started (it is not submitted again)."""
    from types import SimpleNamespace

    return SimpleNamespace(job_name=job_name, state=SKIPPED, status=None, error=None, to_dict=lambda: {
        "job_name": job_name, "state": SKIPPED, "started": False, "jobs": [job_name], "submission": None,
        "job_status": None, "error": None, "started_by": "an earlier run of this sweep"})


def submit_many_plans(specs: Sequence[str], overrides: Sequence[str], sweeps: Sequence[str], *, dry_run: bool,
                      wait: bool, interval: float, max_concurrent: int | None, strict: bool, skip_role_check: bool,
                      output: str, profile: str | None, region: str | None, retry: Any = None,
                      by: str = "time", priority: int | None = None, share: str | None = None,
                      resume: bool = True) -> int:
    """Plan every spec x sweep value first; refuse what cannot work; submit the rest, best first, at most
    `max_concurrent` running. Exit 2 when nothing could start (all refused, or --strict and any refused).
    With a `retry` policy (launcher.orchestrate.retry.RetryPolicy), a job failing in a retried class is resubmitted
    after the policy's backoff. What the sweep starts is kept until every plan started (api.sweep_record): run
    again after it was cut short, it skips the plans started before (`resume`; without it, they start again)."""
    from launcher import EventKind, PlanState
    from launcher.api import connect, plan_sweep, ranked_by, submit_many, sweep_record, warm_pool_notes, worst_exit_code
    from launcher.cli.present import emit_json, safe, safe_data
    from launcher.core.errors import EXIT_INVALID, EXIT_OK

    as_json = output == "json"
    candidates = plan_sweep(specs, overrides, sweeps, region=region, by=by)
    many_specs = len(set(specs)) > 1
    ok = [c for c in candidates if c.ok]
    refused = [c for c in candidates if not c.ok]
    for c in refused:
        for reason in shell_reasons(c):
            click.echo(f"{reason} [refused: {_overrides_text(c, many_specs)}]", err=True)
    blocked = not ok or (strict and refused)
    if not as_json:
        what = "would start" if dry_run else "to start"
        order = {"time": "the least predicted time per token trained",
                 "cost": "the least predicted cost per token trained",
                 "tokens": "most tokens per step"}[ranked_by(candidates, by)]
        if ranked_by(candidates, by) != by:
            order += " (no price for every plan)"
        show_sweep(candidates, {}, many_specs,
                   f"{len(candidates)} plans: {len(ok)} {what}, {len(refused)} refused; ranked: fits, then {order}, "
                   "then most tokens per step, then most memory headroom", ranked_by(candidates, by))
    if blocked:
        why = "every plan was refused" if not ok else f"--strict: {len(refused)} of {len(candidates)} refused"
        if as_json:
            emit_json([safe_data({**c.to_dict(), "reasons": shell_reasons(c), "state": PlanState.NOT_STARTED.value})
                       for c in candidates])
        click.echo(f"nothing was submitted: {why}", err=True)
        return EXIT_INVALID
    record = None if dry_run else sweep_record(ok, resume=resume)
    earlier = dict(record.earlier) if record is not None else {}
    if earlier:
        names = ", ".join(earlier[i] for i in sorted(earlier))
        warn(f"{len(earlier)} of {len(ok)} plans were started by an earlier run of this sweep that did not start them "
             f"all ({names}); they are skipped (--no-resume starts every plan again)")
    if record is not None and record.problem:
        warn(f"what this sweep starts cannot be kept for a run after an interruption ({record.problem})")
    to_run = [c for c in ok if c.index not in earlier]
    plans = [c.plan for c in to_run if c.plan is not None]  # every plan that is ok has one
    for note in warm_pool_notes(plans, max_concurrent):
        warn(note)

    def clients_for(plan_region: str | None) -> Any:
        return connect(profile=profile, region=plan_region)

    def on_event(event: Any) -> None:
        if event.kind is EventKind.WAITING:  # on stderr in both modes: it explains a pause
            click.echo(safe(f"waiting for quota: {event.job_name}: {event.message}"), err=True)
        if event.kind is EventKind.WAIT:  # on stderr: stdout stays one JSON document with --output json
            click.echo(safe(event.message), err=True)
        if event.kind is EventKind.STARTED and record is not None and event.job_name:
            record.started(to_run[event.index].index, event.job_name)
        if as_json:
            return
        if event.kind is EventKind.STARTED and queued_to(event.submission):
            click.echo(safe(f"queued {event.job_name} in Batch queue {queued_to(event.submission)}"))
        elif event.kind is EventKind.STARTED:
            click.echo(safe(f"started {event.job_name} ({event.running} running)"))
        elif event.kind is EventKind.ENDED:
            click.echo(safe(f"{event.job_name} {event.status.status} ({event.running} running)"))
        elif event.kind is EventKind.RESUBMIT:
            click.echo(safe(event.message or f"resubmitting as {event.job_name}"))

    finished = False
    try:
        runs = submit_many(plans, max_concurrent=max_concurrent, dry_run=dry_run, wait=wait, interval=interval,
                           skip_role_check=skip_role_check, clients=clients_for, on_event=on_event, retry=retry,
                           priority=priority, share=share) if plans else ()
        finished = all(run.attempts for run in runs)
    finally:
        if record is not None:
            record.close(finished)
    by_index: dict[int, Any] = {c.index: run for c, run in zip(to_run, runs, strict=True)}
    by_index.update((i, skipped_run(name)) for i, name in earlier.items())
    # Plans that share an account (role, buckets) get the same warnings: each is said once.
    for message in dict.fromkeys(m for run in runs for s in run.submissions for m in (*s.warnings, *s.notes)):
        warn(message)
    errors = {run.error: run.plan.region for run in runs if run.error is not None}
    for err, plan_region in errors.items():  # an interrupt while waiting is one error shared by the plans it stopped
        for line in for_shell(err, plan_region).lines():
            click.echo(safe(line), err=True)
    if as_json:
        out = []
        for c in candidates:
            ran = by_index.get(c.index)
            out.append(safe_data({**c.to_dict(), "reasons": shell_reasons(c),
                                  **(ran.to_dict() if ran else {"state": PlanState.NOT_STARTED.value})}))
        emit_json(out)
    elif dry_run:
        checked = sum(run.state is PlanState.DRY_RUN for run in runs)
        click.echo(f"dry run: {checked} of {len(ok)} plans passed the account checks (buckets, role); "
                   "nothing was written")
    else:
        show_sweep(candidates, by_index, many_specs, "jobs", ranked_by(candidates, by))
    return worst_exit_code(runs) if runs else EXIT_OK


def run_here(specs: Sequence[str], overrides: Sequence[str], *, tiny: bool, nproc: int, max_steps: int | None,
             output: str) -> int:
    """The local CPU run of one spec; in json mode the script's lines go to stderr and the report to stdout."""
    from launcher.api import run_local
    from launcher.cli.present import changes_summary, emit_json
    from launcher.core.errors import UsageError

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


# Flags that mean something only with --local, only without it, and only with --retry (parameter -> flag).
LOCAL_ONLY = {"tiny": "--tiny", "nproc": "--nproc", "max_steps": "--max-steps"}
SAGEMAKER_ONLY = {"dry_run": "--dry-run", "wait": "--wait", "interval": "--interval",
                  "skip_role_check": "--skip-role-check", "retry": "--retry", "max_attempts": "--max-attempts",
                  "retry_backoff": "--retry-backoff"}
RETRY_ONLY = {"max_attempts": "--max-attempts", "retry_backoff": "--retry-backoff"}


def refuse_inapplicable(ctx: click.Context, *, local: bool, retry: str | None) -> None:
    """A flag given that this way of submitting ignores is refused in one line, not silently dropped."""
    from click.core import ParameterSource

    from launcher.core.errors import UsageError

    def given(names: dict[str, str]) -> list[str]:
        return [flag for name, flag in names.items()
                if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)]

    if local and (flags := given(SAGEMAKER_ONLY)):
        raise UsageError(f"{', '.join(flags)} {'applies' if len(flags) == 1 else 'apply'} to SageMaker jobs, "
                         "not to --local: drop --local, or the flag")
    if not local and (flags := given(LOCAL_ONLY)):
        raise UsageError(f"{', '.join(flags)} {'applies' if len(flags) == 1 else 'apply'} only with --local "
                         "(a run here on CPUs): add --local, or drop the flag")
    if not local and not retry and (flags := given(RETRY_ONLY)):
        raise UsageError(f"{', '.join(flags)} {'applies' if len(flags) == 1 else 'apply'} only with --retry: "
                         "add --retry CLASSES, or drop the flag")


def _given(param: str) -> bool:
    """Whether the current command's parameter was given on the command line (not left at its default)."""
    from click.core import ParameterSource

    return click.get_current_context().get_parameter_source(param) is ParameterSource.COMMANDLINE


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
@click.option("--interval", type=click.FloatRange(min=0.05), default=POLL_S, show_default=True,
              help="With --wait or --max-concurrent: seconds between polls (as `logs --interval`).")
@click.option("--skip-role-check", is_flag=True, help="Do not simulate the role's permissions first.")
@retry_options
@queue_options
@click.option("--sweep", "sweeps", multiple=True, metavar="KEY.PATH=V1,V2",
              help="Submit one plan per value (typed as YAML, like --set); several --sweep: every combination.")
@click.option("--max-concurrent", type=click.IntRange(min=1), default=None,
              help="Many plans: at most N jobs running; the next starts when one ends (polled every --interval).")
@click.option("--strict", is_flag=True, help="Many plans: submit nothing if any plan is refused.")
@click.option("--resume/--no-resume", default=True, show_default=True,
              help="Many plans: skip the plans an earlier run of the same sweep started but did not see through "
                   "(cut short, or a submit failed); --no-resume starts every plan again.")
@click.option("--by", type=click.Choice(["time", "cost", "tokens"]), default="time", show_default=True,
              help="Many plans: start the best first by predicted time (or cost) per token trained, or by most "
                   "tokens per step.")
@SET
@templates_option
@backend_option
@max_cost_option
@OUTPUT
@aws_options
def submit_jobs(specs: tuple[str, ...], local: bool, tiny: bool, nproc: int, max_steps: int | None, dry_run: bool,
                wait: bool, interval: float, skip_role_check: bool, retry: str | None, max_attempts: int,
                retry_backoff: float, queue: str | None, priority: int | None, share: str | None,
                sweeps: tuple[str, ...], max_concurrent: int | None, strict: bool, resume: bool, by: str,
                overrides: tuple[str, ...], output: str, profile: str | None, region: str | None) -> None:
    """Start SageMaker training jobs, or with --local run one job's script on this machine first.

    --local exits with the script's exit code, or 3 when one of its checks fails. With several specs or
    --sweep, every plan is checked before any job starts: refused plans are listed (exit 2 only when
    nothing could start, or with --strict), the rest start best first; --wait waits for them all.
    With --queue (or cluster.queue), the jobs go to an AWS Batch queue instead, and this command may end at once.
    """
    refuse_inapplicable(click.get_current_context(), local=local, retry=retry)
    if local and (queue or priority is not None or share):
        from launcher.core.errors import UsageError

        raise UsageError("--local runs one spec here; --queue, --priority and --share are for SageMaker jobs")
    if queue and max_concurrent:
        from launcher.core.errors import UsageError

        raise UsageError("--max-concurrent limits the jobs this machine keeps running; with --queue the Batch "
                         "queue's capacity decides: give one or the other")
    if queue and _given("retry_backoff"):
        from launcher.core.errors import UsageError

        raise UsageError("--retry-backoff is this machine's wait between attempts; with --queue Batch retries "
                         "when it decides: drop it")
    overrides = with_queue(overrides, queue)
    if local:
        if sweeps or max_concurrent or strict:
            from launcher.core.errors import UsageError

            raise UsageError("--local runs one spec here; --sweep, --max-concurrent and --strict are for "
                             "SageMaker jobs")
        sys.exit(run_here(specs, overrides, tiny=tiny, nproc=nproc, max_steps=max_steps, output=output))
    policy = retry_policy(retry, max_attempts, retry_backoff)
    if len(specs) > 1 or sweeps or max_concurrent or strict:
        sys.exit(submit_many_plans(specs, overrides, sweeps, dry_run=dry_run, wait=wait, interval=interval,
                                   max_concurrent=max_concurrent, strict=strict, skip_role_check=skip_role_check,
                                   output=output, profile=profile, region=region, retry=policy, by=by,
                                   priority=priority, share=share, resume=resume))
    sys.exit(submit_to_sagemaker(specs[0], overrides, dry_run=dry_run, wait=wait, interval=interval,
                                 skip_role_check=skip_role_check, output=output, profile=profile, region=region,
                                 retry=policy, priority=priority, share=share))


COMMANDS = (submit_jobs,)
