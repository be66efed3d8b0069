"""The advisor's rules; each cites the public AWS page (or AWS repository) it follows."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from launcher.catalog.smp import (
    ASYNC_CHECKPOINT_SINCE,
    CP_COMM_TYPE_SINCE,
    MISTRAL_CONTEXT_PARALLEL_SINCE,
    OFFLOADING_CLIP_SINCE,
    SMP_IMAGE_REGIONS,
    SMP_IMAGE_REPOSITORY,
    SMP_PARAMETERS,
    carries,
    first_pytorch_with,
    smp_parameters_taken,
)
from launcher.rules.decisions import (
    CONTEXT_PARALLEL_MODELS,
    DELAYED_INIT_THRESHOLD,
    FINE_TUNING_NCCL,
    SMDDP_GROUNDS,
    host_copies_gib,
    needs_transform,
    tensor_parallel_only,
)
from launcher.rules.engine import Context, Finding, Severity, rule
from launcher.spec.presets import PRESETS

_DG = "https://docs.aws.amazon.com/sagemaker/latest/dg/"
REF = _DG + "distributed-model-parallel-v2-reference.html"
BEST = _DG + "model-parallel-best-practices-v2.html"
HSDP = _DG + "model-parallel-core-features-v2-sharded-data-parallelism.html"
TP = _DG + "model-parallel-core-features-v2-tensor-parallelism.html"
EP = _DG + "model-parallel-core-features-v2-expert-parallelism.html"
CP = _DG + "model-parallel-core-features-v2-context-parallelism.html"
MIXED = _DG + "model-parallel-core-features-v2-mixed-precision.html"
SMDDP = _DG + "model-parallel-core-features-v2-smddp-allgather.html"
OFFLOAD = _DG + "model-parallel-core-features-v2-pytorch-activation-offloading.html"
DELAYED = _DG + "model-parallel-core-features-v2-delayed-param-init.html"
NOTES = _DG + "model-parallel-release-notes.html"
SUPPORT = _DG + "distributed-model-parallel-support-v2.html"
USE = _DG + "model-parallel-use-api-v2.html"
RESOURCE = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ResourceConfig.html"
CHECKPOINT_API = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CheckpointConfig.html"
EXAMPLES = ("https://github.com/aws/amazon-sagemaker-examples/tree/4ad18040d41d315b245d68b8d92d2674ec6a7755/"
            "training/distributed_training/pytorch/model_parallel_v2")
ADAPTER = "https://github.com/aws/sagemaker-hyperpod-training-adapter-for-nemo"
EXAMPLES_HEAD = ("https://github.com/aws/amazon-sagemaker-examples/tree/2d519b52c3a2c2361f2b87f0d3de46fd6c0232a5/"
                "%20%20%20%20%20%20build_and_train_models/sm-distributed_model_parallel_v2")
AWS_SCRIPTS = ("https://github.com/aws/amazon-sagemaker-examples/blob/main/build_and_train_models/"
               "sm-distributed_model_parallel_v2/shared-scripts/")
SDK = "https://github.com/aws/sagemaker-python-sdk/blob/master-v2/src/sagemaker/image_uri_config/pytorch-smp.json"
CHECKPOINTS = _DG + "model-parallel-core-features-v2-checkpoints.html"
# AWS's example scripts at their newest (Oct 2024: PyTorch 2.4.1, SMP 2.6.0), and the SageMaker HyperPod training
# adapter v1.4.0 (Aug 2025), the newest AWS code on SMP v2.
AWS_SCRIPTS_HEAD = EXAMPLES_HEAD.replace("/tree/", "/blob/") + "/shared-scripts/"
ADAPTER_140 = ("https://github.com/aws/sagemaker-hyperpod-training-adapter-for-nemo/blob/"
               "0f91fdd5839e26cf310665eb23e8224a3de6a267/src/hyperpod_nemo_adapter/")
AWSOME_NO_SMP = ("https://github.com/aws-samples/awsome-distributed-training/commit/"
                 "305a69b11a47db3f1a91120fb2133c3a420611b3")

MAX_GLOBAL_TOKENS = 4 * 2**20  # best practices: "most research keeps it under 4 million tokens"
LONG_CONTEXT = 8192
CP_MODELS = CONTEXT_PARALLEL_MODELS
EP_MODELS = ("mixtral",)
FP8_MODELS = ("llama", "gpt_neox", "mixtral")


def _v(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def _mi(tokens: int) -> str:
    return f"{tokens:,} tokens ({tokens / 2**20:g} Mi)"


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


# ---- topology (SMP v2 reference and feature pages) ----

@rule("SMP001", Severity.ERROR, "Every parallel degree divides the world size", f"{REF}; {TP}; {EP}; {CP}")
def degrees_divide_world(ctx: Context) -> Iterator[Finding]:
    s = ctx.smp
    for key in ("tensor_parallel_degree", "context_parallel_degree", "expert_parallel_degree", "hybrid_shard_degree"):
        d = getattr(s, key)
        if d > 1 and (d > ctx.world or ctx.world % d):
            yield Finding(f"{key} {d} must divide the world size {ctx.world} "
                          f"({ctx.spec.cluster.instance_count} x {ctx.instance.gpus} GPUs); "
                          f"valid values: {', '.join(map(str, _divisors(ctx.world)[:12]))}", f"smp.{key}")


@rule("SMP002", Severity.ERROR, "hybrid_shard x tensor x expert divides the world size",
      f"{REF}; {ADAPTER} (validate_distributed_degrees)")


def product_divides_world(ctx: Context) -> Iterator[Finding]:
    s = ctx.smp
    product = ctx.shard * s.tensor_parallel_degree * s.expert_parallel_degree
    if ctx.world % product:
        most = ctx.topology.max_shard_degree
        yield Finding(f"hybrid_shard_degree x tensor_parallel_degree x expert_parallel_degree = {ctx.shard} x "
                      f"{s.tensor_parallel_degree} x {s.expert_parallel_degree} = {product} must divide the world "
                      f"size {ctx.world}; lower hybrid_shard_degree to a divisor of {most}",
                      "smp.hybrid_shard_degree")


@rule("SMP003", Severity.ERROR, "context_parallel_degree <= sharding degree", REF)
def cp_within_shard(ctx: Context) -> Iterator[Finding]:
    cp = ctx.smp.context_parallel_degree
    if cp > 1 and cp > ctx.shard:
        yield Finding(f"context_parallel_degree {cp} exceeds the sharding degree {ctx.shard}; raise "
                      f"hybrid_shard_degree to at least {cp} or lower context_parallel_degree",
                      "smp.context_parallel_degree")


@rule("SMP004", Severity.ERROR, "Expert parallelism excludes tensor parallelism", EP)
def ep_excludes_tp(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.expert_parallel_degree > 1 and ctx.smp.tensor_parallel_degree > 1:
        yield Finding("expert_parallel_degree > 1 cannot be combined with tensor_parallel_degree > 1; "
                      "set one of them to 1", "smp.expert_parallel_degree")


@rule("SMP005", Severity.WARNING, "Tensor parallelism across nodes", f"{TP}; {EXAMPLES}")
def tp_across_nodes(ctx: Context) -> Iterator[Finding]:
    tp = ctx.smp.tensor_parallel_degree
    if tp > ctx.instance.gpus:
        yield Finding(f"tensor_parallel_degree {tp} spans more than one node ({ctx.instance.gpus} GPUs); "
                      "inter-node tensor parallelism is slow: keep it at 8 or less and shard more instead",
                      "smp.tensor_parallel_degree")


@rule("SMP006", Severity.ERROR, "Expert parallelism needs a mixture-of-experts model", EP)
def ep_model(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.expert_parallel_degree > 1 and ctx.arch.type not in EP_MODELS:
        yield Finding(f"expert_parallel_degree needs a mixture-of-experts model (mixtral); this model is "
                      f"{ctx.arch.type}: set expert_parallel_degree to 1", "smp.expert_parallel_degree")


@rule("SMP007", Severity.ERROR, "Context parallelism needs a supported model", CP)
def cp_model(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.context_parallel_degree > 1 and ctx.arch.type not in CP_MODELS:
        yield Finding(f"context parallelism supports {', '.join(CP_MODELS)} models, not {ctx.arch.type}; "
                      "set context_parallel_degree to 1", "smp.context_parallel_degree")


@rule("SMP008", Severity.ERROR, "Sequence length divisible for context parallelism",
      f"{CP}; {EXAMPLES} (train_lib.get_batch_for_cp_rank)")


def cp_seq(ctx: Context) -> Iterator[Finding]:
    cp = ctx.smp.context_parallel_degree
    if cp > 1 and ctx.seq % (2 * cp):
        yield Finding(f"seq_length {ctx.seq} must divide by 2 x context_parallel_degree = {2 * cp} "
                      "(each rank takes two load-balanced chunks)", "model.seq_length")


@rule("SMP009", Severity.ERROR, "Attention heads divide by the tensor parallel degree",
      TP)


def tp_heads(ctx: Context) -> Iterator[Finding]:
    tp = ctx.smp.tensor_parallel_degree
    if tp > 1 and (ctx.arch.num_heads % tp or ctx.arch.num_key_value_heads % tp):
        yield Finding(f"tensor_parallel_degree {tp} must divide num_heads {ctx.arch.num_heads} and "
                      f"num_key_value_heads {ctx.arch.num_key_value_heads}", "smp.tensor_parallel_degree")


@rule("SMP010", Severity.ERROR, "Experts divide by the expert parallel degree", EP)
def ep_experts(ctx: Context) -> Iterator[Finding]:
    ep = ctx.smp.expert_parallel_degree
    if ep > 1 and ctx.arch.num_experts % ep:
        yield Finding(f"expert_parallel_degree {ep} must divide num_experts {ctx.arch.num_experts}",
                      "smp.expert_parallel_degree")


@rule("SMP011", Severity.INFO, "What hybrid_shard_degree 0 resolves to", REF)
def shard_auto(ctx: Context) -> Iterator[Finding]:
    s = ctx.smp
    if s.hybrid_shard_degree != 0 or (s.tensor_parallel_degree == 1 and s.expert_parallel_degree > 1):
        return
    if s.tensor_parallel_degree == 1 and ctx.world > ctx.shard:
        hint = (f"to shard over more GPUs set hybrid_shard_degree explicitly (up to {ctx.world}); the memory "
                f"estimate is for {ctx.shard}")
    else:
        hint = "set it explicitly to keep the layout when instance_count changes"
    yield Finding(f"{ctx.decisions.shard_reason}; {hint}", "smp.hybrid_shard_degree")


@rule("SMP012", Severity.ERROR, "hybrid_shard_degree 0 with expert parallelism is undefined",
      f"{REF}; {EP}; {EXAMPLES}")


def shard_auto_with_ep(ctx: Context) -> Iterator[Finding]:
    s = ctx.smp
    if s.hybrid_shard_degree == 0 and s.tensor_parallel_degree == 1 and s.expert_parallel_degree > 1:
        most = ctx.topology.max_shard_degree  # tensor_parallel_degree is 1 here
        yield Finding(f"hybrid_shard_degree 0 with expert_parallel_degree {s.expert_parallel_degree}: SMP's "
                      "reference defines 0 only for tensor parallelism or native FSDP, so the sharding cannot be "
                      f"predicted; set it to a divisor of {most} (AWS's Mixtral example shards over 32 with "
                      "expert_parallel_degree 2 on 64 GPUs)", "smp.hybrid_shard_degree")


@rule("SMP013", Severity.ERROR, "Parallelism and fp8 need SMP's implementation", f"{REF}; {EXAMPLES}")
def transform_needed(ctx: Context) -> Iterator[Finding]:
    needs = needs_transform(ctx.spec)
    if needs and not ctx.spec.model.use_smp_implementation:
        yield Finding(f"{', '.join(needs)} run only on SMP's implementation (torch.sagemaker.transform); set "
                      "model.use_smp_implementation: true or drop them", "model.use_smp_implementation")


# ---- SMP v2 best practices: general settings ----

@rule("SMP020", Severity.WARNING, "Prefer bf16 to fp16", BEST)
def prefer_bf16(ctx: Context) -> Iterator[Finding]:
    if ctx.spec.training.precision == "fp16":
        yield Finding("fp16 mixed precision is less accurate than bf16 and needs loss scaling; set "
                      "training.precision: bf16", "training.precision")


@rule("SMP021", Severity.ERROR, "fp8 needs P5 (H100)", MIXED)
def fp8_instance(ctx: Context) -> Iterator[Finding]:
    if ctx.spec.training.precision == "fp8" and not ctx.instance.fp8:
        yield Finding(f"fp8 needs H100 GPUs (ml.p5.48xlarge); {ctx.instance.name} has {ctx.instance.gpu}: "
                      "use precision bf16 or instance_type ml.p5.48xlarge", "training.precision")


@rule("SMP022", Severity.ERROR, "fp8 needs a supported model and release", f"{MIXED}; {NOTES}")
def fp8_model(ctx: Context) -> Iterator[Finding]:
    if ctx.spec.training.precision != "fp8":
        return
    if ctx.arch.type not in FP8_MODELS:
        yield Finding(f"fp8 supports {', '.join(FP8_MODELS)} models, not {ctx.arch.type}", "training.precision")
    elif ctx.arch.type == "mixtral" and _v(ctx.framework.pytorch) < (2, 3, 1):
        yield Finding("fp8 for Mixtral needs SMP 2.5.0 or later: set framework.pytorch_version to 2.3.1 or later",
                      "framework.pytorch_version")


@rule("SMP023", Severity.ERROR, "SMDDP only where it works", f"{BEST}; {SMDDP}")
def smddp_possible(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.backend != "smddp":
        return
    if not ctx.instance.smddp:
        yield Finding(f"backend smddp does not work on {ctx.instance.name} (SMDDP's AllGather exists only on "
                      "P4d/P4de); set backend: auto or nccl", "smp.backend")
    elif tensor_parallel_only(ctx.spec, ctx.shard):
        yield Finding("backend smddp does not work for tensor-parallel-only jobs (sharding degree 1 with "
                      "tensor_parallel_degree > 1); set backend: auto or nccl", "smp.backend")


@rule("SMP024", Severity.INFO, "What backend auto resolves to, and what SMDDP rests on",
      f"{BEST}; {SMDDP}; {EXAMPLES_HEAD}; {NOTES} (v2.8.0: SMDDP 2.6.0); "
      f"{ADAPTER_140}conf/config_schemas.py (distributed_backend); {AWSOME_NO_SMP}")
def backend_auto(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.backend != "auto":
        return
    grounds = f"; {SMDDP_GROUNDS}" if ctx.decisions.backend == "smddp" else ""
    yield Finding(f"backend auto resolves to {ctx.decisions.backend}: {ctx.decisions.backend_reason}{grounds}",
                  "smp.backend")


@rule("SMP030", Severity.WARNING, "Fine-tuning runs on NCCL", EXAMPLES_HEAD)
def smddp_fine_tuning(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.backend == "smddp" and ctx.spec.model.pretrained is not None:
        yield Finding(f"backend smddp with model.pretrained set: {FINE_TUNING_NCCL}; set backend: auto or nccl",
                      "smp.backend")


@rule("SMP025", Severity.WARNING, "Delayed parameter init off where it is needed", f"{BEST}; {DELAYED}")
def delayed_init_off(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.delayed_param_init is not False:
        return
    copies = host_copies_gib(ctx.spec)
    if ctx.arch.parameters > DELAYED_INIT_THRESHOLD:
        why = f"the model has {ctx.arch.parameters / 1e9:.1f}B parameters; above 60B initialise them lazily"
    elif copies > ctx.instance.host_memory_gib:
        second = " (and tsm.transform's copy beside the Hugging Face model)" if ctx.decisions.transform else ""
        why = (f"{ctx.instance.gpus} ranks each building the {ctx.arch.parameters / 1e9:.1f}B-parameter model in "
               f"fp32{second} need {copies:,.0f} GiB of host memory and {ctx.instance.name} has "
               f"{ctx.instance.host_memory_gib:,} GiB")
    else:
        return
    yield Finding(f"{why}: set delayed_param_init: auto or true", "smp.delayed_param_init")


@rule("SMP026", Severity.INFO, "Delayed parameter init turned on", f"{BEST}; {DELAYED}")
def delayed_init_auto(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.delayed_param_init == "auto" and ctx.decisions.delayed_param_init:
        yield Finding(f"delayed parameter init is on: {ctx.decisions.delayed_reason}", "smp.delayed_param_init")


@rule("SMP027", Severity.WARNING, "Enable activation checkpointing", BEST)
def checkpointing_off(ctx: Context) -> Iterator[Finding]:
    if not ctx.smp.activation_checkpointing:
        yield Finding("activation checkpointing is off; SMP's best practices recommend it for every model size: set "
                      "smp.activation_checkpointing: true", "smp.activation_checkpointing")


@rule("SMP028", Severity.ERROR, "Offloading needs checkpointing", f"{OFFLOAD}; {REF}")
def offload_needs_checkpointing(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.activation_offloading and not ctx.smp.activation_checkpointing:
        yield Finding("activation_offloading offloads checkpointed activations: turn on "
                      "activation_checkpointing or turn offloading off", "smp.activation_offloading")


@rule("SMP029", Severity.WARNING, "Offloading settings without the offloading they set", f"{OFFLOAD}; {REF}")
def offload_settings_unused(ctx: Context) -> Iterator[Finding]:
    smp = ctx.smp
    explicit = smp.model_fields_set & {"activation_loading_horizon", "sm_activation_offloading"}
    if explicit and not smp.activation_offloading:
        yield Finding(f"{', '.join(sorted(explicit))} has no effect while activation_offloading is off",
                      f"smp.{sorted(explicit)[0]}")
    elif "activation_loading_horizon" in explicit and not smp.sm_activation_offloading:
        yield Finding("activation_loading_horizon sets SMP's own offloading; with sm_activation_offloading false "
                      "PyTorch's offload wrapper runs and ignores it", "smp.activation_loading_horizon")


# ---- SMP v2 best practices: batch and context ----

@rule("SMP040", Severity.WARNING, "Global batch above 4Mi tokens", BEST)
def global_batch(ctx: Context) -> Iterator[Finding]:
    if not ctx.topology_ok:
        return
    tokens = ctx.topology.global_batch_tokens
    if tokens <= MAX_GLOBAL_TOKENS:
        return
    s, cp = ctx.smp, ctx.smp.context_parallel_degree
    dp = ctx.topology.data_parallel_degree
    fixes = []
    best_batch = MAX_GLOBAL_TOKENS // (dp * ctx.seq)
    if best_batch >= 1:
        fixes.append(f"lower training.batch_size to {best_batch} ({_mi(dp * best_batch * ctx.seq)})")
    for tp in (2, 4, 8):
        if tp <= s.tensor_parallel_degree or ctx.world % (tp * cp):
            continue
        wider = replace(ctx.topology, tensor_parallel=tp)
        t = wider.global_batch_tokens
        if t <= MAX_GLOBAL_TOKENS:
            shard = ""
            if ctx.world % (ctx.shard * tp * s.expert_parallel_degree):
                shard = f" with hybrid_shard_degree {wider.max_shard_degree}"
            fixes.append(f"raise tensor_parallel_degree to {tp}{shard} ({_mi(t)})")
            break
    fix = "; ".join(fixes) or "use fewer instances"
    yield Finding(f"the global batch is {_mi(tokens)} per step, above the 4 Mi that keeps training converging; "
                  f"{fix}", "training.batch_size")


@rule("SMP041", Severity.WARNING, "Long context wants tensor parallelism", f"{BEST}; {TP}")
def long_context(ctx: Context) -> Iterator[Finding]:
    if ctx.seq >= LONG_CONTEXT and ctx.smp.tensor_parallel_degree == 1:
        yield Finding(f"seq_length {ctx.seq}: activation memory is high and FSDP does not shard activations; "
                      "combine it with tensor parallelism (tensor_parallel_degree 2, 4 or 8)",
                      "smp.tensor_parallel_degree")


# ---- versions, regions, images ----

@rule("SMP050", Severity.ERROR, "An SMP image exists in the region", f"{SUPPORT}; {SDK}")
def image_region(ctx: Context) -> Iterator[Finding]:
    if ctx.region and not ctx.spec.framework.image_uri and ctx.region not in SMP_IMAGE_REGIONS:
        yield Finding(f"no SMP v2 image is published in {ctx.region}; use one of {', '.join(SMP_IMAGE_REGIONS)} "
                      "or pin framework.image_uri", "cluster.region")


@rule("SMP051", Severity.WARNING, "A region is needed to resolve the image", f"{SUPPORT}; {SDK}")
def region_missing(ctx: Context) -> Iterator[Finding]:
    if not ctx.region:
        yield Finding("no region: set cluster.region, AWS_REGION or a profile region; the image cannot be resolved "
                      "and submit will refuse", "cluster.region")


@rule("SMP052", Severity.WARNING, "A pinned image should be an SMP image", f"{USE}; {SDK}")
def pinned_image(ctx: Context) -> Iterator[Finding]:
    uri = ctx.spec.framework.image_uri
    if uri and f"/{SMP_IMAGE_REPOSITORY}" not in uri:
        yield Finding(f"image_uri is not an {SMP_IMAGE_REPOSITORY} image; without SMP in the image "
                      "torch.sagemaker is missing and the job fails at start", "framework.image_uri")
    elif uri and f":{ctx.framework.pytorch}-" not in uri:
        yield Finding(f"image_uri's tag does not start with pytorch_version {ctx.framework.pytorch}; the SDK "
                      "skips its version checks for a pinned image", "framework.image_uri")


@rule("SMP053", Severity.ERROR, "Features need a recent enough SMP release", NOTES)
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


@rule("SMP057", Severity.ERROR, "The image's SMP release takes every SMP parameter the spec sets", f"{NOTES}; {REF}")
def parameters_taken(ctx: Context) -> Iterator[Finding]:
    """The degrees are SMP053's; these are the switches an older release has no parameter for."""
    taken = smp_parameters_taken(ctx.framework.pytorch)
    for name, (default, since) in SMP_PARAMETERS.items():
        if name in taken or name in ("context_parallel_degree", "expert_parallel_degree"):
            continue
        value = getattr(ctx.smp, name)
        if value != default:
            yield Finding(f"{name} {str(value).lower() if isinstance(value, bool) else value} needs SMP {since} or "
                          f"later, whose images take the parameter; the image of pytorch_version "
                          f"{ctx.framework.pytorch} carries SMP {ctx.framework.smp}: set framework.pytorch_version to "
                          f"{first_pytorch_with(since)} or later, or leave smp.{name} at SMP's default", f"smp.{name}")


