"""Published training throughput the step-time model is calibrated on, each point with its public source.

A point is one measured configuration: the model's dimensions, the GPUs, the per-GPU batch, the parallel
layout, the network between nodes, and the tokens per second per GPU its authors report. The model
(launcher.predict.model) is fitted on all of them, and `make bench` (benchmarks/bench_perf.py) reports
the leave-one-out error of every point: the figure for a point comes from a fit that never saw it.

Sources:
- MosaicML LLM Foundry's MPT training benchmarks (PyTorch FSDP, flash attention, 125M to 70B, 8 to 512
  A100 40GB, A100 80GB and H100 80GB GPUs): MPT_URL. The A100 clusters have a 1,600 Gbps node-to-node
  network (RoCE), as the tables say; the H100 tables do not say, and 3,200 Gbps (8 x 400 Gbps, the H100
  clusters of that time) is assumed. MPT dimensions: MPT_DIMS_URL (d_model, n_heads, n_layers, an MLP of
  4 x d_model, vocabulary 50,368). A micro-batch is what FSDP gathers and reduces for, so `batch_size`
  is the table's MicroBatchSize.
- torchtitan's published numbers (PyTorch FSDP2, Llama): TITAN_A100_URL (64 A100 80GB; the network is
  not stated: 8 x 200 Gbps is assumed) and TITAN_H100_URL (H100 at a 500 W power limit with 400 Gbps per
  GPU; the tensor- and context-parallel rows also use torch.compile and Float8).
  Selective activation checkpointing of ops recomputes little and counts as none; of every other layer
  (`selective layer`) as half.
- IBM's and Meta's FSDP throughput table for Llama 2 (PyTorch FSDP, SDPA flash attention, bf16, sequence
  4,096, 2 sequences per GPU): IBM_URL, on 128 A100 80GB with a 400 Gbps node-to-node network (the
  p4d's EFA rate) and on 96 H100 80GB with 800 Gbps. The table does not name the sharding of each row;
  the training code's guide (IBM_CONFIG_URL) prefers hybrid sharding within a node for 7B and 13B and
  needs full sharding for 70B, and that is what the points use. Its 13B rows checkpoint every other
  layer: their hardware over model FLOPs (0.59 / 0.51 on A100, 0.40 / 0.35 on H100) is the 1 + 1/6 of
  half the layers recomputed. The 34B rows are left out: Llama 2 34B was never published, so its
  dimensions have no source here.
"""
from __future__ import annotations

from dataclasses import dataclass

from launcher.catalog.architecture import Architecture
from launcher.spec.presets import PRESETS

MPT_URL = ("https://github.com/mosaicml/llm-foundry/blob/495218376830947dce625efabc4d86be7c47cc45/"
           "scripts/train/benchmarking/README.md")
MPT_DIMS_URL = ("https://github.com/mosaicml/llm-foundry/tree/8c8dd48f72168c5d51e2f7b151595892a8fba43d/"
                "scripts/train/yamls/pretrain")
TITAN_A100_URL = ("https://github.com/pytorch/torchtitan/blob/041336434916bdc0f88c1f89fda176fd3c2092e4/"
                  "docs/performance.md")
TITAN_H100_URL = ("https://github.com/pytorch/torchtitan/blob/eaea6f6a2fa940f03a10906be1df3489cf30af85/"
                  "docs/performance.md")
IBM_URL = ("https://github.com/pytorch/pytorch.github.io/blob/2ad10059d3021d0f902f1204db98e5c930532be8/"
           "_posts/2024-03-13-maximizing-training.md")
IBM_CONFIG_URL = ("https://github.com/foundation-model-stack/fms-fsdp/blob/cc4b276bf901d285073b033ba0074a0d3759b99e/"
                  "docs/configurations.md")

# Where each table comes from, and the network its cluster has between nodes (Gbps per node).
SOURCES: dict[str, tuple[str, str, float]] = {
    "a100-40": (MPT_URL, "MPT, A100 40GB with 1600 Gbps node-node interconnect (RoCE)", 1600.0),
    "a100-80": (MPT_URL, "MPT, A100 80GB with 1600 Gbps node-node interconnect (RoCE)", 1600.0),
    "h100": (MPT_URL, "MPT, H100 80GB BF16 (network not stated: 3200 Gbps assumed)", 3200.0),
    "h100-large": (MPT_URL, "MPT, H100 80GB BF16, large scale (network not stated: 3200 Gbps assumed)", 3200.0),
    "h100-fp8": (MPT_URL, "MPT, H100 80GB FP8 (network not stated: 3200 Gbps assumed)", 3200.0),
    "titan-a100": (TITAN_A100_URL, "torchtitan, Llama on 64 A100 80GB (network not stated: 1600 Gbps assumed)",
                   1600.0),
    "titan-h100": (TITAN_H100_URL, "torchtitan, Llama 3.1 on H100 (500 W), 400 Gbps per GPU", 3200.0),
    "ibm-a100": (IBM_URL, "IBM and Meta FSDP, Llama 2 on 128 A100 80GB with a 400 Gbps node-node network", 400.0),
    "ibm-h100": (IBM_URL, "IBM and Meta FSDP, Llama 2 on 96 H100 80GB with an 800 Gbps node-node network", 800.0),
}

