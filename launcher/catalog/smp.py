"""Facts about instances, framework versions and SMP images that specs, plans and rules share.

Sources: the SMP v2 release notes and supported-frameworks pages
(https://docs.aws.amazon.com/sagemaker/latest/dg/model-parallel-release-notes.html,
https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-model-parallel-support-v2.html), SageMaker
SDK v2's `src/sagemaker/image_uri_config/pytorch-smp.json` and `image_uris.get_training_image_uri`
(https://github.com/aws/sagemaker-python-sdk), and the EC2 instance pages for host memory and
instance storage (https://aws.amazon.com/ec2/instance-types/p4/, https://aws.amazon.com/ec2/instance-types/p5/).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceType:
    name: str
    gpus: int
    gpu: str
    gpu_memory_gb: float
    smddp: bool  # SMDDP's optimised AllGather exists only on P4 (https://docs.aws.amazon.com/sagemaker/latest/dg/data-parallel-intro.html)
    fp8: bool    # FP8 needs Hopper (https://docs.aws.amazon.com/sagemaker/latest/dg/model-parallel-core-features-v2-mixed-precision.html)
    vcpus: int   # CloudWatch's CPUUtilization sums 0-100 over these
    host_memory_gib: int   # host RAM: where each rank builds the model without delayed parameter init
    instance_storage_gb: int  # local NVMe: SageMaker mounts it instead of an EBS volume (0: none)


INSTANCES: dict[str, InstanceType] = {
    i.name: i
    for i in (
        InstanceType("ml.p4d.24xlarge", 8, "A100 40GB", 40.0, smddp=True, fp8=False, vcpus=96,
                     host_memory_gib=1152, instance_storage_gb=8 * 1000),
        InstanceType("ml.p4de.24xlarge", 8, "A100 80GB", 80.0, smddp=True, fp8=False, vcpus=96,
                     host_memory_gib=1152, instance_storage_gb=8 * 1000),
        InstanceType("ml.p5.48xlarge", 8, "H100 80GB", 80.0, smddp=False, fp8=True, vcpus=192,
                     host_memory_gib=2048, instance_storage_gb=8 * 3840),
    )
}


@dataclass(frozen=True)
class FrameworkVersion:
    pytorch: str
    python: str
    smp: str
    cuda: str
    transformers: str = ">=4.40.1,<4.47"  # the entry script's requirements.txt pin for this image
    accelerate: str = ">=0.28.0,<2"


# PyTorch version -> the SMP release its image carries (SDK v2 version_aliases), its Python and CUDA tag.
FRAMEWORKS: dict[str, FrameworkVersion] = {
    f.pytorch: f
    for f in (
        FrameworkVersion("2.0.1", "py310", "2.0.0", "cu118", transformers=">=4.36.0,<4.40"),
        FrameworkVersion("2.1.2", "py310", "2.1.0", "cu121", transformers=">=4.36.0,<4.40"),
        FrameworkVersion("2.2.0", "py310", "2.3.1", "cu121", transformers=">=4.40.1,<4.47"),
        FrameworkVersion("2.3.1", "py311", "2.5.0", "cu121", transformers=">=4.40.1,<4.47"),
        FrameworkVersion("2.4.1", "py311", "2.7.0", "cu121", transformers=">=4.40.1,<4.47"),
        FrameworkVersion("2.5.1", "py311", "2.8.0", "cu124", transformers=">=4.40.1,<4.50"),
    )
}
# Why these ranges: transformers added `attn_implementation` (the script asks for "sdpa") in 4.36; SMP 2.4.0
# and AWS's SMP v2 example scripts ask for transformers >= 4.40.1
# (https://github.com/aws/amazon-sagemaker-examples, model_parallel_v2/shared-scripts/requirements.txt);
# the upper bounds stop at releases AWS ships with a PyTorch of the same generation (its Hugging Face
# training DLCs pair PyTorch 2.1 with transformers 4.36.0, 2.3 with 4.46.1 and 2.5.1 with 4.49.0:
# https://github.com/aws/deep-learning-containers/blob/master/available_images.md), well before
# transformers raised its own PyTorch floor; transformers 5 needs a newer PyTorch than any SMP image
# carries and cannot import the model classes there.


# The SMP v2 parameters (https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-model-parallel-v2-reference.html)
# in the order the distribution sends them, each with SMP's default (None: SMP has none) and the first SMP release
# known to take it. The four of the first release are the ones AWS's first SMP v2 notebooks (SMP 2.0.0, Dec 2023)
# send; expert_parallel_degree came with SMP 2.3.0 and context_parallel_degree with 2.5.0 (release notes,
# https://docs.aws.amazon.com/sagemaker/latest/dg/model-parallel-release-notes.html). The release notes name no
# release for fsdp_cache_flush_warnings, allow_empty_shards and random_seed; AWS's example notebooks send none of
# them, and its HyperPod adapter (SMP 2.7.0 and later) sends random_seed. smp-launch holds them to 2.5.0, the oldest
# release AWS's current scripts target, so an older image gets SMP's default by their absence, never a parameter
# its release may not know.
SMP_PARAMETERS: dict[str, tuple[object, str]] = {
    "hybrid_shard_degree": (0, "2.0.0"),
    "sm_activation_offloading": (True, "2.0.0"),
    "activation_loading_horizon": (2, "2.0.0"),
    "fsdp_cache_flush_warnings": (True, "2.5.0"),
    "allow_empty_shards": (False, "2.5.0"),
    "tensor_parallel_degree": (1, "2.0.0"),
    "context_parallel_degree": (1, "2.5.0"),
    "expert_parallel_degree": (1, "2.3.0"),
    "random_seed": (None, "2.5.0"),
}


def first_pytorch_with(smp_release: str) -> str:
    """The oldest framework version whose image carries this SMP release or a later one."""
    return min((v for v, f in FRAMEWORKS.items() if _version(f.smp) >= _version(smp_release)), key=_version)


def carries(pytorch_version: str, smp_release: str) -> bool:
    """The image of this framework version carries this SMP release or a later one."""
    return _version(FRAMEWORKS[pytorch_version].smp) >= _version(smp_release)


# The first SMP release with each feature the rendered script reads from the library (release notes,
# https://docs.aws.amazon.com/sagemaker/latest/dg/model-parallel-release-notes.html): asynchronous sharded saves
# (2.5.0, torch.sagemaker.distributed.checkpoint.state_dict_saver.async_save); context parallelism's
# cp_comm_type p2p | all_gather, and Mistral 7B and Llama 3.1 under SMP's implementation (2.6.0); SMP's
# gradient-norm clipping with activation offloading (2.8.0, the release's one bug fix).
ASYNC_CHECKPOINT_SINCE = "2.5.0"
CP_COMM_TYPE_SINCE = "2.6.0"
MISTRAL_CONTEXT_PARALLEL_SINCE = "2.6.0"
OFFLOADING_CLIP_SINCE = "2.8.0"


def smp_parameters_taken(pytorch_version: str) -> tuple[str, ...]:
    """The SMP v2 parameters the SMP release of this framework version's image takes, in SMP_PARAMETERS order."""
    release = _version(FRAMEWORKS[pytorch_version].smp)
    return tuple(name for name, (_, since) in SMP_PARAMETERS.items() if _version(since) <= release)


