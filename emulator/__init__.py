"""A SageMaker job lifecycle emulator on top of moto, for tests, benchmarks and demos.

Never imported by the product: moto is a test extra. Typical use::

    import emulator
    with emulator.mocked():                      # or: with emulator.server() as url: ...
        emulator.add_job(emulator.EmulatedJob("demo-1", hosts=4), boto3.client("sagemaker"))

More moto patches: add a module to this package that calls `register_patch(name, apply)` at import;
`install()` imports every module here and applies each patch once, for both modes.
"""
from emulator.core import (
    FAKE_CREDENTIALS,
    install,
    mocked,
    now,
    register_patch,
    reset_server,
    server,
    server_env,
    set_clock,
)
from emulator.jobs import add_job
from emulator.scenario import EmulatedJob, LagModel, expect, expect_attempts, forget_all, set_default
from emulator.throttle import Throttle, attach, serve

__all__ = ["FAKE_CREDENTIALS", "EmulatedJob", "LagModel", "Throttle", "add_job", "attach", "expect", "expect_attempts",
           "forget_all",
           "install", "mocked", "now", "register_patch", "reset_server", "serve", "server", "server_env",
           "set_clock", "set_default"]
