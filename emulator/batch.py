"""AWS Batch service jobs for SageMaker Training, which moto lacks: service environments, SAGEMAKER_TRAINING job
queues, and SubmitServiceJob / DescribeServiceJob / ListServiceJobs / TerminateServiceJob.

What it models, each from AWS's documentation:

- A service environment has a capacity (`capacityLimits`, unit NUM_INSTANCES); a job needs its payload's
  ResourceConfig.InstanceCount. A queue places its RUNNABLE jobs in order (FIFO, or by schedulingPriority, highest
  first, on a queue with a scheduling policy), strictly: a job that does not fit now holds the ones behind it, and
  one that can never fit says so in its statusReason
  (https://docs.aws.amazon.com/batch/latest/userguide/sm_job_stuck_in_runnable_misconfiguration.html).
- A placed job is SCHEDULED: Batch creates the SageMaker training job from the payload, named `AWSBatch` + the
  payload's TrainingJobName + a hex digest (the form of the documented state-change event,
  https://docs.aws.amazon.com/batch/latest/userguide/service-job-events.html; the name is cut to SageMaker's 63
  characters), with the service job's tags. Its status then follows the training job's
  (https://docs.aws.amazon.com/batch/latest/userguide/service-job-status.html): Pending/Starting SCHEDULED,
  Downloading STARTING, Training/Uploading RUNNING, Completed SUCCEEDED, Failed or Stopped FAILED.
- Each attempt's statusReason is SageMaker's word prefixed with "Received status from SageMaker: ". A training
  job that fails with a reason starting `CapacityError` (or stops waiting for spot capacity before training) is
  retried by Batch itself, without using an attempt, its job RUNNABLE again with
  `CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - ...`
  (https://docs.aws.amazon.com/batch/latest/userguide/sm_job_stuck_in_runnable_capacity.html). Any other failure
  meets the job's retryStrategy: the first evaluateOnExit entry whose onStatusReason matches (exactly, or its
  start when it ends in `*`) decides RETRY or EXIT; none matching retries; `attempts` counts every time the job
  was made RUNNABLE, the first included
  (https://docs.aws.amazon.com/batch/latest/userguide/service-job-retries.html).

Everything advances with the emulator clock (emulator.core.now) and is worked out before each read, event by
event: a job placed when another ends is created at the moment that one ended, so a test that polls seldom
sees the same history as one that polls often.
"""
from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from emulator import core, scenario

PREFIX = "Received status from SageMaker: "
CAPACITY_WAIT = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - Unable to provision requested compute resources"
TOO_BIG = ("MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - Service environment(s) associated with the job "
           "queue cannot meet the capacity requirement of the job.")
WAITING = ("SUBMITTED", "PENDING", "RUNNABLE")
ACTIVE = ("SCHEDULED", "STARTING", "RUNNING")
DONE = ("SUCCEEDED", "FAILED")
CAPACITY_RETRY_S = 1.0  # how long Batch waits before placing a job again after a capacity failure (the emulator's)
MAX_EVENTS = 100_000  # events one read may settle
NAME_ROOM = 63 - len("AWSBatch") - 32  # SageMaker's 63 characters, less the prefix and the digest


@dataclass
class Environment:
    name: str
    arn: str
    capacity: int  # instances
    tags: dict[str, str] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"serviceEnvironmentName": self.name, "serviceEnvironmentArn": self.arn,
                "serviceEnvironmentType": "SAGEMAKER_TRAINING", "state": "ENABLED", "status": "VALID",
                "capacityLimits": [{"maxCapacity": self.capacity, "capacityUnit": "NUM_INSTANCES"}],
                "tags": dict(self.tags)}


@dataclass
class Queue:
    name: str
    arn: str
    priority: int
    environments: list[str]  # ARNs, in order
    order: list[dict[str, Any]]
    scheduling_policy: str | None = None
    state: str = "ENABLED"
    tags: dict[str, str] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        out = {"jobQueueName": self.name, "jobQueueArn": self.arn, "state": self.state, "status": "VALID",
               "priority": self.priority, "computeEnvironmentOrder": [], "serviceEnvironmentOrder": self.order,
               "jobQueueType": "SAGEMAKER_TRAINING", "tags": dict(self.tags)}
        if self.scheduling_policy:
            out["schedulingPolicyArn"] = self.scheduling_policy
        return out


