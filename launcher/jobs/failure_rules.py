"""The failure classes' rules as data: which texts make a class, in which order, and what to do about each kind.

launcher.jobs.failures is the engine that applies them. Each rule names its class, the kind of text it matches
(the remedy differs by kind: an EFA failure is not fixed the way an MPI launcher's lost host is), its patterns
(regular expressions matched against lowercased text, so written in lower case), the lines it must not take as
evidence (`unless`), and a public page that shows the text. docs/failures.md lists them for people; the texts
they were written from are in tests/fixtures/failure_corpus.json and failure_corpus_2.json (the `rules` half).
"""
from __future__ import annotations

from dataclasses import dataclass

from launcher.core.enums import StrEnum


class FailureClass(StrEnum):
    """What kind of failure ended a job; the value is what JSON and `--retry` name."""

    CAPACITY = "capacity"
    QUOTA = "quota"
    INTERNAL_ERROR = "internal_error"  # SageMaker's own InternalServerError
    HARDWARE = "hardware"  # an instance or GPU failed (ECC error, a GPU off the bus)
    PERMISSIONS = "permissions"
    IMAGE = "image"
    DATA = "data"  # input channels could not be read or the output written (bad S3 URIs, no route to S3)
    DISK_FULL = "disk_full"
    OUT_OF_MEMORY = "out_of_memory"  # a GPU's memory
    HOST_OUT_OF_MEMORY = "host_out_of_memory"  # the instance's own memory (RAM, /dev/shm included)
    INTERCONNECT = "interconnect"  # EFA, libfabric, aws-ofi-nccl, NCCL errors other than a timeout, MPI's hosts
    SMP = "smp"  # SMP's, SMDDP's or Transformer Engine's own refusal: a spec change fixes it
    NCCL_TIMEOUT = "nccl_timeout"
    USER_ERROR = "user_error"
    SPOT_INTERRUPTION = "spot_interruption"
    MAX_RUNTIME = "max_runtime"  # stopped by SageMaker at MaxRuntimeInSeconds
    UNKNOWN = "unknown"  # nothing SageMaker or the log said names a cause


REMEDIES = {
    FailureClass.CAPACITY: (
        "SageMaker could not get the instances: resubmit later (`submit --retry capacity`), or choose another "
        "instance type or region."),
    FailureClass.QUOTA: (
        "the account's service quota for this instance type is too low: request an increase in Service Quotas "
        "(SageMaker, '<instance type> for training job usage'), or use fewer or other instances."),
    FailureClass.INTERNAL_ERROR: (
        "SageMaker failed on its own side (InternalServerError), not because of the job: resubmit it (`submit` "
        "retries this class by default with --retry); if it keeps failing, open an AWS support case naming the job."),
    FailureClass.HARDWARE: (
        "an instance or one of its GPUs failed (the error is the hardware's, not the script's): resubmit (`submit` "
        "retries this class by default with --retry); the new job gets other instances and resumes from its "
        "checkpoints."),
    FailureClass.PERMISSIONS: (
        "the job's execution role was refused: grant it access to the S3 paths, ECR image and KMS keys the "
        "job names (`smp-launch check-role SPEC` lists what is missing)."),
    FailureClass.IMAGE: (
        "the training image could not be pulled or started: check framework.image_uri (it must exist in the "
        "job's region, be built for x86_64, and the role needs ecr:BatchGetImage on it)."),
    FailureClass.DATA: (
        "SageMaker could not read an input channel or write the output: check that each data channel's S3 URI "
        "exists and holds objects (`aws s3 ls URI`), and, in a VPC (cluster.subnets), that the subnets route to "
        "S3 (an S3 gateway endpoint or a NAT) and the security groups allow it."),
    FailureClass.DISK_FULL: (
        "the instance's storage volume filled up: raise cluster.volume_size_gb, keep fewer or smaller "
        "checkpoints, or stream the data (a FastFile channel) instead of copying it."),
    FailureClass.OUT_OF_MEMORY: (
        "a GPU ran out of memory: turn on smp.activation_checkpointing, raise smp.tensor_parallel_degree "
        "or smp.hybrid_shard_degree, turn on smp.activation_offloading, or lower training.batch_size; "
        "`smp-launch plan SPEC` shows the memory model for each change."),
    FailureClass.HOST_OUT_OF_MEMORY: (
        "the instance ran out of its own memory (RAM, not a GPU's) and the kernel killed the process: set "
        "smp.delayed_param_init: true (without it each of the instance's ranks builds the whole model in fp32 in "
        "host memory before it is sharded, whatever the GPU-side parallelism), turn off smp.activation_offloading "
        "(it keeps activations in host memory), use fewer data loader workers, or choose an instance type with "
        "more memory."),
    FailureClass.INTERCONNECT: (
        "the network between the GPUs failed (EFA, NCCL or MPI), not the script: read every host's log "
        "(`smp-launch logs JOB`) for the first error, and resubmit; in a VPC (cluster.subnets) the security group "
        "must allow all traffic to and from itself."),
    FailureClass.SMP: (
        "the SMP library (or SMDDP, or Transformer Engine under it) refused this job's setup: change the spec as "
        "its message says, then check it with `smp-launch plan SPEC`."),
    FailureClass.NCCL_TIMEOUT: (
        "a collective timed out (NCCL watchdog): one rank stalled or died first; read every host's log "
        "(`smp-launch logs JOB`) for the first error, and check the data loader and "
        "checkpoint saves for one slow rank."),
    FailureClass.USER_ERROR: (
        "the training script exited with an error: read the traceback (`smp-launch logs JOB`), fix it, "
        "resubmit."),
    FailureClass.SPOT_INTERRUPTION: (
        "managed spot capacity was taken back before the job finished: resubmit "
        "(`submit --retry spot`); it resumes from its checkpoints. Raise cluster.max_wait to wait "
        "longer for spot capacity, or use on-demand instances."),
    FailureClass.MAX_RUNTIME: (
        "SageMaker stopped the job when it reached its MaxRuntimeInSeconds (cluster.max_run): "
        "`smp-launch rerun JOB --resume` carries on from its last checkpoint, or raise cluster.max_run (at most "
        "28 days) and submit again."),
    FailureClass.UNKNOWN: "SageMaker gave no reason this tool recognises: read the job's logs (`smp-launch logs JOB`).",
}

