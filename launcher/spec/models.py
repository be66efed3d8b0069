"""The job spec, schema version 1: pydantic models whose field names are a contract with users.

Every model forbids unknown keys and coerces nothing silently (strict types), so a typo or a
quoted number is caught before any AWS call. The JSON Schema editors use is generated from here.
"""
from __future__ import annotations

import difflib
import json
import math
import re
import unicodedata
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationInfo,
    WithJsonSchema,
    field_serializer,
    field_validator,
    model_validator,
)

from launcher.catalog.architecture import MODEL_TYPES, Architecture
from launcher.catalog.smp import DEFAULT_PYTORCH, FRAMEWORKS, INSTANCES
from launcher.core.durations import parse_duration
from launcher.core.frozen import freeze
from launcher.core.sanitize import quoted
from launcher.spec.presets import PRESETS
from launcher.spec.secrets import SECRET_ARN_PATTERN

if TYPE_CHECKING:  # the choices come from the catalog when the module loads; a type checker sees strings
    _ModelType = str
    _InstanceType = str
    _PyTorchVersion = str
else:
    _ModelType = Literal[MODEL_TYPES]
    _InstanceType = Literal[tuple(INSTANCES)]
    _PyTorchVersion = Literal[tuple(FRAMEWORKS)]

Duration = Annotated[
    int,
    BeforeValidator(parse_duration),
    WithJsonSchema({
        "anyOf": [{"type": "integer", "minimum": 1},
                  {"type": "string", "pattern": r"^\s*(\d+|(\d+[dhms])+)\s*$"}],
        "description": "Seconds, or a duration such as 1d, 12h, 90m, 1h30m.",
    }),
]
WARM_POOLS = "https://docs.aws.amazon.com/sagemaker/latest/dg/train-warm-pools.html"
KEEP_ALIVE_MAX = 3600  # ResourceConfig.KeepAlivePeriodInSeconds: 0-3600 (API_ResourceConfig)
# A Batch job queue's name (up to 128 letters, digits, hyphens, underscores) or ARN (API_CreateJobQueue).
QUEUE_PATTERN = r"^([A-Za-z0-9_-]{1,128}|arn:aws[a-z-]*:batch:[a-z0-9-]+:[0-9]{12}:job-queue/[A-Za-z0-9_-]{1,128})$"


def _keep_alive(value):
    """0 (no warm pool) or a duration of at most an hour."""
    if value == 0 and not isinstance(value, bool):
        return 0
    return parse_duration(value)


KeepAlive = Annotated[
    int,
    BeforeValidator(_keep_alive),
    Field(ge=0, le=KEEP_ALIVE_MAX),
    WithJsonSchema({
        "anyOf": [{"type": "integer", "minimum": 0, "maximum": KEEP_ALIVE_MAX},
                  {"type": "string", "pattern": r"^\s*(\d+|(\d+[dhms])+)\s*$"}],
        "description": "Seconds (0-3600), or a duration such as 30m.",
    }),
]
TOKEN_SCALES = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}
TOKENS_MAX = 10**16


def parse_token_count(value):
    """A token budget: a whole number, or a decimal count with K, M, B (or G) or T: 1T is 10**12 tokens."""
    if isinstance(value, bool):
        raise ValueError("a token count is a number such as 300000000000 or a text such as 300B or 1T")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KkMmBbGgTt]?)\s*", value)
        if m:
            return round(float(m.group(1)) * TOKEN_SCALES[m.group(2).lower()])
    raise ValueError(f"{quoted(value)} is not a token count: write a number, or one with K, M, B or T "
                     "(decimal: 1T is 10**12 tokens)")


