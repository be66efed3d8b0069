"""SageMaker training jobs that live: status moves with the emulator clock, and StopTrainingJob works.

moto creates every training job `Completed` at once, does not implement StopTrainingJob, and lets a
second CreateTrainingJob of a name in use replace the first job. These patches put a scripted timeline
(scenario.EmulatedJob) behind each job, refresh the job's fields before every read, and refuse a name in
use as SageMaker does: `ResourceInUse`, "Training job names must be unique within an AWS account and
region, and a training job with this name already exists (ARN)" (the error as SageMaker words it:
https://github.com/aws/amazon-sagemaker-examples/pull/3108).
"""
from __future__ import annotations

import functools
from typing import Any

from emulator import core, failures, scenario

# Every CreateTrainingJob request as the service received it (the JSON body, before moto reads it: moto keeps no
# Environment and replaces MetricDefinitions), by job name: what a contract test holds a plan's request against.
RECEIVED: dict[str, dict[str, Any]] = {}


def received(job_name: str) -> dict[str, Any] | None:
    """The CreateTrainingJob request the emulator received for `job_name` (None: none came)."""
    with core.lock():
        return RECEIVED.get(job_name)


def _forget_received() -> None:
    with core.lock():
        RECEIVED.clear()


def refresh(job: Any) -> None:
    """Write the job's state at the current emulator time onto moto's FakeTrainingJob (and sync its
    checkpoint to S3 once the run has saved one)."""
    script = scenario.get(job.training_job_name)
    if script is None or script.created is None:
        return
    for key, value in script.state(core.now()).items():
        setattr(job, key, value)
    failures.sync(script, job.arn.split(":")[4])


def _refreshing(method):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with core.lock():
            named = self.training_jobs.get(kwargs.get("training_job_name", args[0] if args else None))
            for job in [named] if named is not None and method.__name__ == "describe_training_job" else list(
                    self.training_jobs.values()):
                refresh(job)  # a describe refreshes its own job only: waits on hundreds of jobs stay linear
        return method(self, *args, **kwargs)

    return wrapper


def _apply() -> None:
    from moto.sagemaker import models, responses
    from moto.sagemaker.exceptions import ResourceInUseException, ValidationError

    backend = models.SageMakerModelBackend
    original_create = backend.create_training_job

    @functools.wraps(original_create)
    def create_training_job(self, training_job_name: str, *args: Any, **kwargs: Any):
        with core.lock():  # two creates of one name at once: one wins, the other is refused
            taken = self.training_jobs.get(training_job_name)
            if taken is not None:
                raise ResourceInUseException(
                    "Training job names must be unique within an AWS account and region, and a training job "
                    f"with this name already exists ({taken.arn})")
            job = original_create(self, training_job_name, *args, **kwargs)
        rc = job.resource_config or {}
        count = rc.get("InstanceCount") or sum(g.get("InstanceCount", 0) for g in rc.get("InstanceGroups", [])) or 1
        script = scenario.on_create(training_job_name, rc.get("InstanceType", "ml.p4d.24xlarge"), count,
                                    self.region_name)
        if script is not None:
            script.checkpoint_uri = (job.checkpoint_config or {}).get("S3Uri")
            script.restored = failures.existing(self.account_id, script.checkpoint_uri) if script.checkpoint_uri else ()
            script.saved = ()
            job.creation_time = core.moto_time(script.created)
            job.failure_reason = None
            refresh(job)
        return job

    def stop_training_job(self, training_job_name: str) -> None:
        with core.lock():
            job = self.training_jobs.get(training_job_name)
            if job is None:
                arn = models.FakeTrainingJob.arn_formatter(training_job_name, self.account_id, self.region_name)
                raise ValidationError(message=f"Could not find training job '{arn}'.")
            refresh(job)
            if job.training_job_status != "InProgress":
                raise ValidationError(message=f"The request was rejected because the training job is in status "
                                          f"{job.training_job_status}.")
            script = scenario.get(training_job_name)
            if script is None:  # an unscripted job: stop at once
                job.training_job_status = job.secondary_status = "Stopped"
                return
            script.stop_requested = core.now()
            refresh(job)

    backend.create_training_job = create_training_job
    backend.stop_training_job = stop_training_job
    for name in ("describe_training_job", "list_training_jobs", "search"):
        setattr(backend, name, _refreshing(getattr(backend, name)))

    def stop_response(self) -> Any:
        self.sagemaker_backend.stop_training_job(self._get_param("TrainingJobName"))
        return responses.EmptyResult()

    responses.SageMakerResponse.stop_training_job = stop_response
    create_response = responses.SageMakerResponse.create_training_job

    @functools.wraps(create_response)
    def recording_create(self) -> Any:
        import json

        body = json.loads(self.body or "{}")
        with core.lock():
            RECEIVED[str(body.get("TrainingJobName"))] = body
        return create_response(self)

    responses.SageMakerResponse.create_training_job = recording_create


core.register_patch("sagemaker:lifecycle", _apply)
core.register_reset(_forget_received)