@dataclass
class Attempt:
    training_job: str
    training_arn: str
    started: float
    stopped: float | None = None
    reason: str | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"serviceResourceId": {"name": "TrainingJobArn", "value": self.training_arn},
                               "startedAt": _ms(self.started)}
        if self.stopped is not None:
            out["stoppedAt"] = _ms(self.stopped)
        if self.reason is not None:
            out["statusReason"] = self.reason
        return out


@dataclass
class ServiceJob:
    job_id: str
    arn: str
    name: str
    queue: Queue
    payload: str
    submitted: float
    priority: int | None = None
    share: str | None = None
    retry: dict[str, Any] | None = None
    timeout: dict[str, Any] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    status: str = "RUNNABLE"
    reason: str | None = None
    ready_at: float = 0.0  # when it may be placed
    placed_in: str | None = None  # the environment holding its capacity while active
    attempts: list[Attempt] = field(default_factory=list)
    counted: int = 1  # times made RUNNABLE that count against retryStrategy.attempts
    scheduled_at: float | None = None
    stopped_at: float | None = None
    terminated: str | None = None  # TerminateServiceJob's reason

    @property
    def instances(self) -> int:
        try:
            rc = json.loads(self.payload).get("ResourceConfig") or {}
        except ValueError:
            return 1
        return int(rc.get("InstanceCount") or sum(g.get("InstanceCount", 0) for g in rc.get("InstanceGroups", []))
                   or 1)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"jobArn": self.arn, "jobId": self.job_id, "jobName": self.name,
                               "serviceJobType": "SAGEMAKER_TRAINING", "status": self.status,
                               "createdAt": _ms(self.submitted), "isTerminated": self.terminated is not None,
                               "capacityUsage": [{"capacityUnit": "NUM_INSTANCES", "quantity": float(self.instances)}]}
        if self.reason is not None:
            out["statusReason"] = self.reason
        if self.share:
            out["shareIdentifier"] = self.share
        if self.attempts:
            out["latestAttempt"] = {"serviceResourceId": {"name": "TrainingJobArn",
                                                          "value": self.attempts[-1].training_arn}}
            out["startedAt"] = _ms(self.attempts[0].started)
        if self.scheduled_at is not None:
            out["scheduledAt"] = _ms(self.scheduled_at)
        if self.stopped_at is not None:
            out["stoppedAt"] = _ms(self.stopped_at)
        return out

    def describe(self) -> dict[str, Any]:
        out = self.summary()
        out.pop("capacityUsage")
        out.update(jobQueue=self.queue.arn, serviceRequestPayload=self.payload, tags=dict(self.tags),
                   attempts=[a.describe() for a in self.attempts],
                   capacityUsage=[{"capacityUnit": "NUM_INSTANCES", "quantity": float(self.instances)}])
        out.setdefault("startedAt", 0)  # required by the API's shape; 0 until an attempt starts
        for key, value in (("retryStrategy", self.retry), ("timeoutConfig", self.timeout),
                           ("schedulingPriority", self.priority)):
            if value is not None:
                out[key] = value
        return out


@dataclass
class World:
    """One account and region's service environments, queues and jobs; `clock` is how far events are settled."""

    environments: dict[str, Environment] = field(default_factory=dict)
    queues: dict[str, Queue] = field(default_factory=dict)
    jobs: dict[str, ServiceJob] = field(default_factory=dict)  # by job id, in submission order
    clock: float = 0.0


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def _world(backend: Any) -> World:
    """The state kept on moto's Batch backend, so moto's reset clears it with everything else."""
    world = backend.__dict__.get("_service_jobs")
    if world is None:
        world = backend.__dict__["_service_jobs"] = World(clock=core.now())
    return world


def _client_error(message: str) -> Exception:
    from moto.batch.exceptions import ClientException

    return ClientException(message)


def _find(items: dict[str, Any], ref: str, what: str) -> Any:
    for item in items.values():
        if ref in (item.name, item.arn):
            return item
    raise _client_error(f"{what} {ref} does not exist")


# -- the timeline -----------------------------------------------------------------------------------------------

def _sagemaker(backend: Any) -> Any:
    from moto.sagemaker.models import sagemaker_backends

    return sagemaker_backends[backend.account_id][backend.region_name]