@rule("SMP054", Severity.ERROR, "The generated script needs PyTorch 2.2 or later",
      "https://pytorch.org/docs/stable/distributed.checkpoint.html; launcher/runtime/train_checkpoint.py")


def script_pytorch(ctx: Context) -> Iterator[Finding]:
    if _v(ctx.framework.pytorch) < (2, 2, 0):
        yield Finding(f"the entry script's sharded checkpoints use torch.distributed.checkpoint save/load, "
                      f"which need PyTorch 2.2 or later; set framework.pytorch_version to 2.2.0 or later "
                      f"(now {ctx.framework.pytorch})", "framework.pytorch_version")


@rule("SMP058", Severity.ERROR, "The image's SMP release supports the model", NOTES)
def preset_release(ctx: Context) -> Iterator[Finding]:
    preset = PRESETS.get(ctx.spec.model.preset or "")
    if preset and not carries(ctx.framework.pytorch, preset.smp_since):
        yield Finding(f"{ctx.spec.model.preset} needs SMP {preset.smp_since} or later ({preset.smp_note}); the image "
                      f"of pytorch_version {ctx.framework.pytorch} carries SMP {ctx.framework.smp}: set "
                      f"framework.pytorch_version to {first_pytorch_with(preset.smp_since)} or later",
                      "framework.pytorch_version")


