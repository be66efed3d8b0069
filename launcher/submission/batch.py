"""Handing a plan to an AWS Batch job queue for SageMaker Training instead of starting the job: a queue that
outlives the submitting machine.

A plan whose `cluster.queue` names a SAGEMAKER_TRAINING job queue gets every check a submit makes (the
advisor, the buckets, the role, the tarball uploaded), plus the queue's own (it exists, takes SageMaker
training jobs, is enabled, can ever hold this many instances; a fair-share queue needs a share identifier),
and then one SubmitServiceJob (https://docs.aws.amazon.com/batch/latest/APIReference/API_SubmitServiceJob.html)
whose `serviceRequestPayload` is the CreateTrainingJob request the plan predicts, as JSON. Batch creates the
training job when the queue's service environment has room; retries run on AWS by the job's retryStrategy.

Why SubmitServiceJob here rather than SDK v2's `sagemaker.aws_batch.training_queue.TrainingQueue`: the SDK's
queue makes its own boto3 client (`boto3.client("batch")`: no profile, region, endpoint or call deadline of this
tool's client factory, and no record of the calls a dry run lists), sends a default `timeoutConfig` of one day
whatever the job's `max_run` (a longer job would be killed by Batch), and needs the SDK imported, which `status`
and `wait` never do. What it sends is easy to match: the CreateTrainingJob request without its `Tags`, which
become the service job's tags (tests/test_batch.py holds the two side by side), so a dry run shows the exact
request that will be sent.

Retries: Batch retries a training job that failed for capacity on its own, without using an attempt
(https://docs.aws.amazon.com/batch/latest/userguide/service-job-retries.html). For the other failure classes
a `--retry` names, `evaluateOnExit` can only match the start of the attempt's status reason (SageMaker's
FailureReason after "Received status from SageMaker:"; a pattern may end in `*`, API_ServiceJobEvaluateOnExit),
so only a class that SageMaker's reason names in its first word can be retried there; the rest are decided
from the job's log and are refused with the reason why.
"""
from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from launcher.core.aws import Clients, explain
from launcher.core.errors import Interrupted, LauncherError, UsageError
from launcher.core.frozen import freeze, thaw
from launcher.plan.build import Plan
from launcher.submission.backend import Start
from launcher.submission.create import AccountCheck, Submission

SERVICE_JOB_TYPE = "SAGEMAKER_TRAINING"
# Both spellings are in AWS's own material: the user guide's examples put a space after the colon, the SDK's
# default retry rule (sagemaker/aws_batch/constants.py) none; a rule is written for each.
STATUS_PREFIXES = ("Received status from SageMaker: ", "Received status from SageMaker:")
# Failure classes whose SageMaker FailureReason starts with a word of its own (launcher.jobs.failures).
REASON_STARTS: Mapping[str, tuple[str, ...]] = {"internal_error": ("InternalServerError",)}
BATCH_RETRIES = frozenset({"capacity"})  # Batch's own retry, whatever the strategy says
MAX_RULES = 5  # evaluateOnExit entries (API_ServiceJobRetryStrategy)
MAX_ATTEMPTS = 10  # retryStrategy.attempts, 1-10
MAX_PRIORITY = 9999  # schedulingPriority, 0-9999
# Batch's attempt timeout is a backstop behind SageMaker's own MaxRuntimeInSeconds (and MaxWaitTimeInSeconds for
# spot): the time the instances take to start and the model to upload come on top of the run.
TIMEOUT_MARGIN_S = 3600
QUEUE_ARN = re.compile(r"^arn:aws[a-z-]*:batch:[a-z0-9-]+:\d{12}:job-queue/(?P<name>[A-Za-z0-9_-]{1,128})$")


@dataclass(frozen=True)
class QueueOptions:
    """How a plan goes into its queue: `priority` (schedulingPriority, 0-9999: higher first on a queue with a
    scheduling policy), `share` (the fair-share identifier), and the retry strategy (`retry_classes` and
    `attempts`, from a RetryPolicy)."""

    priority: int | None = None
    share: str | None = None
    retry_classes: tuple[str, ...] = ()
    attempts: int = 1

    def __post_init__(self) -> None:
        if self.priority is not None and not 0 <= self.priority <= MAX_PRIORITY:
            raise UsageError(f"priority {self.priority}: give 0 to {MAX_PRIORITY} (Batch's schedulingPriority)")
        if not 1 <= self.attempts <= MAX_ATTEMPTS:
            raise UsageError(f"{self.attempts} attempts: a Batch queue retries a job at most {MAX_ATTEMPTS} "
                             "attempts in all (retryStrategy.attempts)")
        retry_strategy(self.retry_classes, self.attempts)  # refuses what Batch cannot express, before any call


