#!/usr/bin/env python3
"""Fit the per-shape kernel model (sim/include/shardscope/sim/kernel_shape_model.hpp) to
PyTorch's kernels measured on a GPU, and say how well it predicts what it was not fitted on.

    scripts/fit_kernel_shapes.py [SWEEP.csv] [--check]
    scripts/fit_kernel_shapes.py --import-xla matmul_interpolator_data.h [KEY] > TABLE.csv

SWEEP.csv is tests/pytorch/kernel_sweep.py's output (default: the H200 sweep of
tests/data/measured/2026-11-27-h200-2/). Prints, as markdown:
  * the fitted constants (GEMM: asymptotic efficiency, a tile's k overhead; attention:
    asymptotic efficiency, half-lengths forward and backward, backward factor, head-dimension
    overhead) and the fit's error over every shape it was fitted on. A tile's k overhead is
    fitted on two sources together: the sweep's GEMMs and XLA's published H100 table
    (tests/data/published/xla_matmul_h100.csv: batch, m, n and k from 256 to 4,096, kernel
    times without dispatch), each at its own efficiency and per-launch offset, since the sweep
    alone has three GEMMs of k below 2,048; each source's own k overhead and its error at the
    other's are printed;
  * XLA's B200 table (tests/data/published/xla_matmul_b200.csv, the same grid measured the same
    way) at that k overhead, and the B200 preset's GEMM efficiency it gives: the H200's measured
    efficiency times XLA's B200 efficiency over its H100 one (one method on both GPUs);
  * leave-one-family-out: each shape family (square, Llama 3 8B, Llama 3 70B, thin, wave; for
    attention head dimension 64, non-causal, short and long sequences) predicted by a fit to the
    others;
  * memory-bound kernels (the three shipped sweeps, at 64 Mi and 256 Mi elements, where a
    launch's dispatch is under a tenth of the time): each kind's rate on the bytes the lowering
    counts for it, and the rate of a cast and of the fused AdamW step over the add's (the cost
    model's ComputeModelParams::upcast_rate_scale and fused_adam_rate_scale), with each sweep
    predicted by the other two;
  * sources the fit never saw: the best bf16 GEMM measured on an H100 SXM (stas00/ml-engineering,
    compute/accelerator/README.md: 792.1 TFLOP/s at 6144 x 17920 x 2816) and FlashAttention-3's
    H100 forward and backward throughputs (arXiv 2407.08608, figures 5-7), both on the same SM90
    silicon (132 SMs, 989 TFLOP/s dense bf16) as the H200.
The formulas are the C++ model's; tests/sim/kernel_shape_model_test.cpp holds the C++ model to
the errors this prints. With --check, exit 1 unless the fitted constants are the ones the C++
model, the H200 preset and the B200 preset's GEMM efficiency use (KernelShapeParams' and
ComputeModelParams' defaults, cluster_presets.cpp: the H200 preset's attention efficiency is
FlashAttention-2's, what `model.attention: flash` runs), so a changed sweep or fit cannot leave
them behind. Pure Python, no dependencies. Same input, same output.
"""

