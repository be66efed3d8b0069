"""The public Python API: what the CLI, pipelines (Airflow, SageMaker Pipelines, CI) and tests share.

Each function takes plain values and optional injected `clients` (launcher.core.aws.Clients), returns
typed objects, and raises LauncherError subclasses; nothing here prints, prompts or exits. The CLI
(launcher.cli) is a thin shell that maps these results and errors to output and exit codes.

This module is the face: `__all__` lists every public name (the package `launcher` exports the same),
and nothing inside launcher imports it but the CLI (setup.cfg's import contracts). The types are
re-exported from where they live and load on first use, so importing this module imports no SDK.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from launcher.core.durations import POLL_S

if TYPE_CHECKING:
    from datetime import datetime
    from pathlib import Path

    from launcher.catalog.prices import Price, PriceReport, PriceRow
    from launcher.core.aws import AwsError, Clients, QuotaError, ThrottledError
    from launcher.core.errors import (
        ArgumentError,
        Interrupted,
        LauncherError,
        Mark,
        PreflightError,
        Problem,
        SpecError,
        UsageError,
    )
    from launcher.jobs.failures import Failure, FailureClass
    from launcher.jobs.logs import FollowResult, LogLine, LogLines, LogNote, NoteKind, StatusChange
    from launcher.jobs.metrics import JobMetrics
    from launcher.jobs.queued import QueueState
    from launcher.jobs.status import JobNotFound, JobState, JobStatus, JobSummary, Outcome
    from launcher.local.run import LocalRunResult
    from launcher.orchestrate.calibrate import CalibrationResult
    from launcher.orchestrate.pipeline import PipelineResult
    from launcher.orchestrate.provenance import Change, ChangeKind, NotLaunchedHere
    from launcher.orchestrate.queue import Event, EventKind, PlanRun, PlanState
    from launcher.orchestrate.retry import RefusalWait, RetryPolicy, next_attempt
    from launcher.orchestrate.sweep_record import SweepRecord
    from launcher.plan.build import Plan
    from launcher.plan.sweep import SweepPlan
    from launcher.rules import Advisory, Severity
    from launcher.rules.advise import AdvisedLayout
    from launcher.rules.topology import Topology
    from launcher.spec.loader import LoadedSpec
    from launcher.submission.batch import QueuedSubmission
    from launcher.submission.buckets import BucketMissing
    from launcher.submission.channels import EmptyChannel
    from launcher.submission.create import Submission
    from launcher.submission.quotas import NotOffered, OverQuota, QuotaCheck, QuotaVerdict
    from launcher.submission.role import RoleCheck, RoleRefused, RoleVerdict

# The public names defined elsewhere, and where: each loads on first use (see __getattr__). No public name
# may be a subpackage's (`render`, `rules`): importing the subpackage would replace it on the package.
_REEXPORTED = {
    # specs and plans
    "LoadedSpec": "launcher.spec.loader",
    "Plan": "launcher.plan.build",
    "Advisory": "launcher.rules",
    "Topology": "launcher.rules.topology",
    "SweepPlan": "launcher.plan.sweep",
    "Severity": "launcher.rules",
    # AWS and submitting
    "Clients": "launcher.core.aws",
    "RoleCheck": "launcher.submission.role",
    "RoleVerdict": "launcher.submission.role",
    "Submission": "launcher.submission.create",
    "LocalRunResult": "launcher.local.run",
    "Price": "launcher.catalog.prices",
    "PriceRow": "launcher.catalog.prices",
    "PriceReport": "launcher.catalog.prices",
    "QuotaCheck": "launcher.submission.quotas",
    "QuotaVerdict": "launcher.submission.quotas",
    "QueuedSubmission": "launcher.submission.batch",
    # jobs
    "JobStatus": "launcher.jobs.status",
    "JobState": "launcher.jobs.status",
    "JobSummary": "launcher.jobs.status",
    "JobMetrics": "launcher.jobs.metrics",
    "LogLine": "launcher.jobs.logs",
    "LogLines": "launcher.jobs.logs",
    "LogNote": "launcher.jobs.logs",
    "NoteKind": "launcher.jobs.logs",
    "StatusChange": "launcher.jobs.logs",
    "FollowResult": "launcher.jobs.logs",
    "Failure": "launcher.jobs.failures",
    "QueueState": "launcher.jobs.queued",
    "FailureClass": "launcher.jobs.failures",
    # many plans
    "RetryPolicy": "launcher.orchestrate.retry",
    "RefusalWait": "launcher.orchestrate.retry",
    "next_attempt": "launcher.orchestrate.retry",
    "PlanRun": "launcher.orchestrate.queue",
    "PlanState": "launcher.orchestrate.queue",
    "EventKind": "launcher.orchestrate.queue",
    "Event": "launcher.orchestrate.queue",
    "Change": "launcher.orchestrate.provenance",
    "ChangeKind": "launcher.orchestrate.provenance",
    "PipelineResult": "launcher.orchestrate.pipeline",
    "SweepRecord": "launcher.orchestrate.sweep_record",
    "CalibrationResult": "launcher.orchestrate.calibrate",
    # errors (each carries its exit code)
    "LauncherError": "launcher.core.errors",
    "SpecError": "launcher.core.errors",
    "UsageError": "launcher.core.errors",
    "ArgumentError": "launcher.core.errors",
    "Problem": "launcher.core.errors",
    "Mark": "launcher.core.errors",
    "Interrupted": "launcher.core.errors",
    "PreflightError": "launcher.core.errors",
    "AwsError": "launcher.core.aws",
    "QuotaError": "launcher.core.aws",
    "ThrottledError": "launcher.core.aws",
    "RoleRefused": "launcher.submission.role",
    "OverQuota": "launcher.submission.quotas",
    "NotOffered": "launcher.submission.quotas",
    "BucketMissing": "launcher.submission.buckets",
    "EmptyChannel": "launcher.submission.channels",
    "JobNotFound": "launcher.jobs.status",
    "NotLaunchedHere": "launcher.orchestrate.provenance",
}

__all__ = [
    # the seconds between two polls of a job, every follower's default
    "POLL_S",
    # specs and plans
    "load_spec", "build_plan", "advisor_errors", "write_source_dir", "advise", "advised_spec", "advisor_rules",
    "advisor_rules_markdown", "schema_text", "LoadedSpec", "Plan", "Advisory", "Severity", "Topology", "SweepPlan",
    # AWS and submitting
    "connect", "resolve_region", "check_role", "submit", "run_local", "Clients", "RoleCheck", "RoleVerdict",
    "Submission", "LocalRunResult", "prices", "check_quota", "Price", "PriceRow", "PriceReport", "QuotaCheck",
    "QuotaVerdict", "QueuedSubmission",
    # jobs
    "resolve_job", "status", "wait", "worst_exit_code", "logs", "follow", "follow_many", "stop", "list_jobs",
    "metrics",
    "JobStatus", "JobState", "JobSummary", "JobMetrics", "LogLine", "LogLines", "LogNote", "NoteKind",
    "StatusChange", "FollowResult", "Failure", "FailureClass", "QueueState",
    # many plans
    "plan_sweep", "ranked_by", "submit_many", "rerun", "diff", "is_spec_file", "pipeline_definition", "upsert_pipeline",
    "warm_pool_notes", "sweep_record", "SweepRecord",
    "RetryPolicy", "RefusalWait", "next_attempt", "PlanRun", "PlanState", "Event", "EventKind",
    "Change", "ChangeKind", "PipelineResult",
    # this account's speed
    "calibrate", "CalibrationResult",
    # errors (each carries its exit code)
    "LauncherError", "SpecError", "UsageError", "ArgumentError", "Problem", "Mark", "Interrupted", "AwsError",
    "QuotaError", "ThrottledError", "PreflightError", "RoleRefused", "OverQuota", "NotOffered", "BucketMissing",
    "EmptyChannel", "JobNotFound", "NotLaunchedHere",
]


def __getattr__(name: str) -> Any:
    where = _REEXPORTED.get(name)
    if where is None:
        raise AttributeError(f"module 'launcher.api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# -- specs and plans -----------------------------------------------------------------------------------

def load_spec(path: str, overrides: Sequence[str] | Mapping[str, Any] = (),
              env: Mapping[str, str] | None = None) -> LoadedSpec:
    """Read, merge (extends), override and validate a spec file; raises SpecError with `.problems`.

    `overrides` are `"KEY.PATH=VALUE"` strings (`"training.batch_size=4"`, the value typed as YAML) or a
    mapping of dotted keys to values; a problem with one is marked `overrides:N:COL` (the N-th override)."""
    from launcher.spec.loader import load_spec as _load

    if isinstance(overrides, Mapping):
        import json

        overrides = [f"{key}={json.dumps(value)}" for key, value in overrides.items()]
    return _load(path, list(overrides), env=env)


def build_plan(spec: LoadedSpec, *, region: str | None = None, profile: str | None = None,
               env: Mapping[str, str] | None = None, now: datetime | None = None) -> Plan:
    """The frozen plan for a validated spec: pure, no AWS call, no file written.

    The region is decided here, once: `region`, else the spec's `cluster.region`, else AWS_REGION /
    AWS_DEFAULT_REGION (from `env`, default os.environ), else `profile`'s (AWS_PROFILE's) region."""
    from launcher.core.aws import resolve_region
    from launcher.plan.build import build_plan as _build

    resolved = resolve_region(spec.spec.cluster.region, env, flag=region, profile=profile)
    return _build(spec, now=now, env=env, region=resolved)


def advisor_errors(plan: Plan) -> list[Problem]:
    """The advisor's errors for a plan, each a Problem at the field that caused it (empty: nothing blocks
    submit). A plan is built even for a spec that breaks a rule, so that its numbers show why."""
    from launcher.plan.build import advisory_problems

    return advisory_problems(plan)


def write_source_dir(plan: Plan, directory: str | Path) -> list[Path]:
    """Write the plan's source dir (entry script, helper modules, requirements.txt, distribution.json,
    plan.json, spec.json) into `directory`, created if needed; the paths written, in name order."""
    from launcher.render.files import write_source_dir as _write

    return _write(plan.source.files, directory)


def advise(model: str, *, instance_type: str = "ml.p4d.24xlarge", instances: int | None = None,
           seq_length: int = 4096, global_batch_tokens: int | str | None = None,
           precision: str = "bf16", tokens: int | str | None = None, by: str = "time",
           region: str | None = None, env: Mapping[str, str] | None = None) -> list[AdvisedLayout]:
    """SMP v2 layouts for a model preset that fit, best first: by predicted time to train `tokens` (an int, or
    text such as `"1T"`: decimal; default 10**12), by predicted cost (`by="cost"`, priced in `region`), or in
    the order of AWS's SMP v2 best practices (`by="practices"`). Each carries its predicted speed, time and
    cost; layouts predicted within the model's spread of the best are marked as ties. `region` defaults to
    AWS_REGION, AWS_DEFAULT_REGION or the profile's, as everywhere; with none, ArgumentError (no default).

    Without `instances`, the smallest cluster whose largest fitting batch reaches `global_batch_tokens`
    (an int, or text such as `"4M"`: binary, 4M = 4,194,304). Raises ArgumentError for an unknown
    preset or instance type, or when neither `instances` nor `global_batch_tokens` is given."""
    import re

    from launcher.core.aws import resolve_region as _resolve
    from launcher.core.errors import ArgumentError, no_region
    from launcher.core.sanitize import quoted
    from launcher.rules import advise as _advise
    from launcher.spec.models import REGION_PATTERN, parse_token_count

    batch = _advise.parse_tokens(global_batch_tokens) if isinstance(global_batch_tokens, str) else global_batch_tokens
    try:
        budget = parse_token_count(tokens) if tokens is not None else _advise.DEFAULT_TOKENS
    except ValueError as exc:
        raise ArgumentError(f"{{tokens}}: {exc}") from None
    if budget < 1:
        raise ArgumentError("{tokens}: a token budget is at least 1")
    if precision not in ("bf16", "fp16", "fp8"):
        raise ArgumentError(f"{{precision}}: {quoted(precision)} is not bf16, fp16 or fp8")
    if region is not None and not re.fullmatch(REGION_PATTERN, region):
        raise ArgumentError(f"{{region}}: {quoted(region)} is not an AWS region such as us-west-2")
    where = _resolve(None, env, flag=region)  # as every command decides it: there is no default region
    if not where:
        raise no_region()
    plan = _advise.Budget(tokens=budget, region=where, env=env, by=by)
    return _advise.advise(model, instance_type, instances, seq_length, batch, precision, plan)


def advised_spec(model: str, layout: AdvisedLayout, *, instance_type: str = "ml.p4d.24xlarge",
                 seq_length: int = 4096, precision: str = "bf16", path: str | None = None) -> str:
    """A ready job spec (YAML text) for one layout `advise` returned; `path` is where it will be written
    (its schema modeline is relative to it)."""
    from launcher.rules.advise import spec_yaml

    return spec_yaml(model, instance_type, seq_length, precision, layout, path)


def advisor_rules() -> list[dict[str, str]]:
    """The advisor's rules, by id: `id`, `severity` (error blocks submit), `title`, `source`."""
    from launcher.rules.docs import as_json

    return as_json()


