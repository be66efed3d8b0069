"""Many plans from one command: spec files times the cartesian product of `--sweep KEY=V1,V2,...` values.

Every expansion is loaded, validated, planned and advised before anything is submitted (no AWS call
here). An expansion that cannot work (a spec error, an advisor error, a step that does not fit in GPU
memory) becomes a refused SweepPlan carrying its reasons, one `FILE:LINE:COL: path: message` line
each; the rest are ranked, those that fit first: by the predicted time to train a token (the plan's
predicted time to train over the tokens it trains, so plans training different token counts compare
fairly; with the same tokens this is their time to train), or its cost (`by="cost"`), or (`by="tokens"`)
most tokens per step (the global batch); then most predicted memory headroom per GPU, then the order given.
"""
from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from launcher.core.errors import OVERRIDES, ArgumentError, LauncherError, Mark, Problem, SpecError, UsageError
from launcher.core.frozen import freeze, thaw
from launcher.core.sanitize import clean

if TYPE_CHECKING:
    from launcher.plan.build import Plan

SWEEP = "sweeps"  # the mark of a swept value: the n-th of the `sweeps` argument (a shell words it --sweep)
MAX_PLANS = 256  # a sweep larger than this is a typo in a value list, not an experiment
ORDERS = ("time", "cost", "tokens")
_OPEN, _CLOSE, _QUOTES = "[{", "]}", "'\""


@dataclass(frozen=True)
class Sweep:
    """One `--sweep KEY=V1,V2` flag: its key, each value's YAML text and that text's column in the flag."""

    position: int  # 1-based, among the --sweep flags
    key: str
    values: tuple[str, ...]
    columns: tuple[int, ...]


def _split_values(raw: str) -> list[tuple[int, str]]:
    """(offset, text) of each comma-separated value; commas inside [] {} or quotes do not split."""
    out: list[tuple[int, str]] = []
    depth, quote, start = 0, "", 0
    for i, ch in enumerate(raw):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in _QUOTES:
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            out.append((start, raw[start:i]))
            start = i + 1
    out.append((start, raw[start:]))
    return out


def _braces(text: str) -> str:
    """User text inside an ArgumentError's template, its braces made parentheses so none reads as an argument."""
    return text.replace("{", "(").replace("}", ")")


def parse_sweep(expr: str, position: int) -> Sweep:
    """`KEY=V1,V2,...` -> Sweep; a malformed flag is a UsageError (exit 2) naming it."""
    from launcher.spec.secrets import mask_credentials

    key, eq, raw = expr.partition("=")
    key = key.strip()
    parts = key.split(".")
    if not eq or not key or not all(parts):
        raise ArgumentError(f"{{sweeps}}:{position}:1: expected KEY.PATH=VALUE1,VALUE2,..., "
                            f"got {_braces(clean(mask_credentials(expr), limit=80))!r}")
    if parts[0] == "extends":
        raise ArgumentError(f"{{sweeps}}:{position}:1: extends cannot be swept: give the spec files instead")
    values: list[str] = []
    columns: list[int] = []
    base = len(expr) - len(raw) + 1  # the 1-based column where the values begin
    for offset, text in _split_values(raw):
        if not text.strip():
            raise ArgumentError(f"{{sweeps}}:{position}:{base + offset}: {_braces(clean(key, limit=200))}: an empty "
                                f"value (write VALUE1,VALUE2 with no empty item; '' for an empty string)")
        values.append(text)
        columns.append(base + offset)
    return Sweep(position, key, tuple(values), tuple(columns))


