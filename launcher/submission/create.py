"""Submitting a plan: check the account, upload, start. The only writer to AWS.

Everything that only reads runs first (`check_account`, and all a dry run does); the writes are a
content-addressed upload of the plan's source tarball (an object already there is reused only when it holds those
bytes: launcher.submission.source_store) and one CreateTrainingJob through the SDK. Nothing here prints: warnings
and notes are in the Submission.
"""
from __future__ import annotations

import contextlib
import re
import signal
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from launcher.core.aws import AwsError, Clients, QuotaError, deadline_error, explain, recording
from launcher.core.errors import EXIT_INTERRUPTED, EXIT_TERMINATED, Interrupted, LauncherError, UsageError
from launcher.core.frozen import freeze, thaw
from launcher.core.sanitize import DETAIL_LIMIT, MESSAGE_LIMIT, clean
from launcher.plan.build import Plan, blocking_errors, require_region
from launcher.render.source import split_s3
from launcher.submission import backend, source_store
from launcher.submission.backend import Start
from launcher.submission.buckets import check_bucket
from launcher.submission.channels import check_channels
from launcher.submission.pricing import Fetched, fetch_prices
from launcher.submission.quotas import QuotaCheck, check_quota, from_refusal, require
from launcher.submission.role import RoleCheck, RoleRefused, RoleVerdict, check_role, role_name