def advisor_rules_markdown() -> str:
    """The advisor's rules as the Markdown page docs/rules.md is."""
    from launcher.rules.docs import markdown

    return markdown()


def schema_text() -> str:
    """The job spec's JSON Schema, as text (for editors and CI)."""
    from launcher.spec.schema import schema_text as styled

    return styled()


# -- AWS and submitting --------------------------------------------------------------------------------

def connect(profile: str | None = None, region: str | None = None) -> Clients:
    """The one AWS client factory (profile, region and AWS_ENDPOINT_URL honoured), its clients made lazily.

    Without `region`, `.region` stays None: a plan's region is then decided by the plan (the spec's
    first), and clients made for no plan use boto3's default (see `resolve_region`)."""
    from launcher.core.aws import Clients

    return Clients(profile=profile, region=region)


def resolve_region(region: str | None = None, *, profile: str | None = None) -> str | None:
    """The region of a command that names no spec: `region`, else AWS_REGION / AWS_DEFAULT_REGION, else
    `profile`'s (AWS_PROFILE's), read from disk with no network call; None when nothing names one.
    (`build_plan` decides a plan's region the same way, the spec's `cluster.region` before the environment.)"""
    from launcher.core.aws import resolve_region as _resolve

    return _resolve(flag=region, profile=profile)