TokenCount = Annotated[
    int,
    BeforeValidator(parse_token_count),
    Field(ge=1, le=TOKENS_MAX),
    WithJsonSchema({
        "anyOf": [{"type": "integer", "minimum": 1, "maximum": TOKENS_MAX},
                  {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*[KkMmBbGgTt]?\s*$"}],
        "description": "Tokens, or a decimal count such as 300B or 1T (10**12).",
    }),
]
BUCKET_RULES = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html"
CREATE_TRAINING_JOB = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateTrainingJob.html"
S3_PATTERN = r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$"
IMAGE_PATTERN = r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/[a-z0-9._/-]+(:[\w.-]+|@sha256:[0-9a-f]{64})$"
ROLE_PATTERN = r"^(arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9_+=,.@/-]+|[A-Za-z0-9_+=,.@-]{1,64})$"
NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$"
REGION_PATTERN = r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$"
KMS_PATTERN = r"^[a-zA-Z0-9:/_-]{1,2048}$"  # CreateTrainingJob's KmsKeyId: [a-zA-Z0-9:/_-]*, at most 2048
ENV_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
CHANNEL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
SOURCE_PATTERN = r"^(synthetic|s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?)$"

# What each pattern allows, in words: an error says this rather than print the regex.
PATTERN_WORDS = {
    S3_PATTERN: "an S3 URI: s3://BUCKET/PREFIX, the bucket 3-63 lowercase letters, digits, dots and hyphens",
    SOURCE_PATTERN: "`synthetic` or an S3 URI: s3://BUCKET/PREFIX, the bucket 3-63 lowercase letters, digits, "
                    "dots and hyphens",
    IMAGE_PATTERN: "an ECR image URI: ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPOSITORY:TAG (or @sha256:DIGEST)",
    ROLE_PATTERN: "an IAM role: a role name (1-64 letters, digits and + = , . @ _ -) or a role ARN "
                  "arn:aws:iam::ACCOUNT:role/NAME; leave `role` out to use SMP_LAUNCH_ROLE",
    NAME_PATTERN: "a job name: letters, digits and hyphens, starting and ending with a letter or digit",
    REGION_PATTERN: "an AWS region such as us-west-2",
    KMS_PATTERN: "a KMS key id, key ARN, alias/NAME or alias ARN: 1-2048 letters, digits and : / _ - "
                 f"(CreateTrainingJob's KmsKeyId, {CREATE_TRAINING_JOB})",
    ENV_PATTERN: "an environment variable name: letters, digits and _, not starting with a digit",
    CHANNEL_PATTERN: "a channel name: 1-64 letters, digits and . _ -, starting with a letter or digit",
    r"^subnet-[0-9a-f]{8,17}$": "a subnet id such as subnet-0123abcd",
    r"^sg-[0-9a-f]{8,17}$": "a security group id such as sg-0123abcd",
}

_S3_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_S3_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def bucket_problem(bucket: str) -> str | None:
    """Why S3 refuses `bucket` as a general purpose bucket name (BUCKET_RULES), or None. Its length and
    alphabet are S3_PATTERN's (and SOURCE_PATTERN's), which every S3 URI field checks first; these are the
    rules a pattern does not say."""
    if ".." in bucket:
        return "has two adjacent dots"
    if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", bucket):
        return "is formatted as an IP address"
    for prefix in _S3_RESERVED_PREFIXES:
        if bucket.startswith(prefix):
            return f"starts with {prefix}, which S3 reserves"
    for suffix in _S3_RESERVED_SUFFIXES:
        if bucket.endswith(suffix):
            return f"ends with {suffix}, which S3 reserves"
    return None


def _s3_uri(value: str) -> str:
    if not value.startswith("s3://"):
        return value
    if len(value) > 1024:
        raise ValueError(f"an S3 URI here may have at most 1024 characters (SageMaker's limit); "
                         f"this one has {len(value)}")
    bucket = value[len("s3://"):].split("/", 1)[0]
    problem = bucket_problem(bucket)
    if problem:
        raise ValueError(f"bucket name {quoted(bucket)} {problem} ({BUCKET_RULES})")
    if _CONTROL.search(value):
        raise ValueError("an S3 URI may not hold control characters (newline, tab, escape)")
    return value


def _finite(value: float) -> float:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a finite number")
    return value


S3Uri = Annotated[str, Field(pattern=S3_PATTERN), AfterValidator(_s3_uri)]
# Numbers: an int is a fine float; true, "1e-4" (a string), .inf and .nan are not.
Float = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=1)]
SEED_MAX = 2**32 - 1  # numpy's and most samplers' seed range
Seed = Annotated[int, Field(ge=0, le=SEED_MAX)]


def did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


