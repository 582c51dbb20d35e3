"""Fitting the presets' efficiencies to published runs, with leave-one-out."""

import itertools
import statistics

from .simulation import errors_at, tokens_per_s_at
from .sources import HELD_OUT_TABLES, TORCHTITAN_A100_TABLE, TORCHTITAN_CLUSTERS, scenario

# What --fit fits per GPU, and on which tables (never one of sources.HELD_OUT_TABLES: they
# check the fit). The A100's efficiencies were guesses; the H100's matmul efficiency is
# fitted to TorchTitan's Llama run (published_runs.csv) and stays, so only the Triton attention,
# which no other source runs, is fitted to its tables.
FITS = {
    "A100": (("a100-40gb-roce", "a100-80gb-roce"),
             ("matmul_efficiency", "triton_attention_efficiency")),
    "H100": (("h100-80gb", "h100-80gb-large"), ("triton_attention_efficiency",)),
}
# Fitted over every GPU's tables at once, the efficiencies above fitted at each combination of
# their values: properties of the Triton kernel, as shares of FlashAttention-2's — its per-tile
# overhead, and its slowdown at a small head dimension (only the A100 tables' 125M and 350M models
# have one: head dimension 64).
SHARED_FIT = (("triton_attention_overhead", (0.0, 0.25, 0.5, 1.0)),
              ("triton_attention_head_dim_overhead", (0.0, 0.25, 0.5, 0.75, 1.0)))


# SHARED_FIT's values the presets carry (core/src/cluster_presets.cpp), what --keep-shared fits at.
PRESET_SHARED = {"triton_attention_overhead": 0.25, "triton_attention_head_dim_overhead": 0.25}


def mean_abs_error(published, predicted):
    """Mean |error| of tokens/s, from seconds per token."""
    return statistics.mean(abs(p / q - 1) for p, q in zip(published, predicted))


def grid_minimum(objective, names, around, step, span):
    """The point of a grid of `step` within `span` of `around` (clamped to efficiencies in
    [0.05, 1]) where `objective` is least; one or two names."""
    axes = []
    for name in names:
        lo = max(0.05, around[name] - span)
        hi = min(1.0, around[name] + span)
        axes.append([round(lo + i * step, 6) for i in range(int((hi - lo) / step + 1e-9) + 1)])
    best, best_value = dict(around), float("inf")
    for values in (zip(axes[0]) if len(axes) == 1 else
                   ((a, b) for a in axes[0] for b in axes[1])):
        point = {**around, **dict(zip(names, values))}
        value = objective(point)
        if value < best_value:
            best, best_value = point, value
    return best


def fit_efficiencies(shardscope, rows, names, start, fabric, what):
    """The efficiencies `names` that make the least mean |error| of tokens/s over `rows`.

    Each row's seconds per token is close to linear in 1/efficiency (the time of the kernels an
    efficiency prices): linearise it around the point from a simulation there and one with each
    efficiency 10 % lower, take the grid minimum of the linear model, and repeat from there
    until the point moves less than 0.001."""
    published = [1 / float(r["tokens_per_s_per_gpu"]) for r in rows]

    def per_token(point):
        return [1 / t for t in tokens_per_s_at(shardscope, rows, fabric, point, what)]

    point = dict(start)
    for _ in range(8):
        base = per_token(point)
        slopes = {}
        for name in names:
            nudged = {**point, name: round(point[name] * 0.9, 6)}
            dx = 1 / nudged[name] - 1 / point[name]
            slopes[name] = [(u - b) / dx for u, b in zip(per_token(nudged), base)]

        def linear(p, base=base, slopes=slopes, at=point):
            predicted = [b + sum(slopes[n][i] * (1 / p[n] - 1 / at[n]) for n in names)
                         for i, b in enumerate(base)]
            return mean_abs_error(published, predicted)

        coarse = grid_minimum(linear, names, point, 0.01, 1.0)
        fine = grid_minimum(linear, names, coarse, 0.001, 0.01)
        moved = max(abs(fine[n] - point[n]) for n in names)
        point = fine
        if moved < 0.001:
            break
    return point



def error_cells(errors):
    return (f"{statistics.mean(errors):>+7.1%} {statistics.mean(abs(e) for e in errors):>7.1%} "
            f"{max(abs(e) for e in errors):>7.1%}")