def check_role(plan: Plan, *, clients: Clients | None = None) -> RoleCheck:
    """Can the plan's IAM role run its job? Read-only (IAM's policy simulator); never raises for a refusal.

    The verdict (`.verdict`: pass, fail, or unknown when IAM could not tell) comes with what is
    missing. The clients are for the plan's region (made for it when not given)."""
    from launcher.core.aws import explain
    from launcher.core.errors import LauncherError
    from launcher.submission.create import bind_region
    from launcher.submission.role import check_role as _check

    clients = clients or connect(region=plan.region)
    bind_region(plan, clients)
    try:
        return _check(plan, clients.iam, clients.sts)
    except LauncherError:
        raise
    except Exception as exc:
        raise explain(exc, "checking the role") from None


def check_quota(plan: Plan, *, clients: Clients | None = None) -> QuotaCheck:
    """Can the account start the plan's job now? Its training-instance quota (Service Quotas, read by name)
    against the instances this account's InProgress jobs hold. Read-only; a refusal is the result's `verdict`
    (`over`, `not_offered`), and what AWS could not say is `unknown` with a `note`."""
    from launcher.submission.create import bind_region
    from launcher.submission.quotas import check_quota as _check

    clients = clients or connect(region=plan.region)
    region = bind_region(plan, clients)
    return _check(clients, plan.instance_type, plan.instance_count, region, spot=plan.estimator.use_spot_instances)