class _Section(BaseModel):
    """A frozen model whose dict and list fields are read-only too (FrozenDicts and tuples, serialised as
    the dicts and lists they were)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    def model_post_init(self, context: Any) -> None:
        for name, value in list(self.__dict__.items()):
            if isinstance(value, (dict, list)):
                object.__setattr__(self, name, freeze(value))


FROM_STEP_CHANNEL = "from_step"
# The channels ModelTrainer adds to every job it builds (SM_CODE and SM_DRIVERS in the SDK's constants).
RESERVED_CHANNELS = ("code", "sm_drivers")


class ModelSpec(_Section):
    """The model: a named preset, or an architecture type with its dimensions. Explicit keys override the preset."""

    preset: Optional[str] = Field(None, description="One of: " + ", ".join(PRESETS))
    type: Optional[_ModelType] = Field(None, description="Architecture type when no preset is used.")
    # Upper bounds are far past any published model; they keep arithmetic on the spec bounded.
    seq_length: Count = Field(4096, le=2**24, description="Training sequence length in tokens.")
    num_layers: Optional[Annotated[int, Field(ge=1, le=4096)]] = None
    hidden_width: Optional[Annotated[int, Field(ge=1, le=2**20)]] = None
    num_heads: Optional[Annotated[int, Field(ge=1, le=2**16)]] = None
    num_key_value_heads: Optional[Annotated[int, Field(ge=1, le=2**16)]] = None
    intermediate_size: Optional[Annotated[int, Field(ge=1, le=2**22)]] = None
    vocab_size: Optional[Annotated[int, Field(ge=1, le=2**24)]] = None
    num_experts: Optional[Annotated[int, Field(ge=1, le=2**14)]] = None
    num_experts_per_tok: Optional[Annotated[int, Field(ge=1, le=2**14)]] = None
    pretrained: Optional[StrictStr] = Field(
        None, description="Fine-tune from these weights: a Hugging Face model id or a path inside a data channel.")
    from_step: Optional[Annotated[str, Field(pattern=r"^[A-Za-z0-9-]{1,64}$")]] = Field(
        None, description="In a pipeline: fine-tune from the model an earlier step (named after its spec's name) "
                          "exported; that step must set output.save_final_model: full.")
    use_smp_implementation: StrictBool = Field(
        True, description="Convert the model to SMP's implementation with torch.sagemaker.transform (needed "
                          "for tensor, context and expert parallelism and fp8); false keeps Hugging Face's.")

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v):
        if v is not None and v not in PRESETS:
            raise ValueError(f"unknown preset '{v}'{did_you_mean(v, PRESETS)} "
                             f"(presets: {', '.join(PRESETS)})")
        return v

    @model_validator(mode="after")
    def _resolvable(self):
        if self.preset is None and self.type is None:
            raise ValueError("set `preset` (one of " + ", ".join(PRESETS) + ") or `type` with its dimensions")
        if self.preset and self.type and self.type != PRESETS[self.preset].architecture.type:
            raise ValueError(f"type '{self.type}' contradicts preset '{self.preset}' "
                             f"(a {PRESETS[self.preset].architecture.type} model); drop one of them")
        if self.preset is None:
            needed = ["num_layers", "hidden_width", "num_heads", "intermediate_size", "vocab_size"]
            if self.type == "mixtral":
                needed.append("num_experts")
            missing = [k for k in needed if getattr(self, k) is None]
            if missing:
                raise ValueError(f"type '{self.type}' without a preset needs: {', '.join(missing)}")
        arch = self.architecture()
        if arch.hidden_width % arch.num_heads or arch.num_heads % arch.num_key_value_heads:
            raise ValueError("hidden_width must divide by num_heads, and num_heads by num_key_value_heads")
        if arch.num_experts_per_tok > arch.num_experts:
            raise ValueError("num_experts_per_tok cannot exceed num_experts")
        if self.from_step is not None:  # the earlier step's model arrives in the `from_step` channel
            if self.pretrained not in (None, FROM_STEP_CHANNEL):
                raise ValueError("set model.pretrained or model.from_step, not both")
            object.__setattr__(self, "pretrained", FROM_STEP_CHANNEL)
        return self

    def architecture(self) -> Architecture:
        base = PRESETS[self.preset].architecture if self.preset else None
        dims: dict[str, Any] = {}
        for key in ("num_layers", "hidden_width", "num_heads", "num_key_value_heads",
                    "intermediate_size", "vocab_size", "num_experts", "num_experts_per_tok"):
            value = getattr(self, key)
            dims[key] = value if value is not None else (getattr(base, key) if base else None)
        if dims["num_key_value_heads"] is None:
            dims["num_key_value_heads"] = dims["num_heads"]
        if dims["num_experts"] is None:
            dims["num_experts"] = 1
        if dims["num_experts_per_tok"] is None:
            dims["num_experts_per_tok"] = min(2, dims["num_experts"])
        kind = base.type if base else self.type
        assert kind is not None, "_resolvable refuses a model with neither a preset nor a type"
        return Architecture(type=kind, **dims)


class ClusterSpec(_Section):
    """Where the job runs."""

    instance_type: _InstanceType = Field("ml.p4d.24xlarge", description="SMP v2 supports P4d, P4de and P5.")
    instance_types: list[_InstanceType] = Field(
        default_factory=list, max_length=len(INSTANCES),
        description="Capacity fallback: instance types in order of preference (the first is the job's; "
                    "instance_type, if set, must be one of them). Each is planned and advised on its own; when "
                    "SageMaker has no capacity for one, submit moves to the next that fits.")
    instance_count: Count = Field(1, le=1024)
    volume_size_gb: Count = Field(400, le=16384)
    max_run: Duration = Field(86400, le=28 * 86400, description="Longest the job may run (SageMaker allows 28 days); "
                                  "without it the plan proposes one from its predicted time.")
    spot: StrictBool = Field(False, description="Managed spot training; checkpoints make interruptions resumable.")
    max_wait: Optional[Duration] = Field(None, description="Spot only: run time plus time waiting for capacity.")
    region: Optional[Annotated[str, Field(pattern=REGION_PATTERN)]] = Field(
        None, description="AWS region; otherwise AWS_REGION, AWS_DEFAULT_REGION or the profile's region.")
    subnets: list[Annotated[str, Field(pattern=r"^subnet-[0-9a-f]{8,17}$")]] = Field(default_factory=list)
    security_group_ids: list[Annotated[str, Field(pattern=r"^sg-[0-9a-f]{8,17}$")]] = Field(default_factory=list)
    kms_key_id: Optional[Annotated[str, Field(pattern=KMS_PATTERN)]] = Field(
        None, description="KMS key for the job's S3 output (key id, key ARN, alias/NAME or alias ARN); p4d, "
                          "p4de and p5 encrypt their instance storage in hardware.")
    queue: Optional[Annotated[str, Field(pattern=QUEUE_PATTERN)]] = Field(
        None, description="An AWS Batch job queue of type SAGEMAKER_TRAINING (name or ARN): submit hands the job "
                          "to it, and Batch starts it when the queue's service environment has room.")
    keep_alive: KeepAlive = Field(
        0, description="SageMaker managed warm pool: keep the instances this long (at most 1h) after the job "
                       "ends, so a matching next job (same role, instances, volume, VPC) skips provisioning. "
                       "0: none. Not with spot.")
    backend: Literal["auto", "estimator", "model-trainer"] = Field(
        "auto", description="How the job's request is built: the SageMaker SDK's PyTorch Estimator (SDK 2.x only) or "
                            "ModelTrainer (SDK 2.x and 3.x); auto: the Estimator on SDK 2.x, ModelTrainer on 3.x.")
    max_cost: Optional[Float] = Field(
        None, gt=0, description="The most this job may cost, in US dollars: the advisor refuses a plan whose "
                                "predicted cost (instances x predicted hours x the hourly price) is above it; "
                                "`--max-cost` sets it from the command line.")

    @field_serializer("subnets", "security_group_ids", "instance_types")
    def _as_list(self, value: Any) -> list[str]:
        return list(value)

    @model_validator(mode="before")
    @classmethod
    def _first_preference(cls, data: Any) -> Any:
        """With instance_types, the job's instance type is the first of them: instance_type (a base spec's,
        say) may name any of them and gives way; one that names none of them is refused after validation."""
        if isinstance(data, dict) and isinstance(data.get("instance_types"), (list, tuple)) and data["instance_types"]:
            first, given = data["instance_types"][0], data.get("instance_type")
            if given is None or given in data["instance_types"]:
                data = {**data, "instance_type": first}
        return data

    @model_validator(mode="after")
    def _consistent(self):
        if self.instance_types:
            if len(set(self.instance_types)) != len(self.instance_types):
                raise ValueError("instance_types names an instance type twice; give each once, in order of "
                                 "preference")
            if self.instance_type != self.instance_types[0]:
                raise ValueError(f"instance_type {self.instance_type} is not one of instance_types "
                                 f"{list(self.instance_types)}; drop instance_type (the first of instance_types "
                                 "is the job's) or add it to the list")
        if self.max_wait is not None and not self.spot:
            raise ValueError("max_wait only applies to spot training; set spot: true or drop max_wait")
        if self.max_wait is not None and "max_run" in self.model_fields_set and self.max_wait < self.max_run:
            raise ValueError(f"max_wait ({self.max_wait}s) must be at least max_run ({self.max_run}s)")
        if bool(self.subnets) != bool(self.security_group_ids):
            raise ValueError("a VPC needs both subnets and security_group_ids")
        if self.keep_alive and self.spot:
            raise ValueError(f"keep_alive (a warm pool) cannot be used with spot training: SageMaker managed warm "
                             f"pools do not support spot instances ({WARM_POOLS}); drop one of them")
        return self


class FrameworkSpec(_Section):
    pytorch_version: _PyTorchVersion = Field(
        DEFAULT_PYTORCH, description="PyTorch version of the SMP image; the Python version follows from it.")
    image_uri: Optional[Annotated[str, Field(pattern=IMAGE_PATTERN)]] = Field(
        None, description="Pin an exact training image instead of the SDK's SMP image for this PyTorch version.")


class SmpSpec(_Section):
    """The nine SMP v2 parameters plus how the script uses them (https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-model-parallel-v2-reference.html)."""

    hybrid_shard_degree: StrictInt = Field(
        0, ge=0, le=8192, description="0: SMP's default (with tensor parallelism the largest degree, else native "
                                      "FSDP within each node: 8); 1: no sharding; N: shard over N GPUs.")
    tensor_parallel_degree: Count = Field(1, le=8192)
    context_parallel_degree: Count = Field(1, le=8192)
    expert_parallel_degree: Count = Field(1, le=8192)
    activation_checkpointing: StrictBool = True
    activation_offloading: StrictBool = False
    delayed_param_init: Literal[True, False, "auto"] = Field(
        "auto", description="auto turns it on above 60B parameters, or when one fp32 copy per GPU would not "
                            "fit the host memory.")
    backend: Literal["auto", "smddp", "nccl"] = Field(
        "auto", description="auto: smddp on P4 except tensor-parallel-only jobs; nccl otherwise.")
    sm_activation_offloading: StrictBool = Field(
        False, description="With activation_offloading: true sends SMP's own offloading (it prefetches, and needs "
                           "reentrant checkpointing); false (the default) PyTorch's offload wrapper, as AWS's newest "
                           "SMP code (the SageMaker HyperPod training adapter) sends it.")
    activation_loading_horizon: Count = Field(2, le=4096, description="SMP's offloading only: layers whose inputs "
                                                                      "may be on the GPU at once.")
    cp_comm_type: Optional[Literal["p2p", "all_gather"]] = Field(
        None, description="Context parallelism's key/value exchange, passed to torch.sagemaker.transform (SMP 2.6.0 "
                          "and later): p2p (SMP's default) or all_gather.")
    fsdp_cache_flush_warnings: StrictBool = True
    allow_empty_shards: StrictBool = False
    random_seed: Optional[Seed] = None


class TrainingSpec(_Section):
    batch_size: Count = Field(4, le=2**20, description="Sequences per data-parallel rank (per tensor-parallel "
                                                       "group) per step; no GPU holds a million.")
    precision: Literal["bf16", "fp16", "fp8"] = "bf16"
    max_steps: Count = Field(1000, le=10**9, description="Steps to train; `tokens` sets it from a token budget.")
    tokens: Optional[TokenCount] = Field(
        None, description="A token budget such as 300B or 1T (decimal): max_steps becomes the steps whose global "
                          "batches reach it (rounded up), whatever max_steps says.")
    learning_rate: Float = Field(1e-4, gt=0)
    min_learning_rate: Float = Field(1e-5, ge=0, description="The schedule's floor; at most learning_rate.")
    warmup_steps: Optional[Annotated[int, Field(ge=0, le=10**9)]] = Field(
        None, description="Default: 1% of max_steps; at most max_steps.")
    lr_schedule: Literal["cosine", "linear", "constant"] = "cosine"
    weight_decay: Float = Field(0.1, ge=0)
    beta1: Float = Field(0.9, gt=0, lt=1)
    beta2: Float = Field(0.95, gt=0, lt=1)
    grad_clip: Float = Field(1.0, ge=0)
    log_every: Count = Field(10, le=10**9, description="Steps between progress lines.")
    checkpoint_every: Count = Field(500, le=10**9, description="Steps between sharded checkpoints.")
    async_checkpoint: Literal[True, False, "auto"] = Field(
        "auto", description="Save checkpoints asynchronously with SMP's torch.sagemaker.distributed.checkpoint "
                            "(training goes on while the shards are written; SMP 2.5.0 and later). auto: wherever "
                            "the image's SMP release has it; false: blocking saves.")
    keep_checkpoints: Count = Field(2, le=1000)
    seed: Seed = 12345

    @field_validator("min_learning_rate")
    @classmethod
    def _floor(cls, v, info: ValidationInfo):
        lr = info.data.get("learning_rate")
        if lr is not None and v > lr:
            raise ValueError(f"min_learning_rate ({v}) cannot exceed learning_rate ({lr})")
        return v

    @field_validator("warmup_steps")
    @classmethod
    def _warmup(cls, v, info: ValidationInfo):
        steps = info.data.get("max_steps")
        if v is not None and steps is not None and v > steps:
            raise ValueError(f"warmup_steps ({v}) cannot exceed max_steps ({steps})")
        return v


ChannelSource = Annotated[str, Field(pattern=SOURCE_PATTERN), AfterValidator(_s3_uri)]


class DataSpec(_Section):
    train: ChannelSource = Field("synthetic", description="`synthetic` or an S3 prefix of token-id files.")
    validation: Optional[ChannelSource] = None
    format: Literal["jsonl", "npy"] = Field("jsonl", description="Token ids: JSON lines of input_ids, or .npy arrays.")
    channels: dict[Annotated[str, Field(pattern=CHANNEL_PATTERN)], S3Uri] = Field(
        default_factory=dict, description="More input channels, name: s3://...")

    @model_validator(mode="after")
    def _distinct(self):
        for name in ("train", "validation"):
            if name in self.channels:
                raise ValueError(f"channel '{name}' is set both as data.{name} and data.channels.{name}")
        for name in RESERVED_CHANNELS:
            if name in self.channels:
                raise ValueError(f"channel '{name}' is the SageMaker SDK's own (ModelTrainer sends the job's source "
                                 "and its drivers as channels 'code' and 'sm_drivers'); give it another name")
        if self.validation == "synthetic":
            raise ValueError("validation: synthetic data only applies to the train channel")
        return self


class OutputSpec(_Section):
    path: S3Uri = Field(description="Where the model artefacts go.")
    checkpoint_path: Optional[S3Uri] = Field(None, description="Default: <path>/checkpoints/<job name>.")
    code_path: Optional[S3Uri] = Field(None, description="Where the source tarball goes. Default: <path>/code.")
    save_final_model: Union[bool, Literal["sharded", "full"]] = Field(
        False, description="Write the trained model to the job's model artefacts at the end (default false, as AWS's "
        "examples). true or `sharded`: every rank writes its own shard (torch.distributed.checkpoint); `full`: "
        "rank 0 gathers the whole fp32 model into one Hugging Face pytorch_model.bin.")

    @property
    def final_export(self) -> str:
        """save_final_model as none | sharded | full."""
        value = self.save_final_model
        return "none" if value is False else "sharded" if value is True else value


class PipelineSpec(_Section):
    """How this spec runs as a step of a SageMaker Pipeline (`pipeline`); ignored by `submit`."""

    cache: StrictBool = Field(False, description="Reuse an earlier execution's result when the step's arguments "
                                                 "(after parameters) are the same as then.")
    cache_expire_after: Duration = Field(30 * 86400, le=5 * 366 * 86400,
                                         description="How long a cached result may be reused.")


SNS_TOPIC_PATTERN = r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$"


class NotifySpec(_Section):
    """Where the job's (or pipeline execution's) terminal state is announced."""

    sns: Annotated[str, Field(pattern=SNS_TOPIC_PATTERN)] = Field(
        description="An SNS topic ARN; an EventBridge rule the tool creates sends each terminal state to it.")


TAG_CHARACTERS = "letters, digits, spaces and _ . : / = + - @"
_TAG_PUNCTUATION = frozenset("_.:/=+-@")


def _tag_text(value: str) -> str:
    """SageMaker's Tag pattern [\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*: Unicode letters, separators and numbers count."""
    for ch in value:
        if ch not in _TAG_PUNCTUATION and unicodedata.category(ch)[0] not in "LZN":
            raise ValueError(f"{ch!r} cannot be in a tag; tags hold {TAG_CHARACTERS}")
    return value


