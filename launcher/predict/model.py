"""The step-time model: what one training step of a layout costs in compute and in communication.

A step is one forward and backward pass of `batch_size` sequences on every data-parallel rank (and, in
the job, one optimizer step). Its parts, per GPU:
- Compute: the model's FLOPs for the GPU's tokens (6 x active parameters per token plus attention,
  launcher.catalog.architecture), plus the forward recomputed under activation checkpointing (a third
  more, Korthikanti et al. 2022), at a fitted efficiency (launcher.predict.fit) of the GPU's dense peak.
- Overlappable communication: FSDP's two all-gathers (forward, backward) and one reduce-scatter of the
  sharded 16-bit parameters per step (one all-gather less without resharding after forward), the
  all-reduce of gradient shards across hybrid-shard replicas, context parallelism's ring passes of keys
  and values, and activation offloading's copies over PCIe. FSDP prefetches, so most of it runs under
  compute (hardware.OVERLAP).
- Exposed time: tensor parallelism's all-gathers and reduce-scatters of activations (8 per layer, 12 with
  checkpointing), expert parallelism's all-to-alls, AdamW's memory-bound update of the local shard, and,
  with PyTorch's own activation offloading, the copies back to the GPU: it fetches each layer's activations
  only when backward reaches it, leaving the GPU idle meanwhile, where SMP's offloading prefetches them
  (https://docs.aws.amazon.com/sagemaker/latest/dg/model-parallel-core-features-v2-pytorch-activation-offloading.html).
A ring collective over a group inside one node runs over NVLink; over a group spanning nodes, each node's
network carries every concurrent group's share (`ring_seconds`). The step takes the slower of compute and
overlappable communication, plus the part of the faster one that does not overlap, plus the exposed time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from launcher.catalog.architecture import Architecture
from launcher.predict import hardware

BYTES_16 = 2
# AdamW's step per parameter: read the fp32 weight, two moments and the gradient, write back three and a 16-bit copy.
ADAM_BYTES_PER_PARAM = 30


@dataclass(frozen=True)
class Workload:
    """A layout as the step-time model sees it. `shard_degree` 0 shards over every data-parallel rank."""

    architecture: Architecture
    gpu: str  # a key of hardware.GPUS
    nodes: int
    gpus_per_node: int
    node_gbps: float
    seq_length: int
    batch_size: int
    shard_degree: int = 0
    tensor_parallel: int = 1
    context_parallel: int = 1
    expert_parallel: int = 1
    checkpointing: float = 1.0  # fraction of layers whose forward is recomputed
    offloading: bool = False
    offload_prefetch: bool = True  # SMP's offloading prefetches the copies back; PyTorch's does not
    precision: str = "bf16"
    reshard_after_forward: bool = True
    smddp: bool = False

    @property
    def world(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def data_ranks(self) -> int:
        """Ranks holding the same tensor-parallel slice of the parameters (context-parallel ranks among them)."""
        return max(1, self.world // self.tensor_parallel)

    @property
    def shard(self) -> int:
        return self.shard_degree or self.data_ranks

    @property
    def replicas(self) -> int:
        return max(1, self.data_ranks // (self.shard * self.expert_parallel))

    @property
    def tokens_per_gpu(self) -> float:
        """Tokens a GPU's share of the step covers: a data-parallel rank's, split over tensor and context ranks."""
        return self.batch_size * self.seq_length / (self.tensor_parallel * self.context_parallel)

    @property
    def micro_tokens(self) -> float:
        """Tokens in the matrices a GPU multiplies: the rank's batch over its share of the sequence."""
        return self.batch_size * self.seq_length / self.context_parallel

    @property
    def model_flops(self) -> float:
        """Model FLOPs per GPU per step (what MFU counts: no recomputation)."""
        return self.tokens_per_gpu * self.architecture.flops_per_token(self.seq_length)

    @property
    def hardware_flops(self) -> float:
        return self.model_flops * (1.0 + self.checkpointing / 3.0)

    @property
    def attention_share(self) -> float:
        a = self.architecture
        return 12.0 * a.num_layers * a.hidden_width * self.seq_length / a.flops_per_token(self.seq_length)

    def local_parameters(self) -> float:
        """Parameters of this GPU's tensor- and expert-parallel slice, before FSDP shards them."""
        a = self.architecture
        expert = 0.0
        if a.num_experts > 1:
            expert = float(a.num_layers * (a.layer_parameters() - a.layer_parameters(experts=0)))
        dense = a.parameters - expert
        return dense / self.tensor_parallel + expert / (self.tensor_parallel * self.expert_parallel)