def prices(instance_types: Sequence[str] = (), *, region: str | None = None, refresh: bool = False,
           profile: str | None = None, env: Mapping[str, str] | None = None,
           clients: Clients | None = None) -> PriceReport:
    """SageMaker training prices (on-demand and spot) for `instance_types` (default: every type SMP v2 runs
    on) in a region, each with its source and date: the cache a submit or a refresh wrote, else the snapshot
    shipped with the package. With `refresh`, ask the AWS Price List API first and cache its answer (what it
    could not tell is in `notes`); without, no AWS call is made."""
    import os

    from launcher.catalog.prices import PriceReport, price_table
    from launcher.catalog.smp import INSTANCES
    from launcher.core.aws import resolve_region as _resolve
    from launcher.core.errors import ArgumentError, no_region
    from launcher.core.sanitize import quoted

    env = os.environ if env is None else env
    types = list(instance_types) or list(INSTANCES)
    unknown = [t for t in types if not t.startswith("ml.")]
    if unknown:
        raise ArgumentError(f"{{instance_types}}: {quoted(unknown[0])} is not a SageMaker instance type (they "
                            "start with `ml.`, e.g. ml.p4d.24xlarge)")
    where = _resolve(None, env, flag=region or (clients.region if clients else None), profile=profile)
    if not where:
        raise no_region()
    notes: tuple[str, ...] = ()
    if refresh:
        from launcher.submission.pricing import fetch_prices

        clients = clients or connect(profile=profile, region=where)
        notes = fetch_prices(clients, types, where, env=env, force=True).notes
    return PriceReport(price_table(types, where, env), refreshed=refresh, notes=notes)


def submit(plan: Plan, *, dry_run: bool = False, skip_role_check: bool = False,
           clients: Clients | None = None, priority: int | None = None, share: str | None = None,
           on_event: Callable[[Event], None] | None = None, interval: float = POLL_S) -> Submission:
    """Check the buckets and the role, upload the source bundle if new and start the job (not with dry_run): one
    call to the plan's backend (plan.backend: the PyTorch Estimator or ModelTrainer).

    The clients are for the plan's region (made for it when not given). Raises SpecError when the plan's advisor
    found errors, RoleRefused, AwsError, and Interrupted on Ctrl-C while the job is submitted (with `.started`:
    whether it exists). Warnings are in the Submission, never printed.

    A plan whose spec names an AWS Batch queue (cluster.queue) is handed to that queue instead, after the same
    checks and the queue's own: a QueuedSubmission, with `priority` (schedulingPriority, 0-9999) and `share`
    (the fair-share identifier) given to Batch. A plan with other instance types (cluster.instance_types) falls
    back to the next one it fits when its type has no capacity: its job is followed (every `interval` seconds)
    until it has its instances, and each move is an Event to `on_event`."""
    from launcher.orchestrate.single import submit as submit_plan
    from launcher.submission.batch import QueueOptions

    options = QueueOptions(priority=priority, share=share) if priority is not None or share else None
    return submit_plan(plan, clients or connect(region=plan.region), dry_run=dry_run,
                       skip_role_check=skip_role_check, options=options, on_event=on_event, interval=interval)