@dataclass(frozen=True)
class AccountCheck:
    """What submit learned by reading the account: the role's ARN, the role check, what it could not tell."""

    role_arn: str
    role_check: RoleCheck | None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Submission:
    """What submit did (or, with dry_run, would do); `to_dict()` is `submit --output json`.

    `request` is the plan's predicted CreateTrainingJob request with the role's resolved ARN: what
    the SDK sent (secret environment values redacted)."""

    job_name: str
    region: str
    console_url: str
    source_uri: str
    uploaded: bool
    dry_run: bool
    aws_calls: tuple[str, ...]
    role_check: RoleCheck | None  # None with skip_role_check
    warnings: tuple[str, ...]
    request: Mapping[str, Any]  # read-only; `to_dict()` gives a plain copy
    remembered: bool = False  # recorded as `latest` in the state folder
    notes: tuple[str, ...] = ()  # said after the job's name (e.g. `latest` not saved)
    quota: QuotaCheck | None = None  # the training-instance quota against what runs now
    prices: Fetched | None = None  # what the Price List API said (cached for later plans)

    def __post_init__(self) -> None:
        object.__setattr__(self, "request", freeze(self.request))
        for name in ("aws_calls", "warnings", "notes"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def started(self) -> bool:
        return not self.dry_run

    def to_dict(self) -> dict[str, Any]:
        return {"job_name": self.job_name, "region": self.region, "console_url": self.console_url,
                "source_uri": self.source_uri, "uploaded": self.uploaded, "dry_run": self.dry_run,
                "aws_calls": list(self.aws_calls),
                "role": self.role_check.as_dict() if self.role_check else None,
                "warnings": list(self.warnings), "request": thaw(self.request),
                "remembered": self.remembered, "notes": list(self.notes),
                "quota": self.quota.to_dict() if self.quota else None,
                "prices": self.prices.to_dict() if self.prices else None}


class JobExistence(Enum):
    """What SageMaker says of a job name after a create whose answer may not have come back; the value is
    Interrupted's `started` (True, False, or None for cannot tell)."""

    EXISTS = True
    ABSENT = False
    UNKNOWN = None


def console_url(region: str, job: str) -> str:
    return f"https://{region}.console.aws.amazon.com/sagemaker/home?region={region}#/jobs/{job}"


def _role_arn(plan: Plan, clients: Clients) -> str:
    role = plan.role or ""  # check_account refuses a plan without one before asking
    if role.startswith("arn:"):
        return role
    try:
        return str(clients.iam.get_role(RoleName=role_name(role))["Role"]["Arn"])
    except Exception as exc:
        raise explain(exc, f"looking up role {plan.role}") from None


def bind_region(plan: Plan, clients: Clients) -> str:
    """The plan's region, which the clients must use too (a plan is for one region: its image, its URIs)."""
    region = require_region(plan)
    if clients.region and clients.region != region:
        raise UsageError(f"the plan is for {region} but the clients are for {clients.region}; "
                         f"build the plan with region={clients.region!r}")
    clients.region = region
    return region


def check_account(plan: Plan, clients: Clients, *, skip_role_check: bool = False,
                  refuse_empty_channels: bool = True) -> AccountCheck:
    """Everything submit does that only reads AWS: the buckets' regions, the input channels, the role check, the
    role's ARN. A pipeline's channels may be given other prefixes per execution: `refuse_empty_channels` False
    makes an empty one a warning.

    Refuses (SpecError, exit 2) a plan whose advisor found errors, before any AWS call."""
    refused = blocking_errors(plan)
    if refused:
        raise refused
    region = bind_region(plan, clients)
    if not plan.role:
        raise UsageError(f"{plan.spec_file}: no IAM role: set `role:` in the spec or export SMP_LAUNCH_ROLE "
                         "(a role name or ARN)")
    warnings: list[str] = []
    check = None
    try:
        buckets = {"output": plan.estimator.output_path, "code": plan.estimator.code_location,
                   **{f"input channel {name!r}": uri for name, uri in plan.channels.items()}}
        seen = set()
        for what, uri in buckets.items():
            if split_s3(uri)[0] not in seen:
                seen.add(split_s3(uri)[0])
                check_bucket(clients.s3, uri, region, what)
        warnings += check_channels(plan.channels, clients.s3, refuse_empty=refuse_empty_channels)
        if skip_role_check:
            role_arn = _role_arn(plan, clients)
        else:
            check = check_role(plan, clients.iam, clients.sts)
            if check.verdict == RoleVerdict.FAIL:
                raise RoleRefused("\n".join(check.lines()))
            if check.verdict == RoleVerdict.UNKNOWN:
                warnings += [f"role check: cannot tell: {u}" for u in check.unknowns]
            role_arn = check.role_arn or _role_arn(plan, clients)
    except LauncherError:
        raise
    except Exception as exc:
        raise explain(exc) from None
    return AccountCheck(role_arn, check, tuple(warnings))


def submit(plan: Plan, clients: Clients, *, dry_run: bool = False, skip_role_check: bool = False,
           start: Start | None = None) -> Submission:
    """Check the account, then (unless dry_run) upload the tarball if new and start the job through the plan's
    backend (launcher.submission.backend.schedule), or through `start` (a Batch queue's, or a test's).

    Prints nothing: warnings are in the result.
    Raises Interrupted (exit 130) on Ctrl-C while the job is being created, saying whether it exists
    (exit 143 for SIGTERM). A name SageMaker already holds is this submit's job only when one of its own
    tries may have created it; otherwise it is an AwsError naming the other job (exit 4).
    """
    if plan.spec.model.from_step:
        raise UsageError(f"{plan.spec_file}: model.from_step: {plan.spec.model.from_step!r} names a pipeline step; "
                         "a spec that starts from another step's model runs only in a pipeline (`pipeline`)")
    with recording(clients) as calls:
        return _submit(plan, clients, calls, dry_run=dry_run, skip_role_check=skip_role_check, start=start)


def _submit(plan: Plan, clients: Clients, calls: list[str], *, dry_run: bool, skip_role_check: bool,
            start: Start | None) -> Submission:
    try:
        account = check_account(plan, clients, skip_role_check=skip_role_check)
        quota = require(check_quota(clients, plan.instance_type, plan.instance_count, plan.region or "",
                                    spot=plan.estimator.use_spot_instances))
        prices = fetch_prices(clients, [plan.instance_type, *(a.instance_type for a in plan.alternatives)],
                              plan.region or "", env=clients.env)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted: {plan.job_name} was not started; nothing is running", plan.job_name,
                          JobExistence.ABSENT.value) from None
    uploaded = remembered = False
    notes: list[str] = []
    placed_note = None
    try:  # the tarball's key, verified to hold its bytes or be free (launcher.submission.source_store)
        if dry_run:
            placed = source_store.place(clients.s3, plan)
            plan, placed_note = placed.plan, placed.note
        else:
            plan, uploaded, placed_note = source_store.store(clients.s3, plan)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted while uploading the source: {plan.job_name} was not started; nothing "
                          "is running", plan.job_name, JobExistence.ABSENT.value) from None
    except LauncherError:
        raise
    except Exception as exc:
        raise explain(exc, "uploading the source tarball") from None
    source = plan.source
    if not dry_run:
        try:
            plan, started_notes = _start_claimed(start or backend.schedule, plan, account.role_arn, clients)
        except QuotaError as err:  # SageMaker counted another job first: a queue may wait for it
            raise from_refusal(err, plan.region or "") from None
        remembered, not_remembered = _remember(plan, clients)
        notes += [*started_notes, *([not_remembered] if not_remembered else [])]
    region = plan.region or ""
    return Submission(job_name=plan.job_name, region=region, console_url=console_url(region, plan.job_name),
                      source_uri=source.uri, uploaded=uploaded, dry_run=dry_run, aws_calls=tuple(calls),
                      role_check=account.role_check,
                      warnings=(*account.warnings, *([quota.note] if quota.note else []), *prices.notes,
                                *([placed_note] if placed_note else [])),
                      request=plan.request_for(account.role_arn), remembered=remembered, notes=tuple(notes),
                      quota=quota, prices=prices)