import csv
import functools
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SWEEP = ROOT / "tests/data/measured/2026-11-27-h200-2/kernel_sweep.csv"
# One profiled training step of the same GPU (tests/pytorch/step_kernel_breakdown.py): its SDPA
# ran PyTorch's FLASH_ATTENTION backend (FlashAttention-2, `pytorch_flash::` kernels), as
# `model.attention: flash` asks, where the sweep's unrestricted SDPA chose a faster backend.
STEP_BREAKDOWN = ROOT / "tests/data/measured/2026-11-27-h200-2/step_breakdown_llama8b_selective_op.json"
PEAK = 989.4e12   # H100/H200 SXM dense bf16 (datasheet)
SMS = 132
HBM = 4.8e12      # H200 (datasheet)
ELEMENTWISE_EFFICIENCY = 0.8  # cost_model.hpp's hbm_efficiency: element-wise kernels' share of HBM
TILES = ((128, 256), (256, 128), (128, 128))
SPLIT_K_MIN = 512
# kernel_sweep.py times one launch by CUDA events recorded around it, so each row carries the
# host's dispatch; fitted as a constant offset, it is the measurement's, not the GPU's.
GEMM_FLOOR_GRID = (0, 4e-6, 8e-6, 12e-6, 16e-6)
GEMM_EFFICIENCY_GRID = tuple(e / 1000 for e in range(650, 901, 5))
GEMM_K_OVERHEAD_GRID = tuple(range(0, 257, 32))
MIN_GEMM_FLOPS = 1e9  # below this a launch is mostly dispatch
# XLA's matmul table for sm_90 (an H100 SXM: 3.35 TB/s of HBM), times of the kernel alone: its
# offset per launch is the GPU's (a kernel's ramp and tail), a few microseconds.
XLA_TABLE = ROOT / "tests/data/published/xla_matmul_h100.csv"
XLA_HBM = 3.35e12
XLA_FLOOR_GRID = tuple(i * 1e-6 for i in range(9))
# XLA's table for "sm_100_B200", on the b200-sxm-180gb preset's GPU (cluster_presets.cpp: 148 SMs,
# 2,250 TFLOP/s dense bf16, 7.67 TB/s).
XLA_B200_TABLE = ROOT / "tests/data/published/xla_matmul_b200.csv"
B200 = {"sms": 148, "peak": 2250e12, "hbm": 7.67e12}
B200_EFFICIENCY_GRID = tuple(e / 1000 for e in range(500, 901, 5))
# Every sweep shipped, for the memory-bound kernels (few rows each; their rates repeat).
MEMORY_SWEEPS = sorted(ROOT.glob("tests/data/measured/*/kernel_sweep*.csv"))
MIN_MEMORY_ELEMENTS = 1 << 26  # 64 Mi: from here a launch's dispatch is under a tenth
# The HBM bytes per element the lowering counts for each of kernel_sweep.py's memory ops
# (core/src/transformer_kernels.cpp, core/include/shardscope/core/kernel.hpp): a bf16 add
# reads two and writes one; a cast reads one dtype and writes the other (aten::_to_copy:
# autocast's weight and gradient casts, logits.float()); SwiGLU as silu then a product (5
# accesses of 2 bytes; the sweep's bytes column counts the fused minimum, 3); the fused AdamW
# step reads parameter, gradient and both states and writes parameter and states (7 accesses of
# 4 bytes), the foreach step's passes 20. RMSNorm is left out: the lowering counts an unfused
# fp32 norm (PyTorch before its fused CUDA kernel), which the sweep's F.rms_norm is not. Sweeps
# before 2026-11-30 have no fp32→bf16 cast and no foreach step.
LOWERED_BYTES_PER_ELEMENT = {"add bf16": 6, "cast bf16->fp32": 6, "cast fp32->bf16": 6,
                             "swiglu bf16": 10, "adamw fused fp32": 28, "adamw foreach fp32": 80}
# The kinds the cost model prices at their own rate, by the C++ name of their scale.
SCALED_KINDS = {"cast bf16->fp32": "upcast_rate_scale", "adamw fused fp32": "fused_adam_rate_scale"}


