#!/usr/bin/env python3
"""PyTorch's own time for each GEMM and attention shape of a device profile.

    tests/pytorch/torch_kernel_profile.py PROFILE --out TORCH_PROFILE [--device cuda|cpu]
                                          [--shrink N] [--repeat R]

PROFILE is a `shardscope profile-device` file (shardscope.device_profile/1 or /2): the distinct GEMM and
attention shapes a scenario runs, each timed by shardscope's own CUDA runners (cuBLASLt's first
heuristic choice, the flash kernel). This script times the same shapes the way a training step
runs them, through PyTorch: `torch.matmul` on operands laid out as the IR says (transpose_a: A is
stored k × m; transpose_b: B is stored n × k, as nn.Linear's weight), and
`F.scaled_dot_product_attention` forward, and its backward alone (autograd.grad of a kept graph).
Each time is the median of R runs after warm-up, by CUDA events on a GPU.

It writes TORCH_PROFILE in the same schema, with PyTorch's times in place of shardscope's and the
rest of the profile (bandwidths, overheads) unchanged but for the times beside held SMs, which it
leaves out (contended_sms 0: PyTorch's kernels were not timed beside them), so `simulate --device-profile
TORCH_PROFILE` prices the scenario with PyTorch's kernels, and it prints both times per shape.
The ground truth for the per-shape kernel model is what PyTorch takes, not what shardscope's
runners take.

--device cpu --shrink N times every shape divided by N (at least 1) on the CPU: the GPU campaign's
dry run, which checks the script and its output's schema where there is no GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def timer(device: str):
    """A function that times `fn` once, in seconds: CUDA events on a GPU, the clock on a CPU."""
    import torch

    if device == "cuda":
        def once(fn) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
        return once

    def once_cpu(fn) -> float:
        started = time.perf_counter()
        fn()
        return time.perf_counter() - started
    return once_cpu


def times_ns(fn, device: str, runs: int) -> list[int]:
    """`runs` timings of fn in ns, fastest first, after two warm-up runs (cuBLAS's heuristics,
    SDPA's kernel choice, the caching allocator)."""
    once = timer(device)
    for _ in range(2):
        once(fn)
    return sorted(round(1e9 * once(fn)) for _ in range(runs))


def median_ns(fn, device: str, repeat: int) -> int:
    return round(statistics.median(times_ns(fn, device, repeat)))


def shrunk(shape: dict, dims: tuple[str, ...], shrink: int) -> dict:
    """The shape with each of `dims` divided by `shrink` (at least 1)."""
    return dict(shape, **{d: max(1, shape[d] // shrink) for d in dims})


GEMM_DIMS = ("m", "n", "k", "batch")
ATTENTION_DIMS = ("q_len", "kv_len")


def gemm_ns(g: dict, device: str, repeat: int) -> int:
    import torch

    dtype = getattr(torch, DTYPES[g["input"]])
    m, n, k, batch = (g[d] for d in GEMM_DIMS)
    shape_a = (k, m) if g["transpose_a"] else (m, k)
    shape_b = (n, k) if g["transpose_b"] else (k, n)
    a = torch.randn(batch, *shape_a, device=device, dtype=dtype)
    b = torch.randn(batch, *shape_b, device=device, dtype=dtype)
    a = a.transpose(-1, -2) if g["transpose_a"] else a
    b = b.transpose(-1, -2) if g["transpose_b"] else b
    if batch == 1:
        a, b = a[0], b[0]
    return median_ns(lambda: torch.matmul(a, b), device, repeat)


def attention_ns(at: dict, device: str, repeat: int) -> int:
    import torch
    import torch.nn.functional as F

    dtype = getattr(torch, DTYPES[at["dtype"]])
    batch, heads, kv_heads = at["batch"], at["heads"], at["kv_heads"]
    q_len, kv_len = at["q_len"], at["kv_len"]

    def leaf(h: int, s: int):
        return torch.randn(batch, h, s, at["head_dim"], device=device, dtype=dtype,
                           requires_grad=at["backward"])
    q, k, v = leaf(heads, q_len), leaf(kv_heads, kv_len), leaf(kv_heads, kv_len)

    def forward():
        return F.scaled_dot_product_attention(q, k, v, is_causal=at["causal"],
                                              enable_gqa=kv_heads != heads)
    if not at["backward"]:
        with torch.no_grad():
            return median_ns(forward, device, repeat)
    out = forward()
    grad = torch.randn_like(out)
    return median_ns(lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True),
                     device, repeat)


def describe_gemm(g: dict) -> str:
    t = ("ᵀ" if g["transpose_a"] else "") + "·" + ("ᵀ" if g["transpose_b"] else "")
    return f"GEMM {g['m']}×{g['n']}×{g['k']}" + (f" ×{g['batch']}" if g["batch"] > 1 else "") + \
        f" {t} {g['input']}"


def describe_attention(a: dict) -> str:
    return (f"SDPA {'backward' if a['backward'] else 'forward'} b{a['batch']} h{a['heads']}/"
            f"{a['kv_heads']} s{a['q_len']}×{a['kv_len']} d{a['head_dim']}"
            f"{' causal' if a['causal'] else ''} {a['dtype']}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("profile", type=Path, help="a shardscope profile-device file")
    p.add_argument("--out", type=Path, required=True, help="the profile with PyTorch's times")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--shrink", type=int, default=1,
                   help="divide every dimension by this (the CPU dry run)")
    p.add_argument("--repeat", type=int, default=10, help="timed runs per shape (median)")
    args = p.parse_args()
    if args.shrink < 1 or args.repeat < 1:
        p.error("--shrink and --repeat are at least 1")
    try:
        profile = json.loads(args.profile.read_text())
    except (OSError, ValueError) as e:
        print(f"error: {args.profile}: {e}", file=sys.stderr)
        return 2
    schemas = ("shardscope.device_profile/1", "shardscope.device_profile/2")
    if profile.get("schema") not in schemas:
        print(f"error: {args.profile}: schema is {profile.get('schema')!r}, not one of "
              f"{', '.join(repr(s) for s in schemas)}", file=sys.stderr)
        return 2
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA device is usable here", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    device_name = (torch.cuda.get_device_name() if args.device == "cuda" else "cpu")
    out = dict(profile, device=f"{device_name} (PyTorch {torch.__version__})")
    out["gemms"], out["attention"] = [], []
    if "contended_sms" in out:
        out["contended_sms"] = 0
    print(f"{'shape':58} {'shardscope':>12} {'PyTorch':>12} {'PyTorch vs shardscope':>22}")
    # A shrunk shape is written as it was timed, so the profile never claims a shape it did not
    # measure (a dry run's output prices nothing of the full scenario).
    rows = ([("gemms", g, shrunk(g, GEMM_DIMS, args.shrink), describe_gemm, gemm_ns)
             for g in profile.get("gemms", [])] +
            [("attention", a, shrunk(a, ATTENTION_DIMS, args.shrink), describe_attention,
              attention_ns) for a in profile.get("attention", [])])
    for key, theirs, shape, describe, measure in rows:
        ns = measure(shape, args.device, args.repeat)
        shape.pop("contended_time_ns", None)
        out[key].append(dict(shape, time_ns=ns))
        was = theirs["time_ns"]
        ratio = f"{100 * (ns - was) / was:+.1f} %" if args.shrink == 1 and was else "-"
        print(f"{describe(shape):58} {was / 1e6:9.3f} ms {ns / 1e6:9.3f} ms {ratio:>22}",
              flush=True)
    tmp = args.out.with_suffix(".partial")
    tmp.write_text(json.dumps(out, indent=2) + "\n")
    tmp.replace(args.out)
    print(f"wrote {args.out}: {len(out['gemms'])} GEMMs and {len(out['attention'])} attention "
          f"shapes timed by PyTorch on {device_name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