def _tag_schema(low: int, high: int) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "minLength": low, "maxLength": high,
                           "description": f"{low}-{high} {TAG_CHARACTERS} (any script's letters and digits)."})


TagKey = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_tag_text), _tag_schema(1, 128)]
TagValue = Annotated[str, Field(max_length=256), AfterValidator(_tag_text), _tag_schema(0, 256)]
EnvName = Annotated[str, Field(max_length=512, pattern=ENV_PATTERN)]

# CreateTrainingJob limits (CREATE_TRAINING_JOB): HyperParameters at most 100 entries, keys at most 256
# characters, values at most 2500; Environment at most 100 entries, keys 512, values 512.
HYPERPARAMETERS_MAX = 100
SDK_HYPERPARAMETERS = 9  # sagemaker_program, mp_parameters, ...: see launcher/plan/request.py predict_request
HYPERPARAMETER_KEY_MAX = 256
HYPERPARAMETER_VALUE_MAX = 2500
ENVIRONMENT_MAX = 100
ENVIRONMENT_VALUE_MAX = 512


# Hyperparameters the SDK adds beside the spec's, replacing a spec value of the same name without a word: the
# Estimator's sagemaker_* (the training toolkit reads every sagemaker_-prefixed name as its own) and both backends'
# mp_parameters (launcher/plan/request.py).
SDK_PREFIX = "sagemaker_"
SDK_NAMES = frozenset({"mp_parameters"})


