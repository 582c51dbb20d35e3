#!/usr/bin/env python3
"""Measure real PyTorch FSDP memory and step time, one GPU playing rank 0 of N.

The ground truth for shardscope's memory model (issue: fidelity). For every row of a grid of
recipes this builds the model in plain PyTorch, exactly as shardscope's transformer family
describes it, wraps it with FSDP2 ``fully_shard`` (or FSDP1) on PyTorch's *fake* process group of
world size N (collectives do nothing or copy locally; per-rank memory and compute are real, see
../shared/reference/kineto_fsdp.md), runs a few steps and writes one CSV row with the peaks of each
phase and the step time.

Columns named like scenario keys (``training.loss``, ``fsdp.api``, ...) are the settings: a test
simulates each row by passing those columns as ``--set key=value``. Measured columns follow.

Run it where PyTorch and a CUDA GPU are (PyTorch >= 2.6 for ``torch.distributed.fsdp.fully_shard``):

    python3 scripts/measure_pytorch_fsdp.py --out tests/data/measured/fsdp_memory_h100.csv
    python3 scripts/measure_pytorch_fsdp.py --quick --out /tmp/smoke.csv   # 8 rows, a smoke test
    python3 scripts/measure_pytorch_fsdp.py --list                         # the grid, no GPU needed

Each allocator setting runs in its own process (PYTORCH_CUDA_ALLOC_CONF is read once, when CUDA
starts); rows within a process are separated by freeing everything and emptying the cache. An
out-of-memory row is recorded (oom = 1, the phase it ran out in) and the grid goes on.
"""

from __future__ import annotations

import argparse
import csv
import gc
import itertools
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

SCRIPT_VERSION = "1"

# ---------------------------------------------------------------------------------------------
# The grid


@dataclass(frozen=True)
class Row:
    """One configuration. Field names map to scenario keys (see SCENARIO_KEYS)."""

    model: str  # a name from MODELS
    api: str  # fsdp2 | fsdp1
    world: int  # fake process group size (= cluster.gpus_per_node, one node)
    seq_len: int
    micro_batch: int
    checkpointing: str  # none | full | selective_op
    loss: str  # upcast_fp32 | fused | chunked
    autocast: str  # none | bf16: bf16 params (MixedPrecision) or fp32 params under autocast
    attention: str  # flash | efficient | math
    expandable_segments: bool


# Shapes in shardscope's transformer terms. "llama" blocks: RMSNorm, RoPE, SwiGLU, GQA, untied
# head. "gpt" blocks: LayerNorm with bias, learned positions, GELU MLP, biases, tied embeddings.
MODELS = {
    "llama-1b": dict(hidden=2048, layers=16, heads=32, kv_heads=8, ffn_hidden=8192, vocab=128256,
                     style="llama"),
    "gpt2-xl": dict(hidden=1600, layers=48, heads=25, kv_heads=25, ffn_hidden=6400, vocab=50257,
                    style="gpt", max_seq=2048),
}


def full_grid() -> list[Row]:
    """About 290 rows: every recipe combination at 8 ranks, and slices for 64 ranks, expandable
    segments and the attention kinds."""
    recipes = list(
        itertools.product(
            ["none", "selective_op", "full"], ["upcast_fp32", "fused", "chunked"], ["none", "bf16"]
        )
    )
    rows = []
    for model, api, (seq, mb), (ac, loss, autocast) in itertools.product(
        ["llama-1b", "gpt2-xl"], ["fsdp2", "fsdp1"], [(2048, 1), (2048, 4), (4096, 2)], recipes
    ):
        rows.append(Row(model, api, 8, seq, mb, ac, loss, autocast, "flash", False))
    for model, (ac, loss, autocast) in itertools.product(["llama-1b", "gpt2-xl"], recipes):
        rows.append(Row(model, "fsdp2", 64, 2048, 4, ac, loss, autocast, "flash", False))
    for model, (ac, loss, autocast) in itertools.product(["llama-1b", "gpt2-xl"], recipes):
        if autocast == "none":
            rows.append(Row(model, "fsdp2", 8, 2048, 4, ac, loss, autocast, "flash", True))
    # Attention kinds (math keeps the s x s scores: short sequences only).
    for model, attn, seq, exp in itertools.product(
        ["llama-1b", "gpt2-xl"], ["efficient", "math"], [1024, 2048], [False, True]
    ):
        rows.append(Row(model, "fsdp2", 8, seq, 2, "none", "upcast_fp32", "none", attn, exp))
    return rows