@dataclass(frozen=True)
class QueuedSubmission(Submission):
    """A Submission to a Batch queue: the job's name is the service job's, and `queue` holds the queue, the
    service job's id and ARN (None in a dry run), and `service_request`: the SubmitServiceJob request as sent
    (its payload's secret environment values redacted)."""

    queue: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "queue", freeze(self.queue))

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "queue": thaw(self.queue)}


def queue_of(plan: Plan) -> str | None:
    """The job queue the plan's spec names (cluster.queue), or None: the plan starts its job itself."""
    spec = getattr(plan, "spec", None)
    cluster = getattr(spec, "cluster", None)
    return getattr(cluster, "queue", None) or None


def queue_arn(queue: str, region: str, account: str) -> str:
    return queue if queue.startswith("arn:") else f"arn:aws:batch:{region}:{account}:job-queue/{queue}"


def unexpressed(classes: Iterable[str]) -> list[str]:
    """The classes (and `exit:N`) a Batch retryStrategy cannot match: told from the job's log, not from the start
    of SageMaker's failure reason."""
    return sorted(c for c in set(classes) if c not in REASON_STARTS and c not in BATCH_RETRIES)


def _cannot(names: list[str]) -> str:
    can = sorted({*REASON_STARTS, *BATCH_RETRIES})
    return (f"a Batch queue cannot retry {', '.join(names)}: its retryStrategy matches only the start of "
            f"SageMaker's failure reason, and {'these are' if len(names) > 1 else 'that is'} told from the job's "
            f"log; retry {', '.join(can)} there, or submit without a queue (this machine then retries)")


def retry_strategy(classes: Iterable[str], attempts: int) -> dict[str, Any] | None:
    """Batch's retryStrategy for a RetryPolicy's classes and attempts (None: Batch's default, one attempt).

    Each class SageMaker names at the start of its FailureReason is a RETRY rule on the status reason; a catch-all
    EXIT ends the list (Batch retries a failure that no rule matches). Capacity is Batch's own retry. A class only
    the job's log tells (out of memory, an NCCL timeout, a script's exit code) has no rule: asked alone it is
    refused, beside one that can be retried it is left out (`retry_warnings` says so)."""
    wanted = sorted(set(classes))
    if attempts <= 1 or not wanted:
        return None
    missing = unexpressed(wanted)
    if missing and len(missing) == len([c for c in wanted if c not in BATCH_RETRIES]):
        raise UsageError(_cannot(missing))
    rules = [{"action": "RETRY", "onStatusReason": f"{prefix}{start}*"}
             for c in wanted for start in REASON_STARTS.get(c, ()) for prefix in STATUS_PREFIXES]
    if not rules:  # only what Batch retries on its own
        return None
    rules.append({"action": "EXIT", "onStatusReason": "*"})
    if len(rules) > MAX_RULES:
        raise UsageError(f"a Batch retryStrategy takes at most {MAX_RULES} rules; {', '.join(wanted)} need "
                         f"{len(rules)}: retry fewer classes")
    return {"attempts": attempts, "evaluateOnExit": rules}


def retry_warnings(options: QueueOptions) -> list[str]:
    """What a submit says about the classes of its retry policy that its queue cannot retry."""
    missing = unexpressed(options.retry_classes) if options.attempts > 1 else []
    return [f"{_cannot(missing)}; the others are retried on AWS"] if missing else []


