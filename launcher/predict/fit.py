"""The calibrated part of the step-time model: how much of the GPU's peak a layout's compute reaches.

The efficiency of compute (hardware FLOPs, recomputation included, over the dense peak) is fitted by least
squares on its logarithm over the published points (launcher.predict.published), after each point's
modelled communication is taken out of its measured step (model.compute_from_step). Its features:
the GPU, the width of the matrices a GPU multiplies (hidden / tensor degree), the tokens in them, the
attention's share of the FLOPs (long sequences), checkpointing, fp8 and the number of nodes. Pure Python:
eight coefficients, a few hundred points, well under a millisecond.

`spread` is the standard deviation of the leave-one-out residuals of the fit (each point predicted by the
fit without it, from the hat matrix: Allen's PRESS), the width of every prediction's band.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from launcher.predict import hardware
from launcher.predict.model import Workload, compute_from_step, terms
from launcher.predict.published import POINTS, Published

FEATURES = ("A100", "H100", "ln(width/4096)", "ln(tokens/8192)", "attention share", "H100 x attention share",
            "checkpointing", "fp8 x matrix share", "ln(nodes)")
RIDGE = 1e-6
MAX_EFFICIENCY = 0.9


def features(w: Workload) -> list[float]:
    width = w.architecture.hidden_width / w.tensor_parallel
    hopper = 1.0 if w.gpu.startswith("H100") else 0.0
    attention = w.attention_share
    fp8 = 1.0 - attention if w.precision == "fp8" else 0.0  # fp8 speeds the matrix multiplies, not attention
    return [1.0 - hopper, hopper, math.log(width / 4096), math.log(w.micro_tokens / 8192), attention,
            hopper * attention, w.checkpointing, fp8, math.log(max(1, w.nodes))]


def workload(p: Published) -> Workload:
    nodes = max(1, p.gpus // 8)
    return Workload(p.architecture, p.gpu, nodes, min(8, p.gpus), p.node_gbps, p.seq_length, p.batch_size,
                    shard_degree=p.shard_degree, tensor_parallel=p.tensor_parallel,
                    context_parallel=p.context_parallel, checkpointing=p.checkpointing, precision=p.precision,
                    reshard_after_forward=p.strategy == "FULL_SHARD")


def measured_efficiency(p: Published) -> float | None:
    """The compute efficiency a point's measured throughput implies; None where the model calls it
    communication-bound (its compute time cannot be read from its step)."""
    w = workload(p)
    step = w.tokens_per_gpu / p.tokens_per_s_per_gpu
    compute = compute_from_step(step, terms(w))
    if compute is None or compute <= 0:
        return None
    return w.hardware_flops / (hardware.GPUS[w.gpu].bf16_tflops * 1e12 * compute)


@dataclass(frozen=True)
class Fit:
    coefficients: tuple[float, ...]
    spread: float  # standard deviation of the leave-one-out log residuals of the efficiency
    points: int

    def efficiency(self, w: Workload) -> float:
        x = features(w)
        return min(MAX_EFFICIENCY, math.exp(sum(c * v for c, v in zip(self.coefficients, x, strict=True))))


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (the normal equations are small and well conditioned)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            for c in range(col, n + 1):
                m[r][c] -= f * m[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][c] * x[c] for c in range(r + 1, n))) / m[r][r]
    return x


def _inverse(a: list[list[float]]) -> list[list[float]]:
    n = len(a)
    cols = [_solve(a, [1.0 if i == j else 0.0 for i in range(n)]) for j in range(n)]
    return [[cols[j][i] for j in range(n)] for i in range(n)]


def fit(points: Sequence[Published]) -> Fit:
    """Least squares on log efficiency over the points the model can read compute from."""
    rows: list[tuple[list[float], float]] = []
    for p in points:
        eff = measured_efficiency(p)
        if eff is not None:
            rows.append((features(workload(p)), math.log(eff)))
    k = len(FEATURES)
    xtx = [[RIDGE if i == j else 0.0 for j in range(k)] for i in range(k)]
    xty = [0.0] * k
    for x, y in rows:
        for i in range(k):
            xty[i] += x[i] * y
            for j in range(k):
                xtx[i][j] += x[i] * x[j]
    beta = _solve(xtx, xty)
    inv = _inverse(xtx)
    press = []
    for x, y in rows:
        leverage = sum(x[i] * inv[i][j] * x[j] for i in range(k) for j in range(k))
        residual = y - sum(b * v for b, v in zip(beta, x, strict=True))
        press.append(residual / max(1e-9, 1.0 - leverage))
    spread = math.sqrt(sum(r * r for r in press) / max(1, len(press)))
    return Fit(tuple(beta), spread, len(rows))


@lru_cache(maxsize=1)
def published_fit() -> Fit:
    """The fit over every published point, made once per process."""
    return fit(POINTS)
