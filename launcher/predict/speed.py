"""A layout's predicted speed: seconds per step, tokens per second per GPU, MFU, a band and what bounds it.

The band is how sure the prediction is: its low end takes the fitted efficiency two leave-one-out standard
deviations down with pessimistic communication (collectives at hardware.OVERLAP_LOW overlap and 75% of
the estimated link efficiency), its high end two up with communication at full overlap and the links'
nominal rate. A layout the published points cover closely gets a narrow band; one bound by a network
no point measured gets a wide one, and each parallelism no published point measures on the layout's GPU
(tensor or context parallelism elsewhere than on H100, expert parallelism anywhere) widens it by a quarter
each way and is named in `uncalibrated`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from launcher.predict import hardware
from launcher.predict.fit import Fit, published_fit
from launcher.predict.model import Links, Terms, Workload, step_seconds, terms

BAND_Z = 2.0
LOW_LINK_SCALE = 0.75
# A parallelism no published point measures on the layout's GPU widens the band by this much each way (a
# quarter: the spread of the model's checks against public throughput not in its calibration).
UNCALIBRATED_WIDEN = 0.25


@dataclass(frozen=True)
class Performance:
    """What `plan` shows as `performance`; `calibration` says which factors it used."""

    step_seconds: float
    tokens_per_second_per_gpu: float
    mfu: float
    band: tuple[float, float]  # tokens per second per GPU, low and high
    bound: str  # compute | communication
    compute_seconds: float
    communication_seconds: float  # the overlappable part
    exposed_seconds: float
    calibration: str
    uncalibrated: tuple[str, ...] = ()  # what of the layout no published point measures: why the band is wider

    def __post_init__(self) -> None:
        object.__setattr__(self, "band", tuple(self.band))
        object.__setattr__(self, "uncalibrated", tuple(self.uncalibrated))

    def scaled(self, factor: float, calibration: str) -> Performance:
        """The same prediction with this account's measured factor applied to its speed."""
        low, high = self.band
        return Performance(self.step_seconds / factor, self.tokens_per_second_per_gpu * factor, self.mfu * factor,
                           (low * factor, high * factor), self.bound, self.compute_seconds / factor,
                           self.communication_seconds, self.exposed_seconds, calibration, self.uncalibrated)

    def to_dict(self) -> dict[str, Any]:
        return {"step_seconds": round(self.step_seconds, 4),
                "tokens_per_second_per_gpu": round(self.tokens_per_second_per_gpu, 1),
                "mfu": round(self.mfu, 4), "band": [round(self.band[0], 1), round(self.band[1], 1)],
                "bound": self.bound, "compute_seconds": round(self.compute_seconds, 4),
                "communication_seconds": round(self.communication_seconds, 4),
                "exposed_seconds": round(self.exposed_seconds, 4), "calibration": self.calibration,
                "uncalibrated": list(self.uncalibrated)}


def _speed(w: Workload, efficiency: float, t: Terms, overlap: float) -> tuple[float, float]:
    compute = w.hardware_flops / (hardware.GPUS[w.gpu].bf16_tflops * 1e12 * efficiency)
    step = step_seconds(compute, t, overlap)
    return step, compute


def _family(gpu: str) -> str:
    """A100 40GB -> A100: a parallelism measured on one variant of a GPU counts for its others."""
    return gpu.split()[0]


def uncalibrated(w: Workload) -> tuple[str, ...]:
    """The layout's parallelism that no published point (launcher.predict.published) measures on its GPU, each
    in words: the model's terms for it are link arithmetic no measurement has checked."""
    from launcher.predict.published import POINTS

    out = []
    for degree, name, measured in (
            (w.tensor_parallel, "tensor parallelism", {_family(p.gpu) for p in POINTS if p.tensor_parallel > 1}),
            (w.context_parallel, "context parallelism", {_family(p.gpu) for p in POINTS if p.context_parallel > 1})):
        if degree > 1 and _family(w.gpu) not in measured:
            where = f"only on {', '.join(sorted(measured))}" if measured else "on no GPU"
            out.append(f"{name} {degree}: published points measure it {where}, not on {_family(w.gpu)}")
    if w.expert_parallel > 1:
        out.append(f"expert parallelism {w.expert_parallel}: no published point measures it (its all-to-alls are "
                   "link arithmetic)")
    return tuple(out)


def predict(w: Workload, fitted: Fit | None = None, calibration: str = "published") -> Performance:
    """The model's prediction for one workload (published calibration; see `Performance.scaled`)."""
    import math

    f = fitted or published_fit()
    eff = f.efficiency(w)
    t = terms(w)
    step, compute = _speed(w, eff, t, hardware.OVERLAP)
    spread = math.exp(BAND_Z * f.spread)
    slow_links = Links.of(w, hardware.COLLECTIVE_EFFICIENCY * LOW_LINK_SCALE,
                          hardware.SMDDP_ALLGATHER_EFFICIENCY * LOW_LINK_SCALE)
    slow, _ = _speed(w, eff / spread, terms(w, slow_links), hardware.OVERLAP_LOW)
    fast_links = Links.of(w, 1.0, 1.0)
    fast, _ = _speed(w, min(eff * spread, 1.0), terms(w, fast_links), hardware.OVERLAP_HIGH)
    peak = hardware.GPUS[w.gpu].bf16_tflops * 1e12
    tokens = w.tokens_per_gpu
    unknown = uncalibrated(w)
    widen = (1 + UNCALIBRATED_WIDEN) ** len(unknown)
    return Performance(
        step_seconds=step, tokens_per_second_per_gpu=tokens / step, mfu=w.model_flops / step / peak,
        band=(tokens / slow / widen, tokens / fast * widen),
        bound="compute" if compute >= t.overlappable else "communication",
        compute_seconds=compute, communication_seconds=t.overlappable, exposed_seconds=t.exposed,
        calibration=calibration, uncalibrated=unknown)
