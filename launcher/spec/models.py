"""The job spec, schema version 1: pydantic models whose field names are a contract with users.

Every model forbids unknown keys and coerces nothing silently (strict types), so a typo or a
quoted number is caught before any AWS call. The JSON Schema editors use is generated from here.
"""
from __future__ import annotations

import difflib
import re
from typing import Annotated, Literal, Optional, Union

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
    WithJsonSchema,
    field_validator,
    model_validator,
)

from launcher.architecture import MODEL_TYPES, Architecture
from launcher.catalog import DEFAULT_PYTORCH, FRAMEWORKS, INSTANCES
from launcher.durations import parse_duration
from launcher.secrets import SECRET_ARN_PATTERN
from launcher.spec.presets import PRESETS

Duration = Annotated[
    int,
    BeforeValidator(parse_duration),
    WithJsonSchema({
        "anyOf": [{"type": "integer", "minimum": 1},
                  {"type": "string", "pattern": r"^\s*(\d+|(\d+[dhms])+)\s*$"}],
        "description": "Seconds, or a duration such as 1d, 12h, 90m, 1h30m.",
    }),
]
S3Uri = Annotated[str, Field(pattern=r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$")]
IMAGE_PATTERN = r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/[a-z0-9._/-]+(:[\w.-]+|@sha256:[0-9a-f]{64})$"
ROLE_PATTERN = r"^(arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9_+=,.@/-]+|[A-Za-z0-9_+=,.@-]{1,64})$"
Float = Annotated[float, Field(strict=False)]  # PyYAML reads 1e-4 as a string; accept it as a number
Count = Annotated[int, Field(ge=1)]


def did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ModelSpec(_Section):
    """The model: a named preset, or an architecture type with its dimensions. Explicit keys override the preset."""

    preset: Optional[str] = Field(None, description="One of: " + ", ".join(PRESETS))
    type: Optional[Literal[MODEL_TYPES]] = Field(None, description="Architecture type when no preset is used.")
    seq_length: Count = Field(4096, description="Training sequence length in tokens.")
    num_layers: Optional[Count] = None
    hidden_width: Optional[Count] = None
    num_heads: Optional[Count] = None
    num_key_value_heads: Optional[Count] = None
    intermediate_size: Optional[Count] = None
    vocab_size: Optional[Count] = None
    num_experts: Optional[Count] = None
    num_experts_per_tok: Optional[Count] = None
    pretrained: Optional[StrictStr] = Field(
        None, description="Fine-tune from these weights: a Hugging Face model id or a path inside a data channel.")

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
        return self

    def architecture(self) -> Architecture:
        base = PRESETS[self.preset].architecture if self.preset else None
        dims = {}
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
        return Architecture(type=base.type if base else self.type, **dims)


class ClusterSpec(_Section):
    """Where the job runs."""

    instance_type: Literal[tuple(INSTANCES)] = Field("ml.p4d.24xlarge", description="SMP v2 supports P4d, P4de and P5.")
    instance_count: Count = Field(1, le=1024)
    volume_size_gb: Count = Field(400, le=16384)
    max_run: Duration = Field(86400, le=28 * 86400, description="Longest the job may run (SageMaker allows 28 days).")
    spot: StrictBool = Field(False, description="Managed spot training; checkpoints make interruptions resumable.")
    max_wait: Optional[Duration] = Field(None, description="Spot only: run time plus time waiting for capacity.")
    region: Optional[Annotated[str, Field(pattern=r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")]] = Field(
        None, description="AWS region; otherwise AWS_REGION, AWS_DEFAULT_REGION or the profile's region.")
    subnets: list[Annotated[str, Field(pattern=r"^subnet-[0-9a-f]{8,17}$")]] = Field(default_factory=list)
    security_group_ids: list[Annotated[str, Field(pattern=r"^sg-[0-9a-f]{8,17}$")]] = Field(default_factory=list)
    kms_key_id: Optional[StrictStr] = Field(None, description="KMS key for the training volume and the output.")

    @model_validator(mode="after")
    def _consistent(self):
        if self.max_wait is not None and not self.spot:
            raise ValueError("max_wait only applies to spot training; set spot: true or drop max_wait")
        if self.max_wait is not None and self.max_wait < self.max_run:
            raise ValueError(f"max_wait ({self.max_wait}s) must be at least max_run ({self.max_run}s)")
        if bool(self.subnets) != bool(self.security_group_ids):
            raise ValueError("a VPC needs both subnets and security_group_ids")
        return self


class FrameworkSpec(_Section):
    pytorch_version: Literal[tuple(FRAMEWORKS)] = Field(
        DEFAULT_PYTORCH, description="PyTorch version of the SMP image; the Python version follows from it.")
    image_uri: Optional[Annotated[str, Field(pattern=IMAGE_PATTERN)]] = Field(
        None, description="Pin an exact training image instead of the SDK's SMP image for this PyTorch version.")


class SmpSpec(_Section):
    """The nine SMP v2 parameters plus how the script uses them (smp_v2.md section 1.2)."""

    hybrid_shard_degree: StrictInt = Field(0, ge=0, description="0: SMP decides; 1: no sharding; N: shard over N GPUs.")
    tensor_parallel_degree: Count = 1
    context_parallel_degree: Count = 1
    expert_parallel_degree: Count = 1
    activation_checkpointing: StrictBool = True
    activation_offloading: StrictBool = False
    delayed_param_init: Literal[True, False, "auto"] = Field(
        "auto", description="auto turns it on above 60B parameters.")
    backend: Literal["auto", "smddp", "nccl"] = Field(
        "auto", description="auto: smddp on P4 except tensor-parallel-only jobs; nccl otherwise.")
    sm_activation_offloading: StrictBool = True
    activation_loading_horizon: Count = 2
    fsdp_cache_flush_warnings: StrictBool = True
    allow_empty_shards: StrictBool = False
    random_seed: Optional[Annotated[int, Field(ge=0)]] = None


class TrainingSpec(_Section):
    batch_size: Count = Field(4, description="Sequences per data-parallel rank (per tensor-parallel group) per step.")
    precision: Literal["bf16", "fp16", "fp8"] = "bf16"
    max_steps: Count = 1000
    learning_rate: Float = Field(1e-4, gt=0)
    min_learning_rate: Float = Field(1e-5, ge=0)
    warmup_steps: Optional[Annotated[int, Field(ge=0)]] = Field(None, description="Default: 1% of max_steps.")
    lr_schedule: Literal["cosine", "linear", "constant"] = "cosine"
    weight_decay: Float = Field(0.1, ge=0)
    beta1: Float = Field(0.9, gt=0, lt=1)
    beta2: Float = Field(0.95, gt=0, lt=1)
    grad_clip: Float = Field(1.0, ge=0)
    log_every: Count = Field(10, description="Steps between progress lines.")
    checkpoint_every: Count = Field(500, description="Steps between sharded checkpoints.")
    keep_checkpoints: Count = 2
    seed: Annotated[int, Field(ge=0)] = 12345


ChannelSource = Annotated[str, Field(pattern=r"^(synthetic|s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?)$")]


class DataSpec(_Section):
    train: ChannelSource = Field("synthetic", description="`synthetic` or an S3 prefix of token-id files.")
    validation: Optional[ChannelSource] = None
    format: Literal["jsonl", "npy"] = Field("jsonl", description="Token ids: JSON lines of input_ids, or .npy arrays.")
    channels: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")], S3Uri] = Field(
        default_factory=dict, description="More input channels, name: s3://...")

    @model_validator(mode="after")
    def _distinct(self):
        for name in ("train", "validation"):
            if name in self.channels:
                raise ValueError(f"channel '{name}' is set both as data.{name} and data.channels.{name}")
        if self.validation == "synthetic":
            raise ValueError("validation: synthetic data only applies to the train channel")
        return self


class OutputSpec(_Section):
    path: S3Uri = Field(description="Where the model artefacts go.")
    checkpoint_path: Optional[S3Uri] = Field(None, description="Default: <path>/checkpoints/<job name>.")
    code_path: Optional[S3Uri] = Field(None, description="Where the source tarball goes. Default: <path>/code.")


TagKey = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:/=+@ -]+$")]
TagValue = Annotated[str, Field(max_length=256, pattern=r"^[A-Za-z0-9_.:/=+@ -]*$")]
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,511}$")]


def _secret_arn(value: str) -> str:
    if not re.fullmatch(SECRET_ARN_PATTERN, value):
        raise ValueError(f"{value[:120]!r} is not a Secrets Manager secret ARN: write "
                         "arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME (the ARN `aws secretsmanager "
                         "describe-secret` shows)")
    return value


SecretArn = Annotated[str, Field(max_length=2048, json_schema_extra={"pattern": SECRET_ARN_PATTERN}),
                      AfterValidator(_secret_arn)]


class JobSpec(_Section):
    """A smp-launch job spec (schema version 1)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="smp-launch job spec")

    schema_version: Literal[1] = 1
    name: Annotated[str, Field(max_length=43, pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")] = Field(
        description="Job base name; the job name adds a UTC timestamp.")
    description: Optional[StrictStr] = None
    extends: Optional[StrictStr] = Field(None, description="A spec this one builds on, relative to this file.")
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
    environment: dict[EnvName, StrictStr] = Field(default_factory=dict)
    secrets: dict[EnvName, SecretArn] = Field(
        default_factory=dict, description="Environment variables the job reads from AWS Secrets Manager when it "
        "starts: NAME -> secret ARN. Only the ARN is in the plan; the role needs secretsmanager:GetSecretValue.")
    hyperparameters: dict[str, Union[StrictBool, StrictInt, StrictFloat, StrictStr]] = Field(
        default_factory=dict, description="Passed to the entry script as --key value.")

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
