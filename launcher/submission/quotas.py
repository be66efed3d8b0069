"""Whether the account may start a job at all: its SageMaker training-instance quota against what runs now.

The quota is read by name from Service Quotas (service code `sagemaker`): "<type> for training job usage",
or "<type> for spot training job usage" for managed spot (the name SageMaker's ResourceLimitExceeded quotes).
ListServiceQuotas gives the account's applied values; a quota it does not list has the AWS default
(ListAWSDefaultServiceQuotas). What is in use is the instance count of this account's InProgress training
jobs of that type in the region. Reading only: `submit` and its dry run call this before anything is created.
https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_ListServiceQuotas.html
https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_ListAWSDefaultServiceQuotas.html
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from launcher.core.aws import Clients, QuotaError, pages
from launcher.core.enums import StrEnum
from launcher.core.errors import LauncherError, PreflightError
from launcher.core.sanitize import clean

SERVICE_CODE = "sagemaker"
MAX_RUNNING = 500  # InProgress jobs read at most (5 Search pages); beyond that the count is a floor


class QuotaVerdict(StrEnum):
    """What the quota check found; the values are the `verdict` key of `submit --output json`'s `quota`."""

    OK = "ok"  # the quota holds this job beside what runs now
    OVER = "over"  # it does not
    UNKNOWN = "unknown"  # Service Quotas or SageMaker did not answer: cannot tell
    NOT_OFFERED = "not_offered"  # SageMaker has no such training instance in the region


class OverQuota(QuotaError):
    """The quota cannot hold the job now (exit 3); `check.waitable` says whether it could once jobs end."""

    def __init__(self, check: QuotaCheck):
        super().__init__(check.message())
        self.check = check


class NotOffered(PreflightError):
    """SageMaker does not offer the instance type for training in the region (exit 3)."""


def quota_name(instance_type: str, *, spot: bool) -> str:
    return f"{instance_type} for {'spot ' if spot else ''}training job usage"


@dataclass(frozen=True)
class QuotaCheck:
    """The quota that limits a job's instance type in its region, what already holds it, what the job needs."""

    instance_type: str
    region: str
    spot: bool
    needed: int
    verdict: QuotaVerdict
    quota: float | None = None
    quota_code: str | None = None
    quota_source: str | None = None  # "applied" (the account's value) or "default" (AWS's)
    in_use: int | None = None
    in_use_jobs: tuple[str, ...] = ()
    note: str = ""  # why the verdict is unknown

    def __post_init__(self) -> None:
        object.__setattr__(self, "in_use_jobs", tuple(self.in_use_jobs))

    @property
    def name(self) -> str:
        return quota_name(self.instance_type, spot=self.spot)

    @property
    def waitable(self) -> bool:
        """Over now, but the job alone fits the quota: it can start once running jobs end."""
        return self.verdict is QuotaVerdict.OVER and self.quota is not None and self.needed <= self.quota

    def to_dict(self) -> dict[str, Any]:
        return {"quota_name": self.name, "instance_type": self.instance_type, "region": self.region,
                "spot": self.spot, "needed": self.needed, "verdict": self.verdict.value, "quota": self.quota,
                "quota_code": self.quota_code, "quota_source": self.quota_source, "in_use": self.in_use,
                "in_use_jobs": list(self.in_use_jobs), "note": self.note}

    def console_url(self) -> str:
        page = f"quotas/{self.quota_code}" if self.quota_code else "quotas"
        return f"https://{self.region}.console.aws.amazon.com/servicequotas/home/services/{SERVICE_CODE}/{page}"

    def message(self) -> str:
        """One paragraph: what is in use, the quota, what this job needs, and how to ask for more."""
        if self.verdict is QuotaVerdict.NOT_OFFERED:
            return (f"SageMaker does not offer {self.instance_type} for training in {self.region} (Service Quotas "
                    f"has no {self.name!r} quota there); choose another instance type (cluster.instance_type) or "
                    "region (cluster.region)")
        quota = f"{self.quota:g}" if self.quota is not None else "?"
        jobs = ", ".join(self.in_use_jobs[:5]) + (", ..." if len(self.in_use_jobs) > 5 else "")
        running = f"{self.in_use} in use by {len(self.in_use_jobs)} running job(s) ({jobs})" if self.in_use_jobs \
            else f"{self.in_use or 0} in use"
        want = (self.in_use or 0) + self.needed
        ask = (f"ask for more in the Service Quotas console ({self.console_url()}) or with `aws service-quotas "
               f"request-service-quota-increase --service-code {SERVICE_CODE} --quota-code "
               f"{self.quota_code or '<code>'} --desired-value {want} --region {self.region}`")
        later = "; or wait for running jobs to end (a queue, `--max-concurrent`, waits)" if self.waitable else ""
        source = f" ({self.quota_source})" if self.quota_source else ""
        return (f"the quota {self.name!r} in {self.region} is {quota}{source}; "
                f"{running}, and this job needs {self.needed}: {want} > {quota}. To start it, {ask}, or lower "
                f"cluster.instance_count{later}")