def _ending(backend: Any, attempt: Attempt) -> tuple[float, str, str | None, bool] | None:
    """(when, TrainingJobStatus, FailureReason, trained) of the attempt's training job once it ends, else None
    while it runs (by its script: a pure function of the emulator clock)."""
    script = scenario.get(attempt.training_job)
    if script is None or script.created is None:
        job = _sagemaker(backend).training_jobs.get(attempt.training_job)
        status = getattr(job, "training_job_status", "Completed")
        if status in ("Completed", "Failed", "Stopped"):
            return attempt.started, status, getattr(job, "failure_reason", None), True
        return None
    starts = script.phase_starts()
    last, at = starts[-1]
    if last not in scenario.TERMINAL:
        return None
    state = script.state(at)
    trained = any(s == "Training" for s, _ in starts)
    return at, state["training_job_status"], state.get("failure_reason"), trained


def _phase(backend: Any, attempt: Attempt, at: float) -> str:
    """The service job's status while its training job runs, from the training job's secondary status."""
    script = scenario.get(attempt.training_job)
    if script is None or script.created is None:
        return "RUNNING"
    secondary = script.state(at)["secondary_status"]
    return {"Pending": "SCHEDULED", "Starting": "SCHEDULED", "Downloading": "STARTING"}.get(secondary, "RUNNING")


def _retry_action(job: ServiceJob, reason: str) -> str:
    """RETRY or EXIT for a failed attempt, by the job's retryStrategy (a job without one is not retried)."""
    strategy = job.retry or {}
    if job.counted >= int(strategy.get("attempts", 1)):
        return "EXIT"
    for rule in strategy.get("evaluateOnExit") or []:
        pattern = rule.get("onStatusReason")
        if pattern is None:
            continue
        hit = reason.startswith(pattern[:-1]) if pattern.endswith("*") else reason == pattern
        if hit:
            return str(rule.get("action", "EXIT")).upper()
    return "RETRY"


def _settle(backend: Any, job: ServiceJob, at: float, status: str, failure: str | None, trained: bool) -> None:
    """The attempt's training job ended at `at`: record it, free the capacity, and decide what Batch does next."""
    attempt = job.attempts[-1]
    attempt.stopped = at
    word = failure if status == "Failed" and failure else scenario.MESSAGES.get(status, status)
    attempt.reason = PREFIX + (word or status)
    job.placed_in = None
    capacity = status == "Failed" and (failure or "").startswith("CapacityError")
    capacity = capacity or (status == "Stopped" and not trained and job.terminated is None)
    if status == "Completed":
        job.status, job.reason, job.stopped_at = "SUCCEEDED", attempt.reason, at
    elif job.terminated is not None:
        job.status, job.reason, job.stopped_at = "FAILED", job.terminated, at
    elif capacity:  # Batch's own retry: back at its place in the queue, no attempt used
        job.status, job.reason, job.ready_at = "RUNNABLE", CAPACITY_WAIT, at + CAPACITY_RETRY_S
    elif _retry_action(job, attempt.reason) == "RETRY":
        job.status, job.reason, job.ready_at = "RUNNABLE", attempt.reason, at
        job.counted += 1
    else:
        job.status, job.reason, job.stopped_at = "FAILED", attempt.reason, at


def _training_name(job: ServiceJob, payload: dict[str, Any]) -> str:
    digest = hashlib.md5(f"{job.job_id}/{len(job.attempts)}".encode()).hexdigest()
    return f"AWSBatch{str(payload.get('TrainingJobName', job.name))[:NAME_ROOM]}{digest}"


def _place(backend: Any, job: ServiceJob, env: Environment, at: float) -> None:
    """Create the attempt's training job at `at` (CreateTrainingJob with the payload and the job's tags)."""
    from emulator import sagemaker as lifecycle

    payload = json.loads(job.payload)
    name = _training_name(job, payload)
    tags = [{"Key": k, "Value": v} for k, v in job.tags.items()]
    sm = _sagemaker(backend)
    try:
        created = sm.create_training_job(
            training_job_name=name, hyper_parameters=payload.get("HyperParameters"),
            algorithm_specification=payload.get("AlgorithmSpecification"), role_arn=payload.get("RoleArn"),
            input_data_config=payload.get("InputDataConfig"), output_data_config=payload.get("OutputDataConfig"),
            resource_config=payload.get("ResourceConfig"), vpc_config=payload.get("VpcConfig"),
            stopping_condition=payload.get("StoppingCondition"), tags=tags,
            enable_network_isolation=payload.get("EnableNetworkIsolation", False),
            enable_inter_container_traffic_encryption=payload.get("EnableInterContainerTrafficEncryption", False),
            enable_managed_spot_training=payload.get("EnableManagedSpotTraining", False),
            checkpoint_config=payload.get("CheckpointConfig"), debug_hook_config=payload.get("DebugHookConfig"),
            debug_rule_configurations=payload.get("DebugRuleConfigurations"),
            tensor_board_output_config=payload.get("TensorBoardOutputConfig"),
            experiment_config=payload.get("ExperimentConfig"))
    except Exception as exc:  # SageMaker refused the payload: the attempt fails at once
        job.status, job.stopped_at = "FAILED", at
        job.reason = f"{PREFIX}{type(exc).__name__}: {exc}"
        return
    script = scenario.get(name)
    if script is not None and script.created is not None:
        script.created = at  # placed when capacity freed, which may be before this read
        created.creation_time = core.moto_time(at)
        lifecycle.refresh(created)
    job.attempts.append(Attempt(name, created.arn, at))
    job.status, job.reason, job.placed_in = "SCHEDULED", None, env.arn
    if job.scheduled_at is None:
        job.scheduled_at = at


