"""The hardware figures the step-time model divides by, each with the public page it comes from.

Peaks are dense (no sparsity) tensor-core figures. Link figures are per direction. Collectives never reach
a link's nominal rate; the fraction they reach is an estimate here (COLLECTIVE_EFFICIENCY and the SMDDP one),
and the band of every prediction spans it (launcher.predict.speed).
"""
from __future__ import annotations

from dataclasses import dataclass

A100_DATASHEET = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                  "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
H100_DATASHEET = "https://www.nvidia.com/en-us/data-center/h100/"
P4_PAGE = "https://aws.amazon.com/ec2/instance-types/p4/"
P5_PAGE = "https://aws.amazon.com/ec2/instance-types/p5/"
SMDDP_PAGE = "https://docs.aws.amazon.com/sagemaker/latest/dg/data-parallel-intro.html"


@dataclass(frozen=True)
class Gpu:
    """One GPU model: the dense 16-bit tensor peak (TFLOPS), NVLink per direction, HBM and PCIe (GB/s).

    MFU is quoted against the 16-bit peak in every precision, as the published tables do; fp8's gain shows
    as a higher efficiency, which the calibration fits (launcher.predict.fit)."""

    name: str
    bf16_tflops: float
    nvlink_gb_s: float
    hbm_gb_s: float
    pcie_gb_s: float
    source: str


GPUS: dict[str, Gpu] = {
    g.name: g
    for g in (
        # A100 SXM: 312 dense bf16 TFLOPS, NVLink 600 GB/s (300 each way), HBM2 1,555 GB/s (40 GB) and HBM2e
        # 2,039 GB/s (80 GB), PCIe Gen4 x16 (32 GB/s each way).
        Gpu("A100 40GB", 312.0, 300.0, 1555.0, 32.0, A100_DATASHEET),
        Gpu("A100 80GB", 312.0, 300.0, 2039.0, 32.0, A100_DATASHEET),
        # H100 SXM: 989 dense bf16 TFLOPS (1,979 with sparsity), NVLink 900 GB/s (450 each way),
        # HBM3 3,350 GB/s, PCIe Gen5 x16 (64 GB/s each way).
        Gpu("H100 80GB", 989.0, 450.0, 3350.0, 64.0, H100_DATASHEET),
        # torchtitan's H100s (HBM2e, 500 W): their own note puts the peak between the SXM's 989 and the NVL's
        # 835 dense TFLOPS; the midpoint is used. Only its published points run on it.
        Gpu("H100 500W", 912.0, 450.0, 2400.0, 64.0, H100_DATASHEET),
    )
}

# EFA bandwidth per instance (Gbps, all of its network cards together): P4d and P4de 400, P5 3,200.
NODE_NETWORK_GBPS: dict[str, float] = {
    "ml.p4d.24xlarge": 400.0,
    "ml.p4de.24xlarge": 400.0,
    "ml.p5.48xlarge": 3200.0,
}
NETWORK_SOURCES: dict[str, str] = {"ml.p4d.24xlarge": P4_PAGE, "ml.p4de.24xlarge": P4_PAGE, "ml.p5.48xlarge": P5_PAGE}

# The fraction of a link's rate a large ring collective reaches (an estimate: NCCL's bus bandwidth on a
# well-tuned cluster is commonly 75-90% of the link), and what SMDDP's AllGather reaches on P4 (an estimate:
# AWS documents it as faster than NCCL's on its network without a figure, SMDDP_PAGE).
COLLECTIVE_EFFICIENCY = 0.8
SMDDP_ALLGATHER_EFFICIENCY = 0.9
# How much of the overlappable communication (FSDP's gathers and reductions, context parallelism's ring,
# offloading's copies) runs under compute: PyTorch FSDP prefetches the next layer's all-gather while this
# layer computes (forward_prefetch, BACKWARD_PRE). An estimate, spanned by the band (LOW and HIGH).
OVERLAP = 0.85
OVERLAP_LOW = 0.6
OVERLAP_HIGH = 1.0
