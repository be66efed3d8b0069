"""Which SageMaker Python SDK is installed, and which backend a plan submits through.

Read from the installed packages' metadata, never by importing the SDK (about 2 s), so `plan`, `validate` and
`advise` stay fast and a plan names its backend without the SDK. Two backends build a job's request:

- the PyTorch Estimator (`sagemaker.pytorch.PyTorch` with a `distribution` dict), which exists only in SDK 2.x;
- ModelTrainer with `Torchrun(smp=SMP(...))`, in SDK 2.x (`sagemaker.modules.train`, from 2.257.7 here) and 3.x
  (`sagemaker.train`). SDK 3.x's README: "Older interfaces such as Estimator, Model, Predictor and all their
  subclasses will not be supported in V3" (https://github.com/aws/sagemaker-python-sdk).

`auto` is the Estimator on 2.x (the launcher's first path, unchanged) and ModelTrainer on 3.x.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import metadata

from launcher.core.enums import StrEnum

# The oldest 2.x release whose ModelTrainer takes Torchrun(smp=SMP(...)) as used here, and the setup.cfg floor.
OLDEST_V2 = (2, 257, 7)
V2_ONLY = "sagemaker>=2.257.7,<3"


class BackendKind(StrEnum):
    """How a plan's CreateTrainingJob request is built (cluster.backend; `auto` resolves to one of these)."""

    ESTIMATOR = "estimator"
    MODEL_TRAINER = "model-trainer"


REQUESTED = ("auto", *(k.value for k in BackendKind))


@dataclass(frozen=True)
class InstalledSdk:
    """The SageMaker SDK in this environment: its version string, or None when no SDK is installed."""

    version: str | None
    package: str = "sagemaker"

    @property
    def major(self) -> int | None:
        head = (self.version or "").split(".", 1)[0]
        return int(head) if head.isdigit() else None

    def describe(self) -> str:
        return f"{self.package} {self.version}" if self.version else "no SageMaker SDK"


@functools.cache
def installed_sdk() -> InstalledSdk:
    """The installed SDK, by its distribution's metadata. SDK 3.x may come as its parts alone (sagemaker-train
    without the `sagemaker` meta-package): that counts as 3.x."""
    for package in ("sagemaker", "sagemaker-train"):
        try:
            return InstalledSdk(metadata.version(package), package)
        except metadata.PackageNotFoundError:
            continue
    return InstalledSdk(None)


@dataclass(frozen=True)
class BackendChoice:
    """The backend a plan submits through, why, and what keeps this environment from using it (None: nothing)."""

    kind: BackendKind
    reason: str
    sdk: str
    problem: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {"name": self.kind.value, "reason": self.reason, "sdk": self.sdk, "problem": self.problem}


def choose_backend(requested: str, sdk: InstalledSdk | None = None) -> BackendChoice:
    """`requested` (cluster.backend: auto, estimator or model-trainer) resolved against the installed SDK."""
    sdk = sdk or installed_sdk()
    major = sdk.major
    said = sdk.describe()
    if requested == "auto":
        if major is not None and major >= 3:
            return BackendChoice(BackendKind.MODEL_TRAINER, f"auto, on {said} (ModelTrainer only)", said)
        kind = BackendKind.ESTIMATOR
        reason = f"auto, on {said}" if major == 2 else "auto"
    else:
        kind = BackendKind(requested)
        reason = f"cluster.backend: {requested}"
    problem = None
    if major is None:
        problem = "no SageMaker SDK is installed: install smp-launch's dependencies (pip install 'sagemaker>=2.257.7')"
    elif kind is BackendKind.ESTIMATOR and major >= 3:
        problem = (f"the PyTorch Estimator exists only in SageMaker SDK 2.x and this environment has {said}: set "
                   f"cluster.backend: model-trainer (or --backend model-trainer), or install '{V2_ONLY}'")
    elif major == 2 and _version(sdk.version) < OLDEST_V2:
        problem = f"{said} is older than smp-launch supports: install '{V2_ONLY}'"
    return BackendChoice(kind, reason, said, problem)


def _version(text: str | None) -> tuple[int, ...]:
    parts = []
    for piece in (text or "").split("."):
        digits = "".join(c for c in piece if c.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)
