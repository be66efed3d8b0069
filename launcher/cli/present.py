"""How results reach people (rich tables on a terminal) and pipelines (`--output json`): the one place
for tables, colours and the sanitising entry point.

Every table is a rich Table and fits its width: the terminal's; into a pipe or a file, COLUMNS, else
PIPE_WIDTH (100) columns. Long cells fold (nothing is cut); `--output json` is the form for machines.
Colours are named here only: the log printer (launcher.cli.logprint) takes host_colour and `safe` from
this module and stays a fast path of one write per page of lines, without rich. Importing this module
imports neither rich nor click.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from launcher.core.sanitize import clean as safe
from launcher.core.sanitize import clean_data as safe_data
from launcher.core.sanitize import clean_lines
from launcher.core.timeutil import clock_time

__all__ = ["HOST_COLOURS", "SEVERITY_STYLES", "emit_json", "host_colour", "safe", "safe_data"]

HOST_COLOURS = (36, 33, 32, 35, 34, 31)  # SGR codes by host number (algo-N): cyan, yellow, green, magenta, blue, red
SEVERITY_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}
STATUS_STYLES = {"Completed": "green", "Failed": "bold red", "Stopped": "yellow", "Stopping": "yellow",
                 "InProgress": "cyan"}
PIPE_WIDTH = 100  # not a terminal and no COLUMNS: the width tables fold to


def host_colour(host: int) -> int:
    """The SGR colour code of host algo-`host` (numbered from 1), cycling through HOST_COLOURS."""
    return HOST_COLOURS[(host - 1) % len(HOST_COLOURS)]


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def console(stderr: bool = False):
    """A rich console that leaves a closed pipe to the CLI (rich itself would exit 1)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    stream = sys.stderr if stderr else sys.stdout
    width = None if getattr(stream, "isatty", lambda: False)() else pipe_width()
    return _Console(file=stream, highlight=False, soft_wrap=True, width=width)


def pipe_width() -> int:
    """The width of output that is not a terminal: COLUMNS when it is a number of at least 40, else PIPE_WIDTH."""
    import os

    text = os.environ.get("COLUMNS", "")
    return int(text) if text.isdigit() and int(text) >= 40 else PIPE_WIDTH


def show(out, *renderables) -> None:
    """Print through `out` with each line's trailing padding removed (rich pads every cell of a column)."""
    with out.capture() as captured:
        for item in renderables:
            out.print(item)
    text = "".join(line.rstrip(" ") + "\n" for line in captured.get().splitlines())
    out.file.write(text)
    out.file.flush()


FOLD_MIN_WIDTH = 16  # a folding column is never narrower: its text would stand a word to a line


def new_table(*columns: str, title: str | None = None, right: tuple[str, ...] = (), fold: tuple[str, ...] = ()):
    """A borderless table (aligned columns, one space apart, easy to read and to grep) with a bold header.

    Only the columns named in `fold` (default: the last, where the long text goes) fold their cells to fit the
    width; the others (figures, names, states) keep each cell on one line, so a row reads across."""
    from rich.table import Table

    t = Table(box=None, title=title, title_justify="left", title_style="bold", header_style="bold",
              show_header=bool(columns), pad_edge=False, collapse_padding=True, padding=(0, 1, 0, 0))
    folding = set(fold or columns[-1:])
    for col in columns:
        t.add_column(col, justify="right" if col in right else "left", overflow="fold", no_wrap=col not in folding,
                     min_width=FOLD_MIN_WIDTH if col in fold else None)
    return t


def styled(value: Any, style: str = ""):
    """Text shown verbatim: markup in a value from AWS or a spec is never interpreted."""
    from rich.text import Text

    return Text("-" if value is None else str(value), style=style)


# -- jobs ---------------------------------------------------------------------------------------------

