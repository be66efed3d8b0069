"""Every dataclass the product defines is frozen, but the few that gather facts while one call runs.

A result, a table row or a plan part that a caller could change would change under whoever else holds it (the
frozen plan promises no such thing happens). The modules are imported here by name, one each, so a reader (and the
mutation tool's map) sees which modules this file checks; the first test fails when a module that defines a
dataclass is missing from the list.
"""
import ast
import dataclasses
from pathlib import Path

import launcher.catalog.architecture
import launcher.catalog.prices
import launcher.catalog.smp
import launcher.core.aws
import launcher.core.errors
import launcher.core.sdk
import launcher.jobs.failure_rules
import launcher.jobs.failures
import launcher.jobs.logrecords
import launcher.jobs.logs
import launcher.jobs.metrics
import launcher.jobs.queued
import launcher.jobs.status
import launcher.jobs.stored
import launcher.local.checks
import launcher.local.launchers
import launcher.local.run
import launcher.orchestrate.calibrate
import launcher.orchestrate.notify
import launcher.orchestrate.pipeline
import launcher.orchestrate.pipeline_params
import launcher.orchestrate.provenance
import launcher.orchestrate.queue_state
import launcher.orchestrate.retry
import launcher.orchestrate.runs
import launcher.plan.build
import launcher.plan.bundle
import launcher.plan.sweep
import launcher.predict.account
import launcher.predict.budget
import launcher.predict.fit
import launcher.predict.hardware
import launcher.predict.model
import launcher.predict.published
import launcher.predict.speed
import launcher.render.templates
import launcher.rules.advise
import launcher.rules.decisions
import launcher.rules.engine
import launcher.rules.memory
import launcher.rules.topology
import launcher.spec.loader
import launcher.spec.presets
import launcher.submission.batch
import launcher.submission.create
import launcher.submission.model_trainer
import launcher.submission.pricing
import launcher.submission.quotas
import launcher.submission.role
import launcher.submission.source_store

CHECKED = (
    launcher.catalog.architecture,
    launcher.catalog.prices,
    launcher.catalog.smp,
    launcher.core.aws,
    launcher.core.errors,
    launcher.core.sdk,
    launcher.jobs.failure_rules,
    launcher.jobs.failures,
    launcher.jobs.logrecords,
    launcher.jobs.logs,
    launcher.jobs.metrics,
    launcher.jobs.queued,
    launcher.jobs.status,
    launcher.jobs.stored,
    launcher.local.checks,
    launcher.local.launchers,
    launcher.local.run,
    launcher.orchestrate.calibrate,
    launcher.orchestrate.notify,
    launcher.orchestrate.pipeline,
    launcher.orchestrate.pipeline_params,
    launcher.orchestrate.provenance,
    launcher.orchestrate.queue_state,
    launcher.orchestrate.retry,
    launcher.orchestrate.runs,
    launcher.plan.build,
    launcher.plan.bundle,
    launcher.plan.sweep,
    launcher.predict.account,
    launcher.predict.budget,
    launcher.predict.fit,
    launcher.predict.hardware,
    launcher.predict.model,
    launcher.predict.published,
    launcher.predict.speed,
    launcher.render.templates,
    launcher.rules.advise,
    launcher.rules.decisions,
    launcher.rules.engine,
    launcher.rules.memory,
    launcher.rules.topology,
    launcher.spec.loader,
    launcher.spec.presets,
    launcher.submission.batch,
    launcher.submission.create,
    launcher.submission.model_trainer,
    launcher.submission.pricing,
    launcher.submission.quotas,
    launcher.submission.role,
    launcher.submission.source_store,
)

# Mutable on purpose, each filled in while one call runs and never handed on to be kept.
MUTABLE = {
    ("launcher.core.aws", "Clients"): "creates boto3 clients lazily and records calls for one command",
    ("launcher.jobs.logrecords", "Stats"): "counts one follow's calls, events and lines as they happen",
    ("launcher.local.checks", "RunRecord"): "one torchrun's facts, filled in as its output is read",
    ("launcher.local.run", "LocalRunResult"): "a local run's outcome, filled in as its runs end",
    ("launcher.orchestrate.queue_state", "QueueState"): "a running queue's state; run_queue returns frozen PlanRuns",
    ("launcher.submission.role", "_Findings"): "a role check's findings so far; result() freezes them",
}
REPO = Path(__file__).resolve().parent.parent


def _dataclasses(path: Path) -> list[str]:
    """The module's top-level classes decorated with dataclass (called or bare), read from its source."""
    def is_dataclass(d: ast.expr) -> bool:
        target = d.func if isinstance(d, ast.Call) else d
        return (getattr(target, "attr", None) or getattr(target, "id", None)) == "dataclass"
    return [n.name for n in ast.parse(path.read_text()).body
            if isinstance(n, ast.ClassDef) and any(is_dataclass(d) for d in n.decorator_list)]


def test_every_module_that_defines_a_dataclass_is_checked_here():
    defining = {p.relative_to(REPO).with_suffix("").as_posix().replace("/", ".")
                 for p in (REPO / "launcher").rglob("*.py")
                 if "runtime" not in p.parts and _dataclasses(p)}  # runtime/: the job's own code
    assert defining == {m.__name__ for m in CHECKED}


def test_every_dataclass_is_frozen_but_the_named_accumulators():
    seen, wrong = set(), []
    for module in CHECKED:
        for name in _dataclasses(Path(module.__file__)):
            cls = getattr(module, name)
            assert dataclasses.is_dataclass(cls)
            seen.add((module.__name__, name))
            if cls.__dataclass_params__.frozen == ((module.__name__, name) in MUTABLE):
                wrong.append(f"{module.__name__}.{name}")
    assert not wrong, "frozen where MUTABLE says mutable, or mutable without a reason there"
    assert set(MUTABLE) <= seen, "a MUTABLE entry names no dataclass"
    assert len(seen) > 60
