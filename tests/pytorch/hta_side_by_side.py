#!/usr/bin/env python3
"""HolisticTraceAnalysis and `shardscope breakdown` on the same traces, side by side.

    hta_side_by_side.py [--trace TEXT] [--markdown]

For each trace (HTA's own test traces in tests/data/traces/hta/ and traces/samples/), each
tool runs in its own process, timed (wall clock) and measured (peak RSS of that process):
  * HTA 0.5: TraceAnalysis(include_last_profiler_step=True) — every profiled step, as shardscope
    imports them — then get_temporal_breakdown, get_comm_comp_overlap and
    get_gpu_kernel_breakdown(include_memory_kernels=True);
  * shardscope: `shardscope breakdown TRACE --json` (the same quantities with HTA's definitions,
    core/include/shardscope/core/time_breakdown.hpp).
HTA rounds traces of nanosecond resolution to whole microseconds, each event's start up and its
end down ("due to issue with events overlapping", pytorch#122425), which shortens every kernel by
up to 2 us; it runs once as it comes and once with HTA_DISABLE_NS_ROUNDING=1, and it is that run
the numbers are held to. They agree when every time (idle, compute, non-compute, each kernel
type's) is within 1 % of the rank's span (HTA's denominator for its percentages) and the overlap
within 1 percentage point. A trace HTA cannot analyse (a CPU-only trace has no GPU kernels) is
reported with HTA's error. Exit 1 if any analysed trace disagrees.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from shardscope_torch import shardscope  # noqa: E402

HTA_TRACES = REPO / "tests" / "data" / "traces" / "hta"
TOLERANCE = 0.01  # of the span; the overlap in percentage points / 100

# What HTA computes, as JSON on stdout, in microseconds.
HTA_PROGRAM = r"""
import json, sys, time, warnings, logging
warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)
started = time.monotonic()
from hta.trace_analysis import TraceAnalysis
imported = time.monotonic()
try:
    ta = TraceAnalysis(trace_files={0: sys.argv[1]}, trace_dir="/tmp",
                       include_last_profiler_step=True)
    t = ta.get_temporal_breakdown(visualize=False).iloc[0]
    o = ta.get_comm_comp_overlap(visualize=False).iloc[0]
    types, _ = ta.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
    out = {"span": float(t["kernel_time(us)"]), "idle": float(t["idle_time(us)"]),
           "compute": float(t["compute_time(us)"]),
           "non_compute": float(t["non_compute_time(us)"]),
           "overlap": float(o["comp_comm_overlap_pctg"]) / 100,
           "by_type": {r["kernel_type"].lower(): float(r["sum"]) for _, r in types.iterrows()}}
except Exception as e:
    out = {"error": f"{type(e).__name__}: {e}"}