def read_sweep(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def gemm_rows(sweep):
    rows = []
    for r in sweep:
        if r["kind"] != "gemm" or r["dtype"] != "bf16" or float(r["flops"]) < MIN_GEMM_FLOPS:
            continue
        m, n, k = (int(x) for x in r["shape"].split()[0].split("x"))
        rows.append({"family": r["op"].split()[0], "m": m, "n": n, "k": k,
                     "seconds": float(r["median_ns"]) * 1e-9})
    return rows


def xla_gemm_rows(path=XLA_TABLE, gpu=None):
    """XLA's GEMMs of at least MIN_GEMM_FLOPS, timed from its published FLOP/s; `gpu`: the
    GPU's SMs, peak and HBM rate where it is not the H100 (SMS, PEAK, XLA_HBM)."""
    rows = []
    for r in read_sweep(path):
        b, m, n, k = (int(r[x]) for x in ("batch", "m", "n", "k"))
        flops = 2 * b * m * n * k
        if flops >= MIN_GEMM_FLOPS:
            rows.append({"family": "xla", "batch": b, "m": m, "n": n, "k": k, "hbm": XLA_HBM,
                         **(gpu or {}), "seconds": flops / float(r["bf16_flop_per_s"])})
    return rows


def import_xla(header_path, key="sm_90"):
    """An XLA table's rows from XLA's matmul_interpolator_data.h: every entry's bf16 FLOP/s of
    the device `key`."""
    try:
        text = Path(header_path).read_text()
    except OSError as e:
        print(f"error: cannot read {header_path}: {e.strerror}", file=sys.stderr)
        return 2
    keys = re.findall(r'\n  entries \{\n    key: "([^"]+)"', text)
    if key not in keys:
        print(f"error: {header_path} has no matmul table for the device key {key!r} "
              f"(it has: {', '.join(keys) or 'none'})", file=sys.stderr)
        return 2
    start = text.index(f'key: "{key}"')
    end = re.compile(r'\n  entries \{\n    key: "').search(text, start)
    section = text[start:end.start() if end else len(text)]
    print("batch,m,n,k,bf16_flop_per_s")
    entries = re.finditer(r"entries \{\s*b: (\d+)\s*m: (\d+)\s*n: (\d+)\s*k: (\d+)\s*"
                          r'((?:flops \{[^}]*\}\s*)+)\}', section)
    rows = []
    for e in entries:
        flops = dict(re.findall(r'key: "([^"]+)" value: (\d+)', e.group(5)))
        rows.append((*(int(x) for x in e.group(1, 2, 3, 4)), flops["bf16xbf16->bf16"]))
    for row in sorted(rows):
        print(",".join(str(x) for x in row))
    return 0


def attention_rows(sweep):
    rows = []
    for r in sweep:
        if r["kind"] != "attention":
            continue
        b, h, kv, s, d, causal = re.match(r"b(\d+) h(\d+)/(\d+) s(\d+) d(\d+)( causal)?",
                                          r["shape"]).groups()
        rows.append({"backward": "backward" in r["op"], "seq": int(s), "head_dim": int(d),
                     "causal": bool(causal), "flops": float(r["flops"]),
                     "seconds": float(r["median_ns"]) * 1e-9})
    return rows


@functools.lru_cache(maxsize=None)  # the grids ask for each shape at every efficiency and offset
def gemm_full_rate_flops(m, n, k, k_overhead, batch=1, sms=SMS):
    """kernel_shape_model.cpp's gemm_cost: (FLOPs at the asymptotic rate, split-K bytes)."""
    best = None
    for tm, tn in TILES:
        tiles = math.ceil(m / tm) * math.ceil(n / tn) * batch
        split = max(1, min(sms // tiles, k // SPLIT_K_MIN)) if tiles < sms else 1
        waves = math.ceil(tiles * split / sms)
        work = waves * sms * 2 * tm * tn * (k / split + k_overhead)
        if best is None or work < best[0]:
            best = (work, 4 * m * n * batch * split if split > 1 else 0)
    return best


def gemm_seconds(r, e, k_overhead, floor):
    """A row's time on its GPU (the H200's SMs, peak and HBM rate unless the row says)."""
    batch, hbm = r.get("batch", 1), r.get("hbm", HBM) * ELEMENTWISE_EFFICIENCY
    work, partials = gemm_full_rate_flops(r["m"], r["n"], r["k"], k_overhead, batch,
                                          r.get("sms", SMS))
    operands = 2 * batch * (r["m"] * r["k"] + r["k"] * r["n"] + r["m"] * r["n"])
    return max(work / (r.get("peak", PEAK) * e), operands / hbm) + partials / hbm + floor


def attention_seconds(r, e, half_fwd, half_bwd, backward_factor, d0):
    keys = r["seq"] * (0.5 if r["causal"] else 1.0)
    half = half_bwd if r["backward"] else half_fwd
    full_rate = (r["flops"] * (1 + half / keys) * (backward_factor if r["backward"] else 1.0) *
                 (1 + d0 / r["head_dim"]) / (1 + d0 / 128))
    return full_rate / (PEAK * e)


def flash_in_step(path):
    """(forward, backward) attention rows of the profiled step: its flash kernels' total time
    and the FLOPs of its 32 causal self-attentions (Llama 3.1 8B, 2 × 8,192 tokens)."""
    import json
    step = json.loads(Path(path).read_text())
    keys = step["keys"]
    layers, heads = int(keys["model.layers"]), int(keys["model.heads"])
    seq, batch = int(keys["training.seq_len"]), int(keys["training.micro_batch"])
    head_dim = int(keys["model.hidden"]) // heads
    forward_flops = layers * 4 * batch * heads * seq * seq * head_dim * 0.5
    seconds = {"forward": 0.0, "backward": 0.0}
    for name, phase, ms in step["kernels_ms"]:
        if name.startswith("void pytorch_flash::") and phase in seconds:
            seconds[phase] += ms * 1e-3
    return [{"backward": phase == "backward", "seq": seq, "head_dim": head_dim, "causal": True,
             "flops": forward_flops * (2.5 if phase == "backward" else 1.0), "seconds": t}
            for phase, t in seconds.items()]


def errors(rows, seconds, params):
    return [seconds(r, *params) / r["seconds"] - 1 for r in rows]


def mean_abs(errs):
    return sum(abs(e) for e in errs) / len(errs)


def grid_fit(rows, seconds, grid):
    """The grid point of least mean absolute relative error (deterministic: first wins ties)."""
    best = None
    for params in grid:
        err = mean_abs(errors(rows, seconds, params))
        if best is None or err < best[0] - 1e-12:
            best = (err, params)
    return best[1]


def gemm_grid(k_overheads, floors=GEMM_FLOOR_GRID):
    return [(e, k0, floor) for e in GEMM_EFFICIENCY_GRID for k0 in k_overheads
            for floor in floors]


def gemm_error(rows, fit):
    return mean_abs(errors(rows, gemm_seconds, fit))


def fit_k_overhead(sources):
    """Each source's efficiency and offset fitted at every k overhead, {k0: {source: (e, k0,
    floor)}}, and the k overhead of least mean |error| over every source's GEMMs together."""
    by_k_overhead = {k0: {name: grid_fit(rows, gemm_seconds, gemm_grid((k0,), floors))
                          for name, (rows, floors) in sources.items()}
                     for k0 in GEMM_K_OVERHEAD_GRID}
    joint = min(GEMM_K_OVERHEAD_GRID, key=lambda k0: sum(
        gemm_error(rows, by_k_overhead[k0][name]) * len(rows)
        for name, (rows, _) in sources.items()))
    return by_k_overhead, joint


def report_k_overhead(sources, by_k_overhead, joint):
    """Each source's own k overhead, and its error there, at the other source's and at the joint
    fit's (its efficiency and offset fitted at each)."""
    own = {name: min(GEMM_K_OVERHEAD_GRID, key=lambda k0: gemm_error(rows, by_k_overhead[k0][name]))
           for name, (rows, _) in sources.items()}
    print("### A tile's k overhead, fitted on both GEMM sources\n")
    print("| source | GEMMs | k overhead alone | error there | at the other's | at the joint "
          f"{joint} |\n| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, (rows, _) in sources.items():
        other = next(own[o] for o in sources if o != name)

        def at(k0):
            fit = by_k_overhead[k0][name]
            return f"{100 * gemm_error(rows, fit):.1f} % (e {fit[0]:.3f})"
        print(f"| {name} | {len(rows)} | {own[name]} | {at(own[name])} | {at(other)} "
              f"| {at(joint)} |")
    print()


def report_b200(joint, h200_efficiency):
    """XLA's B200 table at the joint k overhead, and the B200 preset's GEMM efficiency: the H200's
    measured one times XLA's B200 efficiency over XLA's H100 one, to two places."""
    rows = xla_gemm_rows(XLA_B200_TABLE, B200)
    k_overhead = joint["XLA's H100 table"][1]
    grid = [(e, k_overhead, floor) for e in B200_EFFICIENCY_GRID for floor in XLA_FLOOR_GRID]
    fit = grid_fit(rows, gemm_seconds, grid)
    h100 = joint["XLA's H100 table"][0]
    b200 = round(h200_efficiency * fit[0] / h100, 2)
    errs = errors(rows, gemm_seconds, fit)
    by_k = {k: [e for e, r in zip(errs, rows) if r["k"] == k]
            for k in sorted({r["k"] for r in rows})}
    print(f"### XLA's B200 table at k overhead {k_overhead}\n")
    print(f"{len(rows)} GEMMs: efficiency {fit[0]:.3f} of 2,250 TFLOP/s (offset "
          f"{fit[2] * 1e6:.0f} µs), mean error {100 * mean_abs(errs):.1f} %, bias by k "
          + ", ".join(f"{k:,}: {100 * sum(e) / len(e):+.1f} %" for k, e in by_k.items())
          + f". Over XLA's H100 efficiency ({h100:.3f}): {fit[0] / h100:.3f}; times the H200's "
          f"measured {h200_efficiency:.3f}: {b200:.2f}, the b200-sxm-180gb preset's GEMM "
          "efficiency.\n")
    return b200


def attention_grid():
    return [(e / 100, hf, hb, b, d0) for e in range(55, 81) for hf in (0, 64, 128, 192, 256, 384)
            for hb in (128, 256, 384, 512, 768, 1024) for b in (1.0, 1.05, 1.1, 1.15, 1.2, 1.25)
            for d0 in (0, 16, 32, 48, 64, 96)]


def stats(errs):
    return (f"{len(errs)} | {100 * mean_abs(errs):.1f} % | {100 * max(abs(e) for e in errs):.1f} % "
            f"| {100 * sum(errs) / len(errs):+.1f} %")


def report(title, rows, seconds, grid, families):
    params = grid_fit(rows, seconds, grid)
    print(f"### {title}\n")
    print("| shapes | n | mean error | max error | bias |\n| --- | ---: | ---: | ---: | ---: |")
    print(f"| all, fitted on all | {stats(errors(rows, seconds, params))} |")
    for name, member in families:
        held, rest = [r for r in rows if member(r)], [r for r in rows if not member(r)]
        if held and rest:
            print(f"| {name}, fitted on the others | "
                  f"{stats(errors(held, seconds, grid_fit(rest, seconds, grid)))} |")
    print()
    return params


def report_by_k(paths, params, xla):
    """The fitted GEMM model's bias on each shipped sweep and on XLA's table by the GEMMs' k:
    where it drifts with k (a tile's prologue and epilogue weigh more when k is short).
    `xla`: (XLA's rows, its fit)."""
    by_source = {f"{Path(p).parent.name}/{Path(p).name}": (gemm_rows(read_sweep(p)), params)
                 for p in paths}
    by_source["XLA's H100 table"] = xla
    ks = sorted({r["k"] for rows, _ in by_source.values() for r in rows})
    print("### GEMMs by k, every source at the fit (bias; GEMMs)\n")
    print("| source | " + " | ".join(f"k = {k:,}" for k in ks) + " |")
    print("| --- |" + " ---: |" * len(ks))
    for name, (rows, fit) in by_source.items():
        cells = []
        for k in ks:
            errs = errors([r for r in rows if r["k"] == k], gemm_seconds, fit)
            cells.append(f"{100 * sum(errs) / len(errs):+.1f} % ({len(errs)})" if errs else "—")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()


def memory_rates(paths):
    """{sweep name: {op: [bytes per second the lowering counts, one per size ≥ 64 Mi]}}."""
    out = {}
    for path in paths:
        name = f"{path.parent.name}/{path.name}"
        rates = out.setdefault(name, {})
        for r in read_sweep(path):
            n = int(r["shape"]) if r["kind"] == "memory" else 0
            if n < MIN_MEMORY_ELEMENTS or r["op"] not in LOWERED_BYTES_PER_ELEMENT:
                continue
            seconds = float(r["median_ns"]) * 1e-9
            rates.setdefault(r["op"], []).append(LOWERED_BYTES_PER_ELEMENT[r["op"]] * n / seconds)
    return out


def rate_scale(rates, op):
    """The op's rate over the add's, averaged over sizes and the sweeps that ran it, to two
    places; None where none did."""
    ratios = [x / a for sweep in rates.values() for x, a in zip(sweep.get(op, []), sweep["add bf16"])]
    return round(sum(ratios) / len(ratios), 2) if ratios else None


def report_memory(paths):
    rates = memory_rates(paths)
    print(f"### Memory-bound kernels ({len(rates)} sweeps, ≥ 64 Mi elements, bytes as the "
          "lowering counts them)\n")
    print("| kernel (rate at 64 Mi / 256 Mi elements) | " + " | ".join(rates) +
          " | share of 4.8 TB/s | over the add |")
    print("| --- |" + " ---: |" * (len(rates) + 2))
    for op in LOWERED_BYTES_PER_ELEMENT:
        every = [x for sweep in rates.values() for x in sweep.get(op, [])]
        if not every:
            continue
        cells = [" / ".join(f"{x / 1e12:.2f}" for x in sweep[op]) + " TB/s" if op in sweep else "—"
                 for sweep in rates.values()]
        share = f"{100 * min(every) / HBM:.0f}–{100 * max(every) / HBM:.0f} %"
        print(f"| {op} | " + " | ".join(cells) + f" | {share} | {rate_scale(rates, op):.2f} |")
    print("\nEach sweep's rate predicted from its own add and the other sweeps' scale (error of "
          "the predicted rate at 64 Mi / 256 Mi elements):\n")
    print("| kind | scale (all sweeps) | " + " | ".join(rates) + " |")
    print("| --- | ---: |" + " ---: |" * len(rates))
    for op, name in SCALED_KINDS.items():
        cells = []
        for left in rates:
            others = {k: v for k, v in rates.items() if k != left}
            scale = rate_scale(others, op)
            errs = [a * scale / x - 1
                    for x, a in zip(rates[left].get(op, []), rates[left]["add bf16"])]
            cells.append(" / ".join(f"{100 * e:+.1f} %" for e in errs))
        print(f"| {op} (`{name}`) | {rate_scale(rates, op):.2f} | " + " | ".join(cells) + " |")
    print()
    return {name: rate_scale(rates, op) for op, name in SCALED_KINDS.items()}


def cpp_constants():
    """The C++ model's constants: KernelShapeParams' defaults and the H200 preset's efficiencies."""
    header = (ROOT / "sim/include/shardscope/sim/kernel_shape_model.hpp").read_text()
    presets = (ROOT / "core/src/cluster_presets.cpp").read_text()
    cost_model = (ROOT / "sim/include/shardscope/sim/cost_model.hpp").read_text()

    def number(text, name):
        return float(re.search(rf"{name} = ([0-9.]+);", text).group(1))

    h200 = presets[presets.index("ClusterSpec h200()"):]
    b200 = presets[presets.index("ClusterSpec b200()"):]
    return {
        "gemm": (number(h200, "c.gpu.matmul_efficiency"), number(header, "gemm_k_overhead")),
        "b200 gemm": (number(b200, "c.gpu.matmul_efficiency"),),
        "cudnn attention": (number(h200, "c.gpu.cudnn_attention_efficiency"),),
        "attention": (number(h200, "c.gpu.attention_efficiency"),
                      number(header, "attention_forward_half_length"),
                      number(header, "attention_backward_half_length"),
                      number(header, "attention_backward_factor"),
                      number(header, "attention_head_dim_overhead")),
        **{name: (number(cost_model, name),) for name in SCALED_KINDS.values()},
    }


def main():
    if sys.argv[1:2] == ["--import-xla"] and len(sys.argv) in (3, 4):
        return import_xla(*sys.argv[2:])
    args = [a for a in sys.argv[1:] if a != "--check"]
    sweep = read_sweep(args[0] if args else DEFAULT_SWEEP)
    gemms, attentions, xla = gemm_rows(sweep), attention_rows(sweep), xla_gemm_rows()
    print(f"# The per-shape kernel model fitted to {len(gemms)} GEMMs (at least 1 GFLOP) and "
          f"{len(attentions)} attentions\n")
    sources = {"the sweep": (gemms, GEMM_FLOOR_GRID), "XLA's H100 table": (xla, XLA_FLOOR_GRID)}
    by_k_overhead, k_overhead = fit_k_overhead(sources)
    report_k_overhead(sources, by_k_overhead, k_overhead)
    joint = by_k_overhead[k_overhead]
    families = [(f, (lambda f: lambda r: r["family"] == f)(f))
                for f in sorted({r["family"] for r in gemms})]
    g = report(f"GEMMs (bf16), the sweep's, at k overhead {k_overhead}", gemms, gemm_seconds,
               gemm_grid((k_overhead,)), families)
    report_by_k(MEMORY_SWEEPS, g, (xla, joint["XLA's H100 table"]))
    b200 = report_b200(joint, g[0])
    a = report("Attention (SDPA, bf16)", attentions, attention_seconds, attention_grid(), [
        ("head dimension 64", lambda r: r["head_dim"] == 64),
        ("non-causal", lambda r: not r["causal"]),
        ("≤ 1,024 tokens per sequence", lambda r: r["seq"] <= 1024),
        ("≥ 16,384 tokens per sequence", lambda r: r["seq"] >= 16384)])
    # FlashAttention-2 in the step: the sweep's curve, its own efficiency (the mean of forward's
    # and backward's, each solved exactly), to two places as the preset keeps it.
    flash = flash_in_step(STEP_BREAKDOWN)
    solved = [attention_seconds(r, 1.0, *a[1:]) / r["seconds"] for r in flash]
    flash_e = round(sum(solved) / len(solved), 2)
    print("### FlashAttention-2 as the training step runs it\n")
    print("| kernels (one profiled step, 32 layers) | measured | efficiency solved | error at "
          f"{flash_e} |\n| --- | ---: | ---: | ---: |")
    for r, e in zip(flash, solved):
        err = attention_seconds(r, flash_e, *a[1:]) / r["seconds"] - 1
        print(f"| {'backward' if r['backward'] else 'forward'} | {r['seconds'] * 1e3:.1f} ms "
              f"| {e:.3f} | {100 * err:+.1f} % |")
    print()
    memory = report_memory(MEMORY_SWEEPS)
    print("### Fitted constants\n")
    x = joint["XLA's H100 table"]
    print(f"* GEMM: efficiency {g[0]:.3f}, k overhead {g[1]} k-steps "
          f"(measurement offset per launch {g[2] * 1e6:.0f} µs); XLA's H100 kernels at the same "
          f"k overhead: efficiency {x[0]:.3f}, offset {x[2] * 1e6:.0f} µs")
    print(f"* attention: efficiency {a[0]:.2f} (SDPA's own choice of backend, cuDNN's), {flash_e} "
          f"(FlashAttention-2, the step's), half-lengths {a[1]} (forward) and {a[2]} "
          f"(backward) keys, backward factor {a[3]}, head-dimension overhead {a[4]}")
    print(f"* memory-bound: a cast at {memory['upcast_rate_scale']:.2f} and the fused AdamW step at "
          f"{memory['fused_adam_rate_scale']:.2f} of the element-wise kernels' rate\n")
    print("### Sources the fit never saw (H100 SXM: same SMs and peak)\n")
    print("| kernel | published | predicted | error |\n| --- | ---: | ---: | ---: |")
    m, n, k = 6144, 17920, 2816
    pred = 2 * m * n * k / gemm_seconds({"m": m, "n": n, "k": k}, g[0], g[1], 0) / 1e12
    print(f"| GEMM {m}×{n}×{k} (stas00/ml-engineering) | 792.1 TFLOP/s | {pred:.0f} TFLOP/s "
          f"| {100 * (pred / 792.1 - 1):+.1f} % |")
    # FlashAttention-3 (arXiv 2407.08608) head dimension 128, 16k tokens in total per call.
    for label, causal, backward, seq, published in (
            ("FA3 forward, causal, 512", True, False, 512, 292),
            ("FA3 forward, causal, 16k", True, False, 16384, 616),
            ("FA3 forward, 512", False, False, 512, 467),
            ("FA3 forward, 16k", False, False, 16384, 648),
            ("FA3 backward, 512", False, True, 512, 316),
            ("FA3 backward, 16k", False, True, 16384, 561)):
        r = {"backward": backward, "seq": seq, "head_dim": 128, "causal": causal, "flops": 1.0}
        pred = 1 / attention_seconds(r, *a) / 1e12
        print(f"| {label} | {published} TFLOP/s | {pred:.0f} TFLOP/s "
              f"| {100 * (pred / published - 1):+.1f} % |")
    if "--check" in sys.argv[1:]:
        fitted = {"gemm": tuple(g[:2]), "b200 gemm": (b200,), "cudnn attention": (a[0],),
                  "attention": (flash_e, *a[1:]),
                  **{name: (value,) for name, value in memory.items()}}
        used = cpp_constants()
        stale = [k for k in fitted if any(abs(x - y) > 1e-9 for x, y in zip(fitted[k], used[k]))]
        for k in stale:
            print(f"error: the {k} constants in C++ are {used[k]}, the fit gives {fitted[k]}",
                  file=sys.stderr)
        return 1 if stale else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