def quick_grid() -> list[Row]:
    return [
        Row("llama-1b", api, 8, 2048, 2, ac, loss, "none", "flash", exp)
        for api, ac, loss, exp in [
            ("fsdp2", "none", "upcast_fp32", False),
            ("fsdp2", "selective_op", "fused", False),
            ("fsdp2", "full", "chunked", False),
            ("fsdp1", "none", "upcast_fp32", False),
            ("fsdp2", "none", "upcast_fp32", True),
            ("fsdp2", "selective_op", "chunked", True),
            ("fsdp1", "full", "fused", True),
            ("fsdp2", "none", "upcast_fp32", False),
        ]
    ]


def scenario_columns(row: Row) -> dict:
    """The row as shardscope scenario keys (what the simulating test passes as --set)."""
    m = MODELS[row.model]
    gpt = m["style"] == "gpt"
    cols = {
        "model.family": "transformer",
        "model.hidden": m["hidden"],
        "model.layers": m["layers"],
        "model.heads": m["heads"],
        "model.kv_heads": m["kv_heads"],
        "model.ffn_hidden": m["ffn_hidden"],
        "model.vocab": m["vocab"],
        "model.mlp": "gelu" if gpt else "swiglu",
        "model.norm": "layernorm" if gpt else "rmsnorm",
        "model.pos_emb": "learned" if gpt else "rope",
        "model.max_seq": m.get("max_seq", ""),
        "model.bias": "true" if gpt else "false",
        "model.tie_embeddings": "true" if gpt else "false",
        "model.attention": row.attention,
        "cluster.nodes": 1,
        "cluster.gpus_per_node": row.world,
        "training.seq_len": row.seq_len,
        "training.micro_batch": row.micro_batch,
        "training.activation_checkpointing": row.checkpointing,
        "training.loss": row.loss,
        "training.autocast": row.autocast,
        "training.iterations": 1,
        "fsdp.api": row.api,
        "fsdp.mixed_precision.param_dtype": "bf16" if row.autocast == "none" else "fp32",
        "fsdp.mixed_precision.reduce_dtype": "fp32",
        "allocator.expandable_segments": "true" if row.expandable_segments else "false",
    }
    return cols


MEASURED = [
    "oom",  # 1 when any phase ran out of memory
    "oom_phase",  # forward | backward | optimizer | setup
    "forward_allocated_bytes",  # torch.cuda.max_memory_allocated() over the phase
    "forward_reserved_bytes",  # torch.cuda.max_memory_reserved()
    "forward_active_bytes",  # memory_stats()["active_bytes.all.peak"]
    "backward_allocated_bytes",
    "backward_reserved_bytes",
    "backward_active_bytes",
    "optimizer_allocated_bytes",
    "optimizer_reserved_bytes",
    "optimizer_active_bytes",
    "num_alloc_retries",  # memory_stats()["num_alloc_retries"] over the measured step
    "step_ms",  # median CUDA-event time of the measured steps
    # Device memory in use (mem_get_info) less reserved after the last step: the CUDA context
    # with the kernels loaded so far (cluster.gpu.context_memory; the fake group has no NCCL).
    "outside_allocator_bytes",
    "gpu",
    "gpu_memory_bytes",
    "torch_version",
    "cuda_version",
    "script_version",
]


