"""Jobs handed to an AWS Batch queue for SageMaker Training (service jobs): find one by name, say where it is,
follow its training job, stop it. boto3 only, never the SDK.

A queued job is known by its service job's name (the plan's job name); the training job Batch creates for each
attempt has a name of Batch's choosing (`AWSBatch...`), read from the attempt's `serviceResourceId`
(https://docs.aws.amazon.com/batch/latest/APIReference/API_DescribeServiceJob.html). A name SageMaker does not
know is looked up in this account's SAGEMAKER_TRAINING queues (ListServiceJobs' JOB_NAME filter), so `status`
and `wait` work from any machine, long after the submitting process is gone; a lookup is remembered for the rest
of the process.

Its status is the training job's while an attempt runs, and Batch's own while it waits: SUBMITTED, PENDING,
RUNNABLE (with Batch's statusReason when it says why, e.g. a queue blocked for capacity), SCHEDULED, and
between attempts when Batch retries. Batch's terminal states follow its last training job
(https://docs.aws.amazon.com/batch/latest/userguide/service-job-status.html): SUCCEEDED is Completed, FAILED the
training job's Failed or Stopped, or Failed (Stopped when terminated) for a job that never reached SageMaker.
"""
from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from launcher.core.aws import AwsError, Clients, explain, pages
from launcher.core.durations import POLL_S
from launcher.core.errors import EXIT_INTERRUPTED, EXIT_OK
from launcher.core.sanitize import clean
from launcher.jobs import status as plain
from launcher.jobs.status import JobNotFound, JobState, JobStatus, JobSummary, StopResult

SERVICE_JOB_TYPE = "SAGEMAKER_TRAINING"
WAITING = ("SUBMITTED", "PENDING", "RUNNABLE")
DONE = ("SUCCEEDED", "FAILED")
SERVICE_ARN = "arn:aws"  # a service job's ARN: arn:aws:batch:REGION:ACCOUNT:service-job/ID
STOP_REASON = "stopped with smp-launch stop"
_KNOWN: dict[tuple[str | None, str], str] = {}  # (region, job name) -> service job ARN, for this process


@dataclass(frozen=True)
class QueueState:
    """Where a queued job is in its queue, as Batch says (text made safe to print): `status` is Batch's
    (SUBMITTED ... SUCCEEDED, FAILED), `reason` its statusReason, `training_job` the latest attempt's training
    job (None before Batch created one), `attempts` the attempts Batch made."""

    queue: str
    job_id: str
    job_arn: str
    status: str
    reason: str | None
    training_job: str | None
    attempts: int
    priority: int | None = None
    share_identifier: str | None = None

    @classmethod
    def from_description(cls, desc: Mapping[str, Any]) -> QueueState:
        arn = training_arn(desc)
        return cls(queue=clean(str(desc.get("jobQueue", "")).rsplit("/", 1)[-1]), job_id=clean(desc["jobId"]),
                   job_arn=clean(desc.get("jobArn") or ""), status=clean(desc["status"]),
                   reason=clean(desc["statusReason"]) if desc.get("statusReason") else None,
                   training_job=clean(arn.rsplit("/", 1)[-1]) if arn else None,
                   attempts=len(desc.get("attempts") or []), priority=desc.get("schedulingPriority"),
                   share_identifier=clean(desc["shareIdentifier"]) if desc.get("shareIdentifier") else None)

    @property
    def waiting(self) -> bool:
        """In the queue, not yet (or not now) running as a training job."""
        return self.status in WAITING

    def to_dict(self) -> dict[str, Any]:
        return {"queue": self.queue, "job_id": self.job_id, "job_arn": self.job_arn, "status": self.status,
                "reason": self.reason, "training_job": self.training_job, "attempts": self.attempts,
                "priority": self.priority, "share_identifier": self.share_identifier}

    def line(self) -> str:
        """One line for people: `RUNNABLE in queue q: why` (the reason only where Batch gives one)."""
        return f"{self.status} in queue {self.queue}" + (f": {self.reason}" if self.reason else "")


