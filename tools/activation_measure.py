"""Measure what autograd keeps for backward per decoder layer of a Hugging Face model, on CPU.

The memory model's activation constants (launcher/rules/memory.py) come from here: a base model with
one decoder layer and one with two run forward in bf16 under `torch.autograd.graph.saved_tensors_hooks`,
each saved tensor's storage is counted once, parameters are left out, and the difference between
the two runs is one layer's share (the embeddings are bypassed with `inputs_embeds`, and the final
norm and rotary tables cancel out). Dividing by s*b*h gives bytes per token per hidden unit.

Attention runs through PyTorch's scaled_dot_product_attention ("sdpa"): on CPU that is the fused
flash kernel, and on a GPU the flash or memory-efficient kernel; all of them keep the output and a
log-sum-exp, never the s x s score matrix. "eager" attention keeps the scores as well; measure()
takes it to show the difference. Needs torch and transformers (`pip install 'smp-launch[local]'`).

The loss's term is measured differently, because its peak is made of transients (an upcast, a shifted
copy, gradients) that saved-tensor hooks never see: `loss_bytes_per_logit` runs the LM head and the loss
forward and backward under the profiler and takes the CPU allocator's peak, for two vocabularies, and
the difference per logit is the loss's bytes per logit.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

# Small dimensions with the ratios of the real models (intermediate/hidden, heads, key-value heads,
# head width 64 to 128); bytes per s*b*h depend on the ratios, not on the sizes (hidden 512 gives
# the same figures within 0.5%), nor on s with sdpa attention.
PROBE_DIMS: dict[str, dict] = {
    "llama": dict(hidden_size=256, intermediate_size=688, num_attention_heads=2, num_key_value_heads=2),
    "mistral": dict(hidden_size=256, intermediate_size=896, num_attention_heads=4, num_key_value_heads=1),
    "mixtral": dict(hidden_size=256, intermediate_size=896, num_attention_heads=4, num_key_value_heads=1,
                    num_local_experts=8, num_experts_per_tok=2),
    "gpt_neox": dict(hidden_size=256, intermediate_size=1024, num_attention_heads=2),
}
CLASSES = {
    "llama": ("llama", "LlamaConfig", "LlamaModel"),
    "mistral": ("mistral", "MistralConfig", "MistralModel"),
    "mixtral": ("mixtral", "MixtralConfig", "MixtralModel"),
    "gpt_neox": ("gpt_neox", "GPTNeoXConfig", "GPTNeoXModel"),
}
SEQ, BATCH = 64, 2


@dataclass(frozen=True)
class Measured:
    model_type: str
    checkpointed: bool
    attention: str
    bytes_per_sbh: float


def _saved_bytes(model, x, params: set[int]) -> int:
    import torch

    seen: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in params and ptr:
            seen[ptr] = max(seen.get(ptr, 0), storage.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(inputs_embeds=x, use_cache=False).last_hidden_state
    out.float().sum().backward()
    return sum(seen.values())


def _model(model_type: str, layers: int, attention: str, checkpointed: bool):
    import torch

    module, config_name, model_name = CLASSES[model_type]
    mod = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    cfg_mod = importlib.import_module(f"transformers.models.{module}.configuration_{module}")
    config = getattr(cfg_mod, config_name)(num_hidden_layers=layers, vocab_size=128, use_cache=False,
                                           max_position_embeddings=4 * SEQ, **PROBE_DIMS[model_type])
    for key in ("attention_dropout", "hidden_dropout", "attention_probs_dropout_prob"):
        if hasattr(config, key):
            setattr(config, key, 0.0)
    config._attn_implementation = attention
    torch.manual_seed(0)
    model = getattr(mod, model_name)(config).to(torch.bfloat16).train()
    if checkpointed:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    return model


def measure(model_type: str, checkpointed: bool, attention: str = "sdpa") -> Measured:
    """Bytes autograd keeps per layer per s*b*h for this architecture's Hugging Face layer."""
    import torch

    h = PROBE_DIMS[model_type]["hidden_size"]
    totals = []
    for layers in (1, 2):
        model = _model(model_type, layers, attention, checkpointed)
        params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        torch.manual_seed(1)
        x = torch.randn(BATCH, SEQ, h, dtype=torch.bfloat16, requires_grad=True)
        totals.append(_saved_bytes(model, x, params))
    return Measured(model_type, checkpointed, attention, (totals[1] - totals[0]) / (SEQ * BATCH * h))