@rule("SMP059", Severity.ERROR, "cp_comm_type needs SMP 2.6.0",
      f"{NOTES} (v2.6.0); {CP}; {AWS_SCRIPTS_HEAD}train_lib.py (transform, cp_comm_type)")
def cp_comm_type_release(ctx: Context) -> Iterator[Finding]:
    value = ctx.smp.cp_comm_type
    if value is not None and not carries(ctx.framework.pytorch, CP_COMM_TYPE_SINCE):
        yield Finding(f"cp_comm_type {value} is a parameter of SMP {CP_COMM_TYPE_SINCE}'s torch.sagemaker.transform; "
                      f"the image of pytorch_version {ctx.framework.pytorch} carries SMP {ctx.framework.smp}, whose "
                      f"transform does not take it: set framework.pytorch_version to "
                      f"{first_pytorch_with(CP_COMM_TYPE_SINCE)} or later, or drop smp.cp_comm_type",
                      "smp.cp_comm_type")


# ---- combinations that each setting alone allows (SMP 2.0-2.8 release notes, AWS's newest SMP code) ----

@rule("SMP100", Severity.ERROR, "Context parallelism for Mistral needs SMP 2.6.0", f"{NOTES} (v2.6.0); {CP}")
def mistral_context_parallel(ctx: Context) -> Iterator[Finding]:
    if (ctx.smp.context_parallel_degree > 1 and ctx.arch.type == "mistral"
            and not carries(ctx.framework.pytorch, MISTRAL_CONTEXT_PARALLEL_SINCE)):
        yield Finding(f"context parallelism for Mistral came with SMP {MISTRAL_CONTEXT_PARALLEL_SINCE} (SMP 2.5.0's "
                      "was for Llama and GPT-NeoX only); the image of pytorch_version "
                      f"{ctx.framework.pytorch} carries SMP {ctx.framework.smp}: set framework.pytorch_version to "
                      f"{first_pytorch_with(MISTRAL_CONTEXT_PARALLEL_SINCE)} or later, or context_parallel_degree "
                      "to 1", "smp.context_parallel_degree")