ROLE_REMEDY = (
    "SageMaker could not assume the job's execution role: the role must exist in this account and its trust "
    "policy must let sagemaker.amazonaws.com call sts:AssumeRole (`smp-launch check-role SPEC` checks both).")
EFA_REMEDY = (
    "EFA (the instances' network, through libfabric and the aws-ofi-nccl plugin) failed, not the script: keep the SMP "
    "image's own EFA libraries (a custom framework.image_uri must ship a libfabric and aws-ofi-nccl that match), use "
    "an instance type with EFA (cluster.instance_type), and in a VPC (cluster.subnets) let the security group "
    "(cluster.security_group_ids) allow all traffic to and from itself, which EFA needs; resubmit once, and if it "
    "fails again on other instances the image or the VPC is at fault.")
EFA_MEMORY_REMEDY = (
    "EFA could not register (pin) memory for NCCL's buffers: this is the locked-memory limit or a libfabric that does "
    "not match the driver, not the instance's RAM and not a GPU's memory, so smaller batches or a larger instance "
    "will not help: keep the SMP image's own EFA libraries (a custom framework.image_uri must install them with "
    "EFA's installer) and resubmit.")
NCCL_REMEDY = (
    "NCCL failed outside its watchdog (a connection closed or reset, a peer gone, a system call refused): most often "
    "another rank died first, on this host or another, so read every host's log (`smp-launch logs JOB`) for the "
    "earliest error; if there is none, the network between the hosts failed: resubmit, and in a VPC "
    "(cluster.subnets) let the security group allow all traffic to and from itself. `environment: {NCCL_DEBUG: "
    "INFO}` in the spec logs the call that failed.")
MPI_REMEDY = (
    "the MPI launcher (mpirun) lost one of the hosts or could not start on it: that instance died or could not be "
    "reached; read that host's log (`smp-launch logs JOB`) and resubmit. Hosts that cannot reach each other at all "
    "(a VPC security group that does not allow traffic to and from itself) fail this way every time.")
SHM_REMEDY = (
    "the shared memory (/dev/shm, held in the instance's RAM, not a GPU's memory) ran out: data loader workers pass "
    "batches through it, so use fewer workers or smaller batches per worker; a larger instance type has more.")
SMDDP_REMEDY = (
    "SMDDP (the smddp backend) refused or failed: set smp.backend: nccl in the spec (SMDDP runs only on ml.p4d and "
    "ml.p4de, and not every collective or reduce op); `smp-launch plan SPEC` shows the backend chosen.")
FP8_REMEDY = (
    "Transformer Engine refused FP8 on these GPUs: set training.precision: bf16 in the spec, or choose "
    "ml.p5.48xlarge (FP8 needs H100 GPUs).")
