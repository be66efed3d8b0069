"""An account's quota of training instances: CreateTrainingJob refused while running jobs hold it.

SageMaker counts the instances of the account's running training jobs against the quota "<instance type>
for training job usage" and refuses a CreateTrainingJob that would pass it with ResourceLimitExceeded (the
message below is the one the public issues quote: tests/fixtures/failure_corpus.json, `quota-*`).
`set_quota("ml.p4d.24xlarge", 2)` makes the patched moto (in-process or the server) count the emulated jobs
of that type that have not ended; `set_quota(None)` lifts every quota.
"""
from __future__ import annotations

import functools
from typing import Any

from emulator import core, scenario

_QUOTAS: dict[str, int] = {}
MESSAGE = ("The account-level service limit '{type} for training job usage' is {quota} Instances, with current "
           "utilization of {used} Instances and a request delta of {delta} Instances. Please contact AWS support "
           "to request an increase for this limit.")


def set_quota(instance_type: str | None, instances: int = 0) -> None:
    """Allow at most `instances` instances of `instance_type` in running training jobs (None: no quotas)."""
    core.install()
    with core.lock():
        if instance_type is None:
            _QUOTAS.clear()
        else:
            _QUOTAS[instance_type] = instances


def in_use(instance_type: str) -> int:
    """Instances of `instance_type` that emulated jobs created and not yet ended hold now."""
    now = core.now()
    return sum(job.hosts for job in list(scenario._JOBS.values())
               if job.created is not None and job.instance_type == instance_type and job.created <= now
               and now < job.end_time())


def _refusal(config: dict[str, Any]) -> str | None:
    instance_type = str(config.get("InstanceType", ""))
    quota = _QUOTAS.get(instance_type)
    if quota is None:
        return None
    used, delta = in_use(instance_type), int(config.get("InstanceCount", 1))
    if used + delta <= quota:
        return None
    return MESSAGE.format(type=instance_type, quota=quota, used=used, delta=delta)


def _apply() -> None:
    from moto.core.exceptions import JsonRESTError
    from moto.sagemaker.responses import SageMakerResponse

    original = SageMakerResponse.create_training_job

    @functools.wraps(original)
    def create_training_job(self, *args, **kwargs):
        with core.lock():
            refused = _refusal(self._get_param("ResourceConfig") or {}) if _QUOTAS else None
        if refused:
            raise JsonRESTError("ResourceLimitExceeded", refused)
        return original(self, *args, **kwargs)

    SageMakerResponse.create_training_job = create_training_job


core.register_patch("sagemaker:instance-quota", _apply)
