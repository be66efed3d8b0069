"""`rerun` and `diff`: a job's stored plan, submitted again or compared with another's."""
from __future__ import annotations

COMMANDS: tuple = ()