# MPT sizes: (n_layers, d_model, n_heads) from the pretraining YAMLs (MPT_DIMS_URL).
MPT_SIZES = {"125m": (12, 768, 12), "350m": (24, 1024, 16), "760m": (24, 1536, 12), "1b": (24, 2048, 16),
             "3b": (32, 2560, 20), "7b": (32, 4096, 32), "13b": (40, 5120, 40), "30b": (48, 7168, 56),
             "70b": (80, 8192, 64)}
MPT_VOCAB = 50368


@dataclass(frozen=True)
class Published:
    """One published measurement: a configuration and the tokens per second per GPU it reached."""

    source: str  # a key of SOURCES
    label: str
    architecture: Architecture
    seq_length: int
    gpus: int
    gpu: str  # a key of launcher.predict.hardware.GPUS
    batch_size: int  # sequences per data-parallel rank per micro-batch
    checkpointing: float  # the fraction of layers whose forward is recomputed (1.0: full checkpointing)
    precision: str  # bf16 | fp8
    strategy: str  # FULL_SHARD | SHARD_GRAD_OP
    tokens_per_s_per_gpu: float
    shard_degree: int = 0  # 0: every GPU
    tensor_parallel: int = 1
    context_parallel: int = 1

    @property
    def url(self) -> str:
        return SOURCES[self.source][0]

    @property
    def node_gbps(self) -> float:
        return SOURCES[self.source][2]


def mpt_architecture(size: str) -> Architecture:
    """An MPT model as the step-time model counts it: a GPT block with a 4 x d_model MLP (FLOPs per token
    are what matter here; MPT has no biases, which changes them by far less than a percent)."""
    layers, width, heads = MPT_SIZES[size]
    return Architecture("gpt_neox", layers, width, heads, heads, 4 * width, MPT_VOCAB)


def _mpt(source: str, size: str, seq: int, gpus: int, gpu: str, micro: int, ckpt: bool, precision: str,
         strategy: str, tps: float) -> Published:
    return Published(source, f"MPT-{size}", mpt_architecture(size), seq, gpus, gpu, micro, 1.0 if ckpt else 0.0,
                     precision, strategy, float(tps))


def _titan(label: str, preset: str, seq: int, gpus: int, gpu: str, batch: int, ckpt: float, precision: str,
           tps: float, *, tp: int = 1, cp: int = 1, source: str = "titan-h100") -> Published:
    gpu = "H100 500W" if gpu.startswith("H100") else gpu
    return Published(source, label, PRESETS[preset].architecture, seq, gpus, gpu, batch, ckpt, precision,
                     "FULL_SHARD", float(tps), tensor_parallel=tp, context_parallel=cp)


