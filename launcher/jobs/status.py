"""Jobs already launched: describe one, wait for some, list the tool's own, stop one. boto3 only, never the SDK.

Results are frozen dataclasses whose text from AWS is already made safe to print (launcher.core.sanitize);
their `to_dict()` is the `--output json` shape of the matching command."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from launcher.core.aws import Clients, explain, pages
from launcher.core.durations import POLL_S
from launcher.core.enums import StrEnum
from launcher.core.errors import (
    EXIT_INVALID,
    EXIT_JOB_FAILED,
    EXIT_OK,
    EXIT_STOPPED,
    EXIT_TIMEOUT,
    LauncherError,
    UsageError,
)
from launcher.core.names import MANAGED_TAG, check_job_name
from launcher.core.sanitize import clean
from launcher.core.timeutil import epoch

if TYPE_CHECKING:
    from launcher.jobs.failures import Failure
    from launcher.jobs.queued import QueueState


class JobState(StrEnum):
    """A training job's TrainingJobStatus (DescribeTrainingJob); each value is SageMaker's own word, so the
    JSON that carries one is unchanged and a member equals its string."""

    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPING = "Stopping"
    STOPPED = "Stopped"

    @classmethod
    def parse(cls, text: str) -> JobState:
        """The state SageMaker named; a word it has never used is an error, not a traceback."""
        try:
            return cls(text)
        except ValueError:
            raise LauncherError(f"SageMaker reported a job status this version does not know: {clean(text, 80)!r}") \
                from None

    @property
    def terminal(self) -> bool:
        """Completed, Failed or Stopped: nothing about the job changes any more."""
        return self in (JobState.COMPLETED, JobState.FAILED, JobState.STOPPED)

    @property
    def exit_code(self) -> int:
        """The documented exit code for a job in this state: 1 Failed, 5 Stopped, else 0."""
        return {JobState.FAILED: EXIT_JOB_FAILED, JobState.STOPPED: EXIT_STOPPED}.get(self, EXIT_OK)


RUNNING_STATES = (JobState.IN_PROGRESS, JobState.STOPPING)
TERMINAL_STATES = (JobState.COMPLETED, JobState.FAILED, JobState.STOPPED)


class JobNotFound(LauncherError):
    exit_code = EXIT_INVALID


def exit_code_for(status: str) -> int:
    """The documented exit code for a job status: 1 Failed, 5 Stopped, else 0 (any other text too)."""
    try:
        return JobState(status).exit_code
    except ValueError:
        return EXIT_OK


class Outcome(Protocol):
    """Anything with an exit code: a JobStatus, a queue's PlanRun."""

    @property
    def exit_code(self) -> int: ...


_ENDINGS = (EXIT_JOB_FAILED, EXIT_STOPPED, EXIT_TIMEOUT)  # a job's outcomes, worst first; 0 is the best


def worst_exit_code(outcomes: Iterable[Outcome]) -> int:
    """One exit code for many outcomes (job statuses after a wait, a queue's PlanRuns).

    The first code that is not a job's ending wins (an error's: 2 invalid input, 3 refused, 4 AWS, 130
    interrupted); else 1 any Failed, 5 any Stopped, 124 any job still running, 0 all Completed. A JobStatus
    not yet terminal counts as 124: the wait that returned it ran out of time."""
    codes = [EXIT_TIMEOUT if isinstance(o, JobStatus) and not o.terminal else o.exit_code for o in outcomes]
    for code in codes:
        if code != EXIT_OK and code not in _ENDINGS:
            return code
    for code in _ENDINGS:
        if code in codes:
            return code
    return EXIT_OK