class NameTaken(AwsError):
    """SageMaker holds a job of the plan's name that none of this submit's tries made (exit 4)."""

    def __init__(self, message: str, taken: str):
        super().__init__(message)
        self.taken = taken


MAX_RENAMES = 5  # new names tried after SageMaker refused a name this process made as another's


def _start_claimed(start: Start, plan: Plan, role_arn: str, clients: Clients) -> tuple[Plan, list[str]]:
    """`_start` under a name this process holds: the plan's own unless another process on this machine claimed it
    (launcher.core.claims), then a new one; when SageMaker refuses a name this process made and claimed as taken
    (another machine's job), a new name is tried, up to MAX_RENAMES times. Returns the plan as started (renamed,
    or not) and the notes to print after its name. A plan this process submitted before keeps its name: SageMaker
    refuses it (NameTaken), as the same job started twice."""
    from launcher.core import claims
    from launcher.plan.naming import fresh_name, renamed

    notes: list[str] = []
    tried: set[str] = set()
    first = plan.job_name
    for tries in range(MAX_RENAMES + 1):
        held = claims.claim(plan.job_name, plan.spec_hash, clients.env)
        while held is claims.Claim.OTHERS:
            tried.add(plan.job_name)
            plan = renamed(plan, fresh_name(plan, tried))
            held = claims.claim(plan.job_name, plan.spec_hash, clients.env)
        try:
            lost = _start(start, plan, role_arn, clients)
        except NameTaken as err:
            if held is claims.Claim.OURS or tries == MAX_RENAMES:
                raise
            notes.append(f"{plan.job_name} was taken by a job another process made just before ({err.taken})")
            tried.add(plan.job_name)
            plan = renamed(plan, fresh_name(plan, tried))
            continue
        if plan.job_name != first:
            notes.append(f"{first} was another process's name by the time it was submitted: started as "
                         f"{plan.job_name}")
        return plan, [*notes, *([lost] if lost else [])]
    raise AssertionError("unreachable: the last try returns or raises")  # pragma: no cover


def _start(start: Start, plan: Plan, role_arn: str, clients: Clients) -> str | None:
    """CreateTrainingJob via `start`; on Ctrl-C or SIGTERM (even one the SDK swallowed), or when the answer
    was lost on the way back, find out what exists. Returns a note to print after the job's name."""
    name = plan.job_name
    with _noting_signals() as caught, _unanswered_tries(clients) as unanswered:
        try:
            start(plan, plan.source.uri, role_arn, clients)
        except KeyboardInterrupt:
            caught.note(signal.SIGINT)
        except LauncherError:
            raise
        except Exception as exc:
            if not type(exc).__module__.startswith("botocore"):
                raise LauncherError(f"the SageMaker SDK refused the job: {clean(exc, MESSAGE_LIMIT)}") from None
            error = explain(exc, "CreateTrainingJob")
            taken = _name_taken(exc)
            if taken is not None and not unanswered:
                raise NameTaken(f"{name} is taken: SageMaker already has a training job of that name ({taken}), "
                                f"which this submit did not start; {name} was not started (a new plan has a new "
                                "name: build it again, or change `name:`)", taken) from None
            if taken is None and not _answer_may_be_lost(exc):
                raise error from None
            state = job_exists(clients, name)
            if state is JobExistence.EXISTS:  # a try timed out after SageMaker had created the job
                return f"CreateTrainingJob's answer was lost ({error}), but SageMaker has {name}"
            if state is JobExistence.UNKNOWN:
                raise AwsError(f"{error}; cannot tell whether {name} was started: look it up in {plan.region} "
                               "before submitting it again") from None
            raise error from None
        if caught.signum is None:
            return None
        clients.cancel_waits()
        state = job_exists(clients, name)
        region = plan.region
        said = "terminated" if caught.signum == signal.SIGTERM else "interrupted"
        if state is JobExistence.EXISTS:
            _remember(plan, clients)
            message = f"{said}, but {name} was started in {region} and is running"
        elif state is JobExistence.ABSENT:
            message = f"{said}: {name} was not started (SageMaker has no such job in {region}); nothing is running"
        else:
            message = f"{said}: cannot tell whether {name} was started; look it up in {region} before submitting again"
        code = EXIT_TERMINATED if caught.signum == signal.SIGTERM else EXIT_INTERRUPTED
        raise Interrupted(message, name, state.value, code)