def service_request(plan: Plan, queue: str, create_request: Mapping[str, Any],
                    options: QueueOptions) -> dict[str, Any]:
    """The SubmitServiceJob request for a plan whose CreateTrainingJob request is `create_request`: the payload is
    that request without its tags, which become the service job's (as the SDK's TrainingQueue sends them)."""
    payload = {k: v for k, v in thaw(create_request).items() if k != "Tags"}
    tags = {t["Key"]: t["Value"] for t in create_request.get("Tags") or ()}
    stopping = payload.get("StoppingCondition") or {}
    longest = int(stopping.get("MaxWaitTimeInSeconds") or stopping.get("MaxRuntimeInSeconds") or 86400)
    request: dict[str, Any] = {
        "jobName": plan.job_name, "jobQueue": queue, "serviceJobType": SERVICE_JOB_TYPE,
        "serviceRequestPayload": json.dumps(payload),
        "timeoutConfig": {"attemptDurationSeconds": longest + TIMEOUT_MARGIN_S},
    }
    strategy = retry_strategy(options.retry_classes, options.attempts)
    if strategy is not None:
        request["retryStrategy"] = strategy
    if options.priority is not None:
        request["schedulingPriority"] = options.priority
    if options.share:
        request["shareIdentifier"] = options.share
    if tags:
        request["tags"] = tags
    return request


@dataclass(frozen=True)
class QueueCheck:
    """What the queue check read: the queue's ARN, whether it has a scheduling policy, and the most instances
    any of its service environments can hold (None when Batch did not say)."""

    arn: str
    fair_share: bool
    max_instances: int | None