# _mpt(table, size, SeqLen, # GPUs, GPU, MicroBatchSize, Activation Checkpointing, Precision, Sharding Strategy,
#      Throughput (T/s/GPU)): every row of MPT_URL's tables, in its order.
MPT_POINTS: tuple[Published, ...] = (
    _mpt("h100-large", "70b", 2048, 512, "H100 80GB", 8, True, "bf16", "FULL_SHARD", 1007),
    _mpt("h100-large", "70b", 2048, 256, "H100 80GB", 8, True, "bf16", "FULL_SHARD", 1035),
    _mpt("h100-large", "70b", 2048, 128, "H100 80GB", 8, True, "bf16", "FULL_SHARD", 1058),
    _mpt("h100-large", "30b", 2048, 512, "H100 80GB", 8, True, "bf16", "FULL_SHARD", 2115),
    _mpt("h100-large", "30b", 2048, 256, "H100 80GB", 8, True, "bf16", "FULL_SHARD", 2148),
    _mpt("h100-large", "30b", 2048, 128, "H100 80GB", 8, True, "bf16", "FULL_SHARD", 2199),
    _mpt("h100-large", "13b", 2048, 512, "H100 80GB", 16, True, "bf16", "FULL_SHARD", 4952),
    _mpt("h100-large", "13b", 2048, 256, "H100 80GB", 16, True, "bf16", "FULL_SHARD", 4989),
    _mpt("h100-large", "13b", 2048, 128, "H100 80GB", 16, True, "bf16", "FULL_SHARD", 5080),
    _mpt("h100-large", "7b", 2048, 512, "H100 80GB", 6, False, "bf16", "FULL_SHARD", 9670),
    _mpt("h100-large", "7b", 2048, 256, "H100 80GB", 6, False, "bf16", "FULL_SHARD", 10119),
    _mpt("h100-large", "7b", 2048, 128, "H100 80GB", 6, False, "bf16", "FULL_SHARD", 10475),
    _mpt("h100-large", "3b", 2048, 512, "H100 80GB", 8, False, "bf16", "SHARD_GRAD_OP", 21664),
    _mpt("h100-large", "3b", 2048, 256, "H100 80GB", 8, False, "bf16", "SHARD_GRAD_OP", 22772),
    _mpt("h100-large", "3b", 2048, 128, "H100 80GB", 8, False, "bf16", "SHARD_GRAD_OP", 23422),
    _mpt("h100-large", "1b", 2048, 512, "H100 80GB", 12, False, "bf16", "SHARD_GRAD_OP", 39837),
    _mpt("h100-large", "1b", 2048, 256, "H100 80GB", 12, False, "bf16", "SHARD_GRAD_OP", 42555),
    _mpt("h100-large", "1b", 2048, 128, "H100 80GB", 12, False, "bf16", "SHARD_GRAD_OP", 44123),
    _mpt("h100", "70b", 2048, 64, "H100 80GB", 8, True, "bf16", "FULL_SHARD", 1039),
    _mpt("h100", "70b", 2048, 32, "H100 80GB", 2, True, "bf16", "FULL_SHARD", 882),
    _mpt("h100", "30b", 8192, 8, "H100 80GB", 1, True, "bf16", "FULL_SHARD", 1384),
    _mpt("h100", "30b", 4096, 8, "H100 80GB", 1, True, "bf16", "FULL_SHARD", 1802),
    _mpt("h100", "30b", 2048, 32, "H100 80GB", 14, True, "bf16", "FULL_SHARD", 2308),
    _mpt("h100", "30b", 2048, 16, "H100 80GB", 10, True, "bf16", "FULL_SHARD", 2263),
    _mpt("h100", "30b", 2048, 8, "H100 80GB", 3, True, "bf16", "FULL_SHARD", 2002),
    _mpt("h100", "30b", 1024, 8, "H100 80GB", 6, True, "bf16", "FULL_SHARD", 2084),
    _mpt("h100", "13b", 32768, 8, "H100 80GB", 1, True, "bf16", "FULL_SHARD", 1976),
    _mpt("h100", "13b", 16384, 8, "H100 80GB", 3, True, "bf16", "FULL_SHARD", 2985),
    _mpt("h100", "13b", 4096, 8, "H100 80GB", 10, True, "bf16", "FULL_SHARD", 4717),
    _mpt("h100", "13b", 2048, 64, "H100 80GB", 2, False, "bf16", "FULL_SHARD", 4800),
    _mpt("h100", "13b", 2048, 32, "H100 80GB", 2, False, "bf16", "FULL_SHARD", 4811),
    _mpt("h100", "13b", 2048, 16, "H100 80GB", 2, False, "bf16", "FULL_SHARD", 4767),
    _mpt("h100", "13b", 2048, 8, "H100 80GB", 2, False, "bf16", "FULL_SHARD", 4792),
    _mpt("h100", "13b", 1024, 8, "H100 80GB", 40, True, "bf16", "FULL_SHARD", 5502),
    _mpt("h100", "7b", 65536, 8, "H100 80GB", 1, True, "bf16", "FULL_SHARD", 1956),
    _mpt("h100", "7b", 32768, 8, "H100 80GB", 2, True, "bf16", "FULL_SHARD", 3318),
    _mpt("h100", "7b", 8192, 8, "H100 80GB", 8, True, "bf16", "FULL_SHARD", 6935),
    _mpt("h100", "7b", 4096, 8, "H100 80GB", 16, True, "bf16", "FULL_SHARD", 8611),
    _mpt("h100", "7b", 2048, 8, "H100 80GB", 6, False, "bf16", "FULL_SHARD", 10643),
    _mpt("h100", "7b", 1024, 8, "H100 80GB", 64, True, "bf16", "FULL_SHARD", 10203),
    _mpt("h100", "3b", 65536, 8, "H100 80GB", 1, True, "bf16", "FULL_SHARD", 3262),
    _mpt("h100", "3b", 32768, 8, "H100 80GB", 3, True, "bf16", "FULL_SHARD", 5873),
    _mpt("h100", "3b", 16384, 8, "H100 80GB", 1, False, "bf16", "FULL_SHARD", 11152),
    _mpt("h100", "3b", 8192, 8, "H100 80GB", 3, False, "bf16", "FULL_SHARD", 16578),
    _mpt("h100", "3b", 4096, 8, "H100 80GB", 5, False, "bf16", "FULL_SHARD", 20964),
    _mpt("h100", "3b", 2048, 64, "H100 80GB", 6, False, "bf16", "FULL_SHARD", 22525),
    _mpt("h100", "3b", 2048, 32, "H100 80GB", 6, False, "bf16", "FULL_SHARD", 23021),
    _mpt("h100", "3b", 2048, 16, "H100 80GB", 10, False, "bf16", "FULL_SHARD", 24142),
    _mpt("h100", "3b", 1024, 8, "H100 80GB", 20, False, "bf16", "FULL_SHARD", 27046),
    _mpt("h100", "3b", 512, 8, "H100 80GB", 40, False, "bf16", "FULL_SHARD", 27965),
    _mpt("h100", "1b", 65536, 8, "H100 80GB", 1, True, "bf16", "FULL_SHARD", 5506),
    _mpt("h100", "1b", 32768, 8, "H100 80GB", 1, False, "bf16", "FULL_SHARD", 12025),
    _mpt("h100", "1b", 16384, 8, "H100 80GB", 2, False, "bf16", "FULL_SHARD", 19649),
    _mpt("h100", "1b", 8192, 8, "H100 80GB", 3, False, "bf16", "FULL_SHARD", 29157),
    _mpt("h100", "1b", 4096, 8, "H100 80GB", 7, False, "bf16", "FULL_SHARD", 38535),
    _mpt("h100", "1b", 2048, 64, "H100 80GB", 20, False, "bf16", "FULL_SHARD", 44402),
    _mpt("h100", "1b", 2048, 32, "H100 80GB", 20, False, "bf16", "FULL_SHARD", 45130),
    _mpt("h100", "1b", 2048, 16, "H100 80GB", 20, False, "bf16", "FULL_SHARD", 46037),
    _mpt("h100", "1b", 2048, 8, "H100 80GB", 14, False, "bf16", "FULL_SHARD", 45455),
    _mpt("h100", "1b", 1024, 8, "H100 80GB", 18, False, "bf16", "FULL_SHARD", 48910),
    _mpt("h100", "1b", 512, 8, "H100 80GB", 56, False, "bf16", "FULL_SHARD", 52275),
    _mpt("h100", "760m", 32768, 8, "H100 80GB", 1, False, "bf16", "FULL_SHARD", 16291),
    _mpt("h100", "760m", 16384, 8, "H100 80GB", 3, False, "bf16", "FULL_SHARD", 27815),
    _mpt("h100", "760m", 8192, 8, "H100 80GB", 6, False, "bf16", "FULL_SHARD", 41825),
    _mpt("h100", "760m", 4096, 8, "H100 80GB", 12, False, "bf16", "FULL_SHARD", 55459),
    _mpt("h100", "760m", 2048, 32, "H100 80GB", 24, False, "bf16", "FULL_SHARD", 67971),
    _mpt("h100", "760m", 2048, 16, "H100 80GB", 24, False, "bf16", "FULL_SHARD", 68551),
    _mpt("h100", "760m", 2048, 8, "H100 80GB", 24, False, "bf16", "FULL_SHARD", 63147),
    _mpt("h100", "760m", 1024, 8, "H100 80GB", 48, False, "bf16", "FULL_SHARD", 78581),
    _mpt("h100", "760m", 512, 8, "H100 80GB", 96, False, "bf16", "FULL_SHARD", 83749),
    _mpt("h100-fp8", "3b", 32768, 8, "H100 80GB", 3, True, "fp8", "FULL_SHARD", 5856),
    _mpt("h100-fp8", "3b", 8192, 8, "H100 80GB", 3, False, "fp8", "FULL_SHARD", 19146),
    _mpt("h100-fp8", "3b", 2048, 8, "H100 80GB", 10, False, "fp8", "FULL_SHARD", 30586),
    _mpt("h100-fp8", "3b", 512, 8, "H100 80GB", 40, False, "fp8", "FULL_SHARD", 36527),
    _mpt("h100-fp8", "1b", 32768, 8, "H100 80GB", 1, False, "fp8", "FULL_SHARD", 12580),
    _mpt("h100-fp8", "1b", 8192, 8, "H100 80GB", 2, False, "fp8", "FULL_SHARD", 32010),
    _mpt("h100-fp8", "1b", 512, 8, "H100 80GB", 56, False, "fp8", "FULL_SHARD", 70315),
    _mpt("a100-80", "70b", 2048, 64, "A100 80GB", 8, True, "bf16", "FULL_SHARD", 410),
    _mpt("a100-80", "70b", 2048, 32, "A100 80GB", 2, True, "bf16", "FULL_SHARD", 373),
    _mpt("a100-80", "30b", 8192, 8, "A100 80GB", 1, True, "bf16", "FULL_SHARD", 574),
    _mpt("a100-80", "30b", 4096, 8, "A100 80GB", 1, True, "bf16", "FULL_SHARD", 814),
    _mpt("a100-80", "30b", 2048, 8, "A100 80GB", 3, True, "bf16", "FULL_SHARD", 916),
    _mpt("a100-80", "30b", 1024, 8, "A100 80GB", 6, True, "bf16", "FULL_SHARD", 946),
    _mpt("a100-80", "30b", 512, 8, "A100 80GB", 12, True, "bf16", "FULL_SHARD", 967),
    _mpt("a100-80", "13b", 32768, 8, "A100 80GB", 1, True, "bf16", "FULL_SHARD", 1016),
    _mpt("a100-80", "13b", 16384, 8, "A100 80GB", 3, True, "bf16", "FULL_SHARD", 1431),
    _mpt("a100-80", "13b", 8192, 8, "A100 80GB", 5, True, "bf16", "FULL_SHARD", 1795),
    _mpt("a100-80", "13b", 4096, 8, "A100 80GB", 10, True, "bf16", "FULL_SHARD", 2060),
    _mpt("a100-80", "13b", 2048, 8, "A100 80GB", 2, False, "bf16", "FULL_SHARD", 2262),
    _mpt("a100-80", "13b", 1024, 8, "A100 80GB", 40, True, "bf16", "FULL_SHARD", 2330),
    _mpt("a100-80", "7b", 65536, 8, "A100 80GB", 1, True, "bf16", "FULL_SHARD", 1013),
    _mpt("a100-80", "7b", 32768, 8, "A100 80GB", 2, True, "bf16", "FULL_SHARD", 1672),
    _mpt("a100-80", "7b", 16384, 8, "A100 80GB", 4, True, "bf16", "FULL_SHARD", 2453),
    _mpt("a100-80", "7b", 8192, 8, "A100 80GB", 8, True, "bf16", "FULL_SHARD", 3206),
    _mpt("a100-80", "7b", 4096, 8, "A100 80GB", 16, True, "bf16", "FULL_SHARD", 3684),
    _mpt("a100-80", "7b", 2048, 8, "A100 80GB", 6, False, "bf16", "FULL_SHARD", 4641),
    _mpt("a100-80", "7b", 1024, 8, "A100 80GB", 64, True, "bf16", "FULL_SHARD", 4357),
    _mpt("a100-80", "3b", 65536, 8, "A100 80GB", 1, True, "bf16", "FULL_SHARD", 1767),
    _mpt("a100-80", "3b", 32768, 8, "A100 80GB", 3, True, "bf16", "FULL_SHARD", 3029),
    _mpt("a100-80", "3b", 16384, 8, "A100 80GB", 1, False, "bf16", "FULL_SHARD", 5529),
    _mpt("a100-80", "3b", 8192, 8, "A100 80GB", 3, False, "bf16", "FULL_SHARD", 7695),
    _mpt("a100-80", "3b", 4096, 8, "A100 80GB", 5, False, "bf16", "FULL_SHARD", 9457),
    _mpt("a100-80", "3b", 2048, 8, "A100 80GB", 10, False, "bf16", "FULL_SHARD", 10811),
    _mpt("a100-80", "3b", 1024, 8, "A100 80GB", 20, False, "bf16", "FULL_SHARD", 11580),
    _mpt("a100-80", "3b", 512, 8, "A100 80GB", 40, False, "bf16", "FULL_SHARD", 12127),
    _mpt("a100-80", "1b", 65536, 8, "A100 80GB", 1, True, "bf16", "FULL_SHARD", 3044),
    _mpt("a100-80", "1b", 32768, 8, "A100 80GB", 1, False, "bf16", "FULL_SHARD", 6275),
    _mpt("a100-80", "1b", 16384, 8, "A100 80GB", 2, False, "bf16", "FULL_SHARD", 9956),
    _mpt("a100-80", "1b", 8192, 8, "A100 80GB", 3, False, "bf16", "FULL_SHARD", 13814),
    _mpt("a100-80", "1b", 4096, 8, "A100 80GB", 7, False, "bf16", "FULL_SHARD", 17807),
    _mpt("a100-80", "1b", 2048, 8, "A100 80GB", 14, False, "bf16", "FULL_SHARD", 20513),
    _mpt("a100-80", "1b", 1024, 8, "A100 80GB", 18, False, "bf16", "FULL_SHARD", 22112),
    _mpt("a100-80", "1b", 512, 8, "A100 80GB", 56, False, "bf16", "FULL_SHARD", 23148),
    _mpt("a100-80", "760m", 65536, 8, "A100 80GB", 1, True, "bf16", "FULL_SHARD", 4143),
    _mpt("a100-80", "760m", 32768, 8, "A100 80GB", 1, False, "bf16", "FULL_SHARD", 8802),
    _mpt("a100-80", "760m", 16384, 8, "A100 80GB", 3, False, "bf16", "FULL_SHARD", 14274),
    _mpt("a100-80", "760m", 8192, 8, "A100 80GB", 6, False, "bf16", "FULL_SHARD", 20933),
    _mpt("a100-80", "760m", 4096, 8, "A100 80GB", 12, False, "bf16", "FULL_SHARD", 27351),
    _mpt("a100-80", "760m", 2048, 8, "A100 80GB", 24, False, "bf16", "FULL_SHARD", 32434),
    _mpt("a100-80", "760m", 1024, 8, "A100 80GB", 48, False, "bf16", "FULL_SHARD", 29765),
    _mpt("a100-80", "760m", 512, 8, "A100 80GB", 96, False, "bf16", "FULL_SHARD", 29446),
    _mpt("a100-80", "350m", 65536, 8, "A100 80GB", 1, False, "bf16", "FULL_SHARD", 7524),
    _mpt("a100-80", "350m", 32768, 8, "A100 80GB", 2, False, "bf16", "FULL_SHARD", 13652),
    _mpt("a100-80", "350m", 16384, 8, "A100 80GB", 4, False, "bf16", "FULL_SHARD", 23559),
    _mpt("a100-80", "350m", 8192, 8, "A100 80GB", 8, False, "bf16", "FULL_SHARD", 36569),
    _mpt("a100-80", "350m", 4096, 8, "A100 80GB", 16, False, "bf16", "FULL_SHARD", 49555),
    _mpt("a100-80", "350m", 2048, 8, "A100 80GB", 32, False, "bf16", "FULL_SHARD", 58782),
    _mpt("a100-80", "350m", 1024, 8, "A100 80GB", 64, False, "bf16", "FULL_SHARD", 64813),
    _mpt("a100-80", "350m", 512, 8, "A100 80GB", 128, False, "bf16", "FULL_SHARD", 69330),
    _mpt("a100-80", "125m", 65536, 8, "A100 80GB", 1, False, "bf16", "FULL_SHARD", 20368),
    _mpt("a100-80", "125m", 32768, 8, "A100 80GB", 2, False, "bf16", "FULL_SHARD", 36407),
    _mpt("a100-80", "125m", 16384, 8, "A100 80GB", 4, False, "bf16", "FULL_SHARD", 60040),
    _mpt("a100-80", "125m", 8192, 8, "A100 80GB", 8, False, "bf16", "FULL_SHARD", 90392),
    _mpt("a100-80", "125m", 4096, 8, "A100 80GB", 16, False, "bf16", "FULL_SHARD", 118396),
    _mpt("a100-80", "125m", 2048, 8, "A100 80GB", 40, False, "bf16", "FULL_SHARD", 142830),
    _mpt("a100-80", "125m", 2048, 8, "A100 80GB", 32, False, "bf16", "FULL_SHARD", 141737),
    _mpt("a100-80", "125m", 1024, 8, "A100 80GB", 64, False, "bf16", "FULL_SHARD", 156468),
    _mpt("a100-80", "125m", 512, 8, "A100 80GB", 128, False, "bf16", "FULL_SHARD", 165681),
    _mpt("a100-40", "70b", 2048, 128, "A100 40GB", 4, True, "bf16", "FULL_SHARD", 376),
    _mpt("a100-40", "70b", 2048, 64, "A100 40GB", 2, True, "bf16", "FULL_SHARD", 276),
    _mpt("a100-40", "30b", 2048, 128, "A100 40GB", 6, True, "bf16", "FULL_SHARD", 865),
    _mpt("a100-40", "30b", 2048, 32, "A100 40GB", 4, True, "bf16", "FULL_SHARD", 857),
    _mpt("a100-40", "13b", 8192, 8, "A100 40GB", 1, True, "bf16", "FULL_SHARD", 1407),
    _mpt("a100-40", "13b", 4096, 8, "A100 40GB", 2, True, "bf16", "FULL_SHARD", 1603),
    _mpt("a100-40", "13b", 2048, 128, "A100 40GB", 16, True, "bf16", "FULL_SHARD", 1972),
    _mpt("a100-40", "13b", 2048, 64, "A100 40GB", 16, True, "bf16", "FULL_SHARD", 1976),
    _mpt("a100-40", "13b", 2048, 32, "A100 40GB", 14, True, "bf16", "FULL_SHARD", 1998),
    _mpt("a100-40", "13b", 2048, 16, "A100 40GB", 10, True, "bf16", "FULL_SHARD", 1993),
    _mpt("a100-40", "13b", 2048, 8, "A100 40GB", 4, True, "bf16", "FULL_SHARD", 1668),
    _mpt("a100-40", "13b", 1024, 8, "A100 40GB", 8, True, "bf16", "FULL_SHARD", 1727),
    _mpt("a100-40", "13b", 512, 8, "A100 40GB", 16, True, "bf16", "FULL_SHARD", 1763),
    _mpt("a100-40", "7b", 16384, 8, "A100 40GB", 1, True, "bf16", "FULL_SHARD", 2249),
    _mpt("a100-40", "7b", 8192, 8, "A100 40GB", 3, True, "bf16", "FULL_SHARD", 2887),
    _mpt("a100-40", "7b", 4096, 8, "A100 40GB", 6, True, "bf16", "FULL_SHARD", 3366),
    _mpt("a100-40", "7b", 2048, 128, "A100 40GB", 18, True, "bf16", "FULL_SHARD", 3623),
    _mpt("a100-40", "7b", 2048, 64, "A100 40GB", 18, True, "bf16", "FULL_SHARD", 3665),
    _mpt("a100-40", "7b", 2048, 32, "A100 40GB", 18, True, "bf16", "FULL_SHARD", 3725),
    _mpt("a100-40", "7b", 2048, 16, "A100 40GB", 16, True, "bf16", "FULL_SHARD", 3645),
    _mpt("a100-40", "7b", 2048, 8, "A100 40GB", 12, True, "bf16", "FULL_SHARD", 3679),
    _mpt("a100-40", "7b", 1024, 8, "A100 40GB", 24, True, "bf16", "FULL_SHARD", 3854),
    _mpt("a100-40", "7b", 512, 8, "A100 40GB", 48, True, "bf16", "FULL_SHARD", 3895),
    _mpt("a100-40", "3b", 32768, 8, "A100 40GB", 1, True, "bf16", "FULL_SHARD", 2955),
    _mpt("a100-40", "3b", 16384, 8, "A100 40GB", 2, True, "bf16", "FULL_SHARD", 4465),
    _mpt("a100-40", "3b", 8192, 8, "A100 40GB", 1, False, "bf16", "FULL_SHARD", 7149),
    _mpt("a100-40", "3b", 4096, 8, "A100 40GB", 2, False, "bf16", "FULL_SHARD", 8777),
    _mpt("a100-40", "3b", 2048, 128, "A100 40GB", 6, False, "bf16", "FULL_SHARD", 9538),
    _mpt("a100-40", "3b", 2048, 64, "A100 40GB", 6, False, "bf16", "FULL_SHARD", 9736),
    _mpt("a100-40", "3b", 2048, 32, "A100 40GB", 6, False, "bf16", "FULL_SHARD", 9914),
    _mpt("a100-40", "3b", 2048, 16, "A100 40GB", 5, False, "bf16", "FULL_SHARD", 9750),
    _mpt("a100-40", "3b", 2048, 8, "A100 40GB", 5, False, "bf16", "FULL_SHARD", 10065),
    _mpt("a100-40", "3b", 1024, 8, "A100 40GB", 10, False, "bf16", "FULL_SHARD", 10731),
    _mpt("a100-40", "3b", 512, 8, "A100 40GB", 20, False, "bf16", "FULL_SHARD", 11324),
    _mpt("a100-40", "1b", 32768, 8, "A100 40GB", 1, True, "bf16", "FULL_SHARD", 5095),
    _mpt("a100-40", "1b", 16384, 8, "A100 40GB", 1, False, "bf16", "FULL_SHARD", 9715),
    _mpt("a100-40", "1b", 8192, 8, "A100 40GB", 2, False, "bf16", "FULL_SHARD", 13474),
    _mpt("a100-40", "1b", 4096, 8, "A100 40GB", 4, False, "bf16", "FULL_SHARD", 16856),
    _mpt("a100-40", "1b", 2048, 128, "A100 40GB", 10, False, "bf16", "FULL_SHARD", 18647),
    _mpt("a100-40", "1b", 2048, 64, "A100 40GB", 10, False, "bf16", "FULL_SHARD", 19001),
    _mpt("a100-40", "1b", 2048, 32, "A100 40GB", 10, False, "bf16", "FULL_SHARD", 15555),
    _mpt("a100-40", "1b", 2048, 16, "A100 40GB", 8, False, "bf16", "FULL_SHARD", 19085),
    _mpt("a100-40", "1b", 2048, 8, "A100 40GB", 8, False, "bf16", "FULL_SHARD", 19271),
    _mpt("a100-40", "1b", 1024, 8, "A100 40GB", 16, False, "bf16", "FULL_SHARD", 20959),
    _mpt("a100-40", "1b", 512, 8, "A100 40GB", 32, False, "bf16", "FULL_SHARD", 21782),
    _mpt("a100-40", "760m", 32768, 8, "A100 40GB", 1, True, "bf16", "FULL_SHARD", 7183),
    _mpt("a100-40", "760m", 16384, 8, "A100 40GB", 1, False, "bf16", "FULL_SHARD", 13914),
    _mpt("a100-40", "760m", 8192, 8, "A100 40GB", 3, False, "bf16", "FULL_SHARD", 20106),
    _mpt("a100-40", "760m", 4096, 8, "A100 40GB", 6, False, "bf16", "FULL_SHARD", 25863),
    _mpt("a100-40", "760m", 2048, 128, "A100 40GB", 12, False, "bf16", "FULL_SHARD", 28940),
    _mpt("a100-40", "760m", 2048, 64, "A100 40GB", 12, False, "bf16", "FULL_SHARD", 29344),
    _mpt("a100-40", "760m", 2048, 32, "A100 40GB", 12, False, "bf16", "FULL_SHARD", 29648),
    _mpt("a100-40", "760m", 2048, 16, "A100 40GB", 12, False, "bf16", "FULL_SHARD", 29607),
    _mpt("a100-40", "760m", 2048, 8, "A100 40GB", 12, False, "bf16", "FULL_SHARD", 30173),
    _mpt("a100-40", "760m", 1024, 8, "A100 40GB", 24, False, "bf16", "FULL_SHARD", 33422),
    _mpt("a100-40", "760m", 512, 8, "A100 40GB", 48, False, "bf16", "FULL_SHARD", 34938),
    _mpt("a100-40", "350m", 32768, 8, "A100 40GB", 1, False, "bf16", "FULL_SHARD", 13416),
    _mpt("a100-40", "350m", 16384, 8, "A100 40GB", 2, False, "bf16", "FULL_SHARD", 22896),
    _mpt("a100-40", "350m", 8192, 8, "A100 40GB", 4, False, "bf16", "FULL_SHARD", 34933),
    _mpt("a100-40", "350m", 4096, 8, "A100 40GB", 8, False, "bf16", "FULL_SHARD", 46833),
    _mpt("a100-40", "350m", 2048, 128, "A100 40GB", 18, False, "bf16", "FULL_SHARD", 51934),
    _mpt("a100-40", "350m", 2048, 64, "A100 40GB", 18, False, "bf16", "FULL_SHARD", 52689),
    _mpt("a100-40", "350m", 2048, 32, "A100 40GB", 18, False, "bf16", "FULL_SHARD", 53811),
    _mpt("a100-40", "350m", 2048, 16, "A100 40GB", 18, False, "bf16", "FULL_SHARD", 55413),
    _mpt("a100-40", "350m", 2048, 8, "A100 40GB", 16, False, "bf16", "FULL_SHARD", 55995),
    _mpt("a100-40", "350m", 1024, 8, "A100 40GB", 32, False, "bf16", "FULL_SHARD", 62523),
    _mpt("a100-40", "350m", 512, 8, "A100 40GB", 64, False, "bf16", "FULL_SHARD", 66284),
    _mpt("a100-40", "125m", 32768, 8, "A100 40GB", 1, False, "bf16", "FULL_SHARD", 32651),
    _mpt("a100-40", "125m", 16384, 8, "A100 40GB", 2, False, "bf16", "FULL_SHARD", 55484),
    _mpt("a100-40", "125m", 8192, 8, "A100 40GB", 5, False, "bf16", "FULL_SHARD", 86858),
    _mpt("a100-40", "125m", 4096, 8, "A100 40GB", 13, False, "bf16", "FULL_SHARD", 115162),
    _mpt("a100-40", "125m", 2048, 128, "A100 40GB", 26, False, "bf16", "FULL_SHARD", 123936),
    _mpt("a100-40", "125m", 2048, 64, "A100 40GB", 26, False, "bf16", "FULL_SHARD", 125234),
    _mpt("a100-40", "125m", 2048, 32, "A100 40GB", 26, False, "bf16", "FULL_SHARD", 127122),
    _mpt("a100-40", "125m", 2048, 16, "A100 40GB", 26, False, "bf16", "FULL_SHARD", 130535),
    _mpt("a100-40", "125m", 2048, 8, "A100 40GB", 26, False, "bf16", "FULL_SHARD", 136334),
    _mpt("a100-40", "125m", 1024, 8, "A100 40GB", 52, False, "bf16", "FULL_SHARD", 148289),
    _mpt("a100-40", "125m", 512, 8, "A100 40GB", 104, False, "bf16", "FULL_SHARD", 156735),
)

