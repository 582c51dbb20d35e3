#!/usr/bin/env python3
"""Where a real FSDP2 step's GPU time goes, by kernel class: what a per-shape kernel model must
account for beyond GEMMs and attention.

    tests/pytorch/step_kernel_breakdown.py --out BREAKDOWN.json [--grid G] [--row NAME]
                                           [--device cuda|cpu]

Runs one memory-oracle row (default: the default scenario's job, `--grid llama-8b`, its first row)
on this process's GPU as rank 0 of the fake process group, as `memory_oracle.py --device cuda`
does, for three steps, and profiles the third with torch.profiler. It writes the summed device
time per phase (forward, backward, optimizer: each a profiler range) and kernel class (GEMM,
attention, element-wise, reductions, copies, optimizer, other), every kernel's time by name and
phase, the step's span and the GPU's busy time, so the step time a simulation predicts can be
taken apart the same way. --device cpu runs the row's CPU counterpart
(a small row, CPU activity only): the dry run of the script.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import memory_oracle

# A kernel's class from its name (CUDA kernel names as PyTorch 2.11's CUDA 13 build launches
# them); the first class whose words match wins.
CLASSES = (
    ("attention", ("flash", "fmha", "cudnn", "attention")),
    ("gemm", ("gemm", "nvjet", "cutlass", "xmma", "sm90_", "sm100_", "cublas")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    ("copy", ("memcpy", "memset", "copy", "cat", "split", "chunk")),
    ("reduction", ("reduce", "softmax", "norm", "nll", "cross_entropy", "logsumexp")),
    ("element-wise", ("elementwise", "vectorized", "unrolled", "pointwise", "silu", "mul", "add")),
)


def kernel_class(name: str) -> str:
    low = name.lower()
    for cls, words in CLASSES:
        if any(w in low for w in words):
            return cls
    return "other"


PHASE = "shardscope.phase."


class PhaseRanges:
    """train()'s phases callback: one profiler range per phase, the previous one closed."""

    def __init__(self):
        self._open = None

    def enter(self, phase: str, iteration: int, microbatch: int) -> None:
        import torch

        self.close()
        self._open = torch.profiler.record_function(PHASE + phase)
        self._open.__enter__()

    def close(self) -> None:
        if self._open is not None:
            self._open.__exit__(None, None, None)
            self._open = None


def summarize(events, on_gpu: bool) -> dict:
    """Device time per phase and kernel class, and per kernel name, of the profiled step. On the
    CPU (the dry run) the operators stand in for kernels, each by its own time."""
    device = "CUDA" if on_gpu else "CPU"
    phases = sorted((e.time_range.start, e.time_range.end, e.name[len(PHASE):]) for e in events
                    if e.device_type.name == device and e.name.startswith(PHASE))
    # GPU user annotations (ProfilerStep#, Optimizer.step#, the phases) span kernels; they are
    # not kernels.
    kernels = [e for e in events if e.device_type.name == device
               and not getattr(e, "is_user_annotation", False)
               and not e.name.startswith(("ProfilerStep", PHASE))]

    def phase_of(start: float) -> str:
        for begin, end, name in phases:
            if begin <= start <= end:
                return name
        return "outside"

    by_phase: dict[str, dict[str, float]] = {}
    by_name: dict[tuple[str, str], float] = {}
    for e in kernels:
        us = e.device_time_total if on_gpu else e.self_cpu_time_total
        phase, cls = phase_of(e.time_range.start), kernel_class(e.name)
        by_phase.setdefault(phase, {})
        by_phase[phase][cls] = by_phase[phase].get(cls, 0.0) + us
        by_name[(e.name[:200], phase)] = by_name.get((e.name[:200], phase), 0.0) + us
    spans = sorted((e.time_range.start, e.time_range.end) for e in kernels)
    busy, end = 0.0, float("-inf")
    for start, stop in spans:  # the union of the kernels' intervals
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    by_class: dict[str, float] = {}
    for classes in by_phase.values():
        for cls, us in classes.items():
            by_class[cls] = by_class.get(cls, 0.0) + us

    def ms(us: float) -> float:
        return round(us / 1e3, 3)
    return {
        "profiled_step_span_ms": ms(spans[-1][1] - spans[0][0]) if spans else 0.0,
        "gpu_busy_ms": ms(busy),
        "kernel_ms_by_class": {k: ms(v) for k, v in sorted(by_class.items())},
        "kernel_ms_by_phase_and_class": {p: {k: ms(v) for k, v in sorted(c.items())}
                                         for p, c in sorted(by_phase.items())},
        # Every kernel name, longest first: [name, phase, ms].
        "kernels_ms": [[n, p, ms(v)] for (n, p), v in
                       sorted(by_name.items(), key=lambda kv: (-kv[1], kv[0]))],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--grid", default="llama-8b", choices=sorted(memory_oracle.GRIDS))
    p.add_argument("--row", default="", help="a row's name (default: the grid's first)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = p.parse_args()
    rows = memory_oracle.GRIDS[args.grid]()
    chosen = [r for r in rows if not args.row or r["name"] == args.row]
    if not chosen:
        print(f"error: --row {args.row!r}: not in --grid {args.grid}", file=sys.stderr)
        return 2
    r = dict(chosen[0])
    r["keys"] = dict(r["keys"], **{"training.iterations": "3"})
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from shardscope_torch.train import train

    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA device is usable here", file=sys.stderr)
        return 2
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=r["world"])
    job = memory_oracle.row_job(r, args.device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda"
                                           else [])
    # Each phase of the loop (forward, backward, optimizer) is a profiler range, so that every
    # kernel is attributed to the phase that launched it (the GPU sees the range as an
    # annotation around the kernels launched inside it).
    ranges = PhaseRanges()
    with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=1)) as prof:
        def step_done(iteration: int) -> None:
            ranges.close()
            prof.step()
        train(job.model, job.fsdp, job.training, job.shape.vocab, torch.device(args.device),
              ranges.enter, optimizer=job.optimizer, on_step=step_done)
    out = summarize(prof.events(), args.device == "cuda")
    out = {"row": r["name"], "keys": job.keys,
           "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
           "torch": torch.__version__, **out}
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    classes = ", ".join(f"{k} {v:.1f}" for k, v in out["kernel_ms_by_class"].items())
    print(f"wrote {args.out}: {r['name']}: step {out['profiled_step_span_ms']:.1f} ms, device busy "
          f"{out['gpu_busy_ms']:.1f} ms; by class (ms): {classes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