def run_local(spec: str, overrides: Sequence[str] = (), *, tiny: bool = False, nproc: int = 2,
              max_steps: int | None = None, echo: Callable[[str], None] = print) -> LocalRunResult:
    """The CPU preflight: render the job, run its script twice with torchrun on this machine (gloo, `nproc`
    processes; `tiny` shrinks the model, keeping its architecture), and judge what the runs reported
    (`.checks`, `.exit_code`). `echo` gets each line the script prints. Needs the `local` extra (torch)."""
    from launcher.local.run import run_local as _run

    return _run(spec, overrides, tiny=tiny, nproc=nproc, max_steps=max_steps, echo=echo)


# -- jobs ------------------------------------------------------------------------------------------------

def resolve_job(name: str, region: str | None = None) -> tuple[str, str | None]:
    """(job name, region): `latest` is the last job submitted from this machine, in its region unless
    `region` is given; any other name is returned as it is. Raises UsageError when there is no record."""
    from launcher.core.state import resolve_job as _resolve

    return _resolve(name, region)


def status(name: str, *, clients: Clients | None = None, diagnose: bool = True) -> JobStatus:
    """The job's status now (DescribeTrainingJob); raises JobNotFound for a name SageMaker does not know.

    A job that failed carries its failure class (`.failure`); with `diagnose` it is read from algo-1's log
    tail (and, for out of memory, the job's plan) too, not only from the FailureReason.

    A name SageMaker does not know may be a job handed to an AWS Batch queue: its status is then its training
    job's, or Batch's while it waits (`.queue`, a QueueState)."""
    from launcher.jobs.queued import job_status

    return job_status(clients or connect(), name, diagnose=diagnose)


def wait(names: Iterable[str], *, timeout: float | None = None, interval: float = POLL_S,
         clients: Clients | None = None, on_change: Callable[[JobStatus], None] | None = None) -> list[JobStatus]:
    """Poll until every job is terminal (or `timeout` seconds pass); the last status of each, in the order given.

    A job still running at the timeout is returned as it was last seen (`.terminal` is False). A failed job
    carries its failure class and remedy (`.failure`, launcher.jobs.failures). `on_change` is called with each
    status that differs from the one seen before for that job. Jobs in an AWS Batch queue are waited for too."""
    from launcher.jobs.queued import job_status
    from launcher.jobs.status import wait as _wait

    return _wait(clients or connect(), names, timeout=timeout, interval=interval, on_change=on_change,
                 lookup=job_status)


def worst_exit_code(outcomes: Iterable[Outcome]) -> int:
    """One exit code for what `wait` or `submit_many` returned: an error's (the first), else 1 any Failed,
    5 any Stopped, 124 any job a wait left running, 0 all Completed (the CLI's exit code)."""
    from launcher.jobs.status import worst_exit_code as _worst

    return _worst(outcomes)


def logs(name: str, *, until_end: bool = False, hosts: Iterable[int] | None = None, since: float | None = None,
         grep: str | None = None, clients: Clients | None = None, on_note: Callable[[LogNote], None] | None = None,
         on_status: Callable[[StatusChange], None] | None = None) -> LogLines:
    """The job's log lines from every host (algo-N), typed and sanitised; with `until_end`, until the job ends.

    `since` is seconds back from now. Once a followed job's lines are exhausted, the iterator holds its
    `status` and `exit_code`. Nothing is printed: notes (throttling, late lines, no lines yet) go to `on_note`
    (default: the `launcher.logs` logger), status changes to `on_status`."""
    from launcher.jobs.logs import iter_lines, waiting_notes

    if clients is None:
        clients = connect()
        if on_note is not None:
            clients.notify = waiting_notes(on_note)  # "waiting for ..." is a note like the others
    return iter_lines(name, clients, until_end=until_end, since=since, hosts=hosts, grep=grep, on_note=on_note,
                      on_status=on_status)