# The script asks for sdpa attention; GPT-NeoX runs it only from transformers 4.42.0 (earlier releases refuse
# to build the model: https://github.com/huggingface/transformers/pull/31031, released in v4.42.0).
SDPA_SINCE = {"gpt_neox": "4.42.0"}
# Llama 3.1's rope scaling (rope_type "llama3"): AWS's example scripts refuse it below transformers 4.44.2, the
# release the SMP 2.6.0 to 2.8.0 images carry (train_utils.get_model_config in
# https://github.com/aws/amazon-sagemaker-examples/blob/2d519b52c3a2c2361f2b87f0d3de46fd6c0232a5/%20%20%20%20%20%20build_and_train_models/sm-distributed_model_parallel_v2/shared-scripts/train_utils.py).
ROPE_SCALING_SINCE = "4.44.2"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def requirements(pytorch_version: str, model_type: str | None = None, rope_scaling: bool = False) -> dict[str, str]:
    """The pip requirement specifiers the entry script needs on this framework version's image (and model: a
    model that needs a later transformers than the image range's floor gets that floor)."""
    fw = FRAMEWORKS[pytorch_version]
    transformers = fw.transformers
    floors = [v for v in (SDPA_SINCE.get(model_type or ""), ROPE_SCALING_SINCE if rope_scaling else None) if v]
    since = max(floors, key=_version) if floors else None
    if since:
        parts = transformers.split(",")
        floor = next(p for p in parts if p.startswith(">="))
        if _version(floor[2:]) < _version(since):
            transformers = ",".join(f">={since}" if p == floor else p for p in parts)
    return {"transformers": transformers, "accelerate": fw.accelerate}


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
