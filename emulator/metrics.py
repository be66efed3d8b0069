"""Per-host instance metrics, as SageMaker publishes them to CloudWatch while a job trains.

Namespace `/aws/sagemaker/TrainingJobs`, dimension `Host=<job>/algo-N`, one point per metric every
`metric_interval` seconds of training. Values are summed over devices as AWS reports them
(GPUUtilization up to 100 x GPUs, CPUUtilization up to 100 x vCPUs). Host 2 runs cooler than the
others, so a straggler shows up in `smp-launch metrics`.
"""
from __future__ import annotations

import random
from typing import Any

from emulator import core, scenario
from launcher.catalog.smp import INSTANCES

NAMESPACE = "/aws/sagemaker/TrainingJobs"
GPUS = 8


def values(job: scenario.EmulatedJob, host: int, step: int) -> dict[str, float]:
    """The four metrics of one host at one sample, deterministic in (seed, host, step)."""
    rng = random.Random(job.seed * 7919 + host * 104_729 + step)
    gpu = (55.0 if host == 2 else 92.0) + rng.uniform(-4, 4)
    if step == 0:
        gpu = 10.0  # the first minute is start-up
    known = INSTANCES.get(job.instance_type)
    vcpus = known.vcpus if known else 96
    return {
        "GPUUtilization": GPUS * min(100.0, gpu),
        "GPUMemoryUtilization": GPUS * (78.0 + rng.uniform(-2, 2)),
        "CPUUtilization": vcpus * (14.0 + rng.uniform(-3, 3)),
        "MemoryUtilization": 41.0 + rng.uniform(-1, 1),
    }


def pump(backend: Any) -> int:
    """Publish every sample due by now for the jobs in this backend's region."""
    from moto.cloudwatch.models import MetricDatum

    at = core.now()
    written = 0
    with core.lock():
        for job in scenario.created_jobs(backend.region_name):
            window = job.training_window()
            if window is None:
                continue
            due = int((min(at, window[1]) - window[0]) // job.metric_interval) + 1 if at >= window[0] else 0
            done = job.cursor.get("metrics", 0)
            for step in range(done, due):
                when = core.moto_time(window[0] + step * job.metric_interval)
                for host in range(1, job.hosts + 1):
                    dims = [{"Name": "Host", "Value": f"{job.name}/algo-{host}"}]
                    for name, value in values(job, host, step).items():
                        backend.metric_data.append(MetricDatum(NAMESPACE, name, value, dims, when, "Percent"))
                        written += 1
            job.cursor["metrics"] = max(done, due)
    return written


def _apply() -> None:
    from moto.cloudwatch.models import CloudWatchBackend

    for name in ("get_metric_data", "get_metric_statistics", "list_metrics"):
        setattr(CloudWatchBackend, name, core.after(pump)(getattr(CloudWatchBackend, name)))


core.register_patch("cloudwatch:host-metrics", _apply)