def training_arn(desc: Mapping[str, Any]) -> str | None:
    """The training job ARN of the latest attempt, or None before Batch created one."""
    resource = (desc.get("latestAttempt") or {}).get("serviceResourceId") or {}
    if resource.get("value"):
        return str(resource["value"])
    attempts = desc.get("attempts") or []
    last = (attempts[-1].get("serviceResourceId") or {}) if attempts else {}
    return str(last["value"]) if last.get("value") else None


def _batch(clients: Clients) -> Any:
    return clients.client("batch")


def _region(clients: Clients) -> str | None:
    return clients.region


def training_queues(clients: Clients) -> list[str]:
    """The ARNs of the account's SAGEMAKER_TRAINING job queues in the clients' region."""
    found = []
    for page in pages(_batch(clients), "describe_job_queues", "listing Batch job queues"):
        found += [q["jobQueueArn"] for q in page.get("jobQueues") or [] if q.get("jobQueueType") == SERVICE_JOB_TYPE]
    return found


def describe_service_job(clients: Clients, job: str) -> dict[str, Any]:
    try:
        return dict(_batch(clients).describe_service_job(jobId=job))
    except Exception as exc:
        raise explain(exc, f"describing service job {job}") from None


def locate(clients: Clients, name: str) -> dict[str, Any] | None:
    """DescribeServiceJob of the newest service job named `name` (or with this ARN) in the account's SageMaker
    training queues, or None when there is none; a lookup Batch refuses (no permission, no Batch in the region)
    is None too: the caller then says the name is unknown."""
    from botocore.exceptions import BotoCoreError, ClientError

    if name.startswith(SERVICE_ARN) and ":service-job/" in name:
        return describe_service_job(clients, name)
    known = _KNOWN.get((_region(clients), name))
    if known is not None:
        try:
            return dict(_batch(clients).describe_service_job(jobId=known))
        except (ClientError, BotoCoreError):  # gone from Batch's records: look the name up again
            _KNOWN.pop((_region(clients), name), None)

    try:
        newest: dict[str, Any] | None = None
        for queue in training_queues(clients):
            page = _batch(clients).list_service_jobs(jobQueue=queue, filters=[{"name": "JOB_NAME", "values": [name]}])
            for summary in page.get("jobSummaryList") or []:
                later = newest is None or (summary.get("createdAt") or 0) > (newest.get("createdAt") or 0)
                if summary.get("jobName") == name and later:
                    newest = summary
    except (ClientError, BotoCoreError, AwsError):  # Batch could not be asked
        return None
    if newest is None:
        return None
    remember(clients, name, str(newest.get("jobArn") or newest["jobId"]))
    return describe_service_job(clients, str(newest.get("jobArn") or newest["jobId"]))


def remember(clients: Clients, name: str, job: str) -> None:
    """Note that `name` is the service job `job` (its ARN or id), so later reads in this process go straight to it."""
    _KNOWN[(_region(clients), name)] = job