def parse_sweeps(exprs: Sequence[str], overrides: Sequence[str] = ()) -> list[Sweep]:
    """Every --sweep flag; a key swept twice, or both swept and --set, is a UsageError."""
    sweeps = [parse_sweep(e, i) for i, e in enumerate(exprs, start=1)]
    seen: dict[str, int] = {}
    for s in sweeps:
        if s.key in seen:
            raise ArgumentError(f"{{sweeps}}:{s.position}:1: {_braces(clean(s.key, limit=200))} is swept twice "
                                f"(also {{sweeps}} {seen[s.key]}): give its values in one {{sweeps}}")
        seen[s.key] = s.position
    set_keys = {o.partition("=")[0].strip() for o in overrides}
    for s in sweeps:
        if s.key in set_keys:
            raise ArgumentError(f"{{sweeps}}:{s.position}:1: {_braces(clean(s.key, limit=200))} is both swept and "
                                "set by {overrides}: a value set there applies to every plan, so give the key once")
    total = 1
    for s in sweeps:
        total *= len(s.values)
    if total > MAX_PLANS:
        raise UsageError(f"the sweep expands to {total} plans; at most {MAX_PLANS} at once")
    return sweeps


def typed(text: str) -> Any:
    """A --set/--sweep value as the spec loader types it (YAML 1.2); the text itself if it does not parse."""
    from launcher.spec.yaml12 import Loader

    loader = Loader(text)
    try:
        node = loader.get_single_node()
        return None if node is None else loader.construct_document(node)
    except Exception:  # noqa: BLE001 - the loader reports the real error with its position
        return text
    finally:
        loader.dispose()


@dataclass(frozen=True)
class Expansion:
    """One spec file with one choice of every swept value (as extra `--set` strings)."""

    index: int
    spec_file: str
    sets: tuple[str, ...]  # the user's --set first, then the swept keys'
    # swept key -> typed value as it may be shown (read-only): a secret is REDACTED (launcher.spec.secrets.shown_value);
    # the value itself reaches the plan only through `sets`
    overrides: Mapping[str, Any]
    origins: tuple[tuple[int, int], ...] = ()  # per swept set: (sweep position, value column)

    def __post_init__(self) -> None:
        object.__setattr__(self, "overrides", freeze(self.overrides))


def expand(specs: Sequence[str], overrides: Sequence[str] = (), sweeps: Sequence[Sweep] = ()) -> list[Expansion]:
    """Each spec times the cartesian product of the sweeps' values, in the order given (last key fastest)."""
    from launcher.spec.secrets import shown_value

    out: list[Expansion] = []
    choices = [list(zip(s.values, s.columns, strict=True)) for s in sweeps]
    for spec_file in specs:
        for combo in itertools.product(*choices):
            sets = tuple(f"{s.key}={value}" for s, (value, _) in zip(sweeps, combo, strict=True))
            out.append(Expansion(
                index=len(out), spec_file=str(spec_file), sets=(*overrides, *sets),
                overrides={s.key: shown_value(tuple(s.key.split(".")), typed(value))
                           for s, (value, _) in zip(sweeps, combo, strict=True)},
                origins=tuple((s.position, col) for s, (_, col) in zip(sweeps, combo, strict=True))))
    return out