def _order(world: World, queue: Queue, at: float) -> list[ServiceJob]:
    waiting = [j for j in world.jobs.values() if j.queue is queue and j.status in WAITING and j.submitted <= at]
    if queue.scheduling_policy:  # highest schedulingPriority first, then the order they came in
        return sorted(waiting, key=lambda j: -(j.priority or 0))
    return waiting


def _schedule(backend: Any, world: World, at: float) -> None:
    """Place what fits at `at`, each queue's jobs in order; the first that does not fit holds its queue."""
    used: dict[str, int] = {}
    for j in world.jobs.values():
        if j.placed_in is not None:
            used[j.placed_in] = used.get(j.placed_in, 0) + j.instances
    queues = sorted(world.queues.values(), key=lambda q: -q.priority)
    for queue in queues:
        if queue.state != "ENABLED":
            continue
        for job in _order(world, queue, at):
            if job.ready_at > at:  # waiting out a capacity failure, at the head: it holds the queue
                break
            envs = [world.environments[a] for a in queue.environments if a in world.environments]
            if not any(job.instances <= e.capacity for e in envs):
                job.status, job.reason = "RUNNABLE", TOO_BIG
                break
            env = next((e for e in envs if used.get(e.arn, 0) + job.instances <= e.capacity), None)
            if env is None:
                job.status = "RUNNABLE"
                break
            used[env.arn] = used.get(env.arn, 0) + job.instances
            _place(backend, job, env, at)


def advance(backend: Any, now: float | None = None) -> None:
    """Settle every event up to `now` in time order: ends free capacity, freed capacity places waiting jobs."""
    now = core.now() if now is None else now
    world = _world(backend)
    t = min(world.clock, now)
    for _ in range(MAX_EVENTS):
        _schedule(backend, world, t)
        ends = []
        for job in world.jobs.values():
            if job.status in ACTIVE and job.attempts:
                ending = _ending(backend, job.attempts[-1])
                if ending is not None:
                    ends.append((ending[0], job.job_id, ending))
        readies = [j.ready_at for j in world.jobs.values() if j.status in WAITING and j.ready_at > t]
        upcoming = sorted([e for e in ends if e[0] <= now] + [(r, "", None) for r in readies if r <= now],
                          key=lambda e: (e[0], e[1]))
        if not upcoming:
            break
        at, job_id, ending = upcoming[0]
        t = max(t, at)
        if ending is not None:
            _, status, failure, trained = ending
            _settle(backend, world.jobs[job_id], at, status, failure, trained)
    else:  # a script whose attempts end the moment they start, forever
        raise RuntimeError(f"the Batch emulator settled {MAX_EVENTS} events without reaching {now}")
    for job in world.jobs.values():
        if job.status in ACTIVE and job.attempts:
            job.status = _phase(backend, job.attempts[-1], now)
    world.clock = max(world.clock, now)


# -- the operations ------------------------------------------------------------------------------------------

def _body(response: Any) -> dict[str, Any]:
    try:
        return json.loads(response.body or "{}")
    except ValueError:
        raise _client_error("the request body is not JSON") from None


def _arn(backend: Any, kind: str, name: str) -> str:
    return f"arn:aws:batch:{backend.region_name}:{backend.account_id}:{kind}/{name}"