def _payload(desc: Mapping[str, Any]) -> dict[str, Any]:
    try:
        payload = json.loads(desc.get("serviceRequestPayload") or "{}")
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def status_of(clients: Clients, desc: Mapping[str, Any], diagnose: bool = False) -> JobStatus:
    """The JobStatus of a service job: its latest training job's while that runs or once Batch is done, else
    Batch's own (InProgress with Batch's status as the secondary status while it waits or retries)."""
    state = QueueState.from_description(desc)
    name = clean(desc["jobName"])
    done = state.status in DONE
    if state.training_job:
        trained = plain.job_status(clients, state.training_job, diagnose=diagnose and done)
        if done or not trained.terminal:
            return dataclasses.replace(trained, job_name=name, queue=state)
        # the attempt ended and Batch will make another: the job is still on its way
        return dataclasses.replace(trained, job_name=name, status=JobState.IN_PROGRESS, secondary_status=state.status,
                                   failure=None, failure_reason=None, training_end=None, queue=state)
    payload = _payload(desc)
    rc = payload.get("ResourceConfig") or {}
    if not done:
        status = JobState.IN_PROGRESS
    elif state.status == "SUCCEEDED":
        status = JobState.COMPLETED
    else:
        status = JobState.STOPPED if desc.get("isTerminated") else JobState.FAILED
    created = desc.get("createdAt")
    stopped = desc.get("stoppedAt")
    return JobStatus(
        job_name=name, arn=None, status=status, secondary_status=state.status, transitions=(),
        instance_type=clean(str(rc.get("InstanceType") or "?")), instance_count=int(rc.get("InstanceCount") or 0),
        image=clean(str((payload.get("AlgorithmSpecification") or {}).get("TrainingImage") or "")) or None,
        created=created / 1000 if isinstance(created, (int, float)) and created else None,
        training_start=None, training_end=stopped / 1000 if done and isinstance(stopped, (int, float)) else None,
        training_seconds=None, billable_seconds=None,
        failure_reason=state.reason if status is JobState.FAILED else None, model_artifacts=None, queue=state)


def job_status(clients: Clients, job: str, diagnose: bool = False) -> JobStatus:
    """launcher.jobs.status.job_status, and a job waiting in (or run by) a Batch queue when SageMaker has no
    training job of that name."""
    if (_region(clients), job) in _KNOWN or job.startswith(SERVICE_ARN):
        found = locate(clients, job)
        if found is not None:
            return status_of(clients, found, diagnose)
    try:
        return plain.job_status(clients, job, diagnose=diagnose)
    except JobNotFound as missing:
        found = locate(clients, job)
        if found is None:
            raise JobNotFound(f"{missing} (nor in any SageMaker training job queue of AWS Batch)") from None
        return status_of(clients, found, diagnose)


def stop(clients: Clients, name: str, desc: Mapping[str, Any], foreign: bool = False,
         confirm: Callable[[str], bool] | None = None) -> StopResult:
    """Terminate a service job (TerminateServiceJob): one still waiting ends at once, one running has its training
    job stopped by Batch. A job Batch is done with is left alone; one smp-launch did not queue is refused unless
    `foreign` (launcher.jobs.ownership); with `confirm`, it is asked first."""
    from launcher.jobs.ownership import require_ours_queued

    state = QueueState.from_description(desc)
    if state.status in DONE:
        after = status_of(clients, desc)
        return StopResult(clean(name), False, after.status, clean(f"{name} is {after.status}; nothing to stop"))
    if not foreign:
        require_ours_queued(name, desc)
    if confirm is not None and not confirm(clean(f"Terminate queued job {name} (queue {state.queue})?")):
        return StopResult(clean(name), False, status_of(clients, desc).status, "not stopped")
    try:
        _batch(clients).terminate_service_job(jobId=desc.get("jobArn") or desc["jobId"], reason=STOP_REASON)
    except Exception as exc:
        raise explain(exc, f"terminating service job {name}") from None
    after = status_of(clients, describe_service_job(clients, str(desc.get("jobArn") or desc["jobId"])))
    return StopResult(clean(name), True, after.status,
                      clean(f"{name} is terminated in queue {state.queue}" +
                            (f"; SageMaker stops {state.training_job}" if state.training_job else "")))