def check_quota(clients: Clients, instance_type: str, needed: int, region: str, *, spot: bool) -> QuotaCheck:
    """The quota verdict for `needed` more `instance_type` instances in `region`. Never raises for AWS:
    what Service Quotas or SageMaker could not say makes the verdict UNKNOWN, with one note saying why."""

    def made(verdict: QuotaVerdict, **found: Any) -> QuotaCheck:
        return QuotaCheck(instance_type, region, spot, needed, verdict, **found)

    name = quota_name(instance_type, spot=spot)
    try:
        found = _find_quota(clients, name)
    except Exception as err:  # an emulator without the operation raises NotImplementedError, not a ClientError
        return made(QuotaVerdict.UNKNOWN, note=f"quota: cannot tell ({_why(err)}); SageMaker checks it when the "
                                               "job is created")
    if found is None:
        return made(QuotaVerdict.NOT_OFFERED)
    value, code, source = found
    try:
        in_use, jobs = _in_use(clients, instance_type, spot)
    except Exception as err:
        return made(QuotaVerdict.UNKNOWN, quota=value, quota_code=code, quota_source=source,
                    note=f"quota: {value:g}, but what is in use cannot be told ({_why(err)})")
    verdict = QuotaVerdict.OK if in_use + needed <= value else QuotaVerdict.OVER
    return made(verdict, quota=value, quota_code=code, quota_source=source, in_use=in_use, in_use_jobs=jobs)


def _why(err: BaseException) -> str:
    from launcher.submission.pricing import brief

    return brief(str(err) if isinstance(err, LauncherError) else f"{type(err).__name__}: {err}")


_LIMIT = re.compile(r"service limit '(?P<name>(?P<type>\S+) for (?P<spot>spot )?training job usage)' is "
                    r"(?P<quota>[\d.]+) Instances, with current utilization of (?P<used>\d+) Instances and a "
                    r"request delta of (?P<delta>\d+) Instances")


def from_refusal(err: LauncherError, region: str) -> LauncherError:
    """SageMaker's own ResourceLimitExceeded (a job created beside another that took the quota first) as an
    OverQuota whose check a queue can wait on, when its message says the numbers; else `err` as it is."""
    found = _LIMIT.search(str(err))
    if found is None:
        return err
    check = QuotaCheck(found["type"], region, bool(found["spot"]), int(found["delta"]), QuotaVerdict.OVER,
                       quota=float(found["quota"]), in_use=int(found["used"]))
    return OverQuota(check)


def require(check: QuotaCheck) -> QuotaCheck:
    """The check, unless it refuses the job: OverQuota or NotOffered (both exit 3)."""
    if check.verdict is QuotaVerdict.OVER:
        raise OverQuota(check)
    if check.verdict is QuotaVerdict.NOT_OFFERED:
        raise NotOffered(check.message())
    return check


def _quotas(clients: Clients, operation: str) -> Iterator[dict[str, Any]]:
    action = "".join(w.capitalize() for w in operation.split("_")).replace("Aws", "AWS")
    for page in pages(clients.service_quotas, operation, f"reading SageMaker quotas ({action})",
                      ServiceCode=SERVICE_CODE):
        yield from page.get("Quotas") or []


def _find_quota(clients: Clients, name: str) -> tuple[float, str | None, str] | None:
    """(value, code, "applied" | "default") of the quota named `name`; None when neither list names it
    (and the default list answered with SageMaker's quotas, so the type is not offered here)."""
    from launcher.core.aws import AwsError

    for quota in _quotas(clients, "list_service_quotas"):
        value = _number(quota.get("Value"))
        if quota.get("QuotaName") == name and value is not None:
            return value, _code(quota), "applied"
    seen_any = False
    for quota in _quotas(clients, "list_aws_default_service_quotas"):
        seen_any = True
        value = _number(quota.get("Value"))
        if quota.get("QuotaName") == name and value is not None:
            return value, _code(quota), "default"
    if not seen_any:
        raise AwsError("Service Quotas listed no SageMaker quota")
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _code(quota: dict[str, Any]) -> str | None:
    code = quota.get("QuotaCode")
    return clean(code, 40) if isinstance(code, str) and code else None


def _in_use(clients: Clients, instance_type: str, spot: bool) -> tuple[int, tuple[str, ...]]:
    """Instances of `instance_type` that this account's InProgress training jobs hold (spot or on-demand, as
    asked: each has its own quota), and those jobs' names. One SageMaker Search page holds 100 jobs with their
    ResourceConfig (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_Search.html)."""
    query = {"Filters": [{"Name": "TrainingJobStatus", "Operator": "Equals", "Value": "InProgress"}]}
    total, holding, seen = 0, [], 0
    for page in pages(clients.sagemaker, "search", "listing running training jobs", Resource="TrainingJob",
                      SearchExpression=query, PaginationConfig={"PageSize": 100}):
        for result in page.get("Results") or []:
            job = result.get("TrainingJob") or {}
            seen += 1
            if job.get("TrainingJobStatus") != "InProgress" or bool(job.get("EnableManagedSpotTraining")) != spot:
                continue
            count = _count(job.get("ResourceConfig") or {}, instance_type)
            if count:
                total += count
                holding.append(clean(job.get("TrainingJobName", "?"), 63))
        if seen >= MAX_RUNNING:
            break
    return total, tuple(holding)


def _count(resource: dict[str, Any], instance_type: str) -> int:
    if resource.get("InstanceType") == instance_type:
        return int(resource.get("InstanceCount") or 0)
    return sum(int(g.get("InstanceCount") or 0) for g in resource.get("InstanceGroups") or []
               if g.get("InstanceType") == instance_type)