@rule("SMP101", Severity.WARNING, "A pretrained Mistral loses its sliding window under context parallelism",
      f"{NOTES} (v2.6.0 known issues); {CP}")
def mistral_pretrained_window(ctx: Context) -> Iterator[Finding]:
    if (ctx.smp.context_parallel_degree > 1 and ctx.arch.type == "mistral"
            and ctx.spec.model.pretrained is not None):
        yield Finding("SMP's Mistral runs context parallelism only with no sliding window, so the script sets "
                      "sliding_window to null in the pretrained model's config; a model trained with one (Mistral 7B "
                      "v0.1 has 4096) then attends over the whole sequence past it: fine-tune from one without a "
                      "window (Mistral 7B v0.3) or set context_parallel_degree to 1", "smp.context_parallel_degree")


@rule("SMP102", Severity.ERROR, "fp8 cannot use SMP's activation offloading",
      f"{NOTES} (v2.0.0 known issues); {AWS_SCRIPTS_HEAD}train_utils.py (apply_activation_checkpoint); "
      f"{ADAPTER_140}collections/parts/fsdp_strategy.py (sm_activation_offloading)")
def fp8_smp_offloading(ctx: Context) -> Iterator[Finding]:
    if ctx.decisions.offloading == "smp" and ctx.spec.training.precision == "fp8":
        yield Finding("SMP's activation offloading needs reentrant activation checkpointing, and under fp8 the "
                      "script checkpoints with Transformer Engine's non-reentrant checkpoint, as AWS's scripts do: set "
                      "smp.sm_activation_offloading: false (PyTorch's offload wrapper, which AWS's HyperPod adapter "
                      "uses with fp8) or turn activation_offloading off", "smp.sm_activation_offloading")