class _Caught:
    """The signal that stopped CreateTrainingJob (SIGTERM wins over SIGINT: the process is being ended)."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def note(self, signum: int) -> None:
        if self.signum is None or signum == signal.SIGTERM:
            self.signum = signum


@contextlib.contextmanager
def _noting_signals() -> Iterator[_Caught]:
    """Remember a Ctrl-C or a SIGTERM even if the code it interrupts swallows the KeyboardInterrupt.

    SIGTERM (a CI cancel, `timeout`, Kubernetes ending a pod) would otherwise end the process at once,
    leaving a job nobody was told of; here it unwinds like Ctrl-C, so what exists is looked up and said.
    The SDK's telemetry wrapper ends in `finally: return response`, which discards a KeyboardInterrupt
    raised inside CreateTrainingJob; the signal noted here survives that.
    """
    caught = _Caught()

    def handler(signum, frame):
        caught.note(signum)
        raise KeyboardInterrupt

    previous: dict[int, Any] = {}
    for wanted in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[wanted] = signal.signal(wanted, handler)
        except ValueError:  # not the main thread: nothing to install, rely on the exception alone
            pass
    try:
        yield caught
    finally:
        for signum, handled in previous.items():
            if handled is not None:
                signal.signal(signum, handled)


@contextlib.contextmanager
def _unanswered_tries(clients: Clients) -> Iterator[list[int]]:
    """The tries of CreateTrainingJob, by this thread, whose answer never came (a lost connection, a
    timeout) or was a server error: SageMaker may have created the job on any of them. Only after one of
    those is a later try's "name already exists" this submit's own job."""
    unanswered: list[int] = []
    me = threading.get_ident()

    def note(exception: BaseException | None = None, response_dict: Mapping[str, Any] | None = None,
             **_: Any) -> None:
        status = int((response_dict or {}).get("status_code") or 0)
        if threading.get_ident() == me and (exception is not None or status >= 500):
            unanswered.append(status)

    try:
        events = clients.sagemaker.meta.events
    except (AttributeError, LauncherError):  # a test double without botocore's events
        events = None
    if events is not None:
        events.register("response-received.sagemaker.CreateTrainingJob", note)
    try:
        yield unanswered
    finally:
        if events is not None:
            events.unregister("response-received.sagemaker.CreateTrainingJob", note)


def _answer_may_be_lost(exc: BaseException) -> bool:
    """A failure after which the job may exist all the same: a try that timed out or lost its
    connection (botocore retried it)."""
    from botocore import exceptions as bx

    return isinstance(exc, (bx.HTTPClientError, bx.ConnectionError, deadline_error()))


def _name_taken(exc: BaseException) -> str | None:
    """SageMaker's refusal of a name in use ("ResourceInUse: Training job names must be unique ... a training
    job with this name already exists (ARN)"): the existing job as SageMaker names it; None for any other
    error. Whose job it is, only the tries this process made can tell."""
    from botocore import exceptions as bx

    if not isinstance(exc, bx.ClientError):
        return None
    err = exc.response.get("Error", {})
    message = str(err.get("Message", ""))
    lowered = message.lower()
    if str(err.get("Code", "")) != "ResourceInUse" and not ("already exists" in lowered or "must be unique" in lowered):
        return None
    arn = re.search(r"arn:[\w-]+:sagemaker:[^\s()]+", message)
    return clean(arn.group() if arn else message or "ResourceInUse", DETAIL_LIMIT)


def job_exists(clients: Clients, name: str) -> JobExistence:
    """DescribeTrainingJob by name: EXISTS, ABSENT (SageMaker says there is no such job) or UNKNOWN."""
    from botocore.exceptions import ClientError

    try:
        clients.sagemaker.describe_training_job(TrainingJobName=name)
        return JobExistence.EXISTS
    except ClientError as exc:
        err = exc.response.get("Error", {})
        code, message = str(err.get("Code", "")), str(err.get("Message", "")).lower()
        if code in ("ResourceNotFound", "ResourceNotFoundException") or (
                code == "ValidationException" and ("not found" in message or "could not find" in message)):
            return JobExistence.ABSENT
        return JobExistence.UNKNOWN
    except (Exception, KeyboardInterrupt):  # unreachable, throttled, or a second Ctrl-C: cannot tell
        return JobExistence.UNKNOWN
    finally:
        clients.cancel_waits()


def _remember(plan: Plan, clients: Clients) -> tuple[bool, str | None]:
    """Record the job as `latest`; a state folder that cannot be written is a warning, never a failure."""
    from launcher.core import state

    try:
        state.record_submitted(plan.job_name, plan.region, clients.env)
        return True, None
    except OSError as exc:
        folder = state.state_dir(clients.env)
        why = exc.strerror or type(exc).__name__
        return False, (f"{plan.job_name} is running, but it could not be remembered as `latest` ({folder}: {why}); "
                       f"use its name in later commands")
