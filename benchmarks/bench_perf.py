"""The step-time model against every published point it is calibrated on: leave-one-out errors and bands.

For each point of launcher/predict/published.py the efficiency is fitted again on all the other points,
and the point's tokens per second per GPU is predicted from that fit (so no point predicts itself). A
point is "hidden" where the model puts its step under compute (the communication runs under it), and
"exposed" where communication bounds it. Goals: within 15% of the measured value where communication
is hidden, within 25% elsewhere, and the measured value inside the prediction's band.

Also shows the prediction for every job in jobs/ (speed, band, bound, time to train and cost with their
sources), so the page shows what `plan` shows. Saves benchmarks/results/perf.json; `--points` prints
every point's row.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

GOALS = {"hidden": 0.15, "exposed": 0.25}


def leave_one_out() -> list[dict]:
    from launcher.predict.fit import fit, workload
    from launcher.predict.published import POINTS
    from launcher.predict.speed import predict

    rows = []
    for i, p in enumerate(POINTS):
        rest = POINTS[:i] + POINTS[i + 1:]
        got = predict(workload(p), fit(rest))
        kind = "hidden" if got.bound == "compute" else "exposed"
        error = got.tokens_per_second_per_gpu / p.tokens_per_s_per_gpu - 1
        rows.append({"source": p.source, "label": p.label, "seq": p.seq_length, "gpus": p.gpus, "gpu": p.gpu,
                     "batch": p.batch_size, "tp": p.tensor_parallel, "cp": p.context_parallel,
                     "precision": p.precision, "measured": p.tokens_per_s_per_gpu,
                     "predicted": round(got.tokens_per_second_per_gpu, 1),
                     "band": [round(b, 1) for b in got.band], "error": round(error, 4), "kind": kind,
                     "inside_band": got.band[0] <= p.tokens_per_s_per_gpu <= got.band[1], "url": p.url})
    return rows


def summary(rows: list[dict]) -> dict:
    out = {}
    for kind, goal in GOALS.items():
        errs = sorted(abs(r["error"]) for r in rows if r["kind"] == kind)
        if not errs:
            out[kind] = {"points": 0, "goal": goal}
            continue
        inside = sum(r["inside_band"] for r in rows if r["kind"] == kind)
        out[kind] = {"points": len(errs), "goal": goal, "median": statistics.median(errs),
                     "p90": errs[min(len(errs) - 1, int(0.9 * len(errs)))], "max": errs[-1],
                     "within_goal": sum(e <= goal for e in errs), "inside_band": inside}
    by_source = {}
    for source in sorted({r["source"] for r in rows}):
        errs = [abs(r["error"]) for r in rows if r["source"] == source]
        by_source[source] = {"points": len(errs), "median": statistics.median(errs), "max": max(errs)}
    out["by_source"] = by_source
    return out


def jobs_table() -> list[dict]:
    from launcher.api import build_plan, load_spec

    env = {"SMP_LAUNCH_BUCKET": "bench-bucket", "XDG_STATE_HOME": "/nonexistent/bench-state"}
    out = []
    for path in sorted((REPO / "jobs").glob("*.yaml")):
        plan = build_plan(load_spec(str(path), env=env), env=env)
        data = plan.to_dict()
        out.append({"job": path.name, "performance": data["performance"], "cost": data["cost"]})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", action="store_true", help="print every point's leave-one-out row")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = leave_one_out()
    took = time.perf_counter() - start
    s = summary(rows)
    print(f"step-time model, leave-one-out over {len(rows)} published points ({took:.1f} s)")
    for kind, goal in GOALS.items():
        k = s[kind]
        if not k["points"]:
            print(f"  {kind:8} communication: no point (goal within {goal:.0%})")
            continue
        ok = k["within_goal"] == k["points"] and k["inside_band"] == k["points"]
        print(f"  {kind:8} communication: {k['points']} points, |error| median {k['median']:.1%}, p90 {k['p90']:.1%}, "
              f"max {k['max']:.1%}; within {goal:.0%}: {k['within_goal']}/{k['points']}; inside the band: "
              f"{k['inside_band']}/{k['points']} {'(goal met)' if ok else '(goal not met for every point)'}")
    for source, b in s["by_source"].items():
        print(f"  {source:11} {b['points']:4} points, |error| median {b['median']:.1%}, max {b['max']:.1%}")
    misses = [r for r in rows if abs(r["error"]) > GOALS[r["kind"]] or not r["inside_band"]]
    print(f"points outside the goal or the band ({len(misses)}):")
    for r in (rows if args.points else misses):
        print(f"  {r['source']:11} {r['label']:30} seq {r['seq']:6} {r['gpus']:4} x {r['gpu']:10} batch {r['batch']:3} "
              f"{r['precision']:4} measured {r['measured']:9,.0f} predicted {r['predicted']:9,.0f} "
              f"({r['error']:+.1%}) band {r['band'][0]:,.0f}-{r['band'][1]:,.0f}"
              f"{'' if r['inside_band'] else ' OUTSIDE'}")
    jobs = jobs_table()
    print("jobs/ as `plan` predicts them:")
    for j in jobs:
        p, c = j["performance"], j["cost"]
        cost = f"${c['usd']:,.0f} ({c['price_source']}, {c['price_date']})" if c["usd"] is not None else (
            f"cost: cannot tell ({c['note']})")
        hours = p["time_to_train_seconds"] / 3600
        print(f"  {j['job']:16} {p['tokens_per_second_per_gpu']:8,.0f} tok/s/GPU (band {p['band'][0]:,.0f}-"
              f"{p['band'][1]:,.0f}), MFU {p['mfu']:.1%}, {p['bound']}-bound, {hours:,.1f} h "
              f"for {p['time_to_train']['steps']:,} steps; {cost}")
    results = REPO / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / "perf.json").write_text(json.dumps({"summary": s, "points": rows, "jobs": jobs}, indent=1) + "\n")
    print(f"saved {results / 'perf.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