@dataclass(frozen=True)
class SweepPlan:
    """One expanded plan of a sweep: `ok` with its Plan and rank, or `refused` with its reasons (one line each)."""

    index: int
    spec_file: str
    overrides: Mapping[str, Any]  # read-only
    plan: Plan | None
    reasons: tuple[str, ...] = ()
    rank: int | None = None
    problems: tuple[Problem, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "overrides", freeze(self.overrides))
        object.__setattr__(self, "reasons", tuple(self.reasons))
        object.__setattr__(self, "problems", tuple(self.problems))

    @property
    def status(self) -> str:
        return "refused" if self.reasons else "ok"

    @property
    def ok(self) -> bool:
        return not self.reasons

    @property
    def global_batch_tokens(self) -> int | None:
        """Tokens per step (the global batch), where the layout divides the world (else no figure means
        anything); `tokens_per_step` in the JSON."""
        return self.plan.global_batch_tokens if self.plan and self.plan.memory else None

    @property
    def headroom_gb(self) -> float | None:
        """Predicted GPU memory left per GPU at the step's peak (negative: it does not fit)."""
        mem = self.plan.memory if self.plan else None
        return round(mem.capacity_gb - mem.per_gpu_gb, 2) if mem else None

    @property
    def time_to_train_seconds(self) -> float | None:
        time = self.plan.training_time if self.plan else None
        return time.total_seconds if time else None

    @property
    def usd(self) -> float | None:
        cost = self.plan.cost if self.plan else None
        return cost.usd if cost else None

    @property
    def tokens_trained(self) -> int | None:
        time = self.plan.training_time if self.plan else None
        return time.steps * self.plan.global_batch_tokens if time and self.plan else None

    def per_token(self, by: str) -> float:
        """Predicted seconds (or dollars) per token trained; infinite where there is no prediction."""
        total = self.usd if by == "cost" else self.time_to_train_seconds
        tokens = self.tokens_trained
        return total / tokens if total is not None and tokens else float("inf")

    def per_million_tokens(self, by: str) -> float | None:
        """per_token for a million tokens, rounded as shown (None where there is no prediction): what the ranking
        by time or cost compares, in the sweep's table and JSON alike."""
        value = self.per_token(by) * 1e6
        return None if value == float("inf") else round(value, 2 if by == "cost" else 1)

    def to_dict(self) -> dict[str, Any]:
        """`submit --dry-run --output json`'s object for this plan: for `ok`, the plan's own keys as well."""
        time, usd = self.time_to_train_seconds, self.usd
        head = {"index": self.index, "rank": self.rank, "spec_file": clean(self.spec_file, limit=200),
                "overrides": thaw(self.overrides), "status": self.status, "reasons": list(self.reasons),
                "tokens_per_step": self.global_batch_tokens, "headroom_gb": self.headroom_gb,
                "time_to_train_seconds": None if time is None else round(time, 1),
                "usd": None if usd is None else round(usd, 2),
                "seconds_per_million_tokens": self.per_million_tokens("time"),
                "usd_per_million_tokens": self.per_million_tokens("cost")}
        if self.ok and self.plan is not None:
            return {**self.plan.to_dict(), **head}
        return head


def _sweep_mark(mark: Mark, expansion: Expansion, user_sets: int) -> Mark:
    """A problem the loader placed on a synthesized `--set` points at the --sweep flag it came from."""
    if mark.file != OVERRIDES or mark.line <= user_sets:
        return mark
    position, column = expansion.origins[mark.line - user_sets - 1]
    key_len = len(expansion.sets[mark.line - 1].partition("=")[0])
    value_col = key_len + 2
    return Mark(SWEEP, position, column + (mark.col - value_col) if mark.col >= value_col else mark.col)


def prepare(expansion: Expansion, *, user_sets: int, region: str | None = None, profile: str | None = None,
            env: Mapping[str, str] | None = None, now: datetime | None = None) -> SweepPlan:
    """Load, validate, plan and advise one expansion (no AWS call); a refusal carries its reasons."""
    import os

    from launcher.core.aws import resolve_region
    from launcher.plan.build import advisory_problems, build_plan
    from launcher.spec.loader import load_spec

    env = os.environ if env is None else env
    try:
        loaded = load_spec(expansion.spec_file, list(expansion.sets), env=env)
        resolved = resolve_region(loaded.spec.cluster.region, env, flag=region, profile=profile)
        plan = build_plan(loaded, now=now, env=env, region=resolved)
    except SpecError as err:
        problems = tuple(replace(p, mark=_sweep_mark(p.mark, expansion, user_sets)) for p in err.problems)
        return SweepPlan(expansion.index, expansion.spec_file, expansion.overrides, None,
                         tuple(str(p) for p in problems), problems=problems)
    except LauncherError as err:
        return SweepPlan(expansion.index, expansion.spec_file, expansion.overrides, None, (clean(str(err)),))
    problems = tuple(replace(p, mark=_sweep_mark(p.mark, expansion, user_sets)) for p in advisory_problems(plan))
    reasons = [str(p) for p in problems]
    mem = plan.memory
    if mem is not None and not mem.fits and not any("SMP060" in r for r in reasons):
        reasons.append(f"{expansion.spec_file}: memory: predicted {mem.per_gpu_gb:.1f} GB per GPU does not fit "
                       f"in {mem.capacity_gb:.0f} GB")
    return SweepPlan(expansion.index, expansion.spec_file, expansion.overrides, plan, tuple(reasons),
                     problems=problems)