def create_service_environment(backend: Any, body: dict[str, Any]) -> dict[str, Any]:
    world = _world(backend)
    name = body.get("serviceEnvironmentName")
    if not name:
        raise _client_error("serviceEnvironmentName must be provided")
    if body.get("serviceEnvironmentType") != "SAGEMAKER_TRAINING":
        raise _client_error("serviceEnvironmentType must be SAGEMAKER_TRAINING")
    limits = body.get("capacityLimits") or []
    if not limits or limits[0].get("capacityUnit", "NUM_INSTANCES") != "NUM_INSTANCES":
        raise _client_error("capacityLimits must give a maxCapacity in NUM_INSTANCES")
    if any(e.name == name for e in world.environments.values()):
        raise _client_error(f"Service environment {name} already exists")
    env = Environment(name, _arn(backend, "service-environment", name), int(limits[0]["maxCapacity"]),
                      dict(body.get("tags") or {}))
    world.environments[env.arn] = env
    return {"serviceEnvironmentName": env.name, "serviceEnvironmentArn": env.arn}


def describe_service_environments(backend: Any, body: dict[str, Any]) -> dict[str, Any]:
    wanted = set(body.get("serviceEnvironments") or [])
    envs = [e.describe() for e in _world(backend).environments.values()
            if not wanted or e.name in wanted or e.arn in wanted]
    return {"serviceEnvironments": envs}


def create_queue(backend: Any, body: dict[str, Any]) -> dict[str, Any]:
    world = _world(backend)
    name = body.get("jobQueueName")
    order = sorted(body.get("serviceEnvironmentOrder") or [], key=lambda o: o.get("order", 0))
    if not name or not order:
        raise _client_error("jobQueueName and serviceEnvironmentOrder must be provided")
    if any(q.name == name for q in world.queues.values()) or backend.get_job_queue_by_name(name) is not None:
        raise _client_error(f"Job queue {name} already exists")
    envs = [_find(world.environments, o["serviceEnvironment"], "Service environment").arn for o in order]
    queue = Queue(name, _arn(backend, "job-queue", name), int(body.get("priority", 1)), envs, order,
                  body.get("schedulingPolicyArn"), body.get("state") or "ENABLED", dict(body.get("tags") or {}))
    world.queues[queue.arn] = queue
    return {"jobQueueName": queue.name, "jobQueueArn": queue.arn}


def submit_service_job(backend: Any, body: dict[str, Any]) -> dict[str, Any]:
    world = _world(backend)
    for key in ("jobName", "jobQueue", "serviceJobType", "serviceRequestPayload"):
        if not body.get(key):
            raise _client_error(f"{key} must be provided")
    if body["serviceJobType"] != "SAGEMAKER_TRAINING":
        raise _client_error("serviceJobType must be SAGEMAKER_TRAINING")
    queue = _find(world.queues, body["jobQueue"], "Job queue")
    share = body.get("shareIdentifier")
    if queue.scheduling_policy and not share:
        raise _client_error(f"Job queue {queue.name} has a fair share scheduling policy: give a shareIdentifier")
    if share and not queue.scheduling_policy:
        raise _client_error(f"Job queue {queue.name} has no fair share scheduling policy: give no shareIdentifier")
    priority = body.get("schedulingPriority")
    if priority is not None and not 0 <= int(priority) <= 9999:
        raise _client_error("schedulingPriority must be between 0 and 9999")
    retry = body.get("retryStrategy")
    if retry is not None:
        if not 1 <= int(retry.get("attempts", 0)) <= 10:
            raise _client_error("retryStrategy.attempts must be between 1 and 10")
        rules = retry.get("evaluateOnExit") or []
        if len(rules) > 5 or any(len(r.get("onStatusReason") or "") > 512 for r in rules):
            raise _client_error("retryStrategy.evaluateOnExit takes at most 5 entries of at most 512 characters")
    try:
        json.loads(body["serviceRequestPayload"])
    except ValueError:
        raise _client_error("serviceRequestPayload is not JSON") from None
    advance(backend)
    job_id = str(uuid.uuid4())
    now = core.now()
    job = ServiceJob(job_id, _arn(backend, "service-job", job_id), body["jobName"], queue,
                     body["serviceRequestPayload"], now, priority=priority, share=share, retry=retry,
                     timeout=body.get("timeoutConfig"), tags=dict(body.get("tags") or {}), ready_at=now)
    world.jobs[job_id] = job
    _schedule(backend, world, now)
    return {"jobArn": job.arn, "jobName": job.name, "jobId": job.job_id}


def _job(backend: Any, ref: str | None) -> ServiceJob:
    for job in _world(backend).jobs.values():
        if ref in (job.job_id, job.arn):
            return job
    raise _client_error(f"Service job {ref} does not exist")


