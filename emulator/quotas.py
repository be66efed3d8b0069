"""SageMaker's training-instance quotas and capacity, which moto does not model.

moto's Service Quotas knows only `vpc` (ListAWSDefaultServiceQuotas answers NoSuchResourceException for
`sagemaker`) and lacks ListServiceQuotas; its CreateTrainingJob accepts any number of instances. Here:

- ListAWSDefaultServiceQuotas(sagemaker) lists "<type> for training job usage" and "<type> for spot training
  job usage" for every offered type (DEFAULT instances each), ListServiceQuotas the values a test applied;
  both page (MaxResults, NextToken) as the real API does.
- CreateTrainingJob refuses, with SageMaker's ResourceLimitExceeded (the text the public issues quote:
  tests/fixtures/failure_corpus.json, `quota-*`), a job whose instances and those of the InProgress jobs of its
  type (spot or not) exceed the quota. With `plain(True)` only an applied value limits it: the service
  enforces the quota whatever its quota API answers.
- A type marked without capacity fails every job that asks for it while Starting, with SageMaker's
  CapacityError (emulator.failures.capacity_failure).

    emulator.quotas.set_quota("ml.p4d.24xlarge", 4)                 # an applied value
    emulator.quotas.not_offered("ml.p5.48xlarge", "us-west-2")       # no such quota there
    emulator.quotas.no_capacity("ml.p5.48xlarge")                    # its jobs fail for capacity
    emulator.quotas.plain(True)                                      # answer as moto does
    emulator.quotas.in_use("ml.p4d.24xlarge")                        # instances InProgress jobs hold
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
from typing import Any

from emulator import core

TYPES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge",
         "ml.m5.xlarge", "ml.g5.xlarge")
DEFAULT = 256.0  # generous: a test that wants a limit sets one
REFUSAL = ("The account-level service limit '{name}' is {limit:g} Instances, with current utilization of {used} "
           "Instances and a request delta of {count} Instances. Please contact AWS support to request an increase "
           "for this limit.")
_APPLIED: dict[tuple[str, str], float] = {}  # (region, quota name) -> value
_HIDDEN: set[tuple[str | None, str]] = set()  # (region or None for all, instance type): not offered
_NO_CAPACITY: set[str] = set()
_STATE = {"plain": False}


def quota_name(instance_type: str, spot: bool = False) -> str:
    return f"{instance_type} for {'spot ' if spot else ''}training job usage"


def quota_code(name: str) -> str:
    return "L-" + hashlib.sha256(name.encode()).hexdigest()[:8].upper()


def set_quota(instance_type: str, value: float | None, *, spot: bool = False, region: str = "us-west-2") -> None:
    """Apply a quota value to the account (None: back to the AWS default)."""
    core.install()
    with core.lock():
        key = (region, quota_name(instance_type, spot))
        if value is None:
            _APPLIED.pop(key, None)
        else:
            _APPLIED[key] = float(value)


def not_offered(instance_type: str, region: str | None = None) -> None:
    """SageMaker has no `instance_type` for training in `region` (None: anywhere)."""
    core.install()
    _HIDDEN.add((region, instance_type))


def no_capacity(*instance_types: str) -> None:
    """Every job created on one of these types fails while Starting with a CapacityError."""
    core.install()
    _NO_CAPACITY.update(instance_types)


def plain(on: bool) -> None:
    """With True, Service Quotas answers as plain moto does (no sagemaker quotas, no ListServiceQuotas)."""
    core.install()
    _STATE["plain"] = bool(on)


def reset() -> None:
    with core.lock():
        _APPLIED.clear()
        _HIDDEN.clear()
        _NO_CAPACITY.clear()
        _STATE["plain"] = False


def offered(instance_type: str, region: str) -> bool:
    return (None, instance_type) not in _HIDDEN and (region, instance_type) not in _HIDDEN


def quota_value(instance_type: str, region: str, spot: bool) -> float | None:
    """The quota that holds: the applied value, else the default (None: not offered)."""
    if not offered(instance_type, region):
        return None
    return _APPLIED.get((region, quota_name(instance_type, spot)), DEFAULT)


def _quota(region: str, account: str, name: str, value: float) -> dict[str, Any]:
    code = quota_code(name)
    return {"ServiceCode": "sagemaker", "ServiceName": "Amazon SageMaker", "QuotaCode": code, "QuotaName": name,
            "QuotaArn": f"arn:aws:servicequotas:{region}:{account}:sagemaker/{code}", "Value": value,
            "Unit": "None", "Adjustable": True, "GlobalQuota": False}


def _page(quotas: list[dict[str, Any]], params: dict[str, Any]) -> str:
    start = int(params.get("NextToken") or 0)
    size = int(params.get("MaxResults") or 100)
    body: dict[str, Any] = {"Quotas": quotas[start:start + size]}
    if start + size < len(quotas):
        body["NextToken"] = str(start + size)
    return json.dumps(body)


def in_use(instance_type: str, spot: bool = False, region: str = "us-west-2") -> int:
    """Instances of `instance_type` that this process's emulated account holds in InProgress jobs now."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sagemaker.models import sagemaker_backends

    with core.lock():
        return _in_use(sagemaker_backends[DEFAULT_ACCOUNT_ID][region], instance_type, spot)