SMP_VERSION_REMEDY = (
    "the script and the SMP library in the image disagree (a module or name this SMP release does not have): choose "
    "the framework.pytorch_version whose SMP release has it (SMP 2.6.1 deprecated "
    "torch.sagemaker.distributed.fsdp.checkpoint and 2.7.0 removed it: torch.sagemaker.distributed.checkpoint "
    "replaces it), or render the script with this smp-launch again.")
SMP_LAYOUT_REMEDY = (
    "the job runs more processes on a host than the instance type has GPUs: choose an instance type with 8 GPUs "
    "(cluster.instance_type), as SMP v2 needs.")

SMP_SDK_REMEDY = (
    "the SageMaker Python SDK refused SMP on P5 before any job started: it takes smdistributed there only together "
    "with torch_distributed, which smp-launch always sends; an estimator built by hand needs "
    "distribution={'torch_distributed': {'enabled': True}, 'smdistributed': ...}.")
DEBUGGER_REMEDY = (
    "SageMaker Debugger's hook uploads checkpoints the model parallelism library is still writing: turn Debugger off "
    "(debugger_hook_config=False; smp-launch's own jobs always do) and resubmit.")

@dataclass(frozen=True)
class Rule:
    """One kind of text that makes a class: any of `patterns` on a line (or in the reason) that matches none of
    `unless`. `remedy` is the kind's own (None: the class's). `source` is a public page that shows such a text."""

    failure_class: FailureClass
    kind: str
    patterns: tuple[str, ...]
    source: str
    remedy: str | None = None
    unless: tuple[str, ...] = ()


# A line from EFA's own stack: its "Cannot allocate memory" is memory registration, never RAM.
_EFA_LINE = (r"libfabric", r"net/ofi", r"\befa\b", r"aws-ofi-nccl")

HOST_OOM_PATTERNS = (
    r"instance type with more memory", r"out of memory\. please use a larger instance", r"cannot allocate memory",
    r"can't allocate memory", r"killed by signal: killed", r"\boomkilled\b", r"out of memory: kill(?:ed)? process",
    r"signal 9 \(sigkill\)", r"exited on signal 9 \(killed\)", r"std::bad_alloc", r"java\.lang\.outofmemoryerror",
    r"(?<![a-z])memoryerror\b", r"oom when allocating tensor[^\n]*device:cpu",
    r"(?:exit ?code|exit status|exitcode|return code)\s*[:=]?\s*(?:137|-9)(?![0-9])", r"^[^a-z0-9]*killed[^a-z0-9]*$",
    r"signal 9:sigkill")

# An image or its repository refused, in whichever voice (the API's, the registry's): the noun and the refusal
# close together on one line, either way round.
_IMAGE_REFUSED = (r"\b(?:training image|ecr image|image|repository|manifest)\b[^\n]{0,120}?\b(?:not found|is invalid|"
                  r"does not exist|cannot be found|could not be found|not available)")
_IMAGE_REFUSED_BEFORE = (r"\b(?:cannot find|invalid|unable to pull|could not pull)\b[^\n]{0,30}?"
                         r"\b(?:training image|image|repository)\b")

