"""CreateTrainingJob refused on demand, for tests of what submit says when SageMaker says no.

`refuse_create("ResourceLimitExceeded", "...")` makes the patched moto (in-process or the server)
answer the next CreateTrainingJob calls with that error; `refuse_create(None)` stops it.
"""
from __future__ import annotations

import functools

from emulator import core

_REFUSAL: list[tuple[str, str]] = []


def refuse_create(code: str | None, message: str = "") -> None:
    """Answer every CreateTrainingJob with error `code` (a 400) until called with None."""
    core.install()
    _REFUSAL[:] = [(code, message)] if code else []


def _apply() -> None:
    from moto.core.exceptions import JsonRESTError
    from moto.sagemaker.responses import SageMakerResponse

    original = SageMakerResponse.create_training_job

    @functools.wraps(original)
    def create_training_job(self, *args, **kwargs):
        if _REFUSAL:
            code, message = _REFUSAL[0]
            raise JsonRESTError(code, message)
        return original(self, *args, **kwargs)

    SageMakerResponse.create_training_job = create_training_job


core.register_patch("sagemaker:refuse-create", _apply)
