#!/usr/bin/env python3
"""PyTorch's kernel times over a grid of shapes: the data a per-shape kernel model is fitted to.

    tests/pytorch/kernel_sweep.py --out SWEEP.csv [--device cuda|cpu] [--shrink N] [--repeat R]
                                  [--jitter-runs J]

Every row is one operation as a training step runs it through PyTorch, timed by CUDA events (the
median, fastest and slowest of R runs after two warm-up runs):
  gemm       torch.matmul in bf16 (and fp32) over square sizes, the Llama 3 8B/70B projections at
             512 to 16,384 tokens, MPT 125M/350M's small-k projections at 53,248 and 65,536 tokens,
             thin (decode-like) M, an N sweep across one wave of the SMs, and the backward layouts
             (dX: no transposes; dW: A transposed)
  attention  F.scaled_dot_product_attention forward and backward (autograd.grad of a kept graph),
             65,536 tokens per call at sequence lengths 512 to 65,536, head dimension 64 and 128,
             causal and not, grouped-query and not
  memory     memory-bound kernels from 256 Ki to 256 Mi elements: a bf16→fp32 cast, a bf16 add,
             RMSNorm (F.rms_norm over 4,096), SwiGLU's silu(a)·b, the fused AdamW step on fp32
             parameters, an fp32→bf16 cast and the foreach AdamW step: their bytes moved per
             second and the per-launch floor
  jitter     a few shapes run J times: the spread of one kernel's time on one GPU (p50/p95/p99)

Columns: kind, op, shape, dtype, flops, bytes, runs, median_ns, min_ns, max_ns, p95_ns, p99_ns
(flops: the multiply-adds × 2 the op performs, causal attention counting the half it computes;
bytes: what the op must read and write at least; p95/p99 only for jitter rows). The first lines
are `#` comments naming the device, PyTorch and CUDA versions.

--device cpu --shrink N divides every size by N and times it on the CPU: the GPU campaign's dry
run, which checks the script and its output where there is no GPU.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

from torch_kernel_profile import times_ns

COLUMNS = ("kind", "op", "shape", "dtype", "flops", "bytes", "runs", "median_ns", "min_ns",
           "max_ns", "p95_ns", "p99_ns")
ELEMENT_BYTES = {"bf16": 2, "fp32": 4}

# Llama 3's projections (n, k) per model: q/o, k/v, gate/up, down, the LM head.
LLAMA_PROJECTIONS = {
    "llama3-8b": ((4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336), (128256, 4096)),
    "llama3-70b": ((8192, 8192), (1024, 8192), (28672, 8192), (8192, 28672)),
}
TOKENS = (512, 1024, 2048, 4096, 8192, 16384)
# The small-k projections of llm-foundry's smallest MPT models (d_model 768 and 1,024: qkv, out,
# up, down) at the tokens per micro-batch of its A100 tables (26 × 2,048 and 64 × 1,024): where
# the kernel model's k = 1,024 rows of the H200 sweeps run 5–23 % slower than it predicts and
# those models' published runs 8–15 % slower (docs/validation.md).
MPT_PROJECTIONS = {
    "mpt-125m": ((2304, 768), (768, 768), (3072, 768), (768, 3072)),
    "mpt-350m": ((3072, 1024), (1024, 1024), (4096, 1024), (1024, 4096)),
}
MPT_TOKENS = (53248, 65536)
ATTENTION_TOKENS = 65536


def gemm_grid():
    """(op, m, n, k, transpose_a, transpose_b, dtype): nn.Linear's forward layout unless named."""
    for s in (256, 512, 1024, 2048, 4096, 8192, 16384):
        yield "square", s, s, s, False, True, "bf16"
    for s in (2048, 8192):
        yield "square", s, s, s, False, True, "fp32"
    # Each model's projections forward at each token count, and backward (dX, dW) at one.
    for models, tokens, backward_tokens in ((LLAMA_PROJECTIONS, TOKENS, 8192),
                                            (MPT_PROJECTIONS, MPT_TOKENS, MPT_TOKENS[0])):
        for model, projections in models.items():
            for n, k in projections:
                for m in tokens:
                    yield f"{model} forward", m, n, k, False, True, "bf16"
                yield f"{model} dX", backward_tokens, k, n, False, False, "bf16"
                yield f"{model} dW", n, k, backward_tokens, True, False, "bf16"
    for m in (1, 8, 32, 64, 128):
        for n, k in ((4096, 4096), (14336, 4096)):
            yield "thin", m, n, k, False, True, "bf16"
    for n in range(3840, 5120 + 1, 128):  # across the 132 SMs' wave boundary at 128×256 tiles
        yield "wave", 8192, n, 4096, False, True, "bf16"