# torchtitan: Llama 3 at sequence 8192 and Llama 2 at 4096 (the sequence lengths of its configs).
TITAN_POINTS: tuple[Published, ...] = (
    _titan("Llama 3 8B, selective layer", "llama3-8b", 8192, 64, "A100 80GB", 1, 0.5, "bf16", 2904,
           source="titan-a100"),
    _titan("Llama 3 8B, selective op", "llama3-8b", 8192, 64, "A100 80GB", 1, 0.0, "bf16", 2973, source="titan-a100"),
    _titan("Llama 3 70B, full", "llama3-70b", 8192, 64, "A100 80GB", 1, 1.0, "bf16", 331, source="titan-a100"),
    _titan("Llama 2 13B, none", "llama2-13b", 4096, 64, "A100 80GB", 2, 0.0, "bf16", 2162, source="titan-a100"),
    _titan("Llama 2 13B, selective layer", "llama2-13b", 4096, 64, "A100 80GB", 2, 0.5, "bf16", 1914,
           source="titan-a100"),
    _titan("Llama 2 13B, selective op", "llama2-13b", 4096, 64, "A100 80GB", 2, 0.0, "bf16", 1904, source="titan-a100"),
    _titan("Llama 2 70B, selective op", "llama2-70b", 4096, 64, "A100 80GB", 1, 0.0, "bf16", 355, source="titan-a100"),
    _titan("Llama 2 70B, full", "llama2-70b", 4096, 64, "A100 80GB", 2, 1.0, "bf16", 353, source="titan-a100"),
    _titan("Llama 3.1 8B, FSDP, 8 GPUs", "llama3-8b", 8192, 8, "H100 80GB", 2, 0.0, "bf16", 5762),
    _titan("Llama 3.1 8B, FSDP, 128 GPUs", "llama3-8b", 8192, 128, "H100 80GB", 2, 0.0, "bf16", 5605),
    _titan("Llama 3.1 8B, FSDP 8, CP 1", "llama3-8b", 32768, 8, "H100 80GB", 1, 1.0, "fp8", 3890),
    _titan("Llama 3.1 8B, FSDP 4, CP 2", "llama3-8b", 65536, 8, "H100 80GB", 1, 1.0, "fp8", 2540, cp=2),
    _titan("Llama 3.1 8B, FSDP 2, CP 4", "llama3-8b", 131072, 8, "H100 80GB", 1, 1.0, "fp8", 1071, cp=4),
    _titan("Llama 3.1 8B, FSDP 1, CP 8", "llama3-8b", 262144, 8, "H100 80GB", 1, 1.0, "fp8", 548, cp=8),
    _titan("Llama 3.1 70B, FSDP 32, TP 8", "llama3-70b", 8192, 256, "H100 80GB", 16, 1.0, "fp8", 829, tp=8),
)