def describe_service_job(backend: Any, body: dict[str, Any]) -> dict[str, Any]:
    advance(backend)
    return _job(backend, body.get("jobId")).describe()


def list_service_jobs(backend: Any, body: dict[str, Any]) -> dict[str, Any]:
    advance(backend)
    world = _world(backend)
    jobs = list(world.jobs.values())
    if body.get("jobQueue"):
        queue = _find(world.queues, body["jobQueue"], "Job queue")
        jobs = [j for j in jobs if j.queue is queue]
    filters = body.get("filters") or []
    for f in filters:
        values = f.get("values") or []
        if f.get("name") == "JOB_NAME":
            jobs = [j for j in jobs if any(fnmatch.fnmatchcase(j.name, v) for v in values)]
        elif f.get("name") in ("AFTER_CREATED_AT", "BEFORE_CREATED_AT") and values:
            limit = int(values[0])
            after = f["name"] == "AFTER_CREATED_AT"
            jobs = [j for j in jobs if (_ms(j.submitted) > limit) == after]
    if not filters:  # as ListJobs: without a status or a filter, the RUNNING jobs
        status = body.get("jobStatus") or "RUNNING"
        jobs = [j for j in jobs if j.status == status]
    jobs.sort(key=lambda j: j.submitted, reverse=True)
    start = int(body.get("nextToken") or 0)
    size = int(body.get("maxResults") or 100)
    page = jobs[start:start + size]
    out: dict[str, Any] = {"jobSummaryList": [j.summary() for j in page]}
    if start + size < len(jobs):
        out["nextToken"] = str(start + size)
    return out


def terminate_service_job(backend: Any, body: dict[str, Any]) -> dict[str, Any]:
    advance(backend)
    job = _job(backend, body.get("jobId"))
    reason = body.get("reason") or ""
    if job.status in DONE:
        return {}
    job.terminated = reason
    if job.status in WAITING:
        job.status, job.reason, job.stopped_at = "FAILED", reason, core.now()
        return {}
    attempt = job.attempts[-1]
    _sagemaker(backend).stop_training_job(attempt.training_job)
    advance(backend)
    return {}


OPERATIONS = {
    "createserviceenvironment": create_service_environment,
    "describeserviceenvironments": describe_service_environments,
    "submitservicejob": submit_service_job,
    "describeservicejob": describe_service_job,
    "listservicejobs": list_service_jobs,
    "terminateservicejob": terminate_service_job,
}


def _operation(handler):
    def respond(self) -> str:
        with core.lock():
            return json.dumps(handler(self.batch_backend, _body(self)))

    return respond


def _apply() -> None:
    from moto.batch import responses, urls
    from moto.sagemaker import models as sm_models

    for name, handler in OPERATIONS.items():
        setattr(responses.BatchResponse, name, _operation(handler))
        urls.url_paths.setdefault("{0}/v1/" + name + "$", responses.BatchResponse.dispatch)

    create_original = responses.BatchResponse.createjobqueue
    describe_original = responses.BatchResponse.describejobqueues

    @functools.wraps(create_original)
    def createjobqueue(self) -> str:
        body = _body(self)
        if body.get("jobQueueType") != "SAGEMAKER_TRAINING" and not body.get("serviceEnvironmentOrder"):
            return create_original(self)
        with core.lock():
            return json.dumps(create_queue(self.batch_backend, body))

    @functools.wraps(describe_original)
    def describejobqueues(self) -> str:
        found = json.loads(describe_original(self))
        wanted = set(_body(self).get("jobQueues") or [])
        with core.lock():
            found["jobQueues"] += [q.describe() for q in _world(self.batch_backend).queues.values()
                                   if not wanted or q.name in wanted or q.arn in wanted]
        return json.dumps(found)

    responses.BatchResponse.createjobqueue = createjobqueue
    responses.BatchResponse.describejobqueues = describejobqueues

    # A SageMaker read sees the jobs Batch has placed by now (a sweep's jobs appear as capacity frees).
    def advancing(method):
        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            from moto.batch.models import batch_backends

            with core.lock():
                backend = batch_backends[self.account_id][self.region_name]
                if "_service_jobs" in backend.__dict__:
                    advance(backend)
            return method(self, *args, **kwargs)

        return wrapper

    backend_class = sm_models.SageMakerModelBackend
    for name in ("describe_training_job", "list_training_jobs", "search"):
        setattr(backend_class, name, advancing(getattr(backend_class, name)))


core.register_patch("batch:service-jobs", _apply)
