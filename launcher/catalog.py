"""Facts about instances, framework versions and SMP images that specs, plans and rules share.

Sources: ../shared/reference/smp_v2.md sections 2.1 to 2.3 (SageMaker SDK v2 `pytorch-smp.json` and
`image_uris.get_training_image_uri`; SMP release notes).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceType:
    name: str
    gpus: int
    gpu: str
    gpu_memory_gb: float
    smddp: bool  # SMDDP's optimised AllGather exists only on P4 (smp_v2.md section 5)
    fp8: bool    # FP8 needs Hopper (smp_v2.md section 2.3)
    vcpus: int   # CloudWatch's CPUUtilization sums 0-100 over these


INSTANCES: dict[str, InstanceType] = {
    i.name: i
    for i in (
        InstanceType("ml.p4d.24xlarge", 8, "A100 40GB", 40.0, smddp=True, fp8=False, vcpus=96),
        InstanceType("ml.p4de.24xlarge", 8, "A100 80GB", 80.0, smddp=True, fp8=False, vcpus=96),
        InstanceType("ml.p5.48xlarge", 8, "H100 80GB", 80.0, smddp=False, fp8=True, vcpus=192),
    )
}


@dataclass(frozen=True)
class FrameworkVersion:
    pytorch: str
    python: str
    smp: str
    cuda: str
    min_sdk: str


# PyTorch version -> the SMP release its image carries (SDK v2 version_aliases), its Python and CUDA tag.
FRAMEWORKS: dict[str, FrameworkVersion] = {
    f.pytorch: f
    for f in (
        FrameworkVersion("2.0.1", "py310", "2.0.0", "cu118", "2.207.0"),
        FrameworkVersion("2.1.2", "py310", "2.1.0", "cu121", "2.207.0"),
        FrameworkVersion("2.2.0", "py310", "2.3.1", "cu121", "2.214.4"),
        FrameworkVersion("2.3.1", "py311", "2.5.0", "cu121", "2.224.0"),
        FrameworkVersion("2.4.1", "py311", "2.7.0", "cu121", "2.237.0"),
        FrameworkVersion("2.5.1", "py311", "2.8.0", "cu124", "2.243.0"),
    )
}

DEFAULT_PYTORCH = "2.4.1"

SMP_IMAGE_ACCOUNT = "658645717510"
SMP_IMAGE_REPOSITORY = "smdistributed-modelparallel"
SMP_IMAGE_REGIONS = (
    "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1", "ap-southeast-1",
    "ap-southeast-2", "ca-central-1", "eu-central-1", "eu-north-1", "eu-west-1", "eu-west-2",
    "eu-west-3", "sa-east-1", "us-east-1", "us-east-2", "us-west-1", "us-west-2",
)


def cuda_tag(pytorch_version: str, instance_type: str) -> str:
    """The CUDA suffix exactly as SDK v2 derives it (p5 forces cu121 for PyTorch 2.0.1)."""
    if "2.5" in pytorch_version:
        return "cu124"
    if "p5" in instance_type or any(v in pytorch_version for v in ("2.1", "2.2", "2.3", "2.4")):
        return "cu121"
    return "cu118"


def smp_image_uri(region: str, pytorch_version: str, instance_type: str) -> str | None:
    """The SMP v2 training image the SDK would choose, or None where no SMP image is published."""
    fw = FRAMEWORKS.get(pytorch_version)
    if fw is None or region not in SMP_IMAGE_REGIONS:
        return None
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    tag = f"{pytorch_version}-gpu-{fw.python}-{cuda_tag(pytorch_version, instance_type)}"
    return f"{SMP_IMAGE_ACCOUNT}.dkr.ecr.{region}.{domain}/{SMP_IMAGE_REPOSITORY}:{tag}"