def follow(name: str, *, until_end: bool = True, hosts: Iterable[int] | None = None, since: float | None = None,
           grep: str | None = None, rate: float = 2.0, interval: float = POLL_S, late_horizon: float = 300.0,
           drain_timeout: float | None = None, clients: Clients | None = None,
           on_line: Callable[[LogLine], None] | None = None, on_note: Callable[[LogNote], None] | None = None,
           on_status: Callable[[StatusChange], None] | None = None,
           on_idle: Callable[[], None] | None = None) -> FollowResult:
    """Hand the job's log lines to `on_line` until it ends (what exists now, without `until_end`); its outcome.

    At most `rate` CloudWatch Logs calls a second (shared by every read in this process), a poll every
    `interval` seconds. The result holds the job's status and the documented exit code (0 Completed,
    1 Failed, 5 Stopped; 130 when Ctrl-C ended the follow, which leaves the job running). Nothing is
    printed: notes go to `on_note` (with clients made here, the "waiting for" notices of slow AWS calls too),
    status changes to `on_status`; `on_idle` runs before each wait. Lines that reach CloudWatch up to
    `late_horizon` seconds after their timestamps print; later ones are counted in a note at the end
    (`stats.past_horizon`). After the job's end the check for late lines goes on while they arrive, unless
    `drain_timeout` seconds pass (then a note says how many slices were left unchecked)."""
    from launcher.jobs.logs import Polling, waiting_notes
    from launcher.jobs.logs import follow as _follow
    from launcher.jobs.status import JobNotFound

    if clients is None:
        clients = connect()
        if on_note is not None:
            clients.notify = waiting_notes(on_note)  # "waiting for ..." is a note like the others
    made = clients

    def follow_job(job: str) -> FollowResult:
        return _follow(job, made, until_end=until_end, since=since, hosts=hosts, grep=grep,
                       polling=Polling(rate=rate, interval=interval, horizon=late_horizon, drain_timeout=drain_timeout),
                       on_line=on_line, on_note=on_note,
                       on_status=on_status, on_idle=on_idle)

    try:
        return follow_job(name)
    except JobNotFound:  # a job in an AWS Batch queue: each attempt's training job in turn
        from launcher.jobs import queued
        from launcher.jobs.logs import LogNote, NoteKind

        desc = queued.locate(clients, name)
        if desc is None:
            raise
        note = on_note or (lambda _note: None)
        return queued.follow(name, clients, desc, follow_job, lambda text: note(LogNote(NoteKind.QUEUED, text)),
                             until_end=until_end, interval=interval)


def follow_many(names: Iterable[str], *, until_end: bool = True, hosts: Iterable[int] | None = None,
                since: float | None = None, grep: str | None = None, rate: float = 2.0, interval: float = POLL_S,
                late_horizon: float = 300.0, drain_timeout: float | None = None, clients: Clients | None = None,
                on_line: Callable[[LogLine], None] | None = None, on_note: Callable[[LogNote], None] | None = None,
                on_status: Callable[[str, StatusChange], None] | None = None,
                on_idle: Callable[[], None] | None = None) -> list[FollowResult]:
    """`follow` for several jobs at once (a sweep's): one FollowResult each, in order. Every Logs call of every
    job shares one bucket at `rate`; each job has its own reads, so the calls a poll grow with the number of
    jobs, and past `rate x interval` the polls are spaced out (nothing is lost). A line's job is the first
    part of its `stream`; `on_status` gets (job, change). Callbacks run one at a time, from several threads."""
    from launcher.jobs.logs import Polling, waiting_notes
    from launcher.jobs.logs import follow_many as _many

    if clients is None:
        clients = connect()
        if on_note is not None:
            clients.notify = waiting_notes(on_note)
    return _many(names, clients, until_end=until_end, since=since, hosts=hosts, grep=grep,
                 polling=Polling(rate=rate, interval=interval, horizon=late_horizon, drain_timeout=drain_timeout),
                 on_line=on_line, on_note=on_note, on_status=on_status, on_idle=on_idle)


def stop(name: str, *, clients: Clients | None = None, foreign: bool = False,
         confirm: Callable[[str], bool] | None = None) -> JobStatus:
    """Stop a running job; its status after the request. With `confirm` (a question -> yes or no), it is asked
    first, once the job is known to be running and smp-launch's; without it, no question is asked (the caller
    decided).

    A job that has already ended is left alone: its status is returned as it is. A job smp-launch did not start
    (no smp-launch:managed tag, or tags that cannot be read) raises UsageError (exit 2) naming whose it is, unless
    `foreign`."""
    from launcher.jobs import queued
    from launcher.jobs.status import JobNotFound
    from launcher.jobs.status import stop as _stop

    clients = clients or connect()
    try:
        _stop(clients, name, yes=confirm is None, confirm=confirm, foreign=foreign)
    except JobNotFound:  # a job in an AWS Batch queue: TerminateServiceJob
        desc = queued.locate(clients, name)
        if desc is None:
            raise
        queued.stop(clients, name, desc, foreign=foreign, confirm=confirm)
    return queued.job_status(clients, name)


def list_jobs(*, running: bool = False, name_contains: str | None = None, limit: int = 50,
              clients: Clients | None = None) -> list[JobSummary]:
    """The newest jobs this tool launched (tagged smp-launch:managed), newest first; with them, unless `running`,
    the jobs still waiting in the account's AWS Batch queues for SageMaker Training (`.queue` names the queue)."""
    from launcher.jobs.queued import waiting_jobs
    from launcher.jobs.status import list_jobs as _list

    clients = clients or connect()
    rows = _list(clients, running=running, name_contains=name_contains, limit=limit)
    if running:
        return rows
    rows += waiting_jobs(clients, name_contains=name_contains, limit=limit)
    rows.sort(key=lambda r: r.created or 0, reverse=True)
    return rows[:limit]