@rule("SMP103", Severity.ERROR, "SMP's gradient clipping with activation offloading needs SMP 2.8.0",
      f"{NOTES} (v2.8.0 bug fixes); {AWS_SCRIPTS_HEAD}train_lib.py (clip_grad_norm_)")
def offloading_clip(ctx: Context) -> Iterator[Finding]:
    s = ctx.smp
    if (s.activation_offloading and ctx.decisions.grad_clip == "smp"
            and not carries(ctx.framework.pytorch, OFFLOADING_CLIP_SINCE)):
        sliced = (f"tensor_parallel_degree {s.tensor_parallel_degree}" if s.tensor_parallel_degree > 1
                  else f"expert_parallel_degree {s.expert_parallel_degree}")
        yield Finding(f"activation offloading with {sliced}: the script clips with SMP's clip_grad_norm_ (one total "
                      "norm over every slice; FSDP's own would differ per rank), which supports activation "
                      f"offloading from SMP {OFFLOADING_CLIP_SINCE} on, and the image of pytorch_version "
                      f"{ctx.framework.pytorch} carries SMP {ctx.framework.smp}: set framework.pytorch_version to "
                      f"{first_pytorch_with(OFFLOADING_CLIP_SINCE)}, or turn activation_offloading off",
                      "smp.activation_offloading")