@dataclass(frozen=True)
class Links:
    """Link rates in bytes per second as collectives reach them."""

    nvlink: float
    node: float  # one node's network, all of its cards together
    node_allgather: float  # the same for all-gathers (SMDDP's on P4)
    pcie: float
    hbm: float

    @classmethod
    def of(cls, w: Workload, efficiency: float = hardware.COLLECTIVE_EFFICIENCY,
           smddp_efficiency: float = hardware.SMDDP_ALLGATHER_EFFICIENCY) -> Links:
        gpu = hardware.GPUS[w.gpu]
        node = w.node_gbps / 8 * 1e9
        gather = smddp_efficiency if w.smddp else efficiency
        return cls(gpu.nvlink_gb_s * 1e9 * efficiency, node * efficiency, node * gather, gpu.pcie_gb_s * 1e9,
                   gpu.hbm_gb_s * 1e9)


def ring_seconds(nbytes: float, group: int, stride: int, w: Workload, links: Links, *, gather: bool = False) -> float:
    """One ring all-gather or reduce-scatter of an `nbytes` buffer over `group` ranks placed `stride` GPUs
    apart. Inside a node: NVLink. Across nodes: every GPU of the node is in some concurrent group, and the
    node's network carries each group's (group - 1) / group of the buffer."""
    if group <= 1 or nbytes <= 0:
        return 0.0
    per_node = max(1, min(group, w.gpus_per_node // max(1, stride)))
    moved = nbytes * (group - 1) / group
    if math.ceil(group / per_node) <= 1:
        return moved / links.nvlink
    concurrent = w.gpus_per_node / per_node
    return concurrent * moved / (links.node_allgather if gather else links.node)


def peer_rate(group: int, stride: int, w: Workload, links: Links) -> float:
    """Bytes per second a GPU sends to its ring neighbour: NVLink inside a node, its share of the network across."""
    return links.nvlink if group * stride <= w.gpus_per_node else links.node / w.gpus_per_node


@dataclass(frozen=True)
class Terms:
    """Seconds per step: communication that can run under compute, and time that cannot."""

    fsdp: float
    replicas: float
    context: float
    offload: float
    tensor: float
    expert: float
    optimizer: float
    fetch: float = 0.0  # offloaded activations copied back with nothing to hide behind

    @property
    def overlappable(self) -> float:
        return self.fsdp + self.replicas + self.context + self.offload

    @property
    def exposed(self) -> float:
        return self.tensor + self.expert + self.optimizer + self.fetch


def terms(w: Workload, links: Links | None = None) -> Terms:
    links = links or Links.of(w)
    a = w.architecture
    tp, cp, ep = w.tensor_parallel, w.context_parallel, w.expert_parallel
    gathered = BYTES_16 * w.local_parameters()
    fsdp = 0.0
    if w.shard > 1:
        gathers = 2 if w.reshard_after_forward else 1
        fsdp = (gathers * ring_seconds(gathered, w.shard, tp, w, links, gather=True)
                + ring_seconds(gathered, w.shard, tp, w, links))
    replicas = 2 * ring_seconds(gathered / w.shard, w.replicas, tp * w.shard, w, links)
    passes = 3.0 + w.checkpointing  # forward, backward (twice the traffic), recomputed forward
    context = 0.0
    if cp > 1:
        kv = 2 * a.num_key_value_heads * a.head_dim / tp
        per_layer = (cp - 1) * w.batch_size * (w.seq_length / cp) * kv * BYTES_16
        context = a.num_layers * per_layer * passes / peer_rate(cp, tp, w, links)
    offload = fetch = 0.0
    if w.offloading:
        one_way = a.num_layers * w.tokens_per_gpu * a.hidden_width * BYTES_16 / links.pcie
        offload, fetch = (2 * one_way, 0.0) if w.offload_prefetch else (one_way, one_way)
    activations = w.micro_tokens * a.hidden_width * BYTES_16
    tensor = 0.0
    if tp > 1:
        per = ring_seconds(activations, tp, 1, w, links)
        tensor = a.num_layers * (8 + 4 * w.checkpointing) * per
    expert = 0.0
    if ep > 1:
        routed = activations * a.num_experts_per_tok * (ep - 1) / ep
        expert = a.num_layers * (4 + 2 * w.checkpointing) * routed / peer_rate(ep, tp, w, links)
    optimizer = ADAM_BYTES_PER_PARAM * w.local_parameters() / w.shard / links.hbm
    return Terms(fsdp, replicas, context, offload, tensor, expert, optimizer, fetch)


def step_seconds(compute: float, t: Terms, overlap: float = hardware.OVERLAP) -> float:
    """The slower of compute and overlappable communication, the part of the faster one left exposed, and
    the exposed time."""
    comm = t.overlappable
    return max(compute, comm) + (1.0 - overlap) * min(compute, comm) + t.exposed


def compute_from_step(step: float, t: Terms, overlap: float = hardware.OVERLAP) -> float | None:
    """The compute time a measured step implies (step_seconds inverted); None where the measured step is
    no longer than the modelled communication (such a point says nothing about compute)."""
    left = step - t.exposed
    comm = t.overlappable
    bound = left - (1.0 - overlap) * comm
    if bound >= comm:
        return bound
    if overlap < 1.0 and left > comm:
        return (left - comm) / (1.0 - overlap)
    return None