def metrics(name: str, *, since: float = 3600.0, until: float | None = None,
            clients: Clients | None = None) -> JobMetrics:
    """Each host's GPU, GPU memory, CPU and memory utilisation (CloudWatch, per device, 0-100) over the
    `since` seconds before `until` (epoch seconds, default now); `.to_dict()` is `metrics --output json`."""
    import time

    from launcher.jobs.metrics import fetch
    from launcher.jobs.status import JobNotFound

    clients = clients or connect()
    end = time.time() if until is None else until
    try:
        return fetch(clients, name, since, end)
    except JobNotFound:  # a job in an AWS Batch queue: its latest training job's metrics
        from launcher.jobs import queued

        desc = queued.locate(clients, name)
        training = queued.QueueState.from_description(desc).training_job if desc else None
        if training is None:
            raise
        return fetch(clients, training, since, end)


# -- many plans: sweeps, a queue, provenance and SageMaker Pipelines ----------------------------------------

def ranked_by(candidates: Sequence[SweepPlan], by: str) -> str:
    """The order `plan_sweep` applied for `by`: "cost" only where every plan that may start has a price, else
    "time"."""
    from launcher.plan.sweep import ranked_by as _ranked_by

    return _ranked_by(candidates, by)


def plan_sweep(specs: Sequence[str], overrides: Sequence[str] | Mapping[str, Any] = (),
               sweeps: Sequence[str] | Mapping[str, Sequence[Any]] = (), *, region: str | None = None,
               env: Mapping[str, str] | None = None, now: datetime | None = None,
               by: str = "time") -> list[SweepPlan]:
    """Every spec times the cartesian product of `sweeps` (`"KEY=V1,V2"` strings, or KEY -> values),
    each loaded, planned and advised (no AWS call): ranked `ok` SweepPlans first (those that fit, then the
    least predicted time per token trained; `by="cost"`: cost per token; `by="tokens"`: most tokens per
    step), then the refused ones with their reasons. `overrides` apply to every plan. Raises UsageError for
    a malformed sweep."""
    import json

    from launcher.plan.sweep import plan_sweep as _plan_sweep

    if isinstance(overrides, Mapping):
        overrides = [f"{key}={json.dumps(value)}" for key, value in overrides.items()]
    if isinstance(sweeps, Mapping):
        sweeps = [f"{key}={','.join(json.dumps(v) for v in values)}" for key, values in sweeps.items()]
    return _plan_sweep([str(s) for s in specs], list(overrides), list(sweeps), region=region, env=env, now=now,
                       by=by)


def sweep_record(candidates: Sequence[SweepPlan], *, resume: bool = True,
                 env: Mapping[str, str] | None = None) -> SweepRecord:
    """This run's record of a sweep (its `ok` candidates), kept in the state folder until every plan started: its
    `earlier` (plan index -> job name) are the plans an earlier run of the same sweep started and did not see
    through (with `resume`; without it, those records are dropped and every plan starts again). Call `started(index,
    job_name)` for each job started, then `close(finished)`: a finished sweep's record is removed."""
    from launcher.orchestrate.sweep_record import open_record

    return open_record([(c.index, c.plan) for c in candidates if c.ok and c.plan is not None], resume=resume, env=env)


def warm_pool_notes(plans: Sequence[Plan], max_concurrent: int | None) -> list[str]:
    """Why plans that keep their instances warm (cluster.keep_alive) will not reuse each other's pool."""
    from launcher.plan.sweep import warm_pool_notes as _notes

    return _notes(plans, max_concurrent)


def submit_many(plans: Sequence[Plan], *, max_concurrent: int | None = None, dry_run: bool = False,
                wait: bool = False, interval: float = POLL_S, skip_role_check: bool = False,
                clients: Clients | Callable[[str | None], Clients] | None = None,
                on_event: Callable[[Event], None] | None = None, retry: RetryPolicy | None = None,
                on_failure: Callable[[Plan, JobStatus], Plan | None] | None = None, priority: int | None = None,
                share: str | None = None) -> tuple[PlanRun, ...]:
    """Submit plans in order with at most `max_concurrent` jobs running; a queued plan starts as a job ends.

    Returns one PlanRun per plan (in the order given) once every plan started, or with `wait` (or a
    `retry` policy, or an `on_failure` hook) once every job ended. A job that ends in a failure class
    `retry` retries is submitted again as its next attempt after the policy's backoff; `on_failure`
    may instead return any plan to submit for a job that Failed or was Stopped (give one or the other).
    Nothing is printed: `on_event` gets each start, end, resubmission and error as an Event.

    Plans whose spec names an AWS Batch queue (cluster.queue) are handed to it after the same checks: Batch runs
    them as its service environment has room, `retry` becomes the queue's retryStrategy (Batch retries on AWS;
    nothing here waits for it unless `wait`), `priority` and `share` go with each job; `max_concurrent` and
    `on_failure` are for jobs this process runs and are refused with a queue."""
    from launcher.core.errors import UsageError
    from launcher.orchestrate.batch import any_queued, submit_queued
    from launcher.orchestrate.queue import run_queue

    if any_queued(plans):
        if on_failure is not None:
            raise UsageError("on_failure decides in this process; a Batch queue retries by its retryStrategy "
                             "(give retry)")
        return submit_queued(plans, priority=priority, share=share, retry=retry, max_concurrent=max_concurrent,
                             dry_run=dry_run, wait=wait, interval=interval, skip_role_check=skip_role_check,
                             clients=clients, on_event=on_event)
    if priority is not None or share:
        raise UsageError("priority and share are for a Batch queue: no plan names one (cluster.queue)")

    return run_queue(plans, max_concurrent=max_concurrent, dry_run=dry_run, wait=wait, interval=interval,
                     skip_role_check=skip_role_check, clients=clients, on_event=on_event, retry=retry,
                     on_failure=on_failure)


