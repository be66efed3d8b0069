"""The SMP v2 advisor: AWS's SMP v2 best practices and SMP v2's rules, and what `auto` resolves to."""
from launcher.rules import backend as _backend  # noqa: F401  (importing registers the rules)
from launcher.rules import checks as _checks  # noqa: F401
from launcher.rules import stopping as _stopping  # noqa: F401
from launcher.rules.engine import RULES, Advisory, Context, Severity, run_rules

__all__ = ["RULES", "Advisory", "Context", "Severity", "run_rules"]
