"""Read-only containers for results that promise to be frozen all the way down.

A frozen dataclass only refuses `setattr`; a dict or list inside it can still be changed by anyone who
reads it. `freeze` turns nested data into FrozenDicts and tuples, so a value read from a Plan cannot
change under the code that made it. A FrozenDict is a dict subclass that refuses every change: `json`,
Jinja and `isinstance(x, dict)` treat it as the dict it was. `thaw` gives plain, mutable copies for a
library that wants them (the SageMaker SDK).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, NoReturn, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class FrozenDict(dict[K, V], Generic[K, V]):
    """A dict that cannot be changed after it is made: every mutating method raises TypeError.

    `copy()` and `thaw()` give a plain dict; `copy.copy`/`copy.deepcopy` give the object itself (its
    values are frozen too when it was made by `freeze`)."""

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> FrozenDict[K, V]:
        self = super().__new__(cls)
        dict.__init__(self, *args, **kwargs)  # filled here, once: __init__ below cannot refill it
        return self

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(f"{type(self).__name__} is read-only")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"

    def __copy__(self) -> FrozenDict[K, V]:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict[K, V]:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))


def freeze(value: Any) -> Any:
    """`value` with every nested mapping a FrozenDict, every list or tuple a tuple, every set a frozenset;
    anything else (str, numbers, frozen dataclasses) as it is."""
    if isinstance(value, FrozenDict):
        return value
    if isinstance(value, Mapping):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):  # a named tuple keeps its type
        return tuple(freeze(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Plain, mutable copies of frozen data: mappings become dicts, tuples and lists become lists."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return [thaw(v) for v in value]
    if isinstance(value, frozenset):
        return {thaw(v) for v in value}
    return value
