"""smp-launch: plan, check and launch SageMaker model parallelism v2 (SMP v2) training jobs.

The Python API (docs/api.md) is launcher.api, and this package exports exactly what it exports
(`launcher.api.__all__`): the functions, and the types and errors they take, return and raise. Names
load on first use, so `import launcher` stays cheap: neither boto3, pydantic nor the SageMaker SDK is
imported until a function needs it.
"""
from __future__ import annotations

from typing import Any

from launcher import api
from launcher.core.version import VERSION as __version__

__all__ = ["__version__", *api.__all__]


def __getattr__(name: str) -> Any:
    if name not in api.__all__:
        raise AttributeError(f"module 'launcher' has no attribute {name!r}")
    value = getattr(api, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