@rule("SMP104", Severity.ERROR, "Asynchronous checkpoints need SMP 2.5.0",
      f"{NOTES} (v2.5.0); {CHECKPOINTS}")
def async_checkpoint_release(ctx: Context) -> Iterator[Finding]:
    if ctx.spec.training.async_checkpoint is True and not carries(ctx.framework.pytorch, ASYNC_CHECKPOINT_SINCE):
        yield Finding(f"async_checkpoint true: SMP's async_save came with SMP {ASYNC_CHECKPOINT_SINCE} and the image "
                      f"of pytorch_version {ctx.framework.pytorch} carries SMP {ctx.framework.smp}: set "
                      f"framework.pytorch_version to {first_pytorch_with(ASYNC_CHECKPOINT_SINCE)} or later, or "
                      "async_checkpoint to auto or false", "training.async_checkpoint")


@rule("SMP105", Severity.INFO, "Checkpoints block training on this image",
      f"{NOTES} (v2.5.0); {CHECKPOINTS}; {AWS_SCRIPTS_HEAD}checkpoints.py (_save_async_sharded)")
def checkpoints_block(ctx: Context) -> Iterator[Finding]:
    if ctx.spec.training.async_checkpoint == "auto" and not ctx.decisions.async_checkpoint:
        yield Finding(f"every rank waits while its checkpoint shards are written: SMP {ctx.framework.smp} has no "
                      f"asynchronous save; pytorch_version {first_pytorch_with(ASYNC_CHECKPOINT_SINCE)} or later "
                      "saves while training goes on", "training.async_checkpoint")