def describe(clients: Clients, job: str) -> dict[str, Any]:
    """DescribeTrainingJob, with "no such job" said plainly (exit 2) rather than as a ValidationException."""
    from botocore.exceptions import BotoCoreError, ClientError

    check_job_name(job)
    try:
        return clients.sagemaker.describe_training_job(TrainingJobName=job)
    except ClientError as exc:
        err = exc.response.get("Error", {})
        if err.get("Code") == "ValidationException" and "find" in str(err.get("Message", "")).lower():
            region = clients.sagemaker.meta.region_name
            raise JobNotFound(f"no training job named {job!r} in {region}; check the job name and the region") from None
        raise explain(exc, f"describing {job}") from None
    except BotoCoreError as exc:
        raise explain(exc, f"describing {job}") from None


def instances(desc: Mapping[str, Any]) -> tuple[str, int]:
    """(instance type, instance count), for plain and heterogeneous (InstanceGroups) clusters."""
    rc = desc.get("ResourceConfig") or {}
    if rc.get("InstanceCount"):
        return rc.get("InstanceType", "?"), int(rc["InstanceCount"])
    groups = rc.get("InstanceGroups") or []
    types = sorted({g.get("InstanceType", "?") for g in groups})
    return ",".join(types) or "?", sum(int(g.get("InstanceCount", 0)) for g in groups)


@dataclass(frozen=True)
class Transition:
    """One SecondaryStatusTransitions entry: a phase with its start, end (None while current) and message."""

    status: str
    start: float | None
    end: float | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "start": self.start, "end": self.end, "message": self.message}


@dataclass(frozen=True)
class JobStatus:
    """A training job as DescribeTrainingJob reports it, every text made safe to print (launcher.core.sanitize).

    `to_dict()` is exactly what `smp-launch status --output json` prints."""

    job_name: str
    arn: str | None
    status: JobState
    secondary_status: str | None
    transitions: tuple[Transition, ...]
    instance_type: str
    instance_count: int
    image: str | None
    created: float | None
    training_start: float | None
    training_end: float | None
    training_seconds: int | None
    billable_seconds: int | None
    failure_reason: str | None
    model_artifacts: str | None
    failure: Failure | None = None  # the failure class (launcher.jobs.failures) of a Failed or spot-Stopped job
    queue: QueueState | None = None  # a job handed to an AWS Batch queue (launcher.jobs.queued), else None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", JobState(self.status))

    @classmethod
    def from_description(cls, desc: Mapping[str, Any], failure: Failure | None = None) -> JobStatus:
        """The status; `failure` is a diagnosis already made (launcher.jobs.failures.diagnose), else one is made
        from the description alone (FailureReason and transitions, no further call)."""
        from launcher.jobs.failures import classify

        if failure is None:
            failure = classify(desc["TrainingJobStatus"], desc.get("FailureReason"),
                               [(t.get("Status", ""), t.get("StatusMessage", ""))
                                for t in desc.get("SecondaryStatusTransitions", [])],
                               secondary_status=desc.get("SecondaryStatus"))
        itype, count = instances(desc)
        return cls(
            job_name=clean(desc["TrainingJobName"]), arn=_clean(desc.get("TrainingJobArn")),
            status=JobState.parse(desc["TrainingJobStatus"]), secondary_status=_clean(desc.get("SecondaryStatus")),
            transitions=tuple(Transition(clean(t["Status"]), epoch(t.get("StartTime")), epoch(t.get("EndTime")),
                                         clean(t.get("StatusMessage", "")))
                              for t in desc.get("SecondaryStatusTransitions", [])),
            instance_type=clean(itype), instance_count=count,
            image=_clean((desc.get("AlgorithmSpecification") or {}).get("TrainingImage")),
            created=epoch(desc.get("CreationTime")), training_start=epoch(desc.get("TrainingStartTime")),
            training_end=epoch(desc.get("TrainingEndTime")), training_seconds=desc.get("TrainingTimeInSeconds"),
            billable_seconds=desc.get("BillableTimeInSeconds"), failure_reason=_clean(desc.get("FailureReason")),
            model_artifacts=_clean((desc.get("ModelArtifacts") or {}).get("S3ModelArtifacts")),
            failure=failure,
        )

    @property
    def terminal(self) -> bool:
        """Completed, Failed or Stopped: nothing about the job changes any more."""
        return self.status.terminal

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this status: 1 Failed, 5 Stopped, else 0."""
        return self.status.exit_code

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_name": self.job_name, "arn": self.arn, "status": self.status.value,
            "secondary_status": self.secondary_status, "transitions": [t.to_dict() for t in self.transitions],
            "instance_type": self.instance_type, "instance_count": self.instance_count, "image": self.image,
            "created": self.created, "training_start": self.training_start, "training_end": self.training_end,
            "training_seconds": self.training_seconds, "billable_seconds": self.billable_seconds,
            "failure_reason": self.failure_reason, "model_artifacts": self.model_artifacts,
            "failure_class": self.failure.failure_class if self.failure else None,
            "remedy": self.failure.remedy if self.failure else None,
            "failure_evidence": list(self.failure.evidence) if self.failure else [],
            "queue": self.queue.to_dict() if self.queue else None,
        }


@dataclass(frozen=True)
class JobSummary:
    """One row of `list`: a job this tool launched, as SageMaker Search returns it (text made safe to print)."""

    job_name: str
    status: JobState | None
    secondary_status: str | None
    instance_type: str
    instance_count: int
    created: float | None
    training_end: float | None
    billable_seconds: int | None
    queue: str | None = None  # the Batch job queue of a job still waiting there (launcher.jobs.queued)

    @classmethod
    def from_search(cls, job: Mapping[str, Any]) -> JobSummary:
        itype, count = instances(job)
        state = job.get("TrainingJobStatus")
        return cls(job_name=clean(job["TrainingJobName"]), status=None if state is None else JobState.parse(state),
                   secondary_status=_clean(job.get("SecondaryStatus")), instance_type=clean(itype),
                   instance_count=count, created=epoch(job.get("CreationTime")),
                   training_end=epoch(job.get("TrainingEndTime")), billable_seconds=job.get("BillableTimeInSeconds"))

    def to_dict(self) -> dict[str, Any]:
        return {"job_name": self.job_name, "status": self.status.value if self.status else None,
                "secondary_status": self.secondary_status, "instance_type": self.instance_type,
                "instance_count": self.instance_count,
                "created": self.created, "training_end": self.training_end,
                "billable_seconds": self.billable_seconds, "queue": self.queue}


@dataclass(frozen=True)
class StopResult:
    """What `stop` did: whether a StopTrainingJob was sent, the job's status after it, and a sentence."""

    job_name: str
    stopped: bool
    status: JobState
    message: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", JobState(self.status))

    def to_dict(self) -> dict[str, Any]:
        return {"job_name": self.job_name, "stopped": self.stopped, "status": self.status.value,
                "message": self.message}