# Matched against FailureReason, in order: the first that matches wins. SageMaker's own service errors first:
# they are certain, and an AlgorithmError reason could quote anything. The memory and disk rules come before
# the data rule: SageMaker words those as "Artifact upload failed:..." or "Data download failed:..." too; the
# image's repository before permissions: "Access denied for repository" is an image SageMaker may not pull.
REASON_RULES = (
    Rule(FailureClass.CAPACITY, "capacity",
         (r"capacityerror", r"insufficientcapacity", r"insufficient capacity",
          r"unable to provision requested ml compute capacity"),
         "https://github.com/DIAGNijmegen/rse-grand-challenge/issues/2631"),
    Rule(FailureClass.QUOTA, "quota", (r"resourcelimitexceeded", r"account-level service limit", r"service quota"),
         "https://github.com/gabehollombe-aws/jupyter-notebooks/issues/1"),
    # SageMaker's own words, also where a pipeline or an SDK quotes them; a script's own error text may quote
    # anything, so not inside an AlgorithmError.
    Rule(FailureClass.INTERNAL_ERROR, "internal",
         (r"^\s*internalservererror\b", r"^\s*we encountered an internal error",
          r"internalservererror: we encountered an internal error"),
         "https://github.com/aws/sagemaker-python-sdk/issues/70", unless=(r"^\s*algorithmerror",)),
    Rule(FailureClass.HOST_OUT_OF_MEMORY, "reason",
         (r"instance type with more memory", r"out of memory\. please use a larger instance"),
         "https://github.com/comic/grand-challenge.org/blob/main/app/grandchallenge/components/backends/"
         "amazon_sagemaker_base.py"),
    Rule(FailureClass.DISK_FULL, "reason", (r"insufficient disk space", r"no space left on device"),
         "https://github.com/huggingface/blog/issues/114"),
    Rule(FailureClass.IMAGE, "image",
         (r"cannotstartcontainererror", r"cannot pull algorithm container", r"requested image (?:.* )?not found",
          r"image does not exist", r"failed to pull", r"imagepull", r"manifest unknown",
          r"manifest for [^\n]* not found",
          r"pull access denied", r"access denied for repository", r"oci runtime create failed", r"exec format error",
          r"exec user process caused", r"executable file not found in \$path", r"does not grant ecr:",
          r"not authorized to perform: ecr:", r"private docker registry"),
         "https://github.com/aws/sagemaker-python-sdk/issues/1968"),
    # The same refusal in other words; not inside a script's own error, which may name an image file of its data.
    Rule(FailureClass.IMAGE, "image_refused", (_IMAGE_REFUSED, _IMAGE_REFUSED_BEFORE),
         "https://github.com/aws/amazon-sagemaker-examples/issues/2534", unless=(r"^\s*algorithmerror",)),
    Rule(FailureClass.PERMISSIONS, "role",
         (r"unable to assume the role", r"could not assume role", r"sts:assumerole",
          r"trust relationship for 'sagemaker\.amazonaws\.com'"),
         "https://github.com/astronomer/docs/pull/1695", remedy=ROLE_REMEDY),
    Rule(FailureClass.PERMISSIONS, "access",
         (r"accessdenied", r"not authorized to perform", r"is not authorized", r"\(403\)", r"\b403 forbidden",
          r"access denied"),
         "https://github.com/aws/amazon-sagemaker-examples/issues/4384"),
    Rule(FailureClass.DATA, "data",
         (r"data download failed", r"artifact upload failed", r"route to an s3 vpc endpoint",
          r"no file found in path /opt/ml/input", r"nosuchkey", r"specified key does not exist", r"no s3 objects found",
          r"failed to download data", r"nosuchbucket"),
         "https://github.com/aws/amazon-sagemaker-examples/issues/2489"),
)