@rule("SMP106", Severity.WARNING, "cp_comm_type without context parallelism", f"{CP}; {REF}")
def cp_comm_type_unused(ctx: Context) -> Iterator[Finding]:
    if ctx.smp.cp_comm_type is not None and ctx.smp.context_parallel_degree == 1:
        yield Finding(f"cp_comm_type {ctx.smp.cp_comm_type} has no effect while context_parallel_degree is 1",
                      "smp.cp_comm_type")


# ---- the training volume: p4d, p4de and p5 have NVMe instance storage (CreateTrainingJob's ResourceConfig) ----

@rule("SMP055", Severity.ERROR, "The volume size fits the instance storage", RESOURCE)
def volume_too_large(ctx: Context) -> Iterator[Finding]:
    storage = ctx.instance.instance_storage_gb
    if storage and ctx.spec.cluster.volume_size_gb > storage:
        yield Finding(f"{ctx.instance.name} trains on its {storage:,} GB of NVMe instance storage and SageMaker "
                      f"refuses a volume_size_gb above it ({ctx.spec.cluster.volume_size_gb:,}); lower it or drop it",
                      "cluster.volume_size_gb")


@rule("SMP056", Severity.INFO, "No EBS volume on instances with instance storage", f"{RESOURCE}; {CHECKPOINT_API}")
def volume_not_provisioned(ctx: Context) -> Iterator[Finding]:
    storage = ctx.instance.instance_storage_gb
    cluster = ctx.spec.cluster
    if not storage:
        return
    if "volume_size_gb" in cluster.model_fields_set and cluster.volume_size_gb <= storage:
        yield Finding(f"volume_size_gb {cluster.volume_size_gb} provisions nothing: {ctx.instance.name} mounts its "
                      f"{storage:,} GB of NVMe instance storage instead of an EBS volume", "cluster.volume_size_gb")
    if cluster.kms_key_id:
        yield Finding(f"kms_key_id encrypts the job's output in S3 (OutputDataConfig.KmsKeyId) and the uploaded "
                      f"source; {ctx.instance.name}'s instance storage is encrypted by the instance's hardware and "
                      "CreateTrainingJob refuses a VolumeKmsKeyId there, so none is sent; CheckpointConfig takes no "
                      "key, so checkpoint uploads get the bucket's default encryption (give the checkpoint bucket "
                      "SSE-KMS with this key if they must use it)", "cluster.kms_key_id")


# ---- memory (best practices: lowest sharding degree that fits; launcher/rules/memory.py) ----

def _fits(ctx: Context, **changes) -> float | None:
    from launcher.rules.memory import estimate

    e = estimate(ctx.arch, ctx.layout(**changes))
    return e.per_gpu_gb if e.fits else None


