"""A pytest plugin for benchmarks/mutation.py: every test its own coverage context, and its time and outcome.

Loaded with `-p benchmarks.coverage_map` (in each xdist worker too) with SMP_MUTATION_MAP_DIR naming a folder:
each process writes `.coverage.<suffix>` (launcher/ only, one context per test node id) and `outcomes-<pid>.json`
there ({node id: [seconds, passed]}). Coverage starts when the plugin is imported, before any conftest, so a
test's context holds every line of launcher/ it ran (a module-level line runs once, at import: no test owns it).

Python subprocesses a test starts (the end-to-end tests run the installed `smp-launch`) are measured too:
COVERAGE_PROCESS_START names a settings file whose static context is ${SMP_MUTATION_CONTEXT}, which the plugin
sets to the running test's node id, so a line only a subprocess runs is owned by the test that started it.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

import coverage
import pytest

_DIR = os.environ.get("SMP_MUTATION_MAP_DIR", "")
_TRACE = bool(_DIR) and (os.environ.get("PYTEST_XDIST_WORKER") is not None
                         or os.environ.get("SMP_MUTATION_MAP_SERIAL") == "1")
_COV = None
_SUBPROCESS_RC = """[run]
data_file = {dir}/.coverage
parallel = true
source = {root}/launcher
omit = */launcher/runtime/*
context = ${{SMP_MUTATION_CONTEXT}}
disable_warnings = no-data-collected, module-not-imported, module-not-measured, couldnt-parse
"""
if _DIR:
    # set in the controlling process too, so the xdist workers it starts inherit it
    _rc = os.path.join(_DIR, "subprocess.coveragerc")
    if not os.path.exists(_rc):
        with open(_rc, "w", encoding="utf-8") as f:
            f.write(_SUBPROCESS_RC.format(dir=_DIR, root=os.getcwd()))
    os.environ["COVERAGE_PROCESS_START"] = _rc
    os.environ["SMP_MUTATION_CONTEXT"] = ""
if _TRACE:
    _COV = coverage.Coverage(data_file=os.path.join(_DIR, ".coverage"), data_suffix=True, source=["launcher"],
                             omit=["*/launcher/runtime/*"])
    _COV.start()
_OUTCOMES: dict[str, list[Any]] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Any:
    if _COV is None:
        yield
        return
    _COV.switch_context(item.nodeid)
    os.environ["SMP_MUTATION_CONTEXT"] = item.nodeid
    started = time.perf_counter()
    _OUTCOMES[item.nodeid] = [0.0, True]
    yield
    _OUTCOMES[item.nodeid][0] = round(time.perf_counter() - started, 3)
    os.environ["SMP_MUTATION_CONTEXT"] = ""
    _COV.switch_context("")


def pytest_runtest_logreport(report: Any) -> None:
    if _COV is not None and report.failed and report.nodeid in _OUTCOMES:
        _OUTCOMES[report.nodeid][1] = False


def pytest_sessionfinish(session: Any) -> None:
    if _COV is None:
        return
    _COV.stop()
    _COV.save()
    with open(os.path.join(_DIR, f"outcomes-{os.getpid()}.json"), "w", encoding="utf-8") as f:
        json.dump(_OUTCOMES, f)
