"""What the local CPU run (`submit --local`) can and cannot vouch for, judged from the lines its runs print.

The rendered script prints `SMP_LOCAL_RUN {json}` lines in local runs (rank 0); this module turns
two runs' worth of them into pass/fail checks, and lists what a CPU cannot exercise, with the reason.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from launcher.rules.decisions import Decisions
from launcher.spec.models import JobSpec

MARK = "SMP_LOCAL_RUN "


@dataclass
class RunRecord:
    """One torchrun of the script: its exit code, wall time and the facts it reported."""

    exit_code: int
    wall_s: float
    facts: list[dict[str, Any]] = field(default_factory=list)
    killed: bool = False  # the local run killed it mid-save (SIGKILL)

    def add_line(self, line: str) -> bool:
        """Keep the fact a local-run line reports; True when the line was one."""
        if not line.startswith(MARK):
            return False
        try:
            self.facts.append(json.loads(line[len(MARK):]))
        except json.JSONDecodeError:
            return False
        return True

    def of(self, check: str) -> list[dict[str, Any]]:
        return [f for f in self.facts if f.get("check") == check]

    def losses(self) -> dict[int, float]:
        return {f["step"]: f["loss"] for f in self.of("step")}

    def hyperparameters(self) -> dict[str, Any] | None:
        """The hyperparameters the script read (its command line over the spec's), and the folder it ran in."""
        said = self.of("hyperparameters")
        return {"values": said[0]["values"], "folder": said[0]["cwd"]} if said else None


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: does not apply to this spec
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def not_exercised(spec: JobSpec, backend: str, tensor_parallel: int = 1) -> list[dict[str, str]]:
    """Features of this spec that need GPUs or SMP itself: the local run goes without them and says so."""
    smp = spec.smp
    out = []
    if smp.tensor_parallel_degree > 1 and tensor_parallel == 1:
        out.append({"feature": f"tensor_parallel_degree {smp.tensor_parallel_degree}",
                    "reason": "tensor parallelism is emulated on gloo from 2 processes up; this run had too few "
                              "(tsm.transform was the identity)"})
    for key, what in (("context_parallel_degree", "context parallelism"),
                      ("expert_parallel_degree", "expert parallelism")):
        degree = getattr(smp, key)
        if degree > 1:
            out.append({"feature": f"{key} {degree}",
                        "reason": f"{what} needs SMP v2's kernels on GPUs; ran with degree 1 "
                                  "(tsm.transform was the identity)"})
    if spec.training.precision == "fp8":
        out.append({"feature": "precision fp8",
                    "reason": "FP8 needs Transformer Engine on H100 GPUs (ml.p5); ran in bf16"})
    out.append({"feature": f"backend {backend}",
                "reason": f"{backend.upper()} needs GPUs; the ranks talked over gloo on the CPU"})
    return out


def substitutions(spec: JobSpec, decisions: Decisions, tensor_parallel: int = 1) -> list[str]:
    """Features that ran, but through the stand-in a CPU allows rather than SMP's own implementation."""
    out = []
    if tensor_parallel > 1:
        out.append(f"tensor parallel degree {spec.smp.tensor_parallel_degree} ran as {tensor_parallel}, emulated on "
                   "gloo by tsm_local (attention and MLP projections split column/row-wise, one slice per TP rank); "
                   "SMP's Transformer Engine layers need GPUs")
    if decisions.delayed_param_init:
        out.append("delayed parameter init ran as meta device + FSDP param_init_fn with the model's own "
                   "initialiser; SMP's DelayedParamIniter needs SMP")
    if decisions.offloading == "pytorch":
        out.append("activation offloading: PyTorch's offload_wrapper is wired up, but on a CPU it moves nothing")
    elif decisions.offloading == "smp":
        out.append("activation offloading: offload_wrapper is wired up, but on a CPU it moves nothing; "
                   "SMP's own offloading (sm_activation_offloading) needs GPUs")
    return out


def _loss_falls(run: RunRecord) -> Check:
    """Judged on one batch, the first, before and after training: batch-to-batch noise cannot hide it."""
    losses = run.losses()
    again = run.of("loss_on_first_batch")
    if not again or again[0]["step"] not in losses:
        return Check("loss falls", False, "the script did not re-measure its first batch")
    step, after = again[0]["step"], again[0]["after"]
    before = losses[step]
    steps = sorted(losses)
    return Check("loss falls", after < before,
                 f"on step {step}'s batch {before:.4f} -> {after:.4f} after {again[0]['steps']} steps "
                 f"(training loss {losses[steps[0]]:.4f} at step {steps[0]}, {losses[steps[-1]]:.4f} at step "
                 f"{steps[-1]})")


def _ac_grad_norm(run: RunRecord, activation_checkpointing: bool) -> Check:
    name = "step-0 gradient norm equal with and without activation checkpointing"
    if not activation_checkpointing:
        return Check(name, None, "activation checkpointing is off in this spec")
    without = run.of("grad_norm_without_ac")
    steps = {f["step"]: f["grad_norm"] for f in run.of("step")}
    if not without or without[0]["step"] not in steps:
        return Check(name, False, "the script reported no gradient norm to compare")
    a, b = without[0]["grad_norm"], steps[without[0]["step"]]
    return Check(name, math.isclose(a, b, rel_tol=1e-6, abs_tol=0.0), f"without {a!r}, with {b!r}")


def _sharding(run: RunRecord) -> Check:
    name = "each rank holds 1/shard-degree of the parameters"
    facts = run.of("sharding")
    if not facts:
        return Check(name, False, "the script reported no sharding")
    f = facts[0]
    total, held, shard = f["total"], f["held"], f["shard_degree"]
    expected = total / shard
    close = all(abs(h - expected) <= max(64, 0.01 * expected) for h in held)
    complete = sum(held) == total * (len(held) // shard)
    meta = f.get("meta_tensors", [])
    detail = f"{f['strategy']}, shard degree {shard}: ranks hold {held} of {total:,} parameters"
    if meta:
        detail += f"; still on the meta device after init: {', '.join(meta[:3])}"
    return Check(name, close and complete and not meta, detail)


def _wrapping(run: RunRecord) -> Check:
    """Every decoder layer its own FSDP unit, and checkpointed (fp8 with MoE: its attention and its MoE layer),
    in the classes the script names: under tsm.transform, SMP's TransformerLayer, not Hugging Face's block."""
    name = "every decoder layer is its own FSDP unit and is checkpointed"
    facts = run.of("wrapping")
    if not facts:
        return Check(name, False, "the script reported no wrapping")
    f = facts[0]
    layers, units, checkpointed = f["layers"], f["fsdp_units"], f["checkpointed"]
    ok = layers > 0 and units == layers and all(n == layers for n in checkpointed.values())
    done = ", ".join(f"{n} {cls}" for cls, n in checkpointed.items()) or "nothing (activation checkpointing off)"
    return Check(name, ok, f"{layers} {f['layer_class']} layers, {units} FSDP units of their own; checkpointed: {done}")


def _round_trip(run: RunRecord) -> Check:
    name = "checkpoint saved and loaded back bit for bit"
    facts = run.of("checkpoint_round_trip")
    if not facts:
        return Check(name, False, "no checkpoint was saved")
    ok = all(f["equal"] for f in facts)
    steps = ", ".join(str(f["step"]) for f in facts)
    how = ("as they were when the asynchronous save began, after perturbing and loading once training had gone on"
           if facts[0].get("kind") == "async" else "after perturbing and loading")
    return Check(name, ok, f"step {steps}: {facts[0]['tensors']} model and optimizer tensors per rank "
                           f"{'equal' if ok else 'DIFFER'} on every rank {how}")


def _tensor_parallel_folders(run: RunRecord, tensor_parallel: int) -> Check:
    """Each TP rank's slices in a folder of their own: one DCP save over the world would keep one slice."""
    name = "one checkpoint folder per tensor-parallel rank"
    if tensor_parallel == 1:
        return Check(name, None, "tensor parallel degree 1 here")
    facts = run.of("checkpoint_round_trip")
    folders = facts[0].get("folders", []) if facts else []
    expected = [f"tp{tensor_parallel}-{r}/.metadata" for r in range(tensor_parallel)]
    return Check(name, folders == expected, f"DCP metadata in {', '.join(folders) or 'no folder'}")


def _grad_norm_everywhere(run: RunRecord) -> Check:
    """The clipped total norm must be one number: under TP, FSDP's own clip gives each TP rank its own."""
    name = "gradient norm equal on every rank"
    steps = [f for f in run.of("step") if "grad_norms" in f]
    if not steps:
        return Check(name, False, "the script reported no per-rank gradient norms")
    bad = [f for f in steps if len(set(f["grad_norms"])) != 1]
    shown = bad[0] if bad else steps[0]
    return Check(name, not bad, f"step {shown['step']}: {shown['grad_norms']}")


def final_model_check(run: RunRecord, written: bool, export: str = "full") -> Check:
    """The export output.save_final_model asks for: `full` re-read as one Hugging Face file; `sharded` read back
    shard by shard on every rank, and (without TP) joined into one state dict that the Hugging Face class takes."""
    name = "final model saved to SM_MODEL_DIR"
    if export == "none":
        return Check(name, None, "output.save_final_model is off (AWS's default)")
    facts = run.of("final_model")
    if not written or not facts:
        return Check(name, False, "nothing was written" if not written else "the export was not re-read")
    f = facts[0]
    verdict = "load" if f["loads"] else "do NOT load"
    if f.get("format") == "sharded":
        where = ", ".join("SM_MODEL_DIR" if folder == "." else folder for folder in f["folders"]) or "no folder"
        return Check(name, bool(f["loads"]), f"config and DCP shards in {where} {verdict} back "
                                             f"into {f['model_class']} with the weights saved")
    return Check(name, bool(f["loads"]), f"config and pytorch_model.bin ({f['tensors']} tensors) "
                                         f"{verdict} into {f['model_class']} with the weights saved")


def _resume(first: RunRecord, second: RunRecord, resume_step: int) -> Check:
    """The second run resumes from `resume_step` and repeats the first run's losses bit for bit, on every step both
    ran. A first run killed mid-save must not be resumed from the save it never finished."""
    name = "training resumes from the checkpoint"
    resumed = second.of("resumed")
    if not resumed or resumed[0]["step"] != resume_step:
        got = resumed[0]["step"] if resumed else "no checkpoint"
        return Check(name, False, f"expected a resume from step {resume_step}, got {got}")
    before, after = first.losses(), second.losses()
    steps = sorted(s for s in after if s in before) if first.killed else sorted(after)
    same = bool(steps) and all(before.get(s) == after[s] for s in steps)
    held = first.of("held")
    killed = (f"the first run was killed while saving step {held[0]['step']} asynchronously; "
              if first.killed and held else "")
    kind = resumed[0].get("kind")
    return Check(name, same, f"{killed}restarted from step {resume_step}"
                             f"{f' ({kind} checkpoint)' if kind else ''}; steps {steps[0] if steps else '-'}"
                             f"-{steps[-1] if steps else '-'} "
                             f"{'repeat' if same else 'do NOT repeat'} the first run's losses bit for bit")


def judge_runs(first: RunRecord, second: RunRecord | None, resume_step: int,
               activation_checkpointing: bool, tensor_parallel: int = 1) -> list[Check]:
    """The checks of two runs; where the first was killed mid-save, the end-of-training ones are the second's."""
    finished = second if first.killed and second is not None else first
    checks = [_loss_falls(finished), _ac_grad_norm(first, activation_checkpointing), _sharding(first),
              _wrapping(first), _round_trip(first), _tensor_parallel_folders(first, tensor_parallel),
              _grad_norm_everywhere(first)]
    if second is not None:
        checks.append(_resume(first, second, resume_step))
    return checks