# ---------------------------------------------------------------------------------------------
# The model, as shardscope's transformer family describes it (docs/semantics.md)


def build_model_classes(torch, nn, F, compute_loss):
    """The Block and Transformer classes; `compute_loss(row, x, weight, labels)` is the loss."""

    class RMSNorm(nn.Module):
        def __init__(self, dim: int):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            # Computed in fp32, as torchtitan's RMSNorm.
            y = x.float()
            y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5)
            return y.type_as(x) * self.weight

    def rope(x, seq: int):
        # Rotary embedding on (batch, seq, heads, head_dim), no parameters.
        half = x.shape[-1] // 2
        freqs = 1.0 / (500000.0 ** (torch.arange(0, half, device=x.device).float() / half))
        angles = torch.outer(torch.arange(seq, device=x.device).float(), freqs)
        cos, sin = angles.cos()[None, :, None, :], angles.sin()[None, :, None, :]
        x1, x2 = x.float()[..., :half], x.float()[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).type_as(x)

    class Block(nn.Module):
        def __init__(self, m: dict, attention: str):
            super().__init__()
            h, f = m["hidden"], m["ffn_hidden"]
            self.gpt = m["style"] == "gpt"
            self.heads, self.kv_heads = m["heads"], m["kv_heads"]
            self.head_dim = h // self.heads
            kv = self.kv_heads * self.head_dim
            bias = self.gpt
            norm = (lambda d: nn.LayerNorm(d)) if self.gpt else RMSNorm
            self.attention_norm, self.ffn_norm = norm(h), norm(h)
            self.wq = nn.Linear(h, h, bias=bias)
            self.wk = nn.Linear(h, kv, bias=bias)
            self.wv = nn.Linear(h, kv, bias=bias)
            self.wo = nn.Linear(h, h, bias=bias)
            if self.gpt:
                self.fc1, self.fc2 = nn.Linear(h, f, bias=True), nn.Linear(f, h, bias=True)
            else:
                self.w1 = nn.Linear(h, f, bias=False)
                self.w3 = nn.Linear(h, f, bias=False)
                self.w2 = nn.Linear(f, h, bias=False)
            self.attention = attention

        def attend(self, x):
            b, s, _ = x.shape
            q = self.wq(x).view(b, s, self.heads, self.head_dim)
            k = self.wk(x).view(b, s, self.kv_heads, self.head_dim)
            v = self.wv(x).view(b, s, self.kv_heads, self.head_dim)
            if not self.gpt:
                q, k = rope(q, s), rope(k, s)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            if self.kv_heads != self.heads:  # GQA as torchtitan does it: repeat k and v
                rep = self.heads // self.kv_heads
                k = k.repeat_interleave(rep, dim=1)
                v = v.repeat_interleave(rep, dim=1)
            from torch.nn.attention import SDPBackend, sdpa_kernel

            backend = {
                "flash": SDPBackend.FLASH_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION,
                "math": SDPBackend.MATH,
            }[self.attention]
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(o.transpose(1, 2).reshape(b, s, -1))

        def mlp(self, x):
            if self.gpt:
                return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

        def forward(self, x):
            x = x + self.attend(self.attention_norm(x))
            return x + self.mlp(self.ffn_norm(x))

    class Transformer(nn.Module):
        """Embedding, blocks, final norm, head, and the loss (inside forward, so that FSDP's root
        keeps the head unsharded while a chunked loss recomputes it)."""

        def __init__(self, m: dict, row: Row):
            super().__init__()
            h = m["hidden"]
            self.gpt = m["style"] == "gpt"
            self.tok_embeddings = nn.Embedding(m["vocab"], h)
            if self.gpt:
                self.pos_embeddings = nn.Embedding(m["max_seq"], h)
            self.layers = nn.ModuleList(Block(m, row.attention) for _ in range(m["layers"]))
            self.norm = nn.LayerNorm(h) if self.gpt else RMSNorm(h)
            self.output = nn.Linear(h, m["vocab"], bias=False)
            if self.gpt:
                self.output.weight = self.tok_embeddings.weight  # tied
            self.row = row

        def forward(self, tokens, labels):
            x = self.tok_embeddings(tokens)
            if self.gpt:
                x = x + self.pos_embeddings(torch.arange(tokens.shape[1], device=tokens.device))
            for layer in self.layers:
                x = layer(x)
            x = self.norm(x)
            return compute_loss(self.row, x.flatten(0, 1), self.output.weight, labels.flatten())

    return Block, Transformer