def reserved_hyperparameter(key: str) -> bool:
    """Whether the SageMaker SDK (either backend) or its training toolkit owns a hyperparameter of this name."""
    return key.lower().startswith(SDK_PREFIX) or key.lower() in SDK_NAMES


def _hyperparameter_key(key: str) -> str:
    if not key or len(key) > HYPERPARAMETER_KEY_MAX or _CONTROL.search(key):
        raise ValueError(f"a hyperparameter name has 1-{HYPERPARAMETER_KEY_MAX} characters and no control "
                         f"characters (CreateTrainingJob's limit); this one has {len(key)}")
    if reserved_hyperparameter(key):
        raise ValueError("the SageMaker SDK sets this hyperparameter itself (sagemaker_* and mp_parameters are its "
                         "own) and would replace the spec's value: rename it")
    return key


def _hyperparameter_value(value):
    _finite(value)
    sent = len(json.dumps(value))
    if sent > HYPERPARAMETER_VALUE_MAX:
        raise ValueError(f"SageMaker takes hyperparameter values of at most {HYPERPARAMETER_VALUE_MAX} characters "
                         f"(as sent, JSON-encoded); this one has {sent}")
    return value


def _any_case(text: str) -> str:
    """A JSON Schema pattern (ECMA 262: no inline flags) matching `text` in any case."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in text)


HyperKey = Annotated[str, AfterValidator(_hyperparameter_key),
                     WithJsonSchema({"type": "string", "minLength": 1, "maxLength": HYPERPARAMETER_KEY_MAX,
                                     "not": {"anyOf": [{"pattern": f"^{_any_case(SDK_PREFIX)}"}, *(
                                         {"pattern": f"^{_any_case(n)}$"} for n in sorted(SDK_NAMES))]},
                                     "description": "A name the entry script reads (--name value); sagemaker_* and "
                                                    "mp_parameters are the SageMaker SDK's own."})]
HyperValue = Annotated[Union[StrictBool, StrictInt, StrictFloat, StrictStr], AfterValidator(_hyperparameter_value)]


def _secret_arn(value: str) -> str:
    if not re.fullmatch(SECRET_ARN_PATTERN, value):
        raise ValueError(f"{quoted(value)} is not a Secrets Manager secret ARN: write "
                         "arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME (the ARN `aws secretsmanager "
                         "describe-secret` shows)")
    return value


SecretArn = Annotated[str, Field(max_length=2048, json_schema_extra={"pattern": SECRET_ARN_PATTERN}),
                      AfterValidator(_secret_arn)]


class JobSpec(_Section):
    """A smp-launch job spec (schema version 1)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="smp-launch job spec")

    schema_version: Literal[1] = 1
    name: Annotated[str, Field(max_length=43, pattern=NAME_PATTERN)] = Field(
        description="Job base name; the job name adds a UTC timestamp.")
    description: Optional[StrictStr] = None
    extends: Optional[StrictStr] = Field(None, description="A spec this one builds on, relative to this file.")
    templates: Optional[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(
        None, description="A folder of team templates, relative to this file: each *.j2 there replaces the shipped "
                          "template of the same name (train.py.j2, train_secrets.py.j2, requirements.txt.j2, "
                          "distribution.json.j2); `--templates DIR` overrides it.")
    model: ModelSpec
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    framework: FrameworkSpec = Field(default_factory=FrameworkSpec)
    smp: SmpSpec = Field(default_factory=SmpSpec)
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    data: DataSpec = Field(default_factory=DataSpec)
    output: OutputSpec
    role: Optional[Annotated[str, Field(max_length=600, pattern=ROLE_PATTERN)]] = Field(
        None, description="IAM role name or ARN for the job; otherwise SMP_LAUNCH_ROLE.")
    tags: dict[TagKey, TagValue] = Field(default_factory=dict, max_length=40)
    environment: dict[EnvName, Annotated[str, Field(max_length=ENVIRONMENT_VALUE_MAX)]] = Field(
        default_factory=dict, json_schema_extra={"maxProperties": ENVIRONMENT_MAX})
    secrets: dict[EnvName, SecretArn] = Field(
        default_factory=dict, description="Environment variables the job reads from AWS Secrets Manager when it "
        "starts: NAME -> secret ARN. Only the ARN is in the plan; the role needs secretsmanager:GetSecretValue.")
    pipeline: PipelineSpec = Field(default_factory=PipelineSpec)
    notify: Optional[NotifySpec] = None
    hyperparameters: dict[HyperKey, HyperValue] = Field(
        default_factory=dict, description="Passed to the entry script as --key value.",
        json_schema_extra={"maxProperties": HYPERPARAMETERS_MAX - SDK_HYPERPARAMETERS})

    @field_validator("environment")
    @classmethod
    def _environment_count(cls, env):
        if len(env) > ENVIRONMENT_MAX:
            raise ValueError(f"SageMaker takes at most {ENVIRONMENT_MAX} environment variables; this spec sets "
                             f"{len(env)}")
        return env

    @field_validator("hyperparameters")
    @classmethod
    def _hyperparameter_count(cls, hp):
        room = HYPERPARAMETERS_MAX - SDK_HYPERPARAMETERS
        if len(hp) > room:
            raise ValueError(f"at most {room} hyperparameters: SageMaker takes {HYPERPARAMETERS_MAX} and the SDK "
                             f"adds {SDK_HYPERPARAMETERS} of its own; this spec sets {len(hp)}")
        return hp

    @model_validator(mode="after")
    def _tokens_to_steps(self):
        """training.tokens becomes max_steps: the budget over the global batch (data-parallel ranks x batch x
        sequence), rounded up. It wins over max_steps, which a base spec often sets."""
        t = self.training
        if t.tokens is None:
            return self
        gpus = INSTANCES[self.cluster.instance_type].gpus * self.cluster.instance_count
        ranks = max(1, gpus // (self.smp.tensor_parallel_degree * self.smp.context_parallel_degree))
        steps = -(-t.tokens // (ranks * t.batch_size * self.model.seq_length))
        if steps > 10**9:
            raise ValueError(f"training.tokens {t.tokens:,} needs {steps:,} steps at this global batch; at most 10**9")
        if t.warmup_steps is not None and t.warmup_steps > steps:
            raise ValueError(f"warmup_steps ({t.warmup_steps}) cannot exceed the {steps:,} steps training.tokens "
                             "gives")
        object.__setattr__(self, "training", t.model_copy(update={"max_steps": steps}))
        return self

    @model_validator(mode="after")
    def _secrets_are_not_environment(self):
        both = sorted(set(self.secrets) & set(self.environment))
        if both:
            raise ValueError(f"{', '.join(both)} is set both in environment and in secrets; keep it in secrets only")
        return self

    @field_validator("tags")
    @classmethod
    def _user_tags(cls, tags):
        for key in tags:
            if key.lower().startswith(("aws:", "smp-launch:")):
                raise ValueError(f"tag key '{key}' uses a reserved prefix (aws: and smp-launch: are not yours to set)")
        return tags
