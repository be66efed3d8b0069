"""`logs`, `status`, `list`, `stop`, `metrics`: jobs already launched, through boto3 only.

None of these may import the SageMaker SDK (tests/test_logs_e2e.py checks it).
"""
from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import click

from launcher.api import POLL_S
from launcher.cli.options import JOB, OUTPUT, aws_options, job_clients

MAX_HOST = 4096  # far above any training job's instance count; a typo like 1-100000000 is refused, not expanded


def parse_hosts(text: str | None) -> list[int] | None:
    """`1,3`, `algo-2` or `1-4` -> host numbers (algo-N), each at most MAX_HOST."""
    from launcher.core.errors import UsageError
    from launcher.core.sanitize import quoted

    if not text:
        return None
    hosts: set[int] = set()
    for part in text.replace(" ", "").split(","):
        part = part.removeprefix("algo-")
        try:
            lo, _, hi = part.partition("-")
            first, last = int(lo), int(hi or lo)
            if first < 1 or last < first:
                raise ValueError
        except ValueError:
            raise UsageError(f"--host {quoted(text)}: give host numbers like 1,3 or 1-4 (algo-N)") from None
        if last > MAX_HOST:
            raise UsageError(f"--host {quoted(text)}: host numbers go up to {MAX_HOST} (algo-N is the N-th "
                             "instance of the job)")
        hosts.update(range(first, last + 1))
    return sorted(hosts)


def require_hosts(clients, job: str, hosts: list[int]) -> None:
    """Refuse (exit 2) a --host list of which no host exists: it would print nothing and say nothing useful.
    Some hosts missing is a warning from the follower; none at all is a mistake."""
    from launcher.api import status
    from launcher.core.errors import UsageError

    count = status(job, clients=clients, diagnose=False).instance_count
    if count and min(hosts) > count:
        raise UsageError(f"--host {','.join(map(str, hosts[:5]))}{',...' if len(hosts) > 5 else ''}: {job} has "
                         f"{count} host{'s' if count > 1 else ''}, algo-1 to algo-{count}")


@click.command("logs")
@click.argument("jobs", nargs=-1, required=True, metavar="JOB...")
@click.option("--follow/--no-follow", default=True, show_default=True,
              help="Keep printing until the job ends, or print what exists and exit.")
@click.option("--host", "hosts", default=None, metavar="N[,N]", help="Only these hosts (algo-N): 1,3 or 2-4.")
@click.option("--since", default=None, metavar="DURATION", help="Start this far back: 30s, 10m, 1h (default: all).")
@click.option("--grep", default=None, metavar="REGEX", help="Only lines matching this Python regular expression.")
@click.option("--rate", type=click.FloatRange(min=0.1, max=25.0), default=2.0, show_default=True,
              help="At most this many CloudWatch Logs reads a second (the quota is shared by the account).")
@click.option("--interval", type=click.FloatRange(min=0.05), default=POLL_S, show_default=True,
              help="Seconds between polls.")
@click.option("--late-horizon", default="5m", show_default=True, metavar="DURATION",
              help="Print lines that reach CloudWatch up to this long after their timestamps (later ones are "
                   "counted at the end).")
@click.option("--drain-timeout", default=None, metavar="DURATION",
              help="Stop the end-of-job check for late lines after this long (default: when it is done), saying "
                   "how many slices were left unchecked.")
@OUTPUT
@aws_options
def print_logs(jobs: tuple[str, ...], follow: bool, hosts: str | None, since: str | None, grep: str | None,
               rate: float, interval: float, late_horizon: str, drain_timeout: str | None, output: str,
               profile: str | None, region: str | None) -> None:
    """Print a job's logs from all hosts, labelled [algo-N]; JOB may be `latest`. With several jobs, each line
    is labelled [JOB/algo-N] and every read shares --rate.

    Follows until the job ends (every job): exit 0 Completed, 1 Failed, 5 Stopped (the worst). Ctrl-C
    stops following (exit 130) and leaves the jobs running. `--output json` prints JSON lines.
    """
    import re

    from launcher.api import follow as follow_job
    from launcher.api import resolve_job
    from launcher.cli.logprint import Printer
    from launcher.core.errors import UsageError
    from launcher.core.timeutil import parse_since

    if grep:
        try:
            re.compile(grep)
        except re.error as exc:
            raise UsageError(f"--grep {grep!r} is not a regular expression: {exc}") from None
    host_list = parse_hosts(hosts)
    since_s = parse_since(since) if since else None
    horizon_s = parse_since(late_horizon, "--late-horizon")
    if horizon_s < 10:
        raise UsageError(f"--late-horizon {late_horizon!r}: give at least 10s (lines up to 2s late print anyway)")
    drain_s = parse_since(drain_timeout, "--drain-timeout") if drain_timeout else None
    if len(jobs) > 1:
        _print_many(jobs, follow, host_list, since_s, grep, rate, interval, horizon_s, drain_s, output, profile,
                    region)
        return
    name, region = resolve_job(jobs[0], region)
    printer = Printer(as_json=output == "json")
    clients = job_clients(profile, region)
    clients.notify = printer.note  # "waiting for ..." notices of slow AWS calls print with the follower's notes
    if host_list:
        require_hosts(clients, name, host_list)
    result = follow_job(name, until_end=follow, since=since_s, hosts=host_list, grep=grep, rate=rate,
                        interval=interval, late_horizon=horizon_s, drain_timeout=drain_s, clients=clients,
                        **printer.hooks())
    printer.finish(result)
    sys.exit(result.exit_code)