def rerun(name: str, *, dry_run: bool = False, skip_role_check: bool = False,
          clients: Clients | None = None, resume: bool = False) -> Submission:
    """Submit the plan stored with job `name` again: a new job name (tagged smp-launch:rerun-of=<name>),
    the job's own source tarball, and every check submit makes; with `resume`, under the job's own checkpoint
    S3 URI, so it carries on from its last checkpoint. Raises NotLaunchedHere (exit 2) for a job smp-launch did
    not start, JobNotFound, and what submit raises."""
    from launcher.orchestrate.provenance import rerun as _rerun

    return _rerun(name, clients or connect(), dry_run=dry_run, skip_role_check=skip_role_check, resume=resume)


def diff(a: str, b: str, *, everything: bool = False, spec: bool = False,
         clients: Clients | None = None) -> list[Change]:
    """How two jobs' stored plans differ, key by key (either side may be a spec file: its plan now).

    Keys that always differ (the job name, the spec hash) are left out unless `everything`; with `spec`,
    the stored specs are compared instead of the plans."""
    from launcher.orchestrate.provenance import diff as _diff

    return _diff(a, b, clients or connect(), everything=everything, spec=spec)


def calibrate(names: Sequence[str], *, clients: Clients | None = None,
              env: Mapping[str, str] | None = None) -> CalibrationResult:
    """Measure finished jobs' steady speed from their progress lines (warm-up and checkpoint steps left out)
    against the published prediction for their stored specs, and store the ratios beside the state (`env`:
    where, os.environ by default): later plans on each instance type use their geometric mean and say so.
    Reads only from AWS. Raises NotLaunchedHere for a job smp-launch did not start, UsageError for one
    still running or with too few progress lines (nothing is stored then)."""
    from launcher.orchestrate.calibrate import calibrate as _calibrate

    return _calibrate(clients or connect(), list(names), env)


def is_spec_file(ref: str) -> bool:
    """Whether `diff` takes `ref` as a spec file rather than a job name (a path: SageMaker job names hold
    only letters, digits and hyphens)."""
    from launcher.orchestrate.provenance import is_spec_file as _is_spec_file

    return _is_spec_file(ref)


def pipeline_definition(plans: Sequence[Plan], name: str, *, role_arn: str | None = None,
                        clients: Clients | None = None, retry: RetryPolicy | None = None) -> dict[str, Any]:
    """The SageMaker Pipeline definition for the plans (one TrainingStep each, in order): no AWS call."""
    from launcher.orchestrate.pipeline import pipeline_definition as _definition

    return _definition(plans, name, role_arn=role_arn, clients=clients, retry=retry)


def upsert_pipeline(plans: Sequence[Plan], name: str, *, role: str | None = None, dry_run: bool = False,
                    skip_role_check: bool = False, clients: Clients | None = None, retry: RetryPolicy | None = None,
                    start: bool = False, parameters: Mapping[str, str] | None = None,
                    notify: str | None = None) -> PipelineResult:
    """Check each plan as submit does, upload the source tarballs not yet in S3, and create or update the
    pipeline (with dry_run: only the checks and the definition). With `start`, start an execution with
    `parameters` (pipeline parameter name -> value), each checked against its step's plan before anything is
    written. `retry` decides the steps' retry policies; `notify` (an SNS topic ARN, default the first spec's)
    gets each execution's end. The clients are for the plans' region (made for it when not given)."""
    from launcher.orchestrate.pipeline import upsert_pipeline as _upsert

    return _upsert(plans, name, role=role, dry_run=dry_run, skip_role_check=skip_role_check, clients=clients,
                   retry=retry, start=start, parameters=parameters, notify=notify)
