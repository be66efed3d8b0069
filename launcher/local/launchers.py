"""How the local run starts the job's script: as the plan's backend has SageMaker's container start it.

- The PyTorch Estimator's job runs the SMP image's own training toolkit, which starts torchrun on the entry script
  with the hyperparameters as options, the way sagemaker-training's `to_cmd_args` writes them
  (https://github.com/aws/sagemaker-training-toolkit/blob/master/src/sagemaker_training/mapping.py): the
  SDK's own `sagemaker_*` entries left out, each value JSON-decoded, keys sorted, a one-letter key as `-k`, a
  mapping as `k=v,...`, anything else as Python's `str`.
- ModelTrainer's job runs the SDK's own drivers (its `sm_drivers` channel): its torchrun driver starts torchrun
  on the entry script in the unpacked source (`/opt/ml/input/data/code`), the hyperparameters from SM_HPS as
  `--key value` with JSON values. Here that very driver, from the installed SDK, starts the local run.

Either way the script must read the same values (templates/train.py.j2's `hyperparameters`).
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.core.errors import LauncherError
from launcher.core.sdk import BackendKind, installed_sdk

if TYPE_CHECKING:
    from launcher.plan.build import Plan

# Where each SDK line keeps ModelTrainer's torchrun driver, inside its distribution.
DRIVERS = {"sagemaker-train": "sagemaker/train/container_drivers/distributed_drivers/torchrun_driver.py",
           "sagemaker": "sagemaker/modules/train/container_drivers/distributed_drivers/torchrun_driver.py"}


@dataclass(frozen=True)
class Launch:
    """A command that starts the script, the folder it runs in (the source dir is written there), and the
    environment it adds."""

    command: list[str]
    folder: str  # the source dir's name under the run's root: SageMaker's `code` channel for ModelTrainer
    env: Mapping[str, str] = field(default_factory=dict)


def launch(plan: Plan, nproc: int) -> Launch:
    """How the plan's backend has the container start its script, on `nproc` local processes."""
    hyper = dict(plan.request["HyperParameters"])
    if plan.backend.kind is BackendKind.MODEL_TRAINER:
        return _model_trainer(plan, nproc, hyper)
    decoded = {k: json.loads(v) for k, v in hyper.items() if not k.startswith("sagemaker_")}
    return Launch([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                   "train.py", *toolkit_args(decoded)], "src")


def toolkit_args(hyperparameters: Mapping[str, Any]) -> list[str]:
    """The options the training toolkit gives the entry script (its `to_cmd_args`)."""
    out: list[str] = []
    for key in sorted(hyperparameters):
        value = hyperparameters[key]
        out.append(f"--{key}" if len(key) > 1 else f"-{key}")
        if isinstance(value, Mapping):
            out.append(",".join(f"{k}={v}" for k, v in sorted(value.items())))
        else:
            out.append(str(value))
    return out


def _model_trainer(plan: Plan, nproc: int, hyper: Mapping[str, str]) -> Launch:
    from launcher.plan.request import SMP_FIELDS, smp_parameters

    params = smp_parameters(plan)
    smp = {k: params[k] for k in SMP_FIELDS if params.get(k) is not None}
    env = {
        "SM_ENTRY_SCRIPT": "train.py",
        "SM_DISTRIBUTED_CONFIG": json.dumps({"process_count_per_node": nproc, "smp": smp}),
        "SM_HPS": json.dumps({k: _deserialized(v) for k, v in hyper.items()}),
        "SM_HOST_COUNT": "1",
        "SM_CURRENT_INSTANCE_TYPE": plan.instance_type,
        "SM_NETWORK_INTERFACE_NAME": "lo",
        "PET_STANDALONE": "1",  # torchrun's --standalone: a rendezvous on a free port (the driver gives one host none)
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    return Launch([sys.executable, str(torchrun_driver())], "code", env)


def _deserialized(value: str) -> Any:
    """A request's hyperparameter as the SDK's environment script hands it to the driver (its safe_deserialize)."""
    try:
        return json.loads(value)
    except ValueError:
        return value


def torchrun_driver() -> Path:
    """The installed SDK's ModelTrainer torchrun driver, found from its distribution's file list (no import)."""
    sdk = installed_sdk()
    package = "sagemaker-train" if (sdk.major or 0) >= 3 else "sagemaker"
    try:
        files = metadata.files(package) or []
    except metadata.PackageNotFoundError:
        files = []
    for entry in files:
        if str(entry) == DRIVERS[package]:
            return Path(str(entry.locate()))
    raise LauncherError(f"the local run starts ModelTrainer's jobs with the SageMaker SDK's own torchrun driver, and "
                        f"{sdk.describe()} has none ({DRIVERS[package]}); install 'sagemaker>=2.257.7'")