def waiting_jobs(clients: Clients, name_contains: str | None, limit: int) -> list[JobSummary]:
    """`list` rows for jobs still waiting in the account's SageMaker training queues (Batch's WAITING statuses),
    newest first; their training jobs, once made, are listed by SageMaker Search like any other."""
    from botocore.exceptions import BotoCoreError, ClientError

    rows: list[JobSummary] = []
    try:
        for queue in training_queues(clients):
            for status in WAITING:
                page = _batch(clients).list_service_jobs(jobQueue=queue, jobStatus=status, maxResults=100)
                for s in page.get("jobSummaryList") or []:
                    if name_contains and name_contains not in str(s.get("jobName", "")):
                        continue
                    usage = s.get("capacityUsage") or []
                    count = int(sum(u.get("quantity", 0) for u in usage if u.get("capacityUnit") == "NUM_INSTANCES"))
                    rows.append(JobSummary(job_name=clean(s["jobName"]), status=None,
                                           secondary_status=clean(str(s.get("status"))), instance_type="?",
                                           instance_count=count, created=(s.get("createdAt") or 0) / 1000 or None,
                                           training_end=None, billable_seconds=None,
                                           queue=clean(queue.rsplit("/", 1)[-1])))
    except (ClientError, BotoCoreError, AwsError):
        return []  # no Batch here, or no permission to read it: the SageMaker jobs are still listed
    rows.sort(key=lambda r: r.created or 0, reverse=True)
    return rows[:limit]


@dataclass(frozen=True)
class Attempts:
    """The training jobs behind a queued job, as they come: `next()` waits (polling Batch every `interval`) until
    the next attempt's training job exists, or the job is done; `notes` get each queue status once."""

    clients: Clients
    name: str
    interval: float = POLL_S
    sleep: Callable[[float], None] = time.sleep

    def training_jobs(self, on_note: Callable[[str], None], follow: bool) -> Iterator[str | QueueState]:
        """Each attempt's training job name in turn; ends with the job's final QueueState (or, without `follow`,
        with the state now when there is no training job to read)."""
        seen_jobs: set[str] = set()
        said: set[tuple[str, str | None]] = set()
        while True:
            desc = locate(self.clients, self.name)
            if desc is None:
                raise JobNotFound(f"no service job named {self.name!r} in this region's SageMaker training queues")
            state = QueueState.from_description(desc)
            if state.training_job and state.training_job not in seen_jobs and not (state.waiting and seen_jobs):
                seen_jobs.add(state.training_job)
                yield state.training_job
                continue
            if not follow and state.status not in DONE:
                on_note(f"{self.name} is {state.line()}; Batch has made no training job for it yet")
            if state.status in DONE or not follow:
                yield state
                return
            if (state.status, state.reason) not in said:
                said.add((state.status, state.reason))
                on_note(f"{self.name} is {state.line()}; waiting for Batch to start it")
            self.sleep(self.interval)


def follow(name: str, clients: Clients, desc: Mapping[str, Any], follow_job: Callable[[str], Any],
           on_note: Callable[[str], None], *, until_end: bool, interval: float,
           sleep: Callable[[float], None] = time.sleep) -> Any:
    """Follow a queued job: each attempt's training job through `follow_job` (launcher.jobs.logs.follow for that
    name, returning a FollowResult), waiting in between while Batch queues or retries it. The result is the last
    follow's, or one made from Batch's state when no training job was ever made; its exit code is the job's."""
    from launcher.jobs.logs import FollowResult

    remember(clients, name, str(desc.get("jobArn") or desc["jobId"]))
    last = None
    try:
        for item in Attempts(clients, name, interval, sleep).training_jobs(on_note, until_end):
            if isinstance(item, QueueState):
                if last is not None:
                    return dataclasses.replace(last, job=name)
                status = status_of(clients, describe_service_job(clients, item.job_arn or item.job_id))
                code = status.exit_code if status.terminal else EXIT_OK
                return FollowResult(name, status.status.value, code, status.failure_reason, to_end=status.terminal)
            last = follow_job(item)
            if last.interrupted or not until_end:
                return dataclasses.replace(last, job=name)
    except KeyboardInterrupt:
        return FollowResult(name, None, EXIT_INTERRUPTED, interrupted=True)
    return last

