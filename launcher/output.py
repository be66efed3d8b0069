"""How results reach people (rich tables on a terminal) and pipelines (`--output json`)."""
from __future__ import annotations

import json
import sys
from typing import Any


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def _console():
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich exits 1; the CLI's own handler exits 0 quietly
            self.quiet = True
            raise BrokenPipeError

    return _Console(highlight=False, soft_wrap=True)


def _fmt_tokens(n: int) -> str:
    for unit, size in (("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n >= size:
            return f"{n:,} ({n / size:g} {unit})"
    return f"{n:,}"


def show_plan(plan: dict[str, Any]) -> None:
    from rich.table import Table

    console = _console()
    model = plan["model"]
    fw = plan["framework"]
    t = Table(title=f"Plan for {plan['spec_file']}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    rows = [
        ("job name", plan["job_name"]),
        ("region", plan["region"] or "not set (cluster.region, AWS_REGION or a profile)"),
        ("role", plan["role"] or "not set (role: in the spec, or SMP_LAUNCH_ROLE)"),
        ("instances", f"{plan['instance_count']} x {plan['instance_type']} "
                      f"({plan['gpus_per_instance']} GPUs each)"),
        ("world size", f"{plan['world_size']} GPUs"),
        ("data-parallel degree", str(plan["data_parallel_degree"])),
        ("model", f"{model['preset'] or model['type']}: {model['parameters'] / 1e9:.2f}B parameters, "
                  f"{model['num_layers']} layers, hidden {model['hidden_width']}, seq {model['seq_length']}"),
        ("global batch", f"{plan['global_batch_sequences']:,} sequences, "
                         f"{_fmt_tokens(plan['global_batch_tokens'])} tokens"),
        ("framework", f"PyTorch {fw['pytorch_version']} / {fw['py_version']} (SMP {fw['smp_version']})"),
        ("image", fw["image_uri"] or "unknown until a region is set"),
    ]
    reqs = fw.get("requirements") or {}
    if reqs:
        rows.append(("requirements", ", ".join(f"{name}{spec}" for name, spec in reqs.items())))
    decisions = plan.get("decisions") or {}
    if decisions.get("shard_reason"):
        rows.append(("sharding", f"{decisions['sharding_strategy']} over {decisions['hybrid_shard_degree']} GPUs: "
                                 f"{decisions['shard_reason']}"))
    if "transform" in decisions:
        rows.append(("model implementation", "SMP (torch.sagemaker.transform)" if decisions["transform"]
                     else "Hugging Face transformers"))
    if "delayed_reason" in decisions:
        rows.append(("delayed param init", f"{'on' if decisions['delayed_param_init'] else 'off'}: "
                                           f"{decisions['delayed_reason']}"))
    store = plan.get("storage") or {}
    if store.get("note"):
        rows.append(("local storage", store["note"]))
    mem = plan.get("memory")
    if mem:
        verdict = "fits" if mem["fits"] else "DOES NOT FIT"
        rows.append(("GPU memory", f"{mem['per_gpu_gb']:.1f} of {mem['capacity_gb']:.0f} GB per GPU ({verdict}), "
                                   f"peak in the {mem.get('peak_phase', 'forward/backward')}"))
    for k, v in rows:
        t.add_row(k, v)
    console.print(t)
    console.print("[bold]distribution[/bold] " + json.dumps(plan["distribution"]))
    if mem:
        parts = ", ".join(f"{k} {v:.1f}" for k, v in mem["breakdown"].items())
        console.print(f"[bold]memory breakdown (GB)[/bold] {parts}")
        for term, source in (mem.get("sources") or {}).items():
            console.print(f"  {term}: {source}", markup=False)
    show_advisories(plan["advisories"], console)


_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def show_advisories(advisories: list[dict[str, Any]], console=None) -> None:
    console = console or _console()
    if not advisories:
        console.print("[green]no advisories[/green]")
        return
    for a in advisories:
        style = _STYLE.get(a["severity"], "")
        console.print(f"[{style}]{a['severity']:7}[/{style}] {a['rule']} {a['message']}", markup=True)


def show_advice(model: str, instance_type: str, seq_length: int, ranked: list, top: int,
                written: str | None) -> None:
    from rich.table import Table

    console = _console()
    n = ranked[0].instances
    t = Table(title=f"{model} on {n} x {instance_type}, sequence {seq_length}: {len(ranked)} feasible, best first",
              title_justify="left")
    for col in ("#", "shard", "tp", "ckpt", "offload", "batch", "GB/GPU", "tokens/step", "note"):
        t.add_column(col, justify="right" if col != "note" else "left")
    for i, c in enumerate(ranked[:top], start=1):
        note = "AWS reference" if c.reference else ("warnings" if c.warnings else "")
        t.add_row(str(i), str(c.shard), str(c.tp), "yes" if c.checkpointing else "no",
                  "yes" if c.offloading else "no", str(c.batch), f"{c.memory.per_gpu_gb:.1f}",
                  f"{c.global_tokens:,}", note)
    console.print(t)
    console.print("[bold]why #1[/bold]")
    for reason in ranked[0].reasons:
        console.print(f"  - {reason}")
    ref = next((i for i, c in enumerate(ranked, start=1) if c.reference), None)
    if ref and ref > top:
        console.print(f"AWS's reference configuration is #{ref} of {len(ranked)} (--top {ref} shows it)")
    if written:
        console.print(f"wrote {written}")