@rule("SMP060", Severity.ERROR, "The step fits in GPU memory", f"{BEST}; launcher/rules/memory.py")
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
    room = ctx.topology.max_shard_degree
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
                  f"{ctx.instance.gpu} ({parts}); in the order SMP's best practices give: {fix}", "training.batch_size")


@rule("SMP061", Severity.INFO, "A lower sharding degree would communicate less",
      f"{BEST}; {HSDP}")


def shard_lower(ctx: Context) -> Iterator[Finding]:
    if not ctx.topology_ok or not ctx.memory.fits or ctx.memory.utilisation >= 0.5 or ctx.shard <= ctx.instance.gpus:
        return
    room = ctx.topology.max_shard_degree
    for shard in _divisors(room):
        if shard >= ctx.shard or shard < ctx.smp.context_parallel_degree:
            continue
        gb = _fits(ctx, shard_degree=shard)
        if gb and gb / ctx.memory.capacity_gb < 0.9:
            yield Finding(f"the step uses {ctx.memory.per_gpu_gb:.1f} of {ctx.memory.capacity_gb:.0f} GB; "
                          f"hybrid_shard_degree {shard} also fits ({gb:.1f} GB) and communicates less",
                          "smp.hybrid_shard_degree")
            return


@rule("SMP062", Severity.WARNING, "Memory is tight", BEST)
def memory_tight(ctx: Context) -> Iterator[Finding]:
    if ctx.topology_ok and ctx.memory.fits and ctx.memory.utilisation > 0.9:
        yield Finding(f"predicted peak {ctx.memory.per_gpu_gb:.1f} of {ctx.memory.capacity_gb:.0f} GB per GPU; "
                      "expect allocator cache flushes: if their warnings appear, raise hybrid_shard_degree",
                      "smp.hybrid_shard_degree")


# ---- host memory (launcher/rules/memory.py host_estimate) ----

@rule("SMP063", Severity.ERROR, "A full final export fits rank 0's host memory",
      f"{AWS_SCRIPTS}checkpoints.py (_save_full); {AWS_SCRIPTS}arguments.py (--save_final_model, default 0)")


def export_fits_host(ctx: Context) -> Iterator[Finding]:
    if ctx.spec.output.final_export != "full":
        return
    from launcher.rules.memory import host_export_bytes

    need = host_export_bytes(ctx.arch, ctx.layout()) / 2**30
    if need > ctx.instance.host_memory_gib:
        yield Finding(f"save_final_model full gathers the {ctx.arch.parameters / 1e9:.1f}B-parameter model in fp32 "
                      f"on rank 0 ({need:,.0f} GiB) and {ctx.instance.name} has {ctx.instance.host_memory_gib:,} GiB "
                      "of host memory; set output.save_final_model: sharded (every rank writes its own shard)",
                      "output.save_final_model")


@rule("SMP064", Severity.WARNING, "The model build fits host memory",
      f"{DELAYED}; {AWS_SCRIPTS}train_lib.py (delayed_param, transform)")


def host_memory_fits(ctx: Context) -> Iterator[Finding]:
    host = ctx.memory.host if ctx.topology_ok else None
    if host is None or host.fits or host.peak_phase != "model build" or ctx.smp.delayed_param_init is False:
        return
    yield Finding(f"building the model peaks at {host.per_instance_gib:,.0f} GiB of host memory on one instance "
                  f"and {ctx.instance.name} has {ctx.instance.host_memory_gib:,} GiB (rank 0 loads the pretrained "
                  "weights alone)", "model.pretrained")
# ---- cost (the step-time model and the prices the plan uses) ----

PRICING = "https://aws.amazon.com/sagemaker/pricing/"


@rule("SMP070", Severity.ERROR, "Predicted cost within cluster.max_cost", PRICING)
def within_max_cost(ctx: Context) -> Iterator[Finding]:
    limit = ctx.spec.cluster.max_cost
    cost = ctx.cost if limit is not None else None
    if limit is None or cost is None or cost.usd is None or cost.usd <= limit:
        return
    time = ctx.training_time
    hours = time.total_seconds / 3600 if time else 0.0
    yield Finding(f"the predicted cost ${cost.usd:,.0f} ({hours:,.1f} h x ${cost.usd_per_hour:,.2f} an hour, "
                  f"{cost.price_source}, {cost.price_date}) is above cluster.max_cost ${limit:,.0f}; train fewer "
                  "steps or tokens, use spot, or raise max_cost", "cluster.max_cost")


@rule("SMP071", Severity.WARNING, "cluster.max_cost needs a price", PRICING)
def max_cost_unchecked(ctx: Context) -> Iterator[Finding]:
    if ctx.spec.cluster.max_cost is None:
        return
    cost = ctx.cost
    if cost is None:
        yield Finding("cluster.max_cost is not checked: the layout is invalid, so there is no prediction",
                      "cluster.max_cost")
    elif cost.usd is None:
        yield Finding(f"cluster.max_cost is not checked: {cost.note}", "cluster.max_cost")