def _print_many(jobs: tuple[str, ...], follow: bool, hosts: list[int] | None, since: float | None, grep: str | None,
                rate: float, interval: float, horizon: float, drain: float | None, output: str, profile: str | None,
                region: str | None) -> None:
    """`logs JOB1 JOB2 ...`: every job followed at once, lines labelled [JOB/algo-N], the worst exit code."""
    from launcher.api import follow_many, resolve_job, worst_exit_code
    from launcher.cli.logprint import Printer

    resolved = [resolve_job(job, region) for job in jobs]
    names = list(dict.fromkeys(name for name, _ in resolved))
    printer = Printer(as_json=output == "json", with_job=True)
    # one region for all: --region's, else that of `latest` (the only name with a region of its own), else none
    clients = job_clients(profile, next((r for _, r in resolved if r), None))
    clients.notify = printer.note
    hooks = printer.hooks()
    results = follow_many(names, until_end=follow, since=since, hosts=hosts, grep=grep, rate=rate, interval=interval,
                          late_horizon=horizon, drain_timeout=drain, clients=clients, on_line=hooks["on_line"],
                          on_note=hooks["on_note"], on_status=printer.job_status, on_idle=hooks["on_idle"])
    for result in results:
        printer.finish(result)
    sys.exit(130 if any(r.interrupted for r in results) else worst_exit_code(
        [SimpleNamespace(exit_code=r.exit_code) for r in results]))


@click.command("status")
@JOB
@OUTPUT
@aws_options
def show_status(job: str, output: str, profile: str | None, region: str | None) -> None:
    """A job's status, transitions, instances, image, billable seconds and failure reason.

    Exit 0 while running or Completed, 1 Failed, 5 Stopped.
    """
    from launcher.api import resolve_job, status
    from launcher.cli import present

    name, region = resolve_job(job, region)
    found = status(name, clients=job_clients(profile, region))
    if output == "json":
        present.emit_json(found.to_dict())
    else:
        present.show_status(found)
    sys.exit(found.exit_code)


@click.command("list")
@click.option("--running", is_flag=True, help="Only jobs in progress (or stopping).")
@click.option("--name-contains", default=None, metavar="TEXT", help="Only jobs whose name contains TEXT.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="The newest N jobs.")
@OUTPUT
@aws_options
def list_jobs(running: bool, name_contains: str | None, limit: int, output: str, profile: str | None,
              region: str | None) -> None:
    """The jobs smp-launch launched (those carrying its tag), newest first."""
    from launcher.api import list_jobs as find
    from launcher.cli import present

    rows = find(running=running, name_contains=name_contains, limit=limit, clients=job_clients(profile, region))
    if output == "json":
        present.emit_json([r.to_dict() for r in rows])
    elif rows:
        present.show_jobs(rows)
    else:
        click.echo("no jobs launched by smp-launch match", err=True)


@click.command("stop")
@JOB
@click.option("--yes", is_flag=True, help="Do not ask first.")
@click.option("--foreign", is_flag=True, help="Stop it even though smp-launch did not start it (no "
                                              "smp-launch:managed tag); without it such a job is refused.")
@OUTPUT
@aws_options
def stop_job(job: str, yes: bool, foreign: bool, output: str, profile: str | None, region: str | None) -> None:
    """Stop a running job (asks first unless --yes); JOB may be `latest`."""
    from launcher.api import resolve_job, status, stop
    from launcher.cli import present
    from launcher.cli.invoked import name as prog

    name, region = resolve_job(job, region)
    clients = job_clients(profile, region)
    found = status(name, clients=clients, diagnose=False)
    stopped = False
    if found.status == "InProgress":  # whose it is is checked first, then the question is asked
        asked = found
        found = stop(name, clients=clients, foreign=foreign, confirm=None if yes else lambda _q: _confirm_stop(asked))
        stopped = found.status in ("Stopping", "Stopped")
    if stopped and found.queue is not None:
        message = f"{name} is terminated in Batch queue {found.queue.queue}" + (
            f"; SageMaker stops {found.queue.training_job}" if found.queue.training_job else "")
    elif stopped:
        message = (f"{name} is {found.status}; SageMaker uploads what the job saved, then marks it Stopped "
                   f"(follow with `{prog()} logs {name}`)")
    elif found.status == "InProgress":
        message = "not stopped"
    else:
        message = f"{name} is {found.status}; nothing to stop"
    if output == "json":
        present.emit_json(present.safe_data({"job_name": name, "stopped": stopped, "status": found.status,
                                             "message": message}))
    else:
        click.echo(present.safe(message), err=True)


def _confirm_stop(found: Any) -> bool:
    """Ask on the terminal before stopping a running job (a JobStatus); with none to ask on, refuse."""
    from launcher.cli import present
    from launcher.core.errors import UsageError

    if not sys.stdin.isatty():
        raise UsageError(f"stop asks before stopping {found.job_name}, and there is no terminal to ask on; "
                         "pass --yes")
    question = (f"Stop training job {found.job_name} ({found.secondary_status}, {found.instance_count} x "
                f"{found.instance_type})?")
    return click.confirm(present.safe(question), default=False, err=True)


@click.command("metrics")
@JOB
@click.option("--since", default="1h", show_default=True, metavar="DURATION", help="How far back: 30m, 1h, 1d.")
@OUTPUT
@aws_options
def show_metrics(job: str, since: str, output: str, profile: str | None, region: str | None) -> None:
    """Per-host GPU, GPU memory, CPU and memory utilisation as sparklines (per device, 0-100)."""
    from launcher.api import metrics, resolve_job
    from launcher.cli import present
    from launcher.core.timeutil import parse_since

    name, region = resolve_job(job, region)
    data = metrics(name, since=parse_since(since), clients=job_clients(profile, region))
    if output == "json":
        present.emit_json(data.to_dict())
    else:
        present.show_metrics(data)


COMMANDS = (print_logs, show_status, list_jobs, stop_job, show_metrics)