def _clean(text: str | None) -> str | None:
    return None if text is None else clean(text)


def job_status(clients: Clients, job: str, diagnose: bool = False) -> JobStatus:
    """The job's status now (one DescribeTrainingJob); with `diagnose`, a job that Failed (or was stopped by
    managed spot) is classified with algo-1's log tail and its plan too (launcher.jobs.failures.diagnose)."""
    desc = describe(clients, job)
    if diagnose and desc.get("TrainingJobStatus") in (JobState.FAILED, JobState.STOPPED):
        from launcher.jobs.failures import diagnose as diagnose_job

        return JobStatus.from_description(desc, diagnose_job(clients, desc))
    return JobStatus.from_description(desc)


SEARCH_PAGE = 100  # Search's most results a call
_FILTER_CHARS = 1024  # the most characters of one filter's Value (API_Filter)
_FILTERS = 20  # the most filters of one SearchExpression (API_SearchExpression)


def name_expressions(names: Iterable[str]) -> list[dict[str, Any]]:
    """SearchExpressions that together match exactly `names`: `TrainingJobName In a,b,...` filters of at most
    1,024 characters, up to 20 of them or-ed in one expression (about 300 names of 63 characters each)."""
    filters: list[dict[str, Any]] = []
    chunk: list[str] = []
    for name in names:
        if chunk and len(",".join(chunk)) + 1 + len(name) > _FILTER_CHARS:
            filters.append({"Name": "TrainingJobName", "Operator": "In", "Value": ",".join(chunk)})
            chunk = []
        chunk.append(name)
    if chunk:
        filters.append({"Name": "TrainingJobName", "Operator": "In", "Value": ",".join(chunk)})
    return [{"Filters": filters[i:i + _FILTERS], "Operator": "Or"} for i in range(0, len(filters), _FILTERS)]