def _ibm(source: str, preset: str, ckpt: float, tps: float) -> Published:
    gpus, gpu = (128, "A100 80GB") if source == "ibm-a100" else (96, "H100 80GB")
    hybrid = preset != "llama2-70b"  # IBM_CONFIG_URL: hybrid sharding for 7B and 13B, full sharding for 70B
    return Published(source, f"Llama 2 {preset.split('-')[1].upper()}", PRESETS[preset].architecture, 4096, gpus,
                     gpu, 2, ckpt, "bf16", "FULL_SHARD", float(tps), shard_degree=8 if hybrid else 0)


# _ibm(table, Llama 2 preset, layers recomputed, Throughput tokens/sec/GPU): IBM_URL's table, the A100 column
# then the H100 column (the 34B row left out, see above).
IBM_POINTS: tuple[Published, ...] = (
    _ibm("ibm-a100", "llama2-7b", 0.0, 3700),
    _ibm("ibm-a100", "llama2-13b", 0.5, 1800),
    _ibm("ibm-a100", "llama2-70b", 1.0, 370),
    _ibm("ibm-h100", "llama2-7b", 0.0, 7500),
    _ibm("ibm-h100", "llama2-13b", 0.5, 3800),
    _ibm("ibm-h100", "llama2-70b", 1.0, 800),
)

POINTS: tuple[Published, ...] = MPT_POINTS + TITAN_POINTS + IBM_POINTS