def check_queue(plan: Plan, queue: str, options: QueueOptions, batch: Any) -> QueueCheck:
    """Read the queue and its service environments (read-only); refuse what Batch would take but never run."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        found = batch.describe_job_queues(jobQueues=[queue]).get("jobQueues") or []
        detail = next((q for q in found if queue in (q.get("jobQueueName"), q.get("jobQueueArn"))), None)
        if detail is None:
            raise UsageError(f"cluster.queue {queue!r}: there is no such Batch job queue in {plan.region}; create "
                             "one of type SAGEMAKER_TRAINING with a service environment (docs/batch.md)")
        if detail.get("jobQueueType") != SERVICE_JOB_TYPE:
            raise UsageError(f"cluster.queue {queue!r} is a {detail.get('jobQueueType') or 'container'} job queue; "
                             "SageMaker training jobs go to a queue of type SAGEMAKER_TRAINING")
        if detail.get("state") != "ENABLED" or detail.get("status") not in (None, "VALID", "UPDATING"):
            raise UsageError(f"cluster.queue {queue!r} is {detail.get('state')} ({detail.get('status')}): it "
                             "accepts no jobs; enable it first")
        envs = [o["serviceEnvironment"] for o in detail.get("serviceEnvironmentOrder") or []]
        limits = []
        if envs:
            described = batch.describe_service_environments(serviceEnvironments=envs).get("serviceEnvironments")
            for env in described or []:
                limits += [int(c["maxCapacity"]) for c in env.get("capacityLimits") or []
                           if c.get("capacityUnit", "NUM_INSTANCES") == "NUM_INSTANCES" and "maxCapacity" in c]
    except LauncherError:
        raise
    except (ClientError, BotoCoreError) as exc:
        raise explain(exc, f"reading Batch job queue {queue}") from None
    fair_share = bool(detail.get("schedulingPolicyArn"))
    if fair_share and not options.share:
        raise UsageError(f"cluster.queue {queue!r} has a fair-share scheduling policy: give a share identifier "
                         "(--share)")
    if options.share and not fair_share:
        raise UsageError(f"cluster.queue {queue!r} has no fair-share scheduling policy: it takes no share "
                         f"identifier (drop --share {options.share})")
    most = max(limits) if limits else None
    if most is not None and plan.instance_count > most:
        raise UsageError(f"cluster.instance_count {plan.instance_count}: the service environments of queue "
                         f"{queue!r} hold at most {most} instances, so the job would wait in RUNNABLE forever")
    return QueueCheck(str(detail["jobQueueArn"]), fair_share, most)


def find_by_name(batch: Any, queue: str, name: str) -> dict[str, Any] | None:
    """The newest service job named `name` in `queue` (ListServiceJobs' JOB_NAME filter), or None."""
    page = batch.list_service_jobs(jobQueue=queue, filters=[{"name": "JOB_NAME", "values": [name]}])
    jobs = [j for j in page.get("jobSummaryList") or [] if j.get("jobName") == name]
    return max(jobs, key=lambda j: j.get("createdAt") or 0) if jobs else None


def starter(queue: str, options: QueueOptions, clients: Clients, sent: dict[str, Any]) -> Start:
    """The `start` submit hands the plan to (launcher.submission.create.submit): SubmitServiceJob instead of
    CreateTrainingJob. `sent` receives the answer (jobId, jobArn). A try whose answer was lost, or a Ctrl-C during
    the call, is settled by looking the name up in the queue."""

    def start(plan: Plan, source_uri: str, role_arn: str, _clients: Clients) -> str:
        from botocore import exceptions as bx

        from launcher.submission.backend import built_request

        batch = clients.client("batch")
        request = service_request(plan, queue, built_request(plan, source_uri, role_arn, clients), options)
        try:
            sent.update(batch.submit_service_job(**request))
        except KeyboardInterrupt:
            found = _look_up(batch, queue, plan.job_name, sent)
            state = {True: "was queued and will run", False: "was not queued", None: "may have been queued"}[found]
            raise Interrupted(f"interrupted: {plan.job_name} {state} in Batch queue {queue}", plan.job_name,
                              found) from None
        except (bx.ClientError, bx.BotoCoreError) as exc:
            error = explain(exc, "SubmitServiceJob")
            lost = isinstance(exc, (bx.HTTPClientError, bx.ConnectionError))
            if lost and _look_up(batch, queue, plan.job_name, sent):
                return plan.job_name  # a try timed out after Batch had taken the job
            raise error from None
        return plan.job_name

    return start


def _look_up(batch: Any, queue: str, name: str, sent: dict[str, Any]) -> bool | None:
    """Whether the queue holds a job of this name (None: Batch could not be asked); `sent` gets its id and ARN."""
    try:
        found = find_by_name(batch, queue, name)
    except (Exception, KeyboardInterrupt):
        return None
    if found is not None:
        sent.update({k: found[k] for k in ("jobId", "jobArn", "jobName") if k in found})
    return found is not None


def submit(plan: Plan, clients: Clients, *, options: QueueOptions, dry_run: bool = False,
           skip_role_check: bool = False) -> QueuedSubmission:
    """Check the queue, then submit as launcher.submission.create.submit does (same checks, same upload), the job
    handed to the queue. With dry_run, nothing is written and the result shows the exact SubmitServiceJob."""
    from launcher.core.aws import recording
    from launcher.submission import create

    queue = queue_of(plan)
    if not queue:
        raise UsageError(f"{plan.spec_file}: no Batch job queue: set cluster.queue (or --queue)")
    region = create.bind_region(plan, clients)
    with recording(clients) as calls:
        refused = create.blocking_errors(plan)  # the advisor's refusal comes before any AWS call
        if refused:
            raise refused
        checked = check_queue(plan, queue, options, clients.client("batch"))
        sent: dict[str, Any] = {}
        result = create.submit(plan, clients, dry_run=dry_run, skip_role_check=skip_role_check,
                               start=starter(queue, options, clients, sent))
        made = list(calls)
    shown = service_request(plan, queue, result.request, options)  # secrets redacted, as Submission.request
    retried = [c for c in sorted(set(options.retry_classes))
               if c in BATCH_RETRIES or (c in REASON_STARTS and options.attempts > 1)]
    info = {"name": queue, "arn": checked.arn, "job_id": sent.get("jobId"), "job_arn": sent.get("jobArn"),
            "priority": options.priority, "share_identifier": options.share, "retried_classes": retried,
            "retry_strategy": shown.get("retryStrategy"), "service_request": shown}
    console = (f"https://{region}.console.aws.amazon.com/batch/home?region={region}#queues/detail/"
               f"{checked.arn}")
    base = {f.name: getattr(result, f.name) for f in dataclasses.fields(Submission)}
    base.update(console_url=console, aws_calls=tuple(made),
                warnings=(*result.warnings, *retry_warnings(options)))
    return QueuedSubmission(**base, queue=info)


def account_check(plan: Plan, clients: Clients, options: QueueOptions, *,
                  skip_role_check: bool = False) -> AccountCheck:
    """What a sweep checks once per account before any plan starts, with the plan's queue checked too."""
    from launcher.submission import create

    queue = queue_of(plan)
    if queue:
        create.bind_region(plan, clients)
        check_queue(plan, queue, options, clients.client("batch"))
    return create.check_account(plan, clients, skip_role_check=skip_role_check)