def search_jobs(clients: Clients, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The named jobs as SageMaker Search returns them (each record has DescribeTrainingJob's fields): one call
    per 100 jobs. A job missing here may be too new for Search's index, or not exist."""
    found: dict[str, dict[str, Any]] = {}
    wanted = set(names)
    for expression in name_expressions(sorted(wanted)):
        for page in pages(clients.sagemaker, "search", "searching training jobs", Resource="TrainingJob",
                          SearchExpression=expression, PaginationConfig={"PageSize": SEARCH_PAGE}):
            for record in page.get("Results", []):
                job = record.get("TrainingJob") or {}
                if job.get("TrainingJobName") in wanted:
                    found[job["TrainingJobName"]] = job
    return found


def from_record(clients: Clients, record: Mapping[str, Any], diagnose: bool) -> JobStatus:
    """A job's status from its Search record (the fields DescribeTrainingJob gives); with `diagnose`, a Failed
    one is classified with its log tail too (launcher.jobs.failures.diagnose reads CloudWatch Logs, and S3 for
    an out-of-memory failure's plan, never SageMaker)."""
    if diagnose and record.get("TrainingJobStatus") == JobState.FAILED:
        from launcher.jobs.failures import diagnose as diagnose_job

        return JobStatus.from_description(record, diagnose_job(clients, record))
    return JobStatus.from_description(record)


def wait(clients: Clients, names: Iterable[str], *, timeout: float | None = None, interval: float = POLL_S,
         sleep: Callable[[float], None] | None = None, clock: Callable[[], float] | None = None,
         on_change: Callable[[JobStatus], None] | None = None, diagnose: bool = True,
         lookup: Callable[[Clients, str, bool], JobStatus] | None = None, use_search: bool = True) -> list[JobStatus]:
    """Poll every job until each is terminal or `timeout` seconds pass; the last status of each, in order.

    Each poll asks SageMaker Search for the jobs still running (one call per 100 jobs): its records carry
    DescribeTrainingJob's fields, so a job Search returns is never described, whatever its state (a Failed
    one is diagnosed from its record and its log tail: no SageMaker call); only a job Search does not return
    yet (created moments ago, or waiting in a Batch queue; one that is not found raises JobNotFound) is
    described. Where Search is refused, every running job is described. `on_change` gets each status whose (status,
    secondary status) differs from the last one seen. `sleep` and `clock` default to the time module's,
    looked up per call so tests can patch them; `lookup` replaces job_status for the describes
    (launcher.jobs.queued.job_status also knows jobs waiting in a Batch queue)."""
    sleep = sleep or time.sleep
    lookup = lookup or job_status
    clock = clock or time.monotonic
    pending = list(dict.fromkeys(names))
    last: dict[str, JobStatus] = {}
    deadline = None if timeout is None else clock() + timeout
    use_search = use_search and hasattr(clients.sagemaker, "search")  # a stand-in client may describe only
    while True:
        records: dict[str, dict[str, Any]] = {}
        if use_search:
            try:
                records = search_jobs(clients, pending)
            except LauncherError:
                use_search = False  # no sagemaker:Search (or no such operation): describe each job instead
        for name in pending:
            seen = last.get(name)
            record = records.get(name)
            if record is not None and (record.get("TrainingJobStatus"), record.get("SecondaryStatus")) == (
                    None if seen is None else (seen.status, seen.secondary_status)):
                continue  # unchanged
            if record is not None:
                now = from_record(clients, record, diagnose)
            else:
                now = lookup(clients, name, diagnose)
            last[name] = now
            if on_change is not None and (seen is None or (seen.status, seen.secondary_status) !=
                                          (now.status, now.secondary_status)):
                on_change(now)
        pending = [name for name in pending if not last[name].terminal]
        if not pending:
            break
        if deadline is None:
            sleep(interval)
            continue
        left = deadline - clock()
        if left <= 0:
            break
        sleep(min(interval, left))
    return [last[name] for name in dict.fromkeys(names)]


def list_jobs(clients: Clients, running: bool = False, name_contains: str | None = None,
              limit: int = 50) -> list[JobSummary]:
    """The newest jobs carrying the tool's tag, via SageMaker Search's paginator (one call per 100 jobs, tags
    included; at most 2,000 jobs looked at). `running` and `name_contains` are filters in the search
    expression, so the first page already holds the newest matching jobs.

    Filters are re-checked here too, should Search apply only some of them.
    """
    filters = []
    if name_contains:
        filters.append({"Name": "TrainingJobName", "Operator": "Contains", "Value": name_contains})
    if running:
        filters.append({"Name": "TrainingJobStatus", "Operator": "In",
                        "Value": ",".join(state.value for state in RUNNING_STATES)})
    filters.append({"Name": f"Tags.{MANAGED_TAG}", "Operator": "Equals", "Value": "true"})
    params: dict[str, Any] = {"Resource": "TrainingJob", "SearchExpression": {"Filters": filters},
                              "SortBy": "CreationTime", "SortOrder": "Descending",
                              "PaginationConfig": {"PageSize": min(SEARCH_PAGE, limit), "MaxItems": 2000}}
    rows: list[JobSummary] = []
    for page in pages(clients.sagemaker, "search", "listing training jobs", **params):
        for record in page.get("Results", []):
            job = record.get("TrainingJob") or {}
            tags = {t["Key"]: t["Value"] for t in job.get("Tags", [])}
            if tags.get(MANAGED_TAG) != "true":
                continue
            if name_contains and name_contains not in job.get("TrainingJobName", ""):
                continue
            if running and job.get("TrainingJobStatus") not in RUNNING_STATES:
                continue
            rows.append(JobSummary.from_search(job))
        if len(rows) >= limit:
            break
    rows.sort(key=lambda r: r.created or 0, reverse=True)
    return rows[:limit]


def stop(clients: Clients, job: str, yes: bool, confirm: Callable[[str], bool] | None,
         foreign: bool = False) -> StopResult:
    """Stop a running job, asking first unless `yes`; `confirm` is None when nobody can answer. A job smp-launch
    did not start is a NotOurs error (exit 2) unless `foreign` (launcher.jobs.ownership), before anyone is asked."""
    from botocore.exceptions import BotoCoreError, ClientError

    from launcher.jobs.ownership import require_ours

    desc = describe(clients, job)
    status = JobState.parse(desc["TrainingJobStatus"])
    if status is not JobState.IN_PROGRESS:
        return StopResult(clean(job), False, status, clean(f"{job} is {status}; nothing to stop"))
    if not foreign:
        require_ours(clients, job, desc)
    if not yes:
        itype, count = instances(desc)
        question = clean(f"Stop training job {job} ({desc.get('SecondaryStatus')}, {count} x {itype})?")
        if confirm is None:
            raise UsageError(f"stop asks before stopping {job}, and no `confirm` was given to ask with "
                             "(pass yes=True to stop without asking)")
        if not confirm(question):
            return StopResult(clean(job), False, status, "not stopped")
    try:
        clients.sagemaker.stop_training_job(TrainingJobName=job)
    except (ClientError, BotoCoreError) as exc:
        raise explain(exc, f"stopping {job}") from None
    after = JobState.parse(describe(clients, job)["TrainingJobStatus"])
    return StopResult(clean(job), True, after,
                      clean(f"{job} is {after}; SageMaker uploads what the job saved, then marks it Stopped"))
