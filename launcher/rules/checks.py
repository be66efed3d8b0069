"""The advisor's rules. Sources: the seed (../shared/seed/README.md, "seed: <section> <point>") and
the SMP v2 reference notes (../shared/reference/smp_v2.md, "smp_v2.md <section>")."""
from __future__ import annotations

from collections.abc import Iterator

from launcher.catalog import SMP_IMAGE_REGIONS, SMP_IMAGE_REPOSITORY
from launcher.rules.decisions import DELAYED_INIT_THRESHOLD, tensor_parallel_only
from launcher.rules.engine import Context, Finding, rule

MAX_GLOBAL_TOKENS = 4 * 2**20  # seed: "most research keeps it under 4 million tokens"
LONG_CONTEXT = 8192
CP_MODELS = ("llama", "mistral", "gpt_neox")
EP_MODELS = ("mixtral",)
FP8_MODELS = ("llama", "gpt_neox", "mixtral")


def _v(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def _mi(tokens: int) -> str:
    return f"{tokens:,} tokens ({tokens / 2**20:g} Mi)"


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


# ---- topology (smp_v2.md 1.2 and "Validation rules" 6-11) ----

@rule("SMP001", "error", "Every parallel degree divides the world size", "smp_v2.md 1.2; validation rules 6-7")
def degrees_divide_world(ctx: Context) -> Iterator[Finding]:
    s = ctx.smp
    for key in ("tensor_parallel_degree", "context_parallel_degree", "expert_parallel_degree", "hybrid_shard_degree"):
        d = getattr(s, key)
        if d > 1 and (d > ctx.world or ctx.world % d):
            yield Finding(f"{key} {d} must divide the world size {ctx.world} "
                          f"({ctx.spec.cluster.instance_count} x {ctx.instance.gpus} GPUs); "
                          f"valid values: {', '.join(map(str, _divisors(ctx.world)[:12]))}", f"smp.{key}")


@rule("SMP002", "error", "hybrid_shard x tensor x expert divides the world size",
      "smp_v2.md validation rule 8 (HyperPod adapter's check)")
def product_divides_world(ctx: Context) -> Iterator[Finding]:
    s = ctx.smp
    product = ctx.shard * s.tensor_parallel_degree * s.expert_parallel_degree
    if ctx.world % product:
        most = ctx.world // (s.tensor_parallel_degree * s.expert_parallel_degree)
        yield Finding(f"hybrid_shard_degree x tensor_parallel_degree x expert_parallel_degree = {ctx.shard} x "
                      f"{s.tensor_parallel_degree} x {s.expert_parallel_degree} = {product} must divide the world "
                      f"size {ctx.world}; lower hybrid_shard_degree to a divisor of {most}",
                      "smp.hybrid_shard_degree")


@rule("SMP003", "error", "context_parallel_degree <= sharding degree", "smp_v2.md 1.2 (context_parallel_degree)")
def cp_within_shard(ctx: Context) -> Iterator[Finding]:
    cp = ctx.smp.context_parallel_degree
    if cp > 1 and cp > ctx.shard:
        yield Finding(f"context_parallel_degree {cp} exceeds the sharding degree {ctx.shard}; raise "
                      f"hybrid_shard_degree to at least {cp} or lower context_parallel_degree",
                      "smp.context_parallel_degree")


@rule("SMP004", "error", "Expert parallelism excludes tensor parallelism", "smp_v2.md 1.2 (EP) and 6")
def ep_excludes_tp(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.expert_parallel_degree > 1 and ctx.smp.tensor_parallel_degree > 1:
        yield Finding("expert_parallel_degree > 1 cannot be combined with tensor_parallel_degree > 1; "
                      "set one of them to 1", "smp.expert_parallel_degree")


@rule("SMP005", "warning", "Tensor parallelism across nodes", "smp_v2.md 1.2 (TP: the examples keep TP in [1, 8])")
def tp_across_nodes(ctx: Context) -> Iterator[Finding]:
    tp = ctx.smp.tensor_parallel_degree
    if tp > ctx.instance.gpus:
        yield Finding(f"tensor_parallel_degree {tp} spans more than one node ({ctx.instance.gpus} GPUs); "
                      "inter-node tensor parallelism is slow: keep it at 8 or less and shard more instead",
                      "smp.tensor_parallel_degree")


@rule("SMP006", "error", "Expert parallelism needs a mixture-of-experts model", "smp_v2.md 1.2 (EP: Mixtral only)")
def ep_model(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.expert_parallel_degree > 1 and ctx.arch.type not in EP_MODELS:
        yield Finding(f"expert_parallel_degree needs a mixture-of-experts model (mixtral); this model is "
                      f"{ctx.arch.type}: set expert_parallel_degree to 1", "smp.expert_parallel_degree")


@rule("SMP007", "error", "Context parallelism needs a supported model", "smp_v2.md 1.2 (CP: GPT-NeoX, Llama, Mistral)")
def cp_model(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.context_parallel_degree > 1 and ctx.arch.type not in CP_MODELS:
        yield Finding(f"context parallelism supports {', '.join(CP_MODELS)} models, not {ctx.arch.type}; "
                      "set context_parallel_degree to 1", "smp.context_parallel_degree")


@rule("SMP008", "error", "Sequence length divisible for context parallelism",
      "smp_v2.md 3.1 point 10 (2 x cp chunks per sequence)")
def cp_seq(ctx: Context) -> Iterator[Finding]:
    cp = ctx.smp.context_parallel_degree
    if cp > 1 and ctx.seq % (2 * cp):
        yield Finding(f"seq_length {ctx.seq} must divide by 2 x context_parallel_degree = {2 * cp} "
                      "(each rank takes two load-balanced chunks)", "model.seq_length")


@rule("SMP009", "error", "Attention heads divide by the tensor parallel degree",
      "smp_v2.md 3.1 point 4 (TP splits heads)")
def tp_heads(ctx: Context) -> Iterator[Finding]:
    tp = ctx.smp.tensor_parallel_degree
    if tp > 1 and (ctx.arch.num_heads % tp or ctx.arch.num_key_value_heads % tp):
        yield Finding(f"tensor_parallel_degree {tp} must divide num_heads {ctx.arch.num_heads} and "
                      f"num_key_value_heads {ctx.arch.num_key_value_heads}", "smp.tensor_parallel_degree")


@rule("SMP010", "error", "Experts divide by the expert parallel degree", "smp_v2.md 1.2 (EP)")
def ep_experts(ctx: Context) -> Iterator[Finding]:
    ep = ctx.smp.expert_parallel_degree
    if ep > 1 and ctx.arch.num_experts % ep:
        yield Finding(f"expert_parallel_degree {ep} must divide num_experts {ctx.arch.num_experts}",
                      "smp.expert_parallel_degree")


@rule("SMP011", "info", "hybrid_shard_degree 0 lets SMP choose", "smp_v2.md 1.2 (hybrid_shard_degree)")
def shard_auto(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.hybrid_shard_degree == 0:
        yield Finding(f"hybrid_shard_degree 0: SMP shards over {ctx.shard} GPUs here; set it explicitly to keep "
                      "the layout when instance_count changes", "smp.hybrid_shard_degree")


# ---- the seed's general settings ----

@rule("SMP020", "warning", "Prefer bf16 to fp16", "seed: general settings 2")
def prefer_bf16(ctx: Context) -> Iterator[Finding]:
    if ctx.spec.training.precision == "fp16":
        yield Finding("fp16 mixed precision is less accurate than bf16 and needs loss scaling; set "
                      "training.precision: bf16", "training.precision")


@rule("SMP021", "error", "fp8 needs P5 (H100)", "smp_v2.md 2.3 and 3.1 point 9")
def fp8_instance(ctx: Context) -> Iterator[Finding]:
    if ctx.spec.training.precision == "fp8" and not ctx.instance.fp8:
        yield Finding(f"fp8 needs H100 GPUs (ml.p5.48xlarge); {ctx.instance.name} has {ctx.instance.gpu}: "
                      "use precision bf16 or instance_type ml.p5.48xlarge", "training.precision")


@rule("SMP022", "error", "fp8 needs a supported model and release", "smp_v2.md 3.1 point 9 (GPT-NeoX, Llama, Mixtral)")
def fp8_model(ctx: Context) -> Iterator[Finding]:
    if ctx.spec.training.precision != "fp8":
        return
    if ctx.arch.type not in FP8_MODELS:
        yield Finding(f"fp8 supports {', '.join(FP8_MODELS)} models, not {ctx.arch.type}", "training.precision")
    elif ctx.arch.type == "mixtral" and _v(ctx.framework.pytorch) < (2, 3, 1):
        yield Finding("fp8 for Mixtral needs SMP 2.5.0 or later: set framework.pytorch_version to 2.3.1 or later",
                      "framework.pytorch_version")


@rule("SMP023", "error", "SMDDP only where it works", "seed: general settings 3; smp_v2.md 5")
def smddp_possible(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.backend != "smddp":
        return
    if not ctx.instance.smddp:
        yield Finding(f"backend smddp does not work on {ctx.instance.name} (SMDDP's AllGather exists only on "
                      "P4d/P4de); set backend: auto or nccl", "smp.backend")
    elif tensor_parallel_only(ctx.spec, ctx.shard):
        yield Finding("backend smddp does not work for tensor-parallel-only jobs (sharding degree 1 with "
                      "tensor_parallel_degree > 1); set backend: auto or nccl", "smp.backend")


@rule("SMP024", "info", "What backend auto resolves to", "seed: general settings 3")
def backend_auto(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.backend != "auto":
        return
    if ctx.decisions.backend == "smddp":
        why = f"SMDDP's AllGather is available on {ctx.instance.name}"
    elif not ctx.instance.smddp:
        why = f"SMDDP does not support {ctx.instance.name}"
    else:
        why = "tensor-parallel-only jobs must use NCCL"
    yield Finding(f"backend auto resolves to {ctx.decisions.backend}: {why}", "smp.backend")


@rule("SMP025", "warning", "Delayed parameter init above 60B parameters", "seed: general settings 4")
def delayed_init_off(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.delayed_param_init is False and ctx.arch.parameters > DELAYED_INIT_THRESHOLD:
        yield Finding(f"the model has {ctx.arch.parameters / 1e9:.1f}B parameters; above 60B initialise them "
                      "lazily: set delayed_param_init: auto or true", "smp.delayed_param_init")


@rule("SMP026", "info", "Delayed parameter init turned on", "seed: general settings 4")
def delayed_init_auto(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.delayed_param_init == "auto" and ctx.decisions.delayed_param_init:
        yield Finding(f"delayed parameter init is on: {ctx.arch.parameters / 1e9:.1f}B parameters is above 60B",
                      "smp.delayed_param_init")


@rule("SMP027", "warning", "Enable activation checkpointing", "seed: general settings 5")
def checkpointing_off(ctx: Context) -> Iterator[Finding]:
    if not ctx.smp.activation_checkpointing:
        yield Finding("activation checkpointing is off; the seed recommends it for every model size: set "
                      "smp.activation_checkpointing: true", "smp.activation_checkpointing")


@rule("SMP028", "error", "Offloading needs checkpointing", "smp_v2.md 3.1 point 8; validation rule 15")
def offload_needs_checkpointing(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.activation_offloading and not ctx.smp.activation_checkpointing:
        yield Finding("activation_offloading offloads checkpointed activations: turn on "
                      "activation_checkpointing or turn offloading off", "smp.activation_offloading")


@rule("SMP029", "warning", "Offloading settings without offloading", "smp_v2.md validation rule 15")
def offload_settings_unused(ctx: Context) -> Iterator[Finding]:
    explicit = ctx.smp.model_fields_set & {"activation_loading_horizon", "sm_activation_offloading"}
    if explicit and not ctx.smp.activation_offloading:
        yield Finding(f"{', '.join(sorted(explicit))} has no effect while activation_offloading is off",
                      f"smp.{sorted(explicit)[0]}")


# ---- the seed's batch and context rules ----

@rule("SMP040", "warning", "Global batch above 4Mi tokens", "seed: starting points 2 (global batch)")
def global_batch(ctx: Context) -> Iterator[Finding]:
    if not ctx.topology_ok:
        return
    tokens = ctx.global_tokens()
    if tokens <= MAX_GLOBAL_TOKENS:
        return
    s, cp = ctx.smp, ctx.smp.context_parallel_degree
    dp = ctx.world // (s.tensor_parallel_degree * cp)
    fixes = []
    best_batch = MAX_GLOBAL_TOKENS // (dp * ctx.seq)
    if best_batch >= 1:
        fixes.append(f"lower training.batch_size to {best_batch} ({_mi(dp * best_batch * ctx.seq)})")
    for tp in (2, 4, 8):
        if tp <= s.tensor_parallel_degree or ctx.world % (tp * cp):
            continue
        t = ctx.global_tokens(tp=tp)
        if t <= MAX_GLOBAL_TOKENS:
            shard = ""
            if ctx.world % (ctx.shard * tp * s.expert_parallel_degree):
                shard = f" with hybrid_shard_degree {ctx.world // (tp * s.expert_parallel_degree)}"
            fixes.append(f"raise tensor_parallel_degree to {tp}{shard} ({_mi(t)})")
            break
    fix = "; ".join(fixes) or "use fewer instances"
    yield Finding(f"the global batch is {_mi(tokens)} per step, above the 4 Mi that keeps training converging; "
                  f"{fix}", "training.batch_size")


@rule("SMP041", "warning", "Long context wants tensor parallelism", "seed: starting points 2 (long contexts)")
def long_context(ctx: Context) -> Iterator[Finding]:
    if ctx.seq >= LONG_CONTEXT and ctx.smp.tensor_parallel_degree == 1:
        yield Finding(f"seq_length {ctx.seq}: activation memory is high and FSDP does not shard activations; "
                      "combine it with tensor parallelism (tensor_parallel_degree 2, 4 or 8)",
                      "smp.tensor_parallel_degree")


# ---- versions, regions, images ----

@rule("SMP050", "error", "An SMP image exists in the region", "smp_v2.md 2.2 (17 regions)")
def image_region(ctx: Context) -> Iterator[Finding]:
    if ctx.region and not ctx.spec.framework.image_uri and ctx.region not in SMP_IMAGE_REGIONS:
        yield Finding(f"no SMP v2 image is published in {ctx.region}; use one of {', '.join(SMP_IMAGE_REGIONS)} "
                      "or pin framework.image_uri", "cluster.region")


@rule("SMP051", "warning", "A region is needed to resolve the image", "smp_v2.md 2.2")
def region_missing(ctx: Context) -> Iterator[Finding]:
    if not ctx.region:
        yield Finding("no region: set cluster.region, AWS_REGION or a profile region; the image cannot be resolved "
                      "and submit will refuse", "cluster.region")


@rule("SMP052", "warning", "A pinned image should be an SMP image", "smp_v2.md 2.2 (image_uri skips the SDK's checks)")
def pinned_image(ctx: Context) -> Iterator[Finding]:
    uri = ctx.spec.framework.image_uri
    if uri and f"/{SMP_IMAGE_REPOSITORY}" not in uri:
        yield Finding(f"image_uri is not an {SMP_IMAGE_REPOSITORY} image; without SMP in the image "
                      "torch.sagemaker is missing and the job fails at start", "framework.image_uri")
    elif uri and f":{ctx.framework.pytorch}-" not in uri:
        yield Finding(f"image_uri's tag does not start with pytorch_version {ctx.framework.pytorch}; the SDK "
                      "skips its version checks for a pinned image", "framework.image_uri")


@rule("SMP053", "error", "Features need a recent enough SMP release", "smp_v2.md 2.1 (release notes)")
def feature_versions(ctx: Context) -> Iterator[Finding]:
    pt, s = _v(ctx.framework.pytorch), ctx.smp
    needs = []
    if s.context_parallel_degree > 1 and pt < (2, 3, 1):
        needs.append(("context parallelism", "SMP 2.5.0", "2.3.1"))
    if s.expert_parallel_degree > 1 and pt < (2, 2, 0):
        needs.append(("expert parallelism", "SMP 2.3.0", "2.2.0"))
    if ctx.spec.training.precision == "fp8" and pt < (2, 2, 0):
        needs.append(("fp8", "SMP 2.2.0", "2.2.0"))
    if s.tensor_parallel_degree > 1 and ctx.arch.type in ("mistral", "mixtral") and pt < (2, 4, 1):
        needs.append((f"tensor parallelism for {ctx.arch.type}", "SMP 2.6.0", "2.4.1"))
    for feature, release, version in needs:
        yield Finding(f"{feature} needs {release}: set framework.pytorch_version to {version} or later "
                      f"(now {ctx.framework.pytorch}, SMP {ctx.framework.smp})", "framework.pytorch_version")


@rule("SMP054", "error", "The generated script needs PyTorch 2.2 or later",
      "cpu_preflight.md (DCP save/load); templates/train_checkpoint.py.j2")
def script_pytorch(ctx: Context) -> Iterator[Finding]:
    if _v(ctx.framework.pytorch) < (2, 2, 0):
        yield Finding(f"the entry script's sharded checkpoints use torch.distributed.checkpoint save/load, "
                      f"which need PyTorch 2.2 or later; set framework.pytorch_version to 2.2.0 or later "
                      f"(now {ctx.framework.pytorch})", "framework.pytorch_version")


# ---- memory (seed: starting points 1; "extrapolate from these") ----

def _fits(ctx: Context, **changes) -> float | None:
    from launcher.memory import estimate

    e = estimate(ctx.arch, ctx.layout(**changes))
    return e.per_gpu_gb if e.fits else None


@rule("SMP060", "error", "The step fits in GPU memory", "seed: starting points 1 and 'extrapolate from these'")
def memory_fits(ctx: Context) -> Iterator[Finding]:
    if not ctx.topology_ok or ctx.memory.fits:
        return
    s, e = ctx.smp, ctx.memory
    fixes = []
    if not s.activation_checkpointing:
        gb = _fits(ctx, activation_checkpointing=True)
        if gb:
            fixes.append(f"turn on activation_checkpointing ({gb:.1f} GB)")
    # The largest smaller batch that fits, by bisection: memory grows with the batch, and a batch of
    # millions must not mean millions of estimates.
    lo, hi = 0, ctx.spec.training.batch_size  # batch lo fits (0 trivially), batch hi does not
    best = None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        gb = _fits(ctx, batch_size=mid)
        if gb:
            lo, best = mid, gb
        else:
            hi = mid
    if best:
        fixes.append(f"lower training.batch_size to {lo} ({best:.1f} GB)")
    if s.activation_checkpointing and not s.activation_offloading:
        gb = _fits(ctx, activation_offloading=True)
        if gb:
            fixes.append(f"turn on smp.activation_offloading ({gb:.1f} GB)")
    room = ctx.world // (s.tensor_parallel_degree * s.expert_parallel_degree)
    for shard in _divisors(room):
        gb = _fits(ctx, shard_degree=shard) if shard > ctx.shard else None
        if gb:
            fixes.append(f"raise hybrid_shard_degree to {shard} ({gb:.1f} GB)")
            break
    for tp in (2, 4, 8):
        if tp <= s.tensor_parallel_degree or ctx.world % tp or ctx.arch.num_key_value_heads % tp:
            continue
        shard = min(ctx.shard, ctx.world // tp)
        gb = _fits(ctx, tensor_parallel=tp, shard_degree=shard)
        if gb:
            fixes.append(f"raise tensor_parallel_degree to {tp} ({gb:.1f} GB)")
            break
    fix = "; else ".join(fixes) or ("no single change fits: add instances, or use ml.p4de.24xlarge or "
                                    "ml.p5.48xlarge (80 GB)")
    parts = ", ".join(f"{k} {v:.1f}" for k, v in e.breakdown.items())
    yield Finding(f"predicted peak {e.per_gpu_gb:.1f} GB per GPU exceeds the {e.capacity_gb:.0f} GB of "
                  f"{ctx.instance.gpu} ({parts}); in the seed's order: {fix}", "training.batch_size")


@rule("SMP061", "info", "A lower sharding degree would communicate less",
      "seed: starting points 1 (lowest degree that fits)")
def shard_lower(ctx: Context) -> Iterator[Finding]:
    if not ctx.topology_ok or not ctx.memory.fits or ctx.memory.utilisation >= 0.5 or ctx.shard <= ctx.instance.gpus:
        return
    room = ctx.world // (ctx.smp.tensor_parallel_degree * ctx.smp.expert_parallel_degree)
    for shard in _divisors(room):
        if shard >= ctx.shard or shard < ctx.smp.context_parallel_degree:
            continue
        gb = _fits(ctx, shard_degree=shard)
        if gb and gb / ctx.memory.capacity_gb < 0.9:
            yield Finding(f"the step uses {ctx.memory.per_gpu_gb:.1f} of {ctx.memory.capacity_gb:.0f} GB; "
                          f"hybrid_shard_degree {shard} also fits ({gb:.1f} GB) and communicates less",
                          "smp.hybrid_shard_degree")
            return


@rule("SMP062", "warning", "Memory is tight", "seed: starting points 1 (cache-flush warnings)")
def memory_tight(ctx: Context) -> Iterator[Finding]:
    if ctx.topology_ok and ctx.memory.fits and ctx.memory.utilisation > 0.9:
        yield Finding(f"predicted peak {ctx.memory.per_gpu_gb:.1f} of {ctx.memory.capacity_gb:.0f} GB per GPU; "
                      "expect allocator cache flushes: if their warnings appear, raise hybrid_shard_degree",
                      "smp.hybrid_shard_degree")
