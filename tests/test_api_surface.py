"""The public API's surface: every name `launcher.api` exports, with each function's parameters and defaults and
each result type's fields, as tests/api_surface.txt holds them.

A team's pipeline calls these; a default that flips (a role check skipped unless asked for, a dry run that is
not) or a parameter renamed breaks it silently. Any change shows here as a diff to review, and
SMP_WRITE_GOLDENS=1 (`make goldens`) rewrites the file once it is meant.
"""
import dataclasses
import enum
import inspect
import os

import launcher
import launcher.api
from tests.conftest import REPO

SURFACE = REPO / "tests" / "api_surface.txt"


def _shown(value: object) -> str:
    """A default as text that is the same in every run (a set's order follows the process's hash seed)."""
    if isinstance(value, (set, frozenset)):
        return f"{type(value).__name__}({{{', '.join(sorted(map(repr, value)))}}})"
    return repr(value)


def _signature(obj) -> str:
    signature = inspect.signature(obj)
    params = [p.replace(default=_Shown(p.default)) if p.default is not p.empty else p
              for p in signature.parameters.values()]
    return str(signature.replace(parameters=params))


class _Shown:
    def __init__(self, value: object):
        self.text = _shown(value)

    def __repr__(self) -> str:
        return self.text


def _describe(name: str, obj: object) -> list[str]:
    if isinstance(obj, type) and issubclass(obj, enum.Enum):
        return [f"enum {name}: {', '.join(f'{m.name}={m.value!r}' for m in obj)}"]
    if dataclasses.is_dataclass(obj) and isinstance(obj, type):
        fields = [f"{f.name}: {f.type}" + (f" = {_shown(f.default)}" if f.default is not dataclasses.MISSING else "")
                  + (" = <factory>" if f.default_factory is not dataclasses.MISSING else "")
                  for f in dataclasses.fields(obj)]
        return [f"dataclass {name}(frozen={obj.__dataclass_params__.frozen})", *(f"    {f}" for f in fields)]
    if isinstance(obj, type):
        return [f"class {name}({', '.join(b.__name__ for b in obj.__mro__[1:-1])})"]
    if callable(obj):
        return [f"def {name}{_signature(obj)}"]
    return [f"{name} = {obj!r}"]


def surface() -> str:
    lines = []
    for module in (launcher.api, launcher):
        names = sorted(getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")])
        lines.append(f"# {module.__name__}")
        for name in names:
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                continue
            lines += _describe(name, obj)
    return "\n".join(lines) + "\n"


def test_the_public_api_is_the_surface_on_record():
    now = surface()
    if os.environ.get("SMP_WRITE_GOLDENS") == "1":
        SURFACE.write_text(now, encoding="utf-8")
    assert SURFACE.exists(), "no tests/api_surface.txt: run `make goldens`"
    if now != SURFACE.read_text(encoding="utf-8"):
        import difflib

        diff = "".join(difflib.unified_diff(SURFACE.read_text(encoding="utf-8").splitlines(True),
                                            now.splitlines(True), "api_surface.txt", "now", n=0))
        raise AssertionError(f"the public API changed (review, then `make goldens`):\n{diff[:4000]}")