def make_losses(torch, F):
    from torch.utils.checkpoint import checkpoint

    class FusedCrossEntropy(torch.autograd.Function):
        """An in-place fused cross-entropy in plain PyTorch (the memory behaviour of flash-attn's
        CrossEntropyLoss(inplace_backward=True)): no fp32 copy of the logits; the logits and the
        per-token log-sum-exp are saved; backward writes the gradient into the logits. Rows go
        in blocks so the fp32 temporaries are a block's, not the whole logits'."""

        BLOCK = 1024

        @staticmethod
        def forward(ctx, logits, labels):
            lse = torch.empty(logits.shape[0], device=logits.device, dtype=torch.float32)
            for s in range(0, logits.shape[0], FusedCrossEntropy.BLOCK):
                lse[s : s + FusedCrossEntropy.BLOCK] = torch.logsumexp(
                    logits[s : s + FusedCrossEntropy.BLOCK].float(), dim=-1
                )
            picked = logits.gather(1, labels[:, None]).squeeze(1).float()
            ctx.save_for_backward(logits, lse, labels)
            return (lse - picked).mean()

        @staticmethod
        def backward(ctx, grad):
            logits, lse, labels = ctx.saved_tensors
            scale = grad / logits.shape[0]
            for s in range(0, logits.shape[0], FusedCrossEntropy.BLOCK):
                block = logits[s : s + FusedCrossEntropy.BLOCK]
                g = (block.float() - lse[s : s + FusedCrossEntropy.BLOCK, None]).exp_()
                rows = torch.arange(g.shape[0], device=g.device)
                g[rows, labels[s : s + FusedCrossEntropy.BLOCK]] -= 1.0
                block.copy_(g.mul_(scale))  # in place: the logits become their gradient
            return logits, None

    def chunk_tokens(tokens: int, hidden: int, vocab: int) -> int:
        # Liger's default, as shardscope's loss_chunk_tokens: next power of two of
        # ceil(tokens / ceil(vocab / hidden)), at most tokens.
        inc = math.ceil(vocab / hidden)
        return min(1 << max(0, math.ceil(math.log2(math.ceil(tokens / inc)))), tokens)

    def compute_loss(row: Row, x, weight, labels):
        if row.loss == "upcast_fp32":  # torchtitan's cross_entropy_loss
            return F.cross_entropy(F.linear(x, weight).float(), labels)
        if row.loss == "fused":
            return FusedCrossEntropy.apply(F.linear(x, weight), labels)
        # chunked: each chunk's head and loss checkpointed, so backward recomputes them
        chunk = chunk_tokens(x.shape[0], x.shape[1], weight.shape[0])

        def piece(xc, yc):
            return F.cross_entropy(F.linear(xc, weight).float(), yc, reduction="sum")

        total = sum(
            checkpoint(piece, x[s : s + chunk], labels[s : s + chunk], use_reentrant=False)
            for s in range(0, x.shape[0], chunk)
        )
        return total / x.shape[0]

    return compute_loss


# ---------------------------------------------------------------------------------------------
# One row


