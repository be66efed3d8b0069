"""`wait`: follow several jobs to their ends; exit with the worst outcome. boto3 only, never the SDK."""
from __future__ import annotations

import sys
from typing import Any

import click

from launcher.api import POLL_S
from launcher.cli.options import OUTPUT, aws_options, job_clients


def wait_row(job: Any) -> dict[str, Any]:
    """One job in `wait --output json`: its outcome, failure class, remedy and times (text already sanitised)."""
    failure = job.failure
    return {"job_name": job.job_name, "status": job.status.value, "secondary_status": job.secondary_status,
            "terminal": job.terminal, "failure_class": failure.failure_class if failure else None,
            "failure_reason": failure.reason if failure else job.failure_reason,  # bounded when classified
            "remedy": failure.remedy if failure else None,
            "instance_type": job.instance_type, "instance_count": job.instance_count,
            "created": job.created, "training_start": job.training_start, "training_end": job.training_end,
            "training_seconds": job.training_seconds, "billable_seconds": job.billable_seconds,
            "queue": job.queue.to_dict() if job.queue else None}


def _line(job: Any) -> str:
    from launcher.cli.present import safe

    status = job.status + (f" ({job.secondary_status})" if job.secondary_status and
                           job.secondary_status != job.status else "")
    text = f"{job.job_name}: {status}"
    if job.queue is not None and job.secondary_status == job.queue.status:  # waiting in (or retried by) Batch
        text = f"{job.job_name}: {job.queue.line()}"
    if job.failure is not None:
        from launcher.cli.invoked import as_run

        text += f" [{job.failure.failure_class}] {as_run(job.failure.remedy)}"
    return safe(f"{text} ({job.instance_count} x {job.instance_type})")


def _status_table(statuses: dict[str, Any], names: list[str]) -> Any:
    from rich.text import Text

    from launcher.cli.invoked import as_run
    from launcher.cli.present import STATUS_STYLES, new_table

    t = new_table("job", "status", "secondary", "failure class", "remedy", fold=("remedy",))
    for name in names:
        job = statuses.get(name)
        if job is None:
            t.add_row(Text(name), Text("..."), Text("-"), Text("-"), Text("-"))
            continue
        failure = job.failure
        t.add_row(Text(job.job_name), Text(job.status, style=STATUS_STYLES.get(job.status, "")),
                  Text(job.secondary_status or "-"), Text(failure.failure_class if failure else "-"),
                  Text(as_run(failure.remedy) if failure else "-"))
    return t


def _is_terminal() -> bool:
    return sys.stdout.isatty()


@click.command("wait")
@click.argument("jobs", nargs=-1, required=True, metavar="JOB...")
@click.option("--timeout", "timeout_text", default=None, metavar="DURATION",
              help="Give up after this long: 2h, 90m, 1h30m or seconds (exit 124 if a job is still running).")
@click.option("--interval", type=click.FloatRange(min=0.05), default=POLL_S, show_default=True,
              help="Seconds between polls.")
@OUTPUT
@aws_options
def wait_jobs(jobs: tuple[str, ...], timeout_text: str | None, interval: float, output: str, profile: str | None,
              region: str | None) -> None:
    """Wait for jobs to end; JOB may be `latest`. A live table on a terminal, a line per change elsewhere.

    Exit with the worst outcome: 1 any Failed, 5 any Stopped, 124 any still running at --timeout, 0 all
    Completed. Failed jobs are shown with their failure class and a remedy.
    """
    from launcher.api import resolve_job, wait, worst_exit_code
    from launcher.cli import present
    from launcher.core.timeutil import parse_since

    # A duration as --since and the spec's max_run take it (2h, 90m, seconds); 0 polls once.
    timeout = None if timeout_text is None else (
        0.0 if timeout_text.strip() in ("0", "0s") else parse_since(timeout_text, "--timeout"))
    resolved = [resolve_job(job, region) for job in jobs]
    names = list(dict.fromkeys(name for name, _ in resolved))
    # one region for all: --region's, else that of `latest` (the only name with a region of its own), else none
    clients = job_clients(profile, next((r for _, r in resolved if r), None))
    if output == "json":
        done = wait(names, timeout=timeout, interval=interval, clients=clients)
        present.emit_json([present.safe_data(wait_row(job)) for job in done])
    elif _is_terminal():
        from rich.live import Live

        seen: dict[str, Any] = {}
        with Live(_status_table(seen, names), console=present.console(), auto_refresh=False) as live:
            def changed(job: Any) -> None:
                seen[job.job_name] = job
                live.update(_status_table(seen, names), refresh=True)

            done = wait(names, timeout=timeout, interval=interval, clients=clients, on_change=changed)
    else:
        def echo(job: Any) -> None:
            click.echo(_line(job))

        done = wait(names, timeout=timeout, interval=interval, clients=clients, on_change=echo)
    code = worst_exit_code(done)
    running = [job.job_name for job in done if not job.terminal]
    if running and output != "json":
        click.echo(present.safe(f"timed out after {timeout:g} s; still running: {', '.join(running)}"), err=True)
    sys.exit(code)


COMMANDS = (wait_jobs,)