def ranked_by(candidates: Sequence[SweepPlan], by: str) -> str:
    """The order `rank` applies: `cost` only where every plan that may start has a price, else `time`."""
    if by == "cost" and not all(c.usd is not None for c in candidates if c.ok):
        return "time"
    return by


def rank(candidates: Sequence[SweepPlan], by: str = "time") -> list[SweepPlan]:
    """`ok` candidates best first, numbered from 1: fits, then the least predicted time (or cost) per token
    trained (`by`; "tokens": most tokens per step), then most tokens per step, then most headroom, then the
    order given; the refused ones after them, in the order given (no rank)."""
    if by not in ORDERS:
        raise ArgumentError(f"{{by}}: {by!r} is not one of {', '.join(ORDERS)}")
    order = ranked_by(candidates, by)
    ok = [c for c in candidates if c.ok]
    ok.sort(key=lambda c: (not (c.plan and c.plan.memory and c.plan.memory.fits),
                           0.0 if order == "tokens" else c.per_token(order), -(c.global_batch_tokens or 0),
                           -(c.headroom_gb if c.headroom_gb is not None else float("-inf")), c.index))
    refused = sorted((c for c in candidates if not c.ok), key=lambda c: c.index)
    return [replace(c, rank=i) for i, c in enumerate(ok, start=1)] + refused


def plan_sweep(specs: Sequence[str], overrides: Sequence[str] = (), sweeps: Sequence[str] = (), *,
               region: str | None = None, profile: str | None = None, env: Mapping[str, str] | None = None,
               now: datetime | None = None, by: str = "time") -> list[SweepPlan]:
    """Every plan of `specs` x the sweeps' cartesian product, built and advised, ranked by `by` (refused last).

    Pure: no AWS call, nothing written. Each plan's job name is unique: the n-th expansion is
    timestamped n milliseconds after `now`. Raises UsageError for a malformed --sweep."""
    parsed = parse_sweeps(sweeps, overrides)
    expansions = expand(specs, overrides, parsed)
    if len(expansions) > MAX_PLANS:
        raise UsageError(f"{len(expansions)} plans; at most {MAX_PLANS} at once")
    now = now or datetime.now(timezone.utc)
    return rank([prepare(e, user_sets=len(overrides), region=region, profile=profile, env=env,
                         now=now + timedelta(milliseconds=e.index)) for e in expansions], by)


# What a warm pool's next job must share with the one that kept it (train-warm-pools.html, "Matching
# training jobs"): the role, the instances, the volume and its key, the VPC.
_POOL_MATCH = (("role", lambda p: p.role), ("instance type", lambda p: p.estimator.instance_type),
               ("instance count", lambda p: p.estimator.instance_count),
               ("volume size", lambda p: p.estimator.volume_size),
               ("volume KMS key", lambda p: p.estimator.volume_kms_key),
               ("VPC", lambda p: (tuple(p.estimator.subnets or ()), tuple(p.estimator.security_group_ids or ()))))


def warm_pool_notes(plans: Sequence[Plan], max_concurrent: int | None) -> list[str]:
    """Why plans that set cluster.keep_alive may not reuse each other's warm pool; empty when they can."""
    pooled = [p for p in plans if p.estimator.keep_alive_period_in_seconds]
    if not pooled:
        return []
    notes = []
    if len(pooled) < len(plans):
        notes.append(f"{len(plans) - len(pooled)} of {len(plans)} plans do not set cluster.keep_alive: a warm "
                     "pool is reused only by a job that sets it too")
    differ = [what for what, get in _POOL_MATCH if len({get(p) for p in pooled}) > 1]
    if differ:
        notes.append(f"the plans differ in {', '.join(differ)}: a warm pool is reused only by a job with the same "
                     "role, instance type and count, volume size and KMS key, and VPC")
    if len(pooled) > 1 and max_concurrent != 1:
        notes.append("a warm pool serves one job at a time: --max-concurrent 1 lets each job reuse the last "
                     "one's instances")
    return notes