def selective_op_context(torch):
    """torchtitan's op-level selective checkpointing: save the outputs of compute-heavy ops except
    every second matmul (torchtitan/models/llama3/infra/parallelize.py, _save_list). A fresh
    count per checkpointed call, as torchtitan's context function makes one."""
    from collections import defaultdict

    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    save = {
        torch.ops.aten.mm.default,
        torch.ops.aten._scaled_dot_product_efficient_attention.default,
        torch.ops.aten._scaled_dot_product_flash_attention.default,
    }
    meta = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
        if func == torch.ops.aten.mm.default:
            meta[key] += 1
        keep = func in save and not (func == torch.ops.aten.mm.default and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def apply_checkpointing(torch, model, row: Row):
    if row.checkpointing == "none":
        return
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    for i, layer in enumerate(model.layers):
        if row.checkpointing == "full":
            wrapped = checkpoint_wrapper(layer, preserve_rng_state=False)
        else:
            wrapped = checkpoint_wrapper(
                layer, context_fn=lambda: selective_op_context(torch), preserve_rng_state=False
            )
        model.layers[i] = wrapped


def shard(torch, model, row: Row, block_type):
    bf16_params = row.autocast == "none"
    if row.api == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mesh = init_device_mesh("cuda", (row.world,))
        mp = MixedPrecisionPolicy(
            param_dtype=torch.bfloat16 if bf16_params else torch.float32,
            reduce_dtype=torch.float32,
        )
        for layer in model.layers:
            fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
        fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=False)
        model.to_empty(device="cuda")
        return model
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

    wrap = {CheckpointWrapper} if row.checkpointing != "none" else {block_type}
    mp = MixedPrecision(
        param_dtype=torch.bfloat16 if bf16_params else torch.float32,
        reduce_dtype=torch.float32,
        buffer_dtype=torch.bfloat16 if bf16_params else torch.float32,
    )
    return FSDP(
        model,
        auto_wrap_policy=ModuleWrapPolicy(wrap),
        sharding_strategy=ShardingStrategy.FULL_SHARD,
        mixed_precision=mp,
        device_id=torch.cuda.current_device(),
        param_init_fn=lambda m: m.to_empty(device=torch.device("cuda"), recurse=False),
        limit_all_gathers=True,
        use_orig_params=True,
    )


def init_weights(torch, model):
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)


def measure_row(row: Row, steps: int) -> dict:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.testing._internal.distributed.fake_pg import FakeStore

    result = {k: "" for k in MEASURED}
    result.update(
        oom=0,
        gpu=torch.cuda.get_device_name(),
        gpu_memory_bytes=torch.cuda.get_device_properties(0).total_memory,
        torch_version=torch.__version__,
        cuda_version=torch.version.cuda,
        script_version=SCRIPT_VERSION,
    )
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=row.world)
    block_type, transformer = build_model_classes(torch, nn, F, make_losses(torch, F))
    phase = "setup"
    model = optimizer = None
    try:
        with torch.device("meta"):
            model = transformer(MODELS[row.model], row)
        apply_checkpointing(torch, model, row)
        model = shard(torch, model, row, block_type)
        init_weights(torch, model)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        vocab = MODELS[row.model]["vocab"]
        tokens = torch.randint(0, vocab, (row.micro_batch, row.seq_len), device="cuda")
        labels = torch.randint(0, vocab, (row.micro_batch, row.seq_len), device="cuda")
        autocast = (
            torch.autocast("cuda", dtype=torch.bfloat16)
            if row.autocast == "bf16"
            else torch.autocast("cuda", enabled=False)
        )
        times = []
        for step in range(steps):
            last = step == steps - 1
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            retries0 = torch.cuda.memory_stats().get("num_alloc_retries", 0)
            start.record()
            phase = "forward"
            with autocast:
                loss = model(tokens, labels)
            if last:
                record(torch, result, "forward")
            phase = "backward"
            loss.backward()
            del loss
            if last:
                record(torch, result, "backward")
            phase = "optimizer"
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if last:
                record(torch, result, "optimizer")
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
            if last:
                result["num_alloc_retries"] = (
                    torch.cuda.memory_stats().get("num_alloc_retries", 0) - retries0
                )
                free, total = torch.cuda.mem_get_info()
                result["outside_allocator_bytes"] = total - free - torch.cuda.memory_reserved()
        measured = sorted(times[1:] if len(times) > 1 else times)
        result["step_ms"] = f"{measured[len(measured) // 2]:.3f}"
    except torch.cuda.OutOfMemoryError:
        result.update(oom=1, oom_phase=phase)
    finally:
        del model, optimizer
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        dist.destroy_process_group()
    return result