# Matched against FailureReason and the log tail, in order: the cause before its symptoms. A GPU or host
# out-of-memory kill, a failed GPU, a full disk, a refused S3 call, SMP's refusal or a failed EFA on one rank makes
# the others time out or lose their NCCL peers, so nccl_timeout and NCCL's own errors come last.
CONTENT_RULES = (
    Rule(FailureClass.OUT_OF_MEMORY, "gpu",
         (r"cuda out of memory", r"(?<!java\.lang\.)outofmemoryerror", r"cuda error: out of memory",
          r"oom when allocating tensor(?![^\n]*device:cpu)", r"resource_?exhausted: out of memory",
          r"cuda error: [^\n]*\bout of memory", r"cublas_status_alloc_failed", r"cudaerrormemoryallocation",
          r"hip out of memory", r"cuda failure '?out of memory"),
         "https://github.com/PKU-YuanGroup/Open-Sora-Plan/issues/386"),
    Rule(FailureClass.HOST_OUT_OF_MEMORY, "shm",
         (r"out of shared memory", r"insufficient shared memory", r"killed by signal: bus error", r"/dev/shm\b"),
         "https://github.com/aws/sagemaker-python-sdk/issues/5592", remedy=SHM_REMEDY),
    Rule(FailureClass.HOST_OUT_OF_MEMORY, "ram", HOST_OOM_PATTERNS,
         "https://github.com/Kay1794/Aware-of-the-history/issues/2", unless=_EFA_LINE),
    Rule(FailureClass.HARDWARE, "gpu",
         (r"uncorrectable ecc error", r"\becc error", r"fallen off the bus", r"cuda_error_ecc_uncorrectable",
          r"\bnvrm: xid\b", r"\bgpu is lost\b",
          r"unable to determine the device handle for gpu", r"\bnode failure\b", r"\bgpu has fallen\b"),
         "https://github.com/DIAGNijmegen/rse-grand-challenge/issues/2836"),
    Rule(FailureClass.DISK_FULL, "disk",
         (r"no space left on device", r"\[errno 28\]", r"insufficient disk space", r"disk quota exceeded"),
         "https://github.com/databrickslabs/dolly/issues/139"),
    Rule(FailureClass.IMAGE, "image",
         (r"exec format error", r"exec user process caused", r"oci runtime create failed",
          r"executable file not found in \$path", r"\[fatal tini[^\]]*\] exec ", r"pull access denied",
          r"requested access to the resource is denied", r"manifest unknown", r"not authorized to perform: ecr:",
          r"does not grant ecr:"),
         "https://github.com/aws/sagemaker-python-sdk/issues/4113"),
    Rule(FailureClass.PERMISSIONS, "access",
         (r"\((?:accessdenied|403|forbidden)\) when calling", r"\b403 forbidden\b", r"accessdenied: access denied",
          r"is not authorized to perform", r"unable to assume the role"),
         "https://github.com/sofianhamiti/amazon-sagemaker-pipelines-mlflow/issues/1"),
    Rule(FailureClass.SMP, "smddp",
         (r"\bsmddperror\b", r"smddp does not support", r"smdistributed\.dataparallel\.exceptions"),
         "https://github.com/aws/sagemaker-training-toolkit/pull/185", remedy=SMDDP_REMEDY),
    Rule(FailureClass.SMP, "fp8",
         (r"required for fp8 execution", r"device compute capability [0-9.x]+ (?:or higher )?required",
          r"fp8\b[^\n]*\bnot supported", r"transformer_engine[^\n]*fp8[^\n]*(?:error|not supported)"),
         "https://github.com/NVIDIA/TransformerEngine/issues/15", remedy=FP8_REMEDY),
    Rule(FailureClass.SMP, "version",
         (r"(?:cannot import name|no module named|has no attribute)[^\n]*'(?:torch\.sagemaker|smdistributed|"
          r"transformer_engine)", r"'(?:torch\.sagemaker|smdistributed|transformer_engine)[^'\n]*' has no attribute"),
         "https://docs.aws.amazon.com/sagemaker/latest/dg/model-parallel-release-notes.html",
         remedy=SMP_VERSION_REMEDY),
    Rule(FailureClass.SMP, "sdk", (r"smmodelparallel and smdataparallel[^\n]*not support",),
         "https://github.com/huggingface/accelerate/issues/3326", remedy=SMP_SDK_REMEDY),
    Rule(FailureClass.SMP, "debugger", (r"\.sagemaker-uploading\b",),
         "https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-troubleshooting-model-parallel.html",
         remedy=DEBUGGER_REMEDY),
    Rule(FailureClass.SMP, "layout", (r"cannot be larger than the device count",),
         "https://github.com/aws/amazon-sagemaker-examples/issues/2023", remedy=SMP_LAYOUT_REMEDY),
    Rule(FailureClass.INTERCONNECT, "efa_memory",
         (r"net/ofi[^\n]*unable to register memory", r"libfabric[^\n]*cannot allocate memory"),
         "https://github.com/awslabs/awsome-distributed-ai/issues/647", remedy=EFA_MEMORY_REMEDY),
    Rule(FailureClass.INTERCONNECT, "efa",
         (r"\bwarn\b[^\n]*\bnet/ofi\b", r"libfabric efa provider has encountered", r"\blibfabric error\b",
          r"\befa internal error\b", r"aws-ofi-nccl initialization failed", r"net/plugin: could not find: ofi",
          r"libnccl-net[\w.-]*\.so: [^\n]*not found"),
         "https://github.com/aws/aws-ofi-nccl/issues/161", remedy=EFA_REMEDY),
    Rule(FailureClass.DATA, "data", (r"nosuchbucket", r"specified bucket does not exist", r"no s3 objects found"),
         "https://github.com/appvision-ai/fast-bert/issues/151"),
    Rule(FailureClass.NCCL_TIMEOUT, "watchdog",
         (r"watchdog caught collective operation timeout", r"timeout at nccl work",
          r"processgroupnccl[^\n]*\b(?:timed out|timeout)\b", r"\bnccl\b[^=\n]*\btimed out\b"),
         "https://github.com/OFA-Sys/OFA/issues/271"),
    Rule(FailureClass.INTERCONNECT, "nccl",
         (r"\bnccl error\b", r"\bncclsystemerror\b", r"\bncclinternalerror\b", r"\bncclremoteerror\b",
          r"\bnccl warn\b", r"remote process exited or there was a network error", r"got completion from peer",
          r"\bvendor err\b", r"report this issue to the nccl developers", r"\bibv_\w+ failed\b"),
         "https://github.com/NVIDIA/nccl/issues/2076", remedy=NCCL_REMEDY),
    Rule(FailureClass.INTERCONNECT, "mpi",
         (r"orte has lost communication", r"orte was unable to (?:reliably )?start", r"orte daemon has unexpectedly",
          r"orted process exited"),
         "https://github.com/open-mpi/ompi/issues/11830", remedy=MPI_REMEDY),
)
