"""`smp-launch metrics`: each host's GPU, GPU memory, CPU and memory utilisation, as terminal sparklines
(drawn by launcher.cli.present).

SageMaker publishes these per instance to namespace /aws/sagemaker/TrainingJobs, dimension
`Host=<job>/algo-N`, summed over devices (GPUUtilization up to 100 x GPUs, CPUUtilization up to
100 x vCPUs); dividing by the device count makes hosts of any type comparable on 0-100. All
(host, metric) series come from one GetMetricData call, split only at its 500-query limit.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launcher.catalog.smp import INSTANCES
from launcher.core.aws import Clients, pages
from launcher.core.names import METRICS_NAMESPACE as NAMESPACE
from launcher.core.names import TERMINAL
from launcher.core.sanitize import clean
from launcher.core.timeutil import epoch, iso
from launcher.jobs.status import describe, instances

METRICS = (  # (CloudWatch name, label, divided by)
    ("GPUUtilization", "GPU utilization", "gpus"),
    ("GPUMemoryUtilization", "GPU memory utilization", "gpus"),
    ("CPUUtilization", "CPU utilization", "vcpus"),
    ("MemoryUtilization", "memory utilization", None),
)
MAX_QUERIES = 500  # GetMetricData's limit per request
BARS = "▁▂▃▄▅▆▇█"


def devices(instance_type: str) -> dict[str, int | None]:
    known = INSTANCES.get(instance_type)
    return {"gpus": known.gpus if known else None, "vcpus": known.vcpus if known else None}


def period_for(seconds: float) -> int:
    """A period (a multiple of 60 s) that gives at most about 120 points a series."""
    return max(60, math.ceil(seconds / 120 / 60) * 60)


@dataclass(frozen=True)
class Series:
    """One metric of one host: (ISO time, value per device) points and their min / mean / max (None: no data)."""

    points: tuple[tuple[str, float], ...]
    min: float | None
    mean: float | None
    max: float | None

    @property
    def values(self) -> list[float]:
        return [v for _, v in self.points]

    def sparkline(self, width: int = 40) -> str:
        """The values as one line of block characters, scaled 0-100 (see `sparkline`)."""
        return sparkline(self.values, width)

    def to_dict(self) -> dict[str, Any]:
        return {"points": [list(p) for p in self.points], "min": self.min, "mean": self.mean, "max": self.max}


@dataclass(frozen=True)
class HostMetrics:
    host: str  # algo-N
    series: Mapping[str, Series]  # CloudWatch metric name -> its series, in METRICS order

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "series": {name: s.to_dict() for name, s in self.series.items()}}


@dataclass(frozen=True)
class JobMetrics:
    """Each host's series for one job; `to_dict()` is what the metrics command prints as JSON (text from AWS made
    safe to print)."""

    job_name: str
    instance_type: str
    instance_count: int
    status: str
    start: str
    end: str
    period: int
    get_metric_data_calls: int
    units: Mapping[str, str]
    hosts: tuple[HostMetrics, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"job_name": self.job_name, "instance_type": self.instance_type, "instance_count": self.instance_count,
                "status": self.status, "start": self.start, "end": self.end, "period": self.period,
                "get_metric_data_calls": self.get_metric_data_calls, "units": dict(self.units),
                "hosts": [h.to_dict() for h in self.hosts]}

    @property
    def labels(self) -> dict[str, str]:
        """Each metric's CloudWatch name -> what it measures, in the order shown ("GPU utilization")."""
        return {name: label for name, label, _div in METRICS}


def fetch(clients: Clients, job: str, since: float, now: float) -> JobMetrics:
    """Every host's four series over the last `since` seconds of the job, normalised per device."""
    from datetime import datetime, timezone


    desc = describe(clients, job)
    itype, count = instances(desc)
    created = epoch(desc.get("CreationTime")) or now - since
    end = now
    if desc["TrainingJobStatus"] in TERMINAL and desc.get("TrainingEndTime"):
        end = min(now, epoch(desc["TrainingEndTime"]) + 60)
    start = max(end - since, created - 60)
    if end - start < 60:
        start = end - 60
    period = period_for(end - start)
    queries: list[dict[str, Any]] = []
    for host in range(1, count + 1):
        for k, (name, _label, _div) in enumerate(METRICS):
            queries.append({"Id": f"h{host}m{k}", "ReturnData": True, "MetricStat": {
                "Metric": {"Namespace": NAMESPACE, "MetricName": name,
                           "Dimensions": [{"Name": "Host", "Value": f"{job}/algo-{host}"}]},
                "Period": period, "Stat": "Average"}})
    series: dict[str, dict[float, float]] = {q["Id"]: {} for q in queries}
    calls = 0
    for i in range(0, len(queries), MAX_QUERIES):
        params: dict[str, Any] = {"MetricDataQueries": queries[i:i + MAX_QUERIES], "ScanBy": "TimestampAscending",
                                  "StartTime": datetime.fromtimestamp(start, timezone.utc),
                                  "EndTime": datetime.fromtimestamp(end, timezone.utc)}
        for page in pages(clients.cloudwatch, "get_metric_data", f"reading the metrics of {job}", **params):
            calls += 1
            for res in page.get("MetricDataResults", []):
                for ts, value in zip(res.get("Timestamps", []), res.get("Values", []), strict=False):
                    series.setdefault(res["Id"], {})[epoch(ts)] = value
    dev = devices(itype)
    hosts = []
    for host in range(1, count + 1):
        row: dict[str, Series] = {}
        for k, (name, _label, div) in enumerate(METRICS):
            per = dev.get(div) if div else 1
            points = sorted(series.get(f"h{host}m{k}", {}).items())
            values = [v / per for _, v in points] if per else [v for _, v in points]
            row[name] = Series(tuple((iso(t), round(v, 2)) for (t, _), v in zip(points, values, strict=True)),
                               **stats(values))
        hosts.append(HostMetrics(f"algo-{host}", row))
    return JobMetrics(job_name=clean(job), instance_type=clean(itype), instance_count=count,
                      status=clean(desc["TrainingJobStatus"]), start=iso(start), end=iso(end), period=period,
                      get_metric_data_calls=calls, units={name: _unit(div, dev) for name, _l, div in METRICS},
                      hosts=tuple(hosts))


def _unit(div: str | None, dev: dict[str, int | None]) -> str:
    if div is None:
        return "% of memory"
    if dev.get(div):
        return f"% per {'GPU' if div == 'gpus' else 'vCPU'}: the sum / {dev[div]}"
    return "% summed over devices (instance type unknown)"


def stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"min": None, "mean": None, "max": None}
    return {"min": round(min(values), 2), "mean": round(sum(values) / len(values), 2), "max": round(max(values), 2)}


def sparkline(values: list[float], width: int = 40, top: float = 100.0) -> str:
    """Values on a fixed 0-`top` scale (so hosts compare), resampled to at most `width` bars."""
    if not values:
        return ""
    if len(values) > width:
        step = len(values) / width
        values = [sum(chunk) / len(chunk) for chunk in
                  (values[int(i * step):max(int(i * step) + 1, int((i + 1) * step))] for i in range(width))]
    return "".join(BARS[min(len(BARS) - 1, max(0, int(v / top * len(BARS))))] for v in values)
