"""The entry script's progress line, and the SageMaker metric definitions parsed from it.

One format serves three readers: people reading logs, `metric_definitions` (CloudWatch metrics),
and pipelines grepping the log. Keep it stable.
"""
from __future__ import annotations

import re

PREFIX = "SMP_PROGRESS"
FIELDS = ("step", "loss", "lr", "tokens_per_s", "tflops_per_gpu", "gpu_mem_gb")
# The Python format string the rendered script uses.
LINE_FORMAT = (PREFIX + " step={step} loss={loss:.4f} lr={lr:.3e} tokens_per_s={tokens_per_s:.1f} "
               "tflops_per_gpu={tflops_per_gpu:.2f} gpu_mem_gb={gpu_mem_gb:.2f}")
_NUMBER = r"([0-9.eE+-]+|nan|inf)"
LINE_RE = re.compile(PREFIX + r" " + " ".join(f"{f}={_NUMBER}" for f in FIELDS))

METRIC_NAMES = {
    "loss": "train:loss",
    "lr": "train:learning_rate",
    "tokens_per_s": "train:tokens_per_second",
    "tflops_per_gpu": "train:tflops_per_gpu",
    "gpu_mem_gb": "train:gpu_memory_gb",
}


def metric_definitions() -> list[dict[str, str]]:
    """SageMaker `metric_definitions`: one regex per number in the progress line."""
    return [{"Name": name, "Regex": rf"{PREFIX} .*\b{field}={_NUMBER}"} for field, name in METRIC_NAMES.items()]


def parse(line: str) -> dict[str, float] | None:
    m = LINE_RE.search(line)
    if not m:
        return None
    return {f: float(v) for f, v in zip(FIELDS, m.groups(), strict=True)}
