#!/usr/bin/env python3
"""Where memory runs out: one job set up as llm-foundry's MPT runs were (FSDP1 FULL_SHARD, fp32
parameters with bf16 reduction, bf16 autocast, full activation checkpointing, the fused loss,
BACKWARD_POST prefetch, limit_all_gathers) on GPT-2 XL's shape with llm-foundry's low-precision
LayerNorm, trained on the GPU as rank 0 of a fake process group of 8 while the caching allocator
is given less and less memory, beside shardscope's allocator model.

    tests/pytorch/memory_edge.py --measure --out EDGE.csv      (needs a CUDA GPU)
    tests/pytorch/memory_edge.py --check EDGE.csv              (needs the shardscope binary)
    tests/pytorch/memory_edge.py --list

--measure runs the job once with the whole GPU, then with torch.cuda.set_per_process_memory_fraction
capping what the allocator may reserve at each of CAPACITIES × the first run's peak reserved
memory, each run in a fresh process (the cap and the allocator's cache belong to the process).
Per run it writes the cap (a fraction of the device's total memory), whether the job ran out of
memory, its peak allocated and reserved bytes, num_alloc_retries per step after the first and the
median step time after the first.

--check simulates each row (the job the CSV's first line names) with allocator.memory_fraction at
the same fraction of the same device memory and prints, row by row, measured beside predicted:
out of memory or not, retries per step, peak reserved; and the step time each cap cost against
the uncapped run, which the simulator does not price (a retry's device synchronisation and cudaFree/cudaMalloc calls: docs/semantics.md).
That cost is what the published MPT runs at the edge of memory may have paid
(docs/validation.md, "Published training runs"); this measures it where it can be seen. Exit 0
unless a run or a simulation failed: the rows are data, not a pass/fail oracle yet.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import memory_oracle as oracle  # noqa: E402  (puts scripts/ on the path too)
from shardscope_torch import shardscope  # noqa: E402

WORLD = 8
ROW = oracle.row("gpt2-xl-lpln fsdp1 2048x4 ga2 full fused", "gpt2-xl-lpln", world=WORLD,
                 fsdp__api="fsdp1", fsdp__mixed_precision__param_dtype="fp32",
                 fsdp__mixed_precision__reduce_dtype="bf16",
                 fsdp__backward_prefetch="BACKWARD_POST", fsdp__limit_all_gathers=True,
                 training__autocast="bf16", training__activation_checkpointing="full",
                 training__loss="fused", training__seq_len=2048, training__micro_batch=4,
                 training__grad_accum=2, training__iterations=3)
# Caps as multiples of the uncapped run's peak reserved memory: from room to spare, through the
# point where the cache must be released (below 1), to where the allocated peak no longer fits
# (the simulator releases the cache once, in the first step, from 0.98 down, and runs out of
# memory from 0.86). Eleven runs of three steps: about 3 minutes on an H200, most of it each
# process's start.
CAPACITIES = (1.02, 1.0, 0.98, 0.96, 0.94, 0.92, 0.9, 0.88, 0.86, 0.84)
COLUMNS = ("multiple", "fraction", "total_bytes", "out_of_memory", "peak_allocated_bytes",
           "peak_reserved_bytes", "retries_per_step", "step_ms", "device")


def edge_rank(rank: int, world: int, port: int, fraction: float, out: str) -> None:
    """One run in this process: rank 0 of the fake process group of `world`, the allocator capped
    at `fraction` of the device (0: not capped)."""
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from shardscope_torch.memory import CudaPhasePeaks
    from shardscope_torch.ranks import finish_rank
    from shardscope_torch.train import train

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    total = torch.cuda.get_device_properties(0).total_memory
    if fraction > 0:
        torch.cuda.set_per_process_memory_fraction(fraction)
    result = {"fraction": fraction, "total_bytes": total, "device": torch.cuda.get_device_name()}
    try:
        job = oracle.row_job(ROW, "cuda")
        peaks = CudaPhasePeaks()
        train(job.model, job.fsdp, job.training, job.shape.vocab, torch.device("cuda"),
              peaks.set_phase, optimizer=job.optimizer, on_step=peaks.step_done)
        steady = peaks.step_ms[1:]
        retries = peaks.retries_by_step
        result.update(out_of_memory=False,
                      peak_allocated_bytes=max(peaks.allocated.values()),
                      peak_reserved_bytes=max(peaks.reserved.values()),
                      retries_per_step=(retries[-1] - retries[0]) / (len(retries) - 1),
                      step_ms=statistics.median(steady))
    except torch.cuda.OutOfMemoryError:
        result.update(out_of_memory=True, peak_allocated_bytes="", peak_reserved_bytes="",
                      retries_per_step="", step_ms="")
    Path(out).write_text(json.dumps(result))
    finish_rank()


def run(fraction: float) -> dict:
    from shardscope_torch.ranks import spawn

    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "run.json")
        spawn(edge_rank, WORLD, fraction, out, processes=1)
        return json.loads(Path(out).read_text())


def measure(path: Path) -> int:
    loose = run(0.0)
    if loose["out_of_memory"]:
        print(f"error: the job does not fit the whole {loose['device']}", file=sys.stderr)
        return 1
    rows = [{"multiple": "", **loose}]
    print(f"  uncapped: {loose['step_ms']:.1f} ms a step, "
          f"{loose['peak_reserved_bytes'] / 2**30:.2f} GiB reserved", file=sys.stderr, flush=True)
    for multiple in CAPACITIES:
        fraction = loose["peak_reserved_bytes"] * multiple / loose["total_bytes"]
        r = run(fraction)
        rows.append({"multiple": multiple, **r})
        print(f"  {multiple:.2f} × reserved: "
              + ("out of memory" if r["out_of_memory"] else
                 f"{r['step_ms']:.1f} ms a step, {r['retries_per_step']:g} retries a step"),
              file=sys.stderr, flush=True)
    with path.open("w", newline="") as f:
        f.write(f"# written by tests/pytorch/memory_edge.py --measure; row: "
                f"{json.dumps(ROW, sort_keys=True)}\n")
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return 0


def read(path: Path) -> tuple[dict, list[dict]]:
    """The job the CSV measured (its first line names it) and its rows."""
    with path.open() as f:
        first = f.readline()
        f.seek(0)
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    marker = "; row: "
    job = json.loads(first.split(marker, 1)[1]) if marker in first else ROW
    return job, rows


def predicted(job: dict, row: dict) -> dict:
    keys = oracle.scenario_keys(job, "cuda")
    keys["cluster.gpu.memory"] = f"{row['total_bytes']}B"
    if float(row["fraction"]) > 0:
        keys["allocator.memory_fraction"] = row["fraction"]
    return shardscope.simulate(keys)


def check(path: Path) -> int:
    job, rows = read(path)
    base_ms = float(rows[0]["step_ms"])
    print(f"{job['name']} on {rows[0]['device']}, the allocator capped at multiples of the "
          f"uncapped run's peak reserved memory; measured / predicted")
    print(f"{'cap':>6}  {'out of memory':>13}  {'retries a step':>14}  {'peak reserved':>19}  "
          f"step time (what the cap cost)")
    for r in rows:
        s = predicted(job, r)
        oom = r["out_of_memory"] == "True", s.get("out_of_memory") is not None
        retries_p = s.get("allocator_retries_per_step")
        reserved_p = f"{s['peak_memory']['reserved_bytes'] / 2**30:.2f}"
        cap = f"{float(r['multiple']):.2f}×" if r["multiple"] else "none"
        if oom[0]:
            retries_m, reserved_m, cost = "—", "—", "—"
        else:
            retries_m = f"{float(r['retries_per_step']):g}"
            reserved_m = f"{int(r['peak_reserved_bytes']) / 2**30:.2f}"
            ms = float(r["step_ms"])
            cost = f"{ms:.0f} ms ({100 * (ms / base_ms - 1):+.1f} %)"
        yes = ("no", "yes")
        print(f"{cap:>6}  {yes[oom[0]] + ' / ' + yes[oom[1]]:>13}  "
              f"{retries_m + ' / ' + ('unknown' if retries_p is None else f'{retries_p:g}'):>14}  "
              f"{reserved_m + ' / ' + reserved_p + ' GiB':>19}  {cost}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--measure", action="store_true", help="run the job on the GPU")
    what.add_argument("--check", type=Path, metavar="CSV", help="simulate a measured CSV's rows")
    what.add_argument("--list", action="store_true", help="print the job and the caps")
    p.add_argument("--out", type=Path, help="--measure: the CSV to write")
    args = p.parse_args()
    if args.list:
        print(ROW["name"])
        print("  " + json.dumps(oracle.scenario_keys(ROW, "cuda"), sort_keys=True))
        print("  caps (× the uncapped peak reserved): " + ", ".join(f"{c:g}" for c in CAPACITIES))
        return 0
    if args.measure:
        if args.out is None:
            p.error("--measure needs --out")
        return measure(args.out)
    return check(args.check)


if __name__ == "__main__":
    sys.exit(main())