def show_status(job: Any) -> None:
    """A launcher.jobs.status.JobStatus: its facts, then its secondary-status transitions."""
    status = job.status + (f" ({job.secondary_status})" if job.secondary_status and job.secondary_status != job.status
                           else "")
    rows = [("job", job.job_name), ("status", status), ("instances", f"{job.instance_count} x {job.instance_type}"),
            ("image", job.image or "-"), ("created", clock_time(job.created)),
            ("training start", clock_time(job.training_start)), ("training end", clock_time(job.training_end)),
            ("billable seconds", "-" if job.billable_seconds is None else str(job.billable_seconds))]
    if job.failure_reason:
        rows.append(("failure reason", "\n".join(clean_lines(job.failure_reason))))  # its lines, aligned
    if job.failure is not None:
        rows.append(("failure class", job.failure.failure_class))
        from launcher.cli.invoked import as_run

        rows.append(("remedy", as_run(job.failure.remedy)))
    if job.model_artifacts:
        rows.append(("model artifacts", job.model_artifacts))
    if job.queue is not None:  # handed to an AWS Batch queue: where it is there, and its training job
        rows.append(("queue", job.queue.line()))
        rows.append(("training job", job.queue.training_job or "- (not yet made by Batch)"))
    from rich.table import Table

    out = console()
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in rows:
        grid.add_row(f"{key}:", styled(value, STATUS_STYLES.get(job.status, "") if key == "status" else ""))
    if not job.transitions:
        show(out, grid)
        return
    t = new_table("transition", "start (UTC)", "end (UTC)", "message", fold=("message",))
    for x in job.transitions:
        t.add_row(styled(x.status), clock_time(x.start), clock_time(x.end), styled(x.message))
    show(out, grid, "", t)


def show_jobs(rows: list[Any]) -> None:
    """launcher.jobs.status.JobSummary rows, newest first."""
    t = new_table("job", "status", "secondary", "instances", "created (UTC)", "billable s", right=("billable s",),
                  fold=("job", "secondary"))
    for r in rows:
        t.add_row(styled(r.job_name), styled(r.status or "-", STATUS_STYLES.get(r.status or "", "")),
                  styled((r.secondary_status or "-") + (f" (queue {r.queue})" if r.queue else "")),
                  styled(f"{r.instance_count} x {r.instance_type}"),
                  clock_time(r.created), "-" if r.billable_seconds is None else str(r.billable_seconds))
    show(console(), t)


def show_metrics(data: Any) -> None:
    """Per metric, one sparkline row per host with min / mean / max (a launcher.api.JobMetrics)."""
    parts: list[Any] = [styled(f"{data.job_name}: {data.instance_count} x {data.instance_type} ({data.status}), "
                              f"{data.start} to {data.end}, {data.period} s points")]
    for name, label in data.labels.items():
        t = new_table("host", "0-100", "min", "mean", "max", title=f"{label} ({data.units[name]})",
                   right=("host", "min", "mean", "max"))
        # An ended job sends no more points: "yet" only while it runs.
        empty = "no data" if data.status in ("Completed", "Failed", "Stopped") else "no data yet"
        for row in data.hosts:
            s = row.series[name]
            if s.mean is None:
                t.add_row(row.host, empty, "-", "-", "-")
            else:
                t.add_row(row.host, s.sparkline(), f"{s.min:.1f}", f"{s.mean:.1f}", f"{s.max:.1f}")
        parts += ["", t]
    show(console(), *parts)


# -- plans and advice ---------------------------------------------------------------------------------

