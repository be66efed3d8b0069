"""A string enum that reads, prints and serialises as its value, on every Python smp-launch supports.

`enum.StrEnum` arrived in Python 3.11. A member is a `str`, so `json.dumps`, comparisons with the
plain strings a pipeline sends, and `f"{member:7}"` all see its value ("capacity", not
"FailureClass.CAPACITY")."""
from __future__ import annotations

from enum import Enum


class StrEnum(str, Enum):
    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)
