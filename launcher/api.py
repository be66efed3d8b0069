"""The public Python API: what the CLI, pipelines (Airflow, SageMaker Pipelines, CI) and tests share.

Each function takes plain values and optional injected `clients` (launcher.core.aws.Clients), returns
typed objects, and raises LauncherError subclasses; nothing here prints, prompts or exits. The CLI
(launcher.cli) is a thin shell that maps these results and errors to output and exit codes.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import datetime

    from launcher.core.aws import Clients
    from launcher.jobs.status import JobStatus, JobSummary, Outcome
    from launcher.jobs.tail import LogLines
    from launcher.orchestrate.pipeline import PipelineResult
    from launcher.orchestrate.provenance import Change
    from launcher.orchestrate.queue import Event, PlanRun
    from launcher.orchestrate.retry import RetryPolicy
    from launcher.plan.build import Plan
    from launcher.plan.sweep import Candidate
    from launcher.spec.loader import LoadedSpec
    from launcher.submission.create import Submission


def connect(profile: str | None = None, region: str | None = None) -> Clients:
    """The one AWS client factory (profile, region and AWS_ENDPOINT_URL honoured), created lazily."""
    from launcher.core.aws import Clients

    return Clients(profile=profile, region=region)


def load_spec(path: str, overrides: Sequence[str] | Mapping[str, Any] = (),
              env: Mapping[str, str] | None = None) -> LoadedSpec:
    """Read, merge (extends), override and validate a spec file; raises SpecError with `.problems`.

    `overrides` are `--set` strings (`"training.batch_size=4"`) or a mapping of dotted keys to values."""
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
    import os

    from launcher.plan.build import build_plan as _build
    from launcher.plan.build import resolve_region

    resolved = resolve_region(spec.spec.cluster.region, os.environ if env is None else env, flag=region,
                              profile=profile)
    return _build(spec, now=now, env=env, region=resolved)


def submit(plan: Plan, *, dry_run: bool = False, skip_role_check: bool = False,
           clients: Clients | None = None) -> Submission:
    """Check the buckets and the role, upload the source bundle if new and start the job (not with dry_run).

    A queue of one (submit_many with one plan that does not wait). The clients are for the plan's
    region (made for it when not given). Raises SpecError when the plan's advisor found errors,
    RoleRefused, AwsError, and Interrupted on Ctrl-C while the job is submitted (with `.started`:
    whether it exists). Warnings are in the Submission, never printed."""
    from launcher.orchestrate.queue import submit_one

    return submit_one(plan, dry_run=dry_run, skip_role_check=skip_role_check,
                      clients=clients or connect(region=plan.region))


def status(name: str, *, clients: Clients | None = None, diagnose: bool = True) -> JobStatus:
    """The job's status now (DescribeTrainingJob); raises JobNotFound for a name SageMaker does not know.

    A job that failed carries its failure class (`.failure`); with `diagnose` it is read from algo-1's log
    tail (and, for out of memory, the job's plan) too, not only from the FailureReason."""
    from launcher.jobs.status import job_status

    return job_status(clients or connect(), name, diagnose=diagnose)


def wait(names: Iterable[str], *, timeout: float | None = None, interval: float = 30.0,
         clients: Clients | None = None, on_change: Callable[[JobStatus], None] | None = None) -> list[JobStatus]:
    """Poll until every job is terminal (or `timeout` seconds pass); the last status of each, in the order given.

    A job still running at the timeout is returned as it was last seen (`.terminal` is False). A failed job
    carries its failure class and remedy (`.failure`, launcher.jobs.failures). `on_change` is called with each
    status that differs from the one seen before for that job."""
    from launcher.jobs.status import wait as _wait

    return _wait(clients or connect(), names, timeout=timeout, interval=interval, on_change=on_change)


def worst_exit_code(outcomes: Iterable[Outcome]) -> int:
    """One exit code for what `wait` or `submit_many` returned: an error's (the first), else 1 any Failed,
    5 any Stopped, 124 any job a wait left running, 0 all Completed (the CLI's exit code)."""
    from launcher.jobs.status import worst_exit_code as _worst

    return _worst(outcomes)


def resolve_job(name: str, region: str | None = None) -> tuple[str, str | None]:
    """(job name, region): `latest` is the last job submitted from this machine, in its region unless
    `region` is given; any other name is returned as it is. Raises UsageError when there is no record."""
    from launcher.core.state import resolve_job as _resolve

    return _resolve(name, region)


def logs(name: str, *, follow: bool = False, hosts: Iterable[int] | None = None, since: float | None = None,
         grep: str | None = None, clients: Clients | None = None) -> LogLines:
    """The job's log lines from every host (algo-N), typed and sanitised; with `follow`, until the job ends.

    `since` is seconds back from now. Once a followed job's lines are exhausted, the iterator holds its
    `status` and `exit_code`; notes (throttling, late lines) go to the `launcher.logs` logger, never to stdout."""
    from launcher.jobs.tail import iter_lines

    return iter_lines(name, clients or connect(), follow=follow, since=since, hosts=hosts, grep=grep)


def stop(name: str, *, clients: Clients | None = None) -> JobStatus:
    """Stop a running job (no question asked: the caller decided); its status after the request.

    A job that has already ended is left alone: its status is returned as it is."""
    from launcher.jobs.status import job_status
    from launcher.jobs.status import stop as _stop

    clients = clients or connect()
    _stop(clients, name, yes=True, confirm=None)
    return job_status(clients, name)


def list_jobs(*, running: bool = False, name_contains: str | None = None, limit: int = 50,
              clients: Clients | None = None) -> list[JobSummary]:
    """The newest jobs this tool launched (tagged smp-launch:managed), newest first."""
    from launcher.jobs.status import list_jobs as _list

    return _list(clients or connect(), running=running, name_contains=name_contains, limit=limit)


# -- many plans: sweeps and a queue ------------------------------------------------------------------------

def plan_sweep(specs: Sequence[str], overrides: Sequence[str] | Mapping[str, Any] = (),
               sweeps: Sequence[str] | Mapping[str, Sequence[Any]] = (), *, region: str | None = None,
               env: Mapping[str, str] | None = None, now: datetime | None = None) -> list[Candidate]:
    """Every spec times the cartesian product of `sweeps` (`"KEY=V1,V2"` strings, or KEY -> values),
    each loaded, planned and advised (no AWS call): ranked `ok` Candidates first, then the refused ones
    with their reasons. `overrides` apply to every plan. Raises UsageError for a malformed sweep."""
    import json

    from launcher.plan.sweep import plan_sweep as _plan_sweep

    if isinstance(overrides, Mapping):
        overrides = [f"{key}={json.dumps(value)}" for key, value in overrides.items()]
    if isinstance(sweeps, Mapping):
        sweeps = [f"{key}={','.join(json.dumps(v) for v in values)}" for key, values in sweeps.items()]
    return _plan_sweep([str(s) for s in specs], list(overrides), list(sweeps), region=region, env=env, now=now)


def warm_pool_notes(plans: Sequence[Plan], max_concurrent: int | None) -> list[str]:
    """Why plans that keep their instances warm (cluster.keep_alive) will not reuse each other's pool."""
    from launcher.plan.sweep import warm_pool_notes as _notes

    return _notes(plans, max_concurrent)


def submit_many(plans: Sequence[Plan], *, max_concurrent: int | None = None, dry_run: bool = False,
                wait: bool = False, interval: float = 30.0, skip_role_check: bool = False,
                clients: Clients | Callable[[str], Clients] | None = None,
                on_event: Callable[[Event], None] | None = None, retry: RetryPolicy | None = None,
                on_failure: Callable[[Plan, JobStatus], Plan | None] | None = None) -> tuple[PlanRun, ...]:
    """Submit plans in order with at most `max_concurrent` jobs running; a queued plan starts as a job ends.

    Returns one PlanRun per plan (in the order given) once every plan started, or with `wait` (or a
    `retry` policy, or an `on_failure` hook) once every job ended. A job that ends in a failure class
    `retry` retries is submitted again as its next attempt after the policy's backoff; `on_failure`
    may instead return any plan to submit for a job that Failed or was Stopped (give one or the other).
    Nothing is printed: `on_event` gets each start, end, resubmission and error as an Event."""
    from launcher.orchestrate.queue import run_queue

    return run_queue(plans, max_concurrent=max_concurrent, dry_run=dry_run, wait=wait, interval=interval,
                     skip_role_check=skip_role_check, clients=clients, on_event=on_event, retry=retry,
                     on_failure=on_failure)


# issue 13 (13c): provenance and SageMaker Pipelines

def rerun(name: str, *, dry_run: bool = False, skip_role_check: bool = False,
          clients: Clients | None = None) -> Submission:
    """Submit the plan stored with job `name` again: a new job name (tagged smp-launch:rerun-of=<name>),
    the job's own source tarball, and every check submit makes. Raises NotLaunchedHere (exit 2) for a
    job smp-launch did not start, JobNotFound, and what submit raises."""
    from launcher.orchestrate.provenance import rerun as _rerun

    return _rerun(name, clients or connect(), dry_run=dry_run, skip_role_check=skip_role_check)


def diff(a: str, b: str, *, everything: bool = False, spec: bool = False,
         clients: Clients | None = None) -> list[Change]:
    """How two jobs' stored plans differ, key by key (either side may be a spec file: its plan now).

    Keys that always differ (the job name, the spec hash) are left out unless `everything`; with `spec`,
    the stored specs are compared instead of the plans."""
    from launcher.orchestrate.provenance import diff as _diff

    return _diff(a, b, clients or connect(), everything=everything, spec=spec)


def pipeline_definition(plans: Sequence[Plan], name: str, *, role_arn: str | None = None,
                        clients: Clients | None = None) -> dict[str, Any]:
    """The SageMaker Pipeline definition for the plans (one TrainingStep each, in order): no AWS call."""
    from launcher.orchestrate.pipeline import pipeline_definition as _definition

    return _definition(plans, name, role_arn=role_arn, clients=clients)


def upsert_pipeline(plans: Sequence[Plan], name: str, *, role: str | None = None, dry_run: bool = False,
                    skip_role_check: bool = False, clients: Clients | None = None) -> PipelineResult:
    """Check each plan as submit does, upload the source tarballs not yet in S3, and create or update the
    pipeline (with dry_run: only the checks and the definition)."""
    from launcher.orchestrate.pipeline import upsert_pipeline as _upsert

    return _upsert(plans, name, role=role, dry_run=dry_run, skip_role_check=skip_role_check, clients=clients)