out["analysis_s"] = time.monotonic() - imported
print(json.dumps(out))
"""


def traces() -> list[Path]:
    return sorted(HTA_TRACES.glob("*.json.gz")) + sorted((REPO / "traces" / "samples").glob("*.json.gz"))


def measured(command: list[str], env: dict | None = None) -> tuple[str, float, int]:
    """stdout, wall seconds and peak RSS (bytes) of one process."""
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})}, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}")
    return out, seconds, usage.ru_maxrss * 1024


def run_hta(trace: Path, rounding: bool) -> dict:
    env = {} if rounding else {"HTA_DISABLE_NS_ROUNDING": "1"}
    out, seconds, rss = measured([sys.executable, "-c", HTA_PROGRAM, str(trace)], env)
    return {**json.loads(out), "seconds": seconds, "rss": rss}


def run_shardscope(trace: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "breakdown.json"
        _, seconds, rss = measured([shardscope.cli(), "breakdown", str(trace), "--json",
                                    str(path)])
        run = json.loads(path.read_text())["runs"][0]
    us = 1e-3
    return {"span": run["span_ns"] * us, "idle": run["idle_ns"] * us,
            "compute": run["compute_ns"] * us, "non_compute": run["non_compute_ns"] * us,
            "overlap": run["comm_comp_overlap"] or 0.0,
            "by_type": {k[:-3]: v * us for k, v in run["by_type"].items()},
            "seconds": seconds, "rss": rss}


def differences(hta: dict, ours: dict) -> list[str]:
    """What differs beyond the tolerance, one line each."""
    span = max(hta["span"], 1e-9)
    out = []
    for key in ("span", "idle", "compute", "non_compute"):
        if abs(hta[key] - ours[key]) > TOLERANCE * span:
            out.append(f"{key}: HTA {hta[key]:.0f} us, shardscope {ours[key]:.0f} us")
    if abs(hta["overlap"] - ours["overlap"]) > TOLERANCE:
        out.append(f"overlap: HTA {100 * hta['overlap']:.2f} %, "
                   f"shardscope {100 * ours['overlap']:.2f} %")
    for kind in sorted(set(hta["by_type"]) | set(ours["by_type"])):
        a, b = hta["by_type"].get(kind, 0.0), ours["by_type"].get(kind, 0.0)
        if abs(a - b) > TOLERANCE * span:
            out.append(f"{kind}: HTA {a:.0f} us, shardscope {b:.0f} us")
    return out


def largest_delta(hta: dict, ours: dict) -> float:
    """The largest time difference in % of the span (the overlap's in percentage points)."""
    span = max(hta["span"], 1e-9)
    deltas = [abs(hta[k] - ours[k]) / span for k in ("span", "idle", "compute", "non_compute")]
    deltas.append(abs(hta["overlap"] - ours["overlap"]))
    for kind in set(hta["by_type"]) | set(ours["by_type"]):
        deltas.append(abs(hta["by_type"].get(kind, 0.0) - ours["by_type"].get(kind, 0.0)) / span)
    return 100 * max(deltas)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--trace", default="", help="only traces whose name contains this text")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = p.parse_args()
    chosen = [t for t in traces() if args.trace in t.name]
    if not chosen:
        print(f"no trace matches {args.trace!r}", file=sys.stderr)
        return 2
    rows, failed = [], 0
    totals = {"hta": 0.0, "ours": 0.0, "hta_rss": 0, "ours_rss": 0}
    for trace in chosen:
        print(f"{trace.name} ...", file=sys.stderr, flush=True)
        hta = run_hta(trace, rounding=False)
        default = run_hta(trace, rounding=True)
        ours = run_shardscope(trace)
        if "error" in hta:
            verdict = f"HTA cannot analyse it ({hta['error'][:80]}); shardscope: " \
                      f"compute {ours['compute'] / 1e3:.1f} ms of {ours['span'] / 1e3:.1f} ms"
        else:
            problems = differences(hta, ours)
            failed += bool(problems)
            rounded = largest_delta(default, ours)
            verdict = ("; ".join(problems) if problems else
                       f"agree: largest difference {largest_delta(hta, ours):.3f} % "
                       f"(HTA's default rounding: {rounded:.2f} %)")
            totals["hta"] += hta["seconds"]
            totals["ours"] += ours["seconds"]
            totals["hta_rss"] = max(totals["hta_rss"], hta["rss"])
            totals["ours_rss"] = max(totals["ours_rss"], ours["rss"])
        rows.append((trace.name, hta, ours, verdict, "error" not in hta and problems))
    line = "| trace | HTA | shardscope | time ratio | peak RSS, HTA / shardscope | result |" \
        if args.markdown else ""
    if args.markdown:
        print(line)
        print("|---|---|---|---|---|---|")
    for name, hta, ours, verdict, bad in rows:
        ratio = hta["seconds"] / ours["seconds"]
        cells = (name, f"{hta['seconds']:.2f} s", f"{ours['seconds']:.2f} s", f"{ratio:.1f}×",
                 f"{hta['rss'] / 2**20:.0f} / {ours['rss'] / 2**20:.0f} MiB", verdict)
        if args.markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print(f"{'FAIL' if bad else 'ok  '} {name}: HTA {cells[1]}, shardscope {cells[2]} "
                  f"({cells[3]} faster), peak RSS {cells[4]}: {verdict}")
    if totals["ours"] > 0:
        print(f"analysed traces: HTA {totals['hta']:.2f} s, shardscope {totals['ours']:.2f} s "
              f"({totals['hta'] / totals['ours']:.1f}× faster); peak RSS HTA "
              f"{totals['hta_rss'] / 2**20:.0f} MiB, shardscope {totals['ours_rss'] / 2**20:.0f} "
              f"MiB")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