def fit(shardscope, rows, fabric, keep_shared=False, contention=None):
    """--fit: the combination of SHARED_FIT's values with the least mean |error| over every table
    of FITS, each GPU's efficiencies fitted at it; then each table's error at the fit and left out
    of it (the efficiencies fitted on its GPU's other table, the shared values kept).
    keep_shared: only PRESET_SHARED's combination. contention: contention scales to try as well
    (cluster.gpu.contention_scale, one for every GPU)."""
    grid = [(name, (PRESET_SHARED[name],) if keep_shared else candidates)
            for name, candidates in SHARED_FIT]
    if contention:
        grid.append(("contention_scale", tuple(contention)))
    shared = [name for name, _ in grid]
    combinations = list(itertools.product(*(candidates for _, candidates in grid)))
    runs = {gpu: [r for r in rows if r["table"] in tables and scenario(r, fabric)[0] is not None]
            for gpu, (tables, _) in FITS.items()}
    best = None
    fitted = {gpu: {name: 0.5 for name in names} for gpu, (_, names) in FITS.items()}
    for values in combinations:
        at = dict(zip(shared, values))
        label = ", ".join(f"{n} {v}" for n, v in at.items())
        points, errors = {}, []
        for gpu, (tables, names) in FITS.items():
            # Each fit starts from the last one's efficiencies: neighbouring values move them
            # little.
            points[gpu] = fit_efficiencies(shardscope, runs[gpu], names, {**fitted[gpu], **at},
                                           fabric, f"fitting {gpu} at {label}")
            fitted[gpu] = {name: points[gpu][name] for name in names}
            errors += errors_at(shardscope, runs[gpu], fabric, points[gpu], f"{gpu} at the fit")
        mean = statistics.mean(abs(e) for e in errors)
        print(f"{label}: mean |error| {mean:.2%}, bias {statistics.mean(errors):+.2%}, "
              f"largest {max(abs(e) for e in errors):.1%} over {len(errors)} runs; "
              + "; ".join(f"{gpu} " + ", ".join(f"{n} {points[gpu][n]:.3f}" for n in names)
                          for gpu, (_, names) in FITS.items()))
        if best is None or mean < best[0]:
            best = (mean, points)
    for gpu, (tables, names) in FITS.items():
        point = best[1][gpu]
        print(f"\n{gpu}: {len(runs[gpu])} runs of {', '.join(tables)}; fitted "
              + ", ".join(f"{n} {point[n]:.3f}" for n in (*names, *shared)))
        print(f"  {'table':<18} {'runs':>5}   at the fit: bias    mean     max   left out: "
              f"fitted on the other tables, then bias    mean     max")
        for table in tables:
            held = [r for r in runs[gpu] if r["table"] == table]
            others = [r for r in runs[gpu] if r["table"] != table]
            at_fit = errors_at(shardscope, held, fabric, point, f"{table} at the fit")
            left = fit_efficiencies(shardscope, others, names, point, fabric,
                                    f"fitting {gpu} without {table}")
            out = errors_at(shardscope, held, fabric, left, f"{table} left out")
            print(f"  {table:<18} {len(held):>5}         {error_cells(at_fit)}   "
                  + ", ".join(f"{n} {left[n]:.3f}" for n in names) + f"   {error_cells(out)}")


FP8_TABLE = "h100-80gb-fp8"
# The efficiencies fitted to one table alone, each run left out in turn (--fit-fp8,
# --fit-a100-attention): the table and the cluster.gpu key.
ONE_TABLE_FITS = {
    "fp8": (FP8_TABLE, "fp8_matmul_efficiency"),
    "a100-attention": (TORCHTITAN_A100_TABLE, "attention_efficiency"),
}


# A held-out table that a fit used would no longer show anything about runs the model never saw.
_FITTED = ({table for tables, _ in FITS.values() for table in tables}
           | {table for table, _ in ONE_TABLE_FITS.values()})
if _FITTED & HELD_OUT_TABLES:
    raise SystemExit(f"fitting.py: fitted to held-out tables {sorted(_FITTED & HELD_OUT_TABLES)}")


def fit_one_table(shardscope, rows, fabric, which):
    """The efficiency ONE_TABLE_FITS[which] names with the least mean |error| over its table's
    runs that ran, everything else at the presets; then each run left out in turn, predicted by a
    fit to the others."""
    table, name = ONE_TABLE_FITS[which]
    runs = [r for r in rows if r["table"] == table and r.get("ran", True)]
    point = fit_efficiencies(shardscope, runs, (name,), {name: 0.5}, fabric, f"fitting {name}")
    at_fit = errors_at(shardscope, runs, fabric, point, f"{table} at the fit")
    print(f"{table}: {len(runs)} runs; fitted {name} {point[name]:.3f}; at the fit "
          f"{error_cells(at_fit)}")
    left_out = []
    for i, held in enumerate(runs):
        others = runs[:i] + runs[i + 1:]
        left = fit_efficiencies(shardscope, others, (name,), point, fabric, f"fitting without {i}")
        error = errors_at(shardscope, [held], fabric, left, f"run {i} left out")[0]
        left_out.append(error)
        run = (f"{held['model']} seq {held['seq_len']} × {held['micro_batch']} "
               f"{held['activation_checkpointing']}" if table in TORCHTITAN_CLUSTERS
               else f"mpt-{held['model']} seq {held['seq_len']}")
        print(f"  {run}: fitted on the other {len(others)} {left[name]:.3f}, error {error:+.1%}")
    print(f"left out, each run: {error_cells(left_out)} (bias, mean |error|, largest)")