def attention_grid():
    """(op, batch, heads, kv_heads, seq, head_dim, causal, backward)."""
    for head_dim, heads, kv_heads in ((128, 32, 8), (64, 16, 16)):
        for seq in (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536):
            for backward in (False, True):
                yield ("sdpa", ATTENTION_TOKENS // seq, heads, kv_heads, seq, head_dim, True,
                       backward)
    for seq in (2048, 8192):
        for backward in (False, True):
            yield "sdpa", ATTENTION_TOKENS // seq, 32, 8, seq, 128, False, backward


MEMORY_OPS = ("cast bf16->fp32", "add bf16", "rms_norm bf16", "swiglu bf16", "adamw fused fp32",
              "cast fp32->bf16", "adamw foreach fp32")


def memory_grid():
    for op in MEMORY_OPS:
        for log2 in range(18, 29, 2):
            yield op, 1 << log2


def gemm_row(spec, device, shrink):
    import torch

    op, m, n, k, ta, tb, dtype = spec
    m, n, k = (max(1, d // shrink) for d in (m, n, k))
    t = torch.bfloat16 if dtype == "bf16" else torch.float32
    a = torch.randn(*((k, m) if ta else (m, k)), device=device, dtype=t)
    b = torch.randn(*((n, k) if tb else (k, n)), device=device, dtype=t)
    a = a.t() if ta else a
    b = b.t() if tb else b
    size = ELEMENT_BYTES[dtype]
    layout = ("ᵀ" if ta else "") + "·" + ("ᵀ" if tb else "")
    return ("gemm", op, f"{m}x{n}x{k} {layout}", dtype, 2 * m * n * k,
            size * (m * k + k * n + m * n), lambda: torch.matmul(a, b))


def attention_row(spec, device, shrink):
    import torch
    import torch.nn.functional as F

    op, batch, heads, kv_heads, seq, head_dim, causal, backward = spec
    seq = max(1, seq // shrink)
    q = torch.randn(batch, heads, seq, head_dim, device=device, dtype=torch.bfloat16,
                    requires_grad=backward)
    k, v = (torch.randn(batch, kv_heads, seq, head_dim, device=device, dtype=torch.bfloat16,
                        requires_grad=backward) for _ in range(2))

    def forward():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                              enable_gqa=kv_heads != heads)
    # Forward: QKᵀ and PV, 2 × 2·s²·d per head; backward: 2.5 times that (dV, dP, dQ, dK and the
    # recomputed QKᵀ); causal computes half.
    flops = 4 * batch * heads * seq * seq * head_dim * (2.5 if backward else 1.0)
    flops = round(flops / (2 if causal else 1))
    qkv_bytes = 2 * batch * seq * head_dim * (2 * heads + 2 * kv_heads)
    shape = (f"b{batch} h{heads}/{kv_heads} s{seq} d{head_dim}{' causal' if causal else ''}")
    name = f"{op} {'backward' if backward else 'forward'}"
    if not backward:
        def fn():
            with torch.no_grad():
                forward()
        return "attention", name, shape, "bf16", flops, qkv_bytes, fn
    out = forward()
    grad = torch.randn_like(out)
    return ("attention", name, shape, "bf16", flops, 2 * qkv_bytes,
            lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True))


def memory_row(spec, device, shrink):
    import torch
    import torch.nn.functional as F

    op, n = spec
    n = max(4096, n // shrink)
    bf16 = dict(device=device, dtype=torch.bfloat16)
    if op == "cast bf16->fp32":
        x = torch.randn(n, **bf16)
        return "memory", op, str(n), "bf16", 0, 6 * n, lambda: x.float()
    if op == "cast fp32->bf16":  # PyTorch's vectorized narrowing copy (cuda/Copy.cu)
        x = torch.randn(n, device=device)
        return "memory", op, str(n), "fp32", 0, 6 * n, lambda: x.bfloat16()
    if op == "add bf16":
        x, y = torch.randn(n, **bf16), torch.randn(n, **bf16)
        return "memory", op, str(n), "bf16", n, 6 * n, lambda: x + y
    if op == "rms_norm bf16":
        x, w = torch.randn(n // 4096, 4096, **bf16), torch.ones(4096, **bf16)
        return "memory", op, str(n), "bf16", 4 * n, 4 * n, lambda: F.rms_norm(x, (4096,), w)
    if op == "swiglu bf16":
        x, y = torch.randn(n, **bf16), torch.randn(n, **bf16)
        return "memory", op, str(n), "bf16", 5 * n, 6 * n, lambda: F.silu(x) * y
    if op in ("adamw fused fp32", "adamw foreach fp32"):
        p = torch.nn.Parameter(torch.randn(n, device=device))
        p.grad = torch.randn(n, device=device)
        fused = device == "cuda" and op == "adamw fused fp32"
        opt = torch.optim.AdamW([p], lr=1e-4, fused=fused, foreach=not fused)
        opt.step()  # the moments exist before timing
        # Fused: reads parameter, gradient and both moments, writes parameter and both moments;
        # foreach: _multi_tensor_adam's passes, 20 accesses (core/include/shardscope/core/kernel.hpp).
        accesses = 7 if op == "adamw fused fp32" else 20
        return "memory", op, str(n), "fp32", 12 * n, 4 * accesses * n, opt.step
    raise ValueError(op)


JITTER = (("gemm", ("wave", 8192, 4096, 4096, False, True, "bf16")),
          ("gemm", ("llama3-8b forward", 8192, 14336, 4096, False, True, "bf16")),
          ("attention", ("sdpa", 8, 32, 8, 8192, 128, True, False)),
          ("memory", ("rms_norm bf16", 1 << 24)))


def percentile(sorted_ns: list[int], p: float) -> int:
    return sorted_ns[min(len(sorted_ns) - 1, int(p / 100 * len(sorted_ns)))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="the CSV to write")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--shrink", type=int, default=1, help="divide every size by this (dry run)")
    p.add_argument("--repeat", type=int, default=10, help="timed runs per shape")
    p.add_argument("--jitter-runs", type=int, default=300, help="timed runs per jitter shape")
    args = p.parse_args()
    if min(args.shrink, args.repeat, args.jitter_runs) < 1:
        p.error("--shrink, --repeat and --jitter-runs are at least 1")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA device is usable here", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    makers = {"gemm": gemm_row, "attention": attention_row, "memory": memory_row}
    work = ([("gemm", s, args.repeat, False) for s in gemm_grid()] +
            [("attention", s, args.repeat, False) for s in attention_grid()] +
            [("memory", s, args.repeat, False) for s in memory_grid()] +
            [(kind, s, args.jitter_runs, True) for kind, s in JITTER])
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    rows = []
    for i, (kind, spec, runs, jitter) in enumerate(work):
        _, op, shape, dtype, flops, nbytes, fn = makers[kind](spec, args.device, args.shrink)
        ns = times_ns(fn, args.device, runs)
        rows.append({"kind": "jitter" if jitter else kind, "op": op, "shape": shape, "dtype": dtype,
                     "flops": flops, "bytes": nbytes, "runs": runs,
                     "median_ns": round(statistics.median(ns)), "min_ns": ns[0], "max_ns": ns[-1],
                     "p95_ns": percentile(ns, 95) if jitter else "",
                     "p99_ns": percentile(ns, 99) if jitter else ""})
        rate = (f"{flops / statistics.median(ns) / 1e3:8.1f} TFLOP/s" if kind != "memory"
                else f"{nbytes / statistics.median(ns):8.1f} GB/s")
        print(f"[{i + 1:3}/{len(work)}] {rows[-1]['kind']:9} {op:22} {shape:28} {dtype:5} "
              f"{statistics.median(ns) / 1e3:11.1f} µs {rate}", flush=True)
        del fn
        if args.device == "cuda":
            torch.cuda.empty_cache()
    tmp = args.out.with_suffix(".partial")
    with open(tmp, "w", newline="") as f:
        f.write(f"# device: {device_name}; PyTorch {torch.__version__}; CUDA "
                f"{torch.version.cuda}; shrink {args.shrink}\n")
        f.write("# written by tests/pytorch/kernel_sweep.py "
                + " ".join(sys.argv[1:]).replace(str(args.out), "OUT") + "\n")
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(args.out)
    print(f"wrote {args.out}: {len(rows)} rows timed by PyTorch on {device_name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