def record(torch, result: dict, phase: str) -> None:
    """The phase's peaks, then a fresh peak for the next phase."""
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    result[f"{phase}_allocated_bytes"] = torch.cuda.max_memory_allocated()
    result[f"{phase}_reserved_bytes"] = torch.cuda.max_memory_reserved()
    result[f"{phase}_active_bytes"] = stats.get("active_bytes.all.peak", 0)
    torch.cuda.reset_peak_memory_stats()


# ---------------------------------------------------------------------------------------------
# Driver


def header(rows: list[Row]) -> list[str]:
    return ["row"] + list(scenario_columns(rows[0]).keys()) + MEASURED


def worker(args) -> None:
    """Runs the rows given on stdin (JSON lines) in this process; prints one JSON line each."""
    for line in sys.stdin:
        spec = json.loads(line)
        row = Row(**spec["row"])
        try:
            out = measure_row(row, args.steps)
        except Exception as e:  # a row that fails for another reason is reported, not fatal
            out = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps({"index": spec["index"], "result": out}), flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", help="CSV to write (rows are appended as they finish)")
    p.add_argument("--quick", action="store_true", help="8 rows: a smoke test")
    p.add_argument("--list", action="store_true", help="print the grid as CSV settings and stop")
    p.add_argument("--steps", type=int, default=3, help="steps per row; the last is measured")
    p.add_argument("--limit", type=int, default=0, help="run only the first N rows")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return 0
    rows = quick_grid() if args.quick else full_grid()
    if args.limit > 0:
        rows = rows[: args.limit]
    cols = header(rows)
    if args.list:
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(cols[: 1 + len(scenario_columns(rows[0]))])
        for i, r in enumerate(rows):
            w.writerow([i] + list(scenario_columns(r).values()))
        return 0
    if not args.out:
        p.error("--out is required (or --list)")
    if args.steps < 1:
        p.error("--steps must be at least 1")
    tmp = args.out + ".partial"
    started = time.monotonic()
    done = 0
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        # One worker process per allocator setting: PYTORCH_CUDA_ALLOC_CONF is read at CUDA init.
        for expandable in (False, True):
            batch = [(i, r) for i, r in enumerate(rows) if r.expandable_segments == expandable]
            if not batch:
                continue
            env = dict(os.environ)
            env["PYTORCH_CUDA_ALLOC_CONF"] = f"expandable_segments:{expandable}"
            proc = subprocess.Popen(
                [sys.executable, __file__, "--worker", "--steps", str(args.steps)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
            )
            assert proc.stdin and proc.stdout
            for i, r in batch:
                proc.stdin.write(json.dumps({"index": i, "row": asdict(r)}) + "\n")
            proc.stdin.close()
            for line in proc.stdout:
                msg = json.loads(line)
                i, res = msg["index"], msg["result"]
                if "error" in res:
                    print(f"row {i}: {res['error']}", file=sys.stderr)
                    continue
                w.writerow({"row": i, **scenario_columns(rows[i]), **res})
                f.flush()
                done += 1
                elapsed = time.monotonic() - started
                print(f"{done}/{len(rows)} rows, {elapsed:.0f} s", file=sys.stderr)
            if proc.wait() != 0:
                print(f"worker exited with {proc.returncode}", file=sys.stderr)
    os.replace(tmp, args.out)
    print(f"wrote {args.out}: {done} rows in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0 if done == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