def _in_use(backend: Any, instance_type: str, spot: bool) -> int:
    from emulator.sagemaker import refresh

    total = 0
    for job in list(backend.training_jobs.values()):
        refresh(job)
        if job.training_job_status != "InProgress" or bool(job.enable_managed_spot_training) != spot:
            continue
        rc = job.resource_config or {}
        if rc.get("InstanceType") == instance_type:
            total += int(rc.get("InstanceCount") or 0)
    return total


def _apply() -> None:
    from moto.core.exceptions import JsonRESTError
    from moto.sagemaker import models
    from moto.servicequotas.responses import ServiceQuotasResponse

    original_defaults = ServiceQuotasResponse.list_aws_default_service_quotas

    def list_aws_default_service_quotas(self: Any) -> str:
        params = json.loads(self.body or "{}")
        if params.get("ServiceCode") != "sagemaker" or _STATE["plain"]:
            return original_defaults(self)
        quotas = [_quota(self.region, self.current_account, quota_name(t, s), DEFAULT)
                  for t in TYPES if offered(t, self.region) for s in (False, True)]
        return _page(quotas, params)

    def list_service_quotas(self: Any) -> str:
        if _STATE["plain"]:
            raise NotImplementedError("The list_service_quotas action has not been implemented")
        params = json.loads(self.body or "{}")
        if params.get("ServiceCode") != "sagemaker":
            return _page([], params)
        with core.lock():
            applied = sorted((n, v) for (r, n), v in _APPLIED.items() if r == self.region)
        quotas = [_quota(self.region, self.current_account, n, v) for n, v in applied
                  if offered(n.split(" ")[0], self.region)]
        return _page(quotas, params)

    ServiceQuotasResponse.list_aws_default_service_quotas = list_aws_default_service_quotas
    ServiceQuotasResponse.list_service_quotas = list_service_quotas

    backend = models.SageMakerModelBackend
    original_create = backend.create_training_job
    signature = inspect.signature(original_create)

    @functools.wraps(original_create)
    def create_training_job(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs).arguments
        name = bound.get("training_job_name", "")
        rc = bound.get("resource_config") or {}
        itype, count = rc.get("InstanceType", ""), int(rc.get("InstanceCount") or 0)
        spot = bool(bound.get("enable_managed_spot_training"))
        with core.lock():
            if itype:
                limit = (_APPLIED.get((self.region_name, quota_name(itype, spot))) if _STATE["plain"]
                         else quota_value(itype, self.region_name, spot))
                used = _in_use(self, itype, spot)
                if limit is not None and used + count > limit:
                    raise JsonRESTError("ResourceLimitExceeded", REFUSAL.format(
                        name=quota_name(itype, spot), limit=limit, used=used, count=count))
            if itype in _NO_CAPACITY:
                from emulator import failures, scenario

                if scenario.get(name) is None:
                    scenario.expect(scenario.EmulatedJob(name, hosts=max(count, 1), instance_type=itype,
                                                         **failures.capacity_failure()))
        return original_create(self, *args, **kwargs)

    backend.create_training_job = create_training_job


core.register_patch("servicequotas:sagemaker", _apply)
core.register_reset(reset)