def _fmt_tokens(n: int) -> str:
    for unit, size in (("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n >= size:
            return f"{n:,} ({n / size:g} {unit})"
    return f"{n:,}"


INVALID_LAYOUT = "- (the layout is invalid: see the errors on stderr)"


def span(seconds: float) -> str:
    """A duration as people say it: 45 s, 12m 5s, 6h 55m, 3d 4h (launcher.core.durations.spoken, for the core)."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s}s"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h}h {m}m"
    d, h = divmod(h, 24)
    return f"{d:,}d {h}h"


def prediction_rows(plan: dict[str, Any]) -> list[tuple[str, str]]:
    """`speed`, `time to train` and `cost`: one line each, with where each figure comes from."""
    perf, cost = plan.get("performance"), plan.get("cost")
    if not perf:
        if plan.get("memory") is None:
            return [("speed", INVALID_LAYOUT)]
        return [("speed", f"not predicted: no hardware figures for {plan['instance_type']}")]
    low, high = perf["band"]
    speed = (f"{perf['tokens_per_second_per_gpu']:,.0f} tokens/s per GPU (band {low:,.0f}-{high:,.0f}), "
             f"MFU {perf['mfu'] * 100:.1f}%, {perf['step_seconds']:.2f} s a step, {perf['bound']}-bound "
             f"(compute {perf['compute_seconds']:.2f} s, overlappable communication "
             f"{perf['communication_seconds']:.2f} s); calibration: {perf['calibration']}")
    if perf.get("uncalibrated"):
        speed += "; band widened, not calibrated: " + "; ".join(perf["uncalibrated"])
    t = perf["time_to_train"]
    time = (f"{span(perf['time_to_train_seconds'])}: {t['steps']:,} steps ({t['steps_from']}) x "
            f"{perf['step_seconds']:.2f} s, start-up {span(t['startup_seconds'])}, {t['checkpoints']:,} "
            + (f"asynchronous checkpoints {span(t['checkpoint_seconds'])} (copies to host memory)"
               if t.get("async_checkpoints") else f"checkpoint writes {span(t['checkpoint_seconds'])}"))
    if t["interruption_seconds"]:
        time += f", spot interruptions {span(t['interruption_seconds'])}"
    if cost and cost.get("usd") is not None:
        money = (f"${cost['usd']:,.0f} (${cost['usd_per_hour']:,.2f} an hour: {cost['note']}; price: "
                 f"{cost['price_source']}, {cost['price_date']})")
    else:
        money = f"cannot tell: {cost['note'] if cost else 'no prediction'}"
    return [("speed", speed), ("time to train", time), ("cost", money)]


def describe_templates(used: dict[str, str]) -> str:
    """The plan's `templates` in one line: all shipped, or which team files replaced which."""
    team = [f"{name} from {path}" for name, path in used.items() if path != "shipped"]
    if not team:
        return "shipped"
    return "; ".join(team) + ("; the others shipped" if len(team) < len(used) else "")


BACKEND_NAMES = {"estimator": "the PyTorch Estimator", "model-trainer": "ModelTrainer"}


def host_memory_line(host: dict[str, Any], decisions: dict[str, Any]) -> str:
    """The plan's host-memory row: the busiest instance's peak and the step it is in; a step that is off, or holds
    nothing on the host, is never named."""
    if host.get("peak_phase") is None:
        why = "delayed parameter init builds it on the GPUs" if decisions.get("delayed_param_init") else \
            "no step holds it there"
        return (f"none of the model's copies on the host ({why}; no final export): 0 of "
                f"{host['capacity_gib']:,} GiB per instance")
    fits = "fits" if host["fits"] else "DOES NOT FIT"
    peak = host["per_instance_gib"]
    shown = "under 0.1" if peak < 0.05 else f"{peak:,.1f}"
    return (f"{shown} of {host['capacity_gib']:,} GiB per instance for the model's copies ({fits}), peak in the "
            f"{host['peak_phase']}")


def show_plan(plan: dict[str, Any]) -> None:
    """The plan in `plan --output json`'s shape. Errors are not here: the CLI prints them on stderr like
    `validate`; with an invalid layout (no memory estimate) the numbers derived from it are not shown."""
    model, fw = plan["model"], plan["framework"]
    valid_layout = plan.get("memory") is not None
    rows = [
        ("job name", plan["job_name"]),
        ("region", plan["region"] or "not set (cluster.region, AWS_REGION or a profile)"),
        ("role", plan["role"] or "not set (role: in the spec, or SMP_LAUNCH_ROLE)"),
        ("instances", f"{plan['instance_count']} x {plan['instance_type']} ({plan['gpus_per_instance']} GPUs each)"),
        ("world size", f"{plan['world_size']} GPUs"),
        ("data-parallel degree", str(plan["data_parallel_degree"]) if valid_layout else INVALID_LAYOUT),
        ("model", f"{model['preset'] or model['type']}: {model['parameters'] / 1e9:.2f}B parameters, "
                  f"{model['num_layers']} layers, hidden {model['hidden_width']}, seq {model['seq_length']}"),
        ("global batch", f"{plan['global_batch_sequences']:,} sequences, "
                         f"{_fmt_tokens(plan['global_batch_tokens'])} tokens" if valid_layout else INVALID_LAYOUT),
        ("framework", f"PyTorch {fw['pytorch_version']} / {fw['py_version']} (SMP {fw['smp_version']})"),
        ("image", fw["image_uri"] or "unknown until a region is set"),
    ]
    backend = plan.get("backend")
    if backend:
        rows.append(("backend", f"{BACKEND_NAMES.get(backend['name'], backend['name'])} ({backend['reason']})"
                     + (f"; cannot run here: {backend['problem']}" if backend.get("problem") else "")))
    reqs = fw.get("requirements") or {}
    if reqs:
        rows.append(("requirements", ", ".join(f"{name}{spec}" for name, spec in reqs.items())))
    decisions = plan.get("decisions") or {}
    if decisions.get("shard_reason"):  # as set, also where the layout is invalid (the errors say why)
        rows.append(("sharding", f"{decisions['sharding_strategy']} over {decisions['hybrid_shard_degree']} GPUs: "
                                 f"{decisions['shard_reason']}"))
    if "transform" in decisions:
        rows.append(("model implementation", "SMP (torch.sagemaker.transform)" if decisions["transform"]
                     else "Hugging Face transformers"))
    if "delayed_reason" in decisions:
        rows.append(("delayed param init", f"{'on' if decisions['delayed_param_init'] else 'off'}: "
                                           f"{decisions['delayed_reason']}"))
    if plan.get("templates"):
        rows.append(("templates", describe_templates(plan["templates"])))
    store = plan.get("storage") or {}
    if store.get("note"):
        rows.append(("local storage", store["note"]))
    if plan.get("alternatives"):  # cluster.instance_types: where a capacity failure moves the job, in order
        rows.append(("capacity fallback", ", then ".join(
            f"{a['instance_type']} ({'fits' if a['fits'] else 'skipped, ' + (a['errors'] or ['?'])[0].split()[0]})"
            for a in plan["alternatives"])))
    mem = plan.get("memory")
    if mem:
        verdict = "fits" if mem["fits"] else "DOES NOT FIT"
        rows.append(("GPU memory", f"{mem['per_gpu_gb']:.1f} of {mem['capacity_gb']:.0f} GB per GPU ({verdict}), "
                                   f"peak in the {mem.get('peak_phase', 'forward/backward')}"))
        host = mem.get("host")
        if host:
            rows.append(("host memory", host_memory_line(host, decisions)))
    else:
        rows.append(("GPU memory", INVALID_LAYOUT))
    rows += prediction_rows(plan)
    from rich.table import Table

    out = console()
    t = Table(title=f"Plan for {plan['spec_file']}", show_header=False, title_justify="left")
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    for key, value in rows:
        t.add_row(key, styled(value))
    out.print(t)
    out.print(styled("distribution ", "bold") + styled(json.dumps(plan["distribution"])))
    if mem:
        parts = ", ".join(f"{k} {v:.1f}" for k, v in mem["breakdown"].items())
        out.print(styled("memory breakdown (GB) ", "bold") + styled(parts))
        for term, source in (mem.get("sources") or {}).items():
            out.print(styled(f"  {term}: {source}"))
    show_advisories([a for a in plan["advisories"] if a["severity"] != "error"], out,
                    errors=sum(a["severity"] == "error" for a in plan["advisories"]))


def show_advisories(advisories: list[dict[str, Any]], out=None, errors: int = 0) -> None:
    """Warnings and notes, one line each, coloured by severity (errors go to stderr, as `validate` prints them)."""
    out = out or console()
    if not advisories and not errors:
        out.print(styled("no advisories", "green"))
    for a in advisories:
        out.print(styled(f"{a['severity']:7}", SEVERITY_STYLES.get(a["severity"], "")) + styled(f" {a['rule']} "
                                                                                             f"{a['message']}"))
    if errors:
        out.print(styled(f"{errors} error{'s' if errors > 1 else ''} (on stderr): submit refuses this plan",
                        SEVERITY_STYLES["error"]))


def advice_note(candidate: Any, best: Any) -> str:
    """What sets a ranked layout apart: AWS's reference configuration, the rules that warn about it, and
    what it costs next to the best (more sharding or tensor parallelism, offloading, no checkpointing)."""
    notes = []
    if candidate.reference:
        notes.append("AWS reference")
    notes += [w.split(":", 1)[0] for w in candidate.warnings]
    if candidate.pytorch_version:
        notes.append(f"pytorch {candidate.pytorch_version}")
    if candidate is not best:
        if candidate.tp > best.tp:
            notes.append(f"tp {candidate.tp} > {best.tp}")
        if candidate.shard > best.shard and candidate.tp == best.tp:
            notes.append(f"shards over {candidate.shard} GPUs, not {best.shard}")
        if candidate.offloading and not best.offloading:
            notes.append("offloads activations")
        if not candidate.checkpointing:
            notes.append("no checkpointing")
        if candidate.global_batch_tokens < best.global_batch_tokens:
            notes.append("fewer tokens a step")
    return ", ".join(notes)


def show_advice(model: str, instance_type: str, seq_length: int, ranked: list, top: int,
                written: str | None, by: str = "time", budget: str = "1T") -> None:
    out = console()
    best = ranked[0]
    order = {"time": "sorted by time, shortest first", "cost": "sorted by cost, cheapest first",
             "practices": "in the order of AWS's best practices"}[by]
    t = new_table("#", "shard", "tp", "ckpt", "offl", "batch", "GB/GPU", "free", "tok/step", "tok/s/GPU",
                  "MFU", "bound", "time", "cost", "note",
                  title=f"{model} on {best.instances} x {instance_type}, sequence {seq_length}: "
                        f"{len(ranked)} feasible, {order}, those with under {1 - best.HEADROOM:.0%} of GPU memory free "
                        f"last (time and cost to train {budget} tokens)",
                  right=("#", "shard", "tp", "batch", "GB/GPU", "free", "tok/step", "tok/s/GPU", "MFU", "time",
                         "cost"), fold=("note",))
    for i, c in enumerate(ranked[:top], start=1):
        p = c.performance
        note = advice_note(c, best)
        if c.ties_with_best:
            note = ", ".join(x for x in ("ties with #1", note) if x)
        t.add_row(str(i), str(c.shard), str(c.tp), "yes" if c.checkpointing else "no",
                  "yes" if c.offloading else "no", str(c.batch), f"{c.memory.per_gpu_gb:.1f}",
                  f"{c.memory.capacity_gb - c.memory.per_gpu_gb:.1f}" + ("" if c.headroom else " (tight)"),
                  f"{c.global_batch_tokens:,}", f"{p.tokens_per_second_per_gpu:,.0f}" if p else "-",
                  f"{p.mfu * 100:.1f}%" if p else "-", p.bound if p else "-",
                  span(c.time_seconds) if c.time else "-", f"${c.usd:,.0f}" if c.usd is not None else "-",
                  styled(note))
    show(out, t)
    out.print(styled("why #1", "bold"))
    for reason in best.reasons:
        out.print(styled(f"  - {reason}"))
    if best.too_long:
        out.print(styled(f"warning {best.too_long}", SEVERITY_STYLES["warning"]))
    if best.cost is not None and best.cost.usd is None:
        out.print(styled(f"cost: cannot tell: {best.cost.note}"))
    elif best.cost is not None:
        out.print(styled(f"price: {best.cost.price_source}, {best.cost.price_date}"))
    ref = next((i for i, c in enumerate(ranked, start=1) if c.reference), None)
    if ref and ref > top:
        out.print(styled(f"AWS's reference configuration is #{ref} of {len(ranked)} (--top {ref} shows it)"))
    if written:
        out.print(styled(f"wrote {written}"))


def show_calibration(result: Any) -> None:
    """launcher.api.CalibrationResult: each job measured against its prediction, then the factors kept."""
    t = new_table("job", "instance type", "GPUs", "measured tok/s/GPU", "predicted", "ratio", "steady lines",
                  "left out", right=("GPUs", "measured tok/s/GPU", "predicted", "ratio", "steady lines", "left out"))
    for j in result.jobs:
        t.add_row(styled(j.job), styled(j.instance_type), str(j.gpus), f"{j.measured:,.1f}", f"{j.predicted:,.1f}",
                  f"{j.ratio:.3f}", str(j.steady_lines), str(j.skipped_lines))
    out = console()
    show(out, t)
    for itype, factor in result.factors.items():
        out.print(styled(f"{itype}: later plans multiply the published prediction by {factor:.3f}"))


# -- the role check -----------------------------------------------------------------------------------

def show_role_check(check: Any) -> None:
    """launcher.submission.role.RoleCheck: the verdict and each reason, on stdout (the exit code says it too)."""
    data = check.as_dict()
    style = {"pass": "green", "fail": "bold red"}.get(data["verdict"], "yellow")
    out = console()
    out.print(styled(f"role {data['role_arn'] or data['role']}: ") + styled(data["verdict"], style))
    for line in check.lines()[1:]:
        out.print(styled(line))


def changes_summary(changes: Sequence[str]) -> str:
    """One short line for the values changed for this machine, counted per section (`--output json` lists them)."""
    sections: dict[str, int] = {}
    for change in changes:
        section = change.split("=", 1)[0].split(".", 1)[0]
        sections[section] = sections.get(section, 0) + 1
    counted = ", ".join(f"{section} {n}" for section, n in sections.items())
    return f"{len(changes)} values ({counted}); `--output json` lists them"