def peak_allocated(fn) -> int:
    """Peak bytes the CPU allocator held above its level at the start while fn ran: the profiler records every
    allocation and free ([memory] events, kernels' temporaries included) and the running sum's maximum is the
    peak, as torch.cuda.max_memory_allocated would give on a GPU."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]")
    now = peak = 0
    for _, nbytes in events:
        now += nbytes
        peak = max(peak, now)
    return peak


LOSS_VOCAB = (4096, 8192)  # two vocabularies: the difference is the loss's share per logit
LOSSES = ("transformers", "torchtitan", "torchtitan_loss_parallel")


def _loss_step(kind: str, vocab: int):
    """One forward and backward from the last hidden state through the LM head to the loss."""
    import torch

    torch.manual_seed(0)
    h = torch.randn(BATCH, 4 * SEQ, 64, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(vocab, 64, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (BATCH, 4 * SEQ))

    def step():
        logits = h @ weight.t()
        if kind == "transformers":  # LlamaForCausalLM's own loss: upcast, a shifted copy, cross-entropy
            from transformers.loss.loss_utils import ForCausalLMLoss

            loss = ForCausalLMLoss(logits, labels, vocab)
        elif kind == "torchtitan":  # torchtitan's train.py: labels shifted by the loader, one fp32 upcast
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))
        else:  # the same under tensor parallelism: vocabulary-sharded logits and torch's loss_parallel
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.tensor import DTensor, Shard
            from torch.distributed.tensor.parallel import loss_parallel

            pred = DTensor.from_local(logits, init_device_mesh("cpu", (1,)), [Shard(2)])
            with loss_parallel():
                loss = torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
                del pred, logits
                loss.backward()
            return
        del logits  # the script keeps `.loss` only; torchtitan deletes `pred` before backward
        loss.backward()

    return step


def loss_bytes_per_logit(kind: str = "transformers") -> float:
    """Peak bytes the loss needs per logit (b*s*V), forward and backward. `transformers`: the entry script's
    path (the model's own loss); `torchtitan`: cross_entropy on pre-shifted labels; `torchtitan_loss_parallel`:
    the same on vocabulary-sharded logits (needs a process group: run_loss_parallel starts one of 1 rank)."""
    small, large = (peak_allocated(_loss_step(kind, v)) for v in LOSS_VOCAB)
    return (large - small) / (BATCH * 4 * SEQ * (LOSS_VOCAB[1] - LOSS_VOCAB[0]))


def run_loss_parallel() -> float:
    """loss_bytes_per_logit("torchtitan_loss_parallel") inside a one-rank gloo process group."""
    import os

    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29631")
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        return loss_bytes_per_logit("torchtitan_loss_parallel")
    finally:
        dist.destroy_process_group()


def main() -> None:
    import transformers

    print(f"transformers {transformers.__version__}, seq {SEQ}, batch {BATCH}")
    for model_type in CLASSES:
        for checkpointed in (False, True):
            for attention in ("sdpa", "eager"):
                m = measure(model_type, checkpointed, attention)
                print(f"{model_type:9} checkpointed={str(checkpointed):5} {attention:5} {m.bytes_per_sbh:7.2f}")
    for kind in LOSSES[:2]:
        print(f"loss ({kind}): {loss_bytes_per_logit(kind):.2f} bytes per logit at its peak")
    print(f"loss ({LOSSES[2]}): {run_loss_parallel():.2f} bytes per logit at its peak")


if __name__ == "__main__":
    main()
