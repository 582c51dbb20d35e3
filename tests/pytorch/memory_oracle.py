#!/usr/bin/env python3
"""Oracle B: PyTorch's own accounting of allocated memory, against `shardscope simulate`.

For every row of the grid below, the same scenario keys (a) build, in plain PyTorch on the CPU,
the model shardscope describes and wrap it with FSDP2 (or FSDP1) exactly as `plan --emit` writes
it, then train two iterations under PyTorch's memory tracker (FSDPMemTracker for FSDP2,
MemTracker for FSDP1) — on the fake process group of world N under FakeTensorMode (no memory is
really allocated, so worlds of 8 to 64 and realistic shapes cost nothing), or with real tensors
over gloo at world 2 as a cross-check of the fake path; and (b) are simulated by shardscope. The
per-phase peaks of allocated bytes (forward, backward, optimizer) must agree within the row's
tolerance (3 % unless the row names a documented cause).

    tests/pytorch/memory_oracle.py --measure --out tests/data/pytorch/fsdp_memory_cpu.csv
    tests/pytorch/memory_oracle.py --check tests/data/pytorch/fsdp_memory_cpu.csv
    tests/pytorch/memory_oracle.py --list

--measure needs PyTorch (the venv of `make pytorch-env`); --check needs only the shardscope
binary and the CSV, so `make test` runs it without PyTorch.

On a GPU, `--device cuda` measures the fake-group rows with real tensors on the GPU instead: the
caching allocator's per-phase peaks of allocated and reserved bytes (torch.cuda.max_memory_*) and
the step time, each row once with the default allocator and once with expandable segments (each
setting in its own process: PYTORCH_CUDA_ALLOC_CONF is read when CUDA starts). `--grid large`
gives the GPU-sized rows (a 1B Llama and GPT-2 XL at 8 and 64 ranks; `large-quick`: 8 of them),
`--grid llama-8b` the default scenario's job (Llama 3.1 8B at 8,192 × 2 tokens, world 8) under each
activation checkpointing: PyTorch's step time with free communication, and memory at 8B scale.

    tests/pytorch/memory_oracle.py --device cuda --measure --out fsdp_memory_cuda.csv
    tests/pytorch/memory_oracle.py --device cuda --grid large-quick --measure --out big.csv
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import itertools
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from shardscope_torch.shapes import TINY_LLAMA, ModelShape  # noqa: E402  (no torch needed)

PHASES = ("forward", "backward", "optimizer", "generation")
TOLERANCE = 0.03

# Shapes large enough that no single small tensor decides a row, small enough for real tensors
# on two CPU cores at world 2. Every dimension is a multiple of 64.
LLAMA = ModelShape(hidden=512, layers=4, heads=8, kv_heads=2, ffn_hidden=1408, vocab=8192)
GPT = ModelShape(hidden=512, layers=4, heads=8, kv_heads=8, ffn_hidden=2048, vocab=8192,
                 mlp="gelu", norm="layernorm", pos_emb="learned", max_seq=1024, bias=True,
                 tie_embeddings=True)
# GPU-sized shapes (--grid large): Llama 3.2 1B's and GPT-2 XL's.
LLAMA_1B = ModelShape(hidden=2048, layers=16, heads=32, kv_heads=8, ffn_hidden=8192, vocab=128256)
GPT2_XL = ModelShape(hidden=1600, layers=48, heads=25, kv_heads=25, ffn_hidden=6400, vocab=50257,
                     mlp="gelu", norm="layernorm", pos_emb="learned", max_seq=2048, bias=True,
                     tie_embeddings=True)
# The default scenario's model (examples/llama3-8b-h100x8.yaml: Llama 3.1 8B), --grid llama-8b.
LLAMA_8B = ModelShape(hidden=4096, layers=32, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256)
# "tiny": for oracles that ask whether PyTorch trains a setting at all (mixed_precision_oracle.py),
# not how much it allocates: real tensors at world 8 in seconds.
# llm-foundry's MPT recipe: LPLayerNorm (low_precision_layernorm) under bf16 autocast over fp32
# parameters (its DEFAULT precision), on the GPT shape.
GPT_LPLN = dataclasses.replace(GPT, norm="low_precision_layernorm")
# llm-foundry's MPT-30B and MPT-13B blocks (scripts/train/yamls/pretrain/mpt-30b.yaml, -13b:
# d_model 7168 and 5120, 56 and 40 heads, expansion 4, vocab 50368, the recipe above), four of
# them (--grid mpt): a block's memory at the scale of the published runs
# (tests/data/published/llm_foundry_mpt.csv), whose peak moves one block at a time.
MPT_30B = ModelShape(hidden=7168, layers=4, heads=56, kv_heads=56, ffn_hidden=28672, vocab=50368,
                     mlp="gelu", norm="low_precision_layernorm", pos_emb="learned", max_seq=8192,
                     bias=True, tie_embeddings=True)
MPT_13B = dataclasses.replace(MPT_30B, hidden=5120, heads=40, kv_heads=40, ffn_hidden=20480,
                              max_seq=16384)
# GPT-2 XL under the MPT recipe: tests/pytorch/memory_edge.py's job, sized for one GPU.
GPT2_XL_LPLN = dataclasses.replace(GPT2_XL, norm="low_precision_layernorm")
# torchtitan's RMSNorm class of 2024 (unfused_rmsnorm): fp32 ops, keeping more than the fused
# kernel.
LLAMA_UNFUSED = dataclasses.replace(LLAMA, norm="unfused_rmsnorm")
LLAMA_8B_UNFUSED = dataclasses.replace(LLAMA_8B, norm="unfused_rmsnorm")
MODELS = {"llama": LLAMA, "gpt": GPT, "llama-1b": LLAMA_1B, "gpt2-xl": GPT2_XL,
          "llama-unfused": LLAMA_UNFUSED, "llama-8b-unfused": LLAMA_8B_UNFUSED,
          "llama-8b": LLAMA_8B, "tiny": TINY_LLAMA, "gpt-lpln": GPT_LPLN,
          "mpt-30b-4blocks": MPT_30B, "mpt-13b-4blocks": MPT_13B, "gpt2-xl-lpln": GPT2_XL_LPLN}


def row(name: str, model: str = "llama", world: int = 8, fake: bool = True, **keys) -> dict:
    return {"name": name, "model": model, "world": world, "fake": fake,
            "keys": {k.replace("__", "."): str(v).lower() if isinstance(v, bool) else str(v)
                     for k, v in keys.items()}}


BF16 = dict(fsdp__mixed_precision__param_dtype="bf16", fsdp__mixed_precision__reduce_dtype="fp32")
AUTOCAST = dict(training__autocast="bf16", fsdp__mixed_precision__reduce_dtype="fp32")


RECIPE_FACTORS = (["llama", "gpt"], ["fsdp2", "fsdp1"], ["none", "full", "selective_op", "every_2"],
                  ["upcast_fp32", "fused", "chunked"])


def recipe_rows(pairwise: bool = False) -> list[dict]:
    """Model × API × activation checkpointing × loss: all 48 rows, or (pairwise) a cover of 16 in
    which every pair of two factors' values appears in some row: the (model, API) pair g and
    checkpointing a keep the loss (a + g) mod 3."""
    models, apis, acs, losses = RECIPE_FACTORS
    rows = []
    for g, (model, api) in enumerate(itertools.product(models, apis)):
        for a, ac in enumerate(acs):
            for l_index, loss in enumerate(losses):
                if pairwise and l_index != (a + g) % len(losses):
                    continue
                rows.append(row(f"{model} {api} {ac} {loss}", model, fsdp__api=api,
                                training__activation_checkpointing=ac, training__loss=loss,
                                **BF16))
    return rows


def grid(pairwise: bool = False) -> list[dict]:
    """The oracle's rows; `pairwise`: what CI measures (make test-pytorch), every fake-tensor row
    but a pairwise cover of the recipe product (recipe_rows), without the four cross-checks with
    real tensors over gloo. The committed CSV holds every row, and `make test` simulates them all
    against it."""
    rows = recipe_rows(pairwise)
    for model, api, ac in itertools.product(["llama", "gpt"], ["fsdp2", "fsdp1"],
                                            ["none", "full"]):
        rows.append(row(f"{model} {api} {ac} autocast", model, fsdp__api=api,
                        training__activation_checkpointing=ac, **AUTOCAST))
    # The low-precision LayerNorm keeps its tensors in bf16 under autocast (a LayerNorm keeps
    # fp32 ones), and without autocast is a LayerNorm.
    for api, ac in itertools.product(["fsdp2", "fsdp1"], ["none", "full"]):
        rows.append(row(f"gpt-lpln {api} {ac} autocast", "gpt-lpln", fsdp__api=api,
                        training__activation_checkpointing=ac, **AUTOCAST))
    rows.append(row("gpt-lpln fsdp2 none bf16", "gpt-lpln", **BF16))
    # The RMSNorm written as ops keeps an fp32 copy of its input and its normalised tensor; a
    # checkpointed block makes them again in its recompute.
    for api, ac in itertools.product(["fsdp2", "fsdp1"], ["none", "full"]):
        rows.append(row(f"llama-unfused {api} {ac} bf16", "llama-unfused", fsdp__api=api,
                        training__activation_checkpointing=ac, **BF16))
    rows.append(row("llama-unfused fsdp2 selective_op bf16", "llama-unfused",
                    training__activation_checkpointing="selective_op", **BF16))
    rows.append(row("llama-unfused fsdp2 none autocast", "llama-unfused", **AUTOCAST))
    for model in ("llama", "gpt"):
        rows.append(row(f"{model} fsdp2 fp32", model))
        rows.append(row(f"{model} fsdp2 math attention", model, model__attention="math", **BF16))
        rows.append(row(f"{model} fsdp2 micro-batch 4", model, training__micro_batch=4, **BF16))
        rows.append(row(f"{model} fsdp2 reshard false", model,
                        fsdp__reshard_after_forward=False, **BF16))
    # MixedPrecisionPolicy.output_dtype and the input casts (docs/semantics.md, "Mixed-precision
    # casts"): the root's logits cast to fp32 in its post-forward, with each loss that reads them;
    # under autocast with fp32 parameters the same policy on every module (the blocks' outputs
    # are already fp32); FSDP1's input casts and buffer dtype, which change nothing here.
    for loss in ("upcast_fp32", "fused"):
        rows.append(row(f"llama fsdp2 output fp32 root {loss}", training__loss=loss,
                        fsdp__mixed_precision__output_dtype="fp32",
                        fsdp__mixed_precision__output_dtype_modules="root", **BF16))
    rows.append(row("llama fsdp2 autocast output fp32", fsdp__mixed_precision__output_dtype="fp32",
                    **AUTOCAST))
    rows.append(row("llama fsdp2 no input cast", fsdp__mixed_precision__cast_forward_inputs=False,
                    **BF16))
    rows.append(row("llama fsdp1 input casts buffer bf16", fsdp__api="fsdp1",
                    fsdp__mixed_precision__cast_forward_inputs=True,
                    fsdp__mixed_precision__cast_root_forward_inputs=False,
                    fsdp__mixed_precision__buffer_dtype="bf16", **BF16))
    # torch.optim's fused AdamW: no foreach temporary in the optimizer step.
    rows.append(row("llama fsdp2 fused adamw", training__optimizer_impl="fused", **BF16))
    # A custom AllGather that keeps one output buffer per group (fsdp.all_gather_buffer).
    rows.append(row("llama fsdp2 persistent all-gather buffers",
                    fsdp__all_gather_buffer="persistent", **BF16))
    rows.append(row("llama fsdp2 persistent all-gather buffers full",
                    fsdp__all_gather_buffer="persistent",
                    training__activation_checkpointing="full", **BF16))
    # Two micro-batches, finalizing every backward or only the last (set_is_last_backward).
    for last in ("every_microbatch", "last_microbatch"):
        rows.append(row(f"llama fsdp2 grad_accum 2 is_last_backward {last}",
                        training__grad_accum=2, fsdp__is_last_backward=last, **BF16))
    for world in (16, 32, 64):
        rows.append(row(f"llama fsdp2 world {world}", world=world, **BF16))
    # training.generation: a registered generate before each step (prefill and decode forwards
    # under no_grad, KV caches; docs/semantics.md, "Generation").
    gen = dict(training__generation__calls=1, training__generation__batch=4,
               training__generation__prompt_tokens=384, training__generation__new_tokens=4)
    for model in ("llama", "gpt"):
        rows.append(row(f"{model} fsdp2 generate", model, **gen, **BF16))
    rows.append(row("llama fsdp2 generate keep unsharded static cache",
                    training__generation__keep_unsharded=True,
                    training__generation__kv_cache="preallocated", **gen, **BF16))
    if pairwise:  # real bf16 tensors on the CPU: about 3 minutes of both cores per row
        return rows
    for model, api in itertools.product(["llama", "gpt"], ["fsdp2", "fsdp1"]):
        rows.append(row(f"{model} {api} real world 2", model, world=2, fake=False,
                        fsdp__api=api, **BF16))
    return rows


def large_grid(quick: bool = False) -> list[dict]:
    """GPU-sized rows: every recipe at 8 ranks for both APIs and three batch shapes, the FSDP2
    ones at 64 ranks, and expandable segments (the CUDA path runs each row with both allocator
    settings anyway)."""
    rows = []
    recipes = list(itertools.product(["none", "selective_op", "full"],
                                     ["upcast_fp32", "fused", "chunked"]))
    shapes = [(2048, 1), (2048, 4), (4096, 2)]
    for model, api, (seq, mb), (ac, loss) in itertools.product(
            ["llama-1b", "gpt2-xl"], ["fsdp2", "fsdp1"], shapes, recipes):
        if MODELS[model].max_seq and seq > MODELS[model].max_seq:
            continue  # past the learned position table: shardscope refuses it, CUDA asserts
        rows.append(row(f"{model} {api} {seq}x{mb} {ac} {loss}", model, fsdp__api=api,
                        training__seq_len=seq, training__micro_batch=mb,
                        training__activation_checkpointing=ac, training__loss=loss, **BF16))
    for model, (ac, loss) in itertools.product(["llama-1b", "gpt2-xl"], recipes):
        rows.append(row(f"{model} fsdp2 world 64 {ac} {loss}", model, world=64,
                        training__seq_len=2048, training__micro_batch=4,
                        training__activation_checkpointing=ac, training__loss=loss, **BF16))
    if quick:
        wanted = {"fsdp2 2048x1 none upcast_fp32", "fsdp2 2048x4 selective_op fused",
                  "fsdp2 4096x2 full chunked", "fsdp1 2048x1 none upcast_fp32"}
        rows = [r for r in rows if r["name"].split(" ", 1)[1] in wanted]
    return rows


def llama_8b_grid() -> list[dict]:
    """The default scenario's job as rank 0 runs it (world 8, 8,192 tokens × 2 per micro-batch)
    under each activation checkpointing: PyTorch's step time with free communication beside the
    simulation's compute, and its memory at 8B scale (one H200 holds the unsharded layers); and
    once with the RMSNorm written as PyTorch ops (unfused_rmsnorm), whose time the model does not
    count in full yet (docs/validation.md, "Norms")."""
    # The H200 that measured them: the H100 preset's 80 GB would not hold the row without
    # checkpointing. Five steps, so that the median step time is a warm one.
    def job(name: str, model: str, ac: str) -> dict:
        return row(name, model, cluster__preset="h200-sxm-141gb", training__seq_len=8192,
                   training__micro_batch=2, training__iterations=5,
                   training__activation_checkpointing=ac, **BF16)

    return [job(f"llama-8b fsdp2 8192x2 {ac}", "llama-8b", ac)
            for ac in ("selective_op", "full", "none")] + [
        job("llama-8b-unfused fsdp2 8192x2 selective_op", "llama-8b-unfused", "selective_op")]


def mpt_grid() -> list[dict]:
    """Two of the published MPT runs shardscope finds out of memory, at four blocks: 30B at
    8,192 × 1 tokens and 13B at 16,384 × 3 on 8 GPUs, as Composer ran them (FSDP1 FULL_SHARD,
    fp32 parameters with bf16 reduction (its DEFAULT), bf16 autocast, full checkpointing, the
    fused loss, BACKWARD_POST prefetch, limit_all_gathers); fake tensors, about 40 s."""
    mpt = dict(fsdp__api="fsdp1", fsdp__mixed_precision__param_dtype="fp32",
               fsdp__mixed_precision__reduce_dtype="bf16", fsdp__backward_prefetch="BACKWARD_POST",
               fsdp__limit_all_gathers=True, training__autocast="bf16",
               training__activation_checkpointing="full", training__loss="fused")
    return [row("mpt-30b fsdp1 8192x1 full fused", "mpt-30b-4blocks", training__seq_len=8192,
                training__micro_batch=1, **mpt),
            row("mpt-13b fsdp1 16384x3 full fused", "mpt-13b-4blocks", training__seq_len=16384,
                training__micro_batch=3, **mpt)]


GRIDS = {"oracle": grid, "pairwise": lambda: grid(pairwise=True), "large": large_grid,
         "large-quick": lambda: large_grid(quick=True), "llama-8b": llama_8b_grid,
         "mpt": mpt_grid}


def scenario_keys(r: dict, device: str | None = None) -> dict[str, str]:
    """The row as a whole scenario. On the CPU (and for a CSV measured there) the cuBLAS
    workspaces, which only CUDA allocates, are left out (docs/semantics.md)."""
    keys = MODELS[r["model"]].scenario_keys()
    keys.update({
        "cluster.preset": "h100-sxm-80gb",
        "cluster.nodes": "1",
        "cluster.gpus_per_node": str(r["world"]),
        "training.seq_len": "512",
        "training.micro_batch": "2",
        "training.iterations": "2",
    })
    if (device or r.get("device", "cpu")) == "cpu":
        keys["cluster.gpu.cublas_workspace"] = "0"
    keys.update(r["keys"])
    return keys


# ---------------------------------------------------------------------------------------------
# PyTorch


def measure_row(r: dict) -> dict:
    """The row under PyTorch's tracker in this process, whose default process group is the
    fake one of world r["world"] (fake rows) or gloo (real rows)."""
    import contextlib

    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker

    from shardscope_torch.fsdp import FsdpSettings, device_mesh, offload_without_cuda, shard_model
    from shardscope_torch.memory import (phase_tracker_class, rounded_like_cuda,
                                         untracked_sharding_propagation)
    from shardscope_torch.model import Transformer
    from shardscope_torch.train import TrainingSettings, build_optimizer, train

    keys = scenario_keys(r)
    shape = MODELS[r["model"]]
    fsdp = FsdpSettings.from_keys(keys, r["world"], r["world"])
    training = TrainingSettings.from_keys(keys)
    device = torch.device("cpu")
    # init_device_mesh reads ranks from a tensor: outside FakeTensorMode.
    mesh = device_mesh(fsdp, "cpu") if fsdp.api == "fsdp2" or fsdp.hybrid else None
    torch.manual_seed(0)
    fake = FakeTensorMode() if r["fake"] else contextlib.nullcontext()
    with fake, rounded_like_cuda(), offload_without_cuda():
        model = Transformer.for_api(shape, fsdp.api, training.loss,
                                    keys.get("model.attention", "flash"))
        model = shard_model(model, fsdp, training.activation_checkpointing, device, mesh)
        optimizer = build_optimizer(model, training.optimizer, training.optimizer_impl)
        if fsdp.api == "fsdp2":
            tracker = phase_tracker_class(FSDPMemTracker)(mod=model, optm=optimizer)
        else:
            tracker = phase_tracker_class(MemTracker)()
            tracker.track_flat_parameters(model)
        with tracker, untracked_sharding_propagation(tracker):
            if training.generation_calls > 0:
                tracker.track_generation(model)  # after the tracker installs its hooks
            train(model, fsdp, training, shape.vocab, device, tracker.set_phase,
                  optimizer=optimizer)
    return {"peaks": tracker.peaks, "breakdown": tracker.breakdown, "peak_at": tracker.peak_at,
            "transitions": tracker.transitions}


@dataclass
class RowJob:
    """A row's training job on a device: what train() needs."""
    keys: dict[str, str]
    shape: ModelShape
    fsdp: object  # shardscope_torch.fsdp.FsdpSettings
    training: object  # shardscope_torch.train.TrainingSettings
    model: object
    optimizer: object


def row_job(r: dict, device_type: str) -> RowJob:
    """The row's model built on the meta device, sharded, materialized on `device_type` with real
    tensors, and its optimizer; this process's default process group is the row's (the fake
    one of world r["world"])."""
    import torch

    from shardscope_torch.fsdp import FsdpSettings, device_mesh, materialize, shard_model
    from shardscope_torch.model import Transformer
    from shardscope_torch.train import TrainingSettings, build_optimizer

    keys = scenario_keys(r, device_type)
    shape = MODELS[r["model"]]
    fsdp = FsdpSettings.from_keys(keys, r["world"], r["world"])
    training = TrainingSettings.from_keys(keys)
    device = torch.device(device_type)
    mesh = device_mesh(fsdp, device_type) if fsdp.api == "fsdp2" or fsdp.hybrid else None
    torch.manual_seed(0)
    with torch.device("meta"):
        model = Transformer.for_api(shape, fsdp.api, training.loss,
                                    keys.get("model.attention", "flash"))
    model = shard_model(model, fsdp, training.activation_checkpointing, device, mesh)
    materialize(model, device)
    optimizer = build_optimizer(model, training.optimizer, training.optimizer_impl)
    return RowJob(keys, shape, fsdp, training, model, optimizer)


def measure_row_cuda(r: dict) -> dict:
    """The row on this process's GPU with real tensors, rank 0 of the fake process group of
    world r["world"] (every rank allocates what rank 0 does): the caching allocator's peaks per
    phase and the step times."""
    import gc

    import torch

    from shardscope_torch.memory import CudaPhasePeaks
    from shardscope_torch.train import train

    job = None
    peaks = CudaPhasePeaks()
    try:
        job = row_job(r, "cuda")
        peaks = CudaPhasePeaks()
        train(job.model, job.fsdp, job.training, job.shape.vocab, torch.device("cuda"),
              peaks.set_phase, optimizer=job.optimizer, on_step=peaks.step_done)
        free, total = torch.cuda.mem_get_info()
        return {"peaks": peaks.allocated, "reserved": peaks.reserved,
                "step_ms": sorted(peaks.step_ms)[len(peaks.step_ms) // 2],
                "alloc_retries": peaks.retries,
                # In use on the device less reserved: the CUDA context and the kernels loaded.
                "outside_allocator_bytes": total - free - torch.cuda.memory_reserved(),
                "device": torch.cuda.get_device_name()}
    except torch.cuda.OutOfMemoryError:
        return {"error": f"out of memory in {peaks.phase or 'setup'}", "traceback": ""}
    finally:
        del job
        gc.collect()
        torch.cuda.empty_cache()


def measure_world(rank: int, world: int, port: int, rows: list[dict], out: str) -> None:
    """One process (fake rows: rank 0 of the fake group) or each gloo rank (real rows) runs
    every row of its world size; rank 0 writes the results."""
    import torch.distributed as dist

    from shardscope_torch.ranks import finish_rank, init_gloo

    if rows[0]["fake"]:
        from torch.testing._internal.distributed.fake_pg import FakeStore

        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    else:
        init_gloo(rank, world, port)
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    results = []
    for r in rows:
        started = time.monotonic()
        try:
            measured = measure_row_cuda(r) if r.get("device") == "cuda" else measure_row(r)
            results.append({"name": r["name"], **measured,
                            "seconds": time.monotonic() - started})
        except Exception as e:  # reported per row; the other rows go on
            import traceback
            results.append({"name": r["name"], "error": f"{type(e).__name__}: {e}",
                            "traceback": traceback.format_exc()})
        if rank == 0:
            print(f"  {r['name']}: {time.monotonic() - started:.1f} s", file=sys.stderr,
                  flush=True)
    if rank == 0:
        Path(out).write_text(json.dumps(results))
    finish_rank()


def expandable(r: dict) -> bool:
    return r["keys"].get("allocator.expandable_segments") == "true"


def measure(rows: list[dict]) -> dict[str, dict]:
    """Every row, one process per world size (per allocator setting on CUDA: the setting is
    read when CUDA starts)."""
    from shardscope_torch.ranks import spawn

    results = {}
    groups = sorted({(r["world"], r["fake"], expandable(r)) for r in rows})
    for world, fake, segments in groups:
        batch = [r for r in rows
                 if r["world"] == world and r["fake"] == fake and expandable(r) == segments]
        cuda = batch[0].get("device") == "cuda"
        how = ("GPU, real tensors, fake process group" if cuda else
               "fake process group, FakeTensorMode" if fake else "gloo, real tensors")
        print(f"pytorch: {len(batch)} rows, world {world}, {how}"
              f"{', expandable segments' if cuda and segments else ''}", file=sys.stderr,
              flush=True)
        saved = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
        if cuda:
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = f"expandable_segments:{segments}"
        try:
            with tempfile.TemporaryDirectory() as tmp:
                out = str(Path(tmp) / "rows.json")
                spawn(measure_world, world, batch, out, processes=1 if fake else world)
                for res in json.loads(Path(out).read_text()):
                    results[res["name"]] = res
        finally:
            if saved is None:
                os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
            else:
                os.environ["PYTORCH_CUDA_ALLOC_CONF"] = saved
    return results


def fused_attention_on_cuda(r: dict) -> bool:
    """Whether CUDA has a fused SDPA kernel for the row: fp32 attention (no mixed precision, no
    autocast) has only the memory-efficient kernel there, which takes no grouped-query heads."""
    keys = {**MODELS[r["model"]].scenario_keys(), **r["keys"]}
    fp32 = ("fsdp.mixed_precision.param_dtype" not in keys and "training.autocast" not in keys)
    return not (fp32 and keys["model.kv_heads"] != keys["model.heads"])


def on_cuda(rows: list[dict]) -> list[dict]:
    """The fake-group rows as GPU rows, each with both allocator settings (real-tensor gloo rows
    are the CPU's cross-check). A row CUDA has no fused attention kernel for runs SDPA's math
    path, as PyTorch's own dispatch would, and says so in its keys."""
    out = []
    for r in rows:
        if not r["fake"]:
            continue
        attention = {} if fused_attention_on_cuda(r) else {"model.attention": "math"}
        for segments in (False, True):
            keys = {**r["keys"], **attention,
                    "allocator.expandable_segments": str(segments).lower()}
            out.append({**r, "name": r["name"] + (" expandable" if segments else ""),
                        "keys": keys, "device": "cuda"})
    return out


# ---------------------------------------------------------------------------------------------
# The CSV and the check

SETTING_COLUMNS = ("row", "model", "world", "fake_tensors", "keys")
MEASURED_COLUMNS = tuple(f"{p}_allocated_bytes" for p in PHASES)
# What only a GPU run measures (the CUDA CSV's further columns).
CUDA_COLUMNS = tuple(f"{p}_reserved_bytes" for p in PHASES) + (
    "step_ms", "alloc_retries", "outside_allocator_bytes", "device")


def write_csv(path: Path, rows: list[dict], results: dict[str, dict]) -> int:
    import torch

    failed = 0
    cuda = any(r.get("device") == "cuda" for r in rows)
    tmp = path.with_suffix(".partial")
    with tmp.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(SETTING_COLUMNS + MEASURED_COLUMNS + (CUDA_COLUMNS if cuda else ()) +
                   ("torch_version",))
        for r in rows:
            res = results[r["name"]]
            if "error" in res:
                failed += 1
                print(f"FAIL  {r['name']}: PyTorch raised {res['error']}\n{res['traceback']}")
                continue
            keys = ";".join(f"{k}={v}" for k, v in sorted(r["keys"].items()))
            extra = []
            if cuda:
                extra = [res["reserved"].get(p, 0) for p in PHASES] + [
                    f"{res['step_ms']:.3f}", res["alloc_retries"],
                    res["outside_allocator_bytes"], res["device"]]
            w.writerow([r["name"], r["model"], r["world"], int(r["fake"]), keys] +
                       [res["peaks"].get(p, 0) for p in PHASES] + extra + [torch.__version__])
    os.replace(tmp, path)
    return failed


def read_csv(path: Path) -> list[dict]:
    out = []
    with path.open() as f:
        lines = list(csv.DictReader(f))
    for line in lines:
        keys = dict(kv.split("=", 1) for kv in line["keys"].split(";") if kv)
        r = {"name": line["row"], "model": line["model"], "world": int(line["world"]),
             "fake": line["fake_tensors"] == "1", "keys": keys,
             # CSVs measured before the generation phase have no column for it (0 there).
             "measured": {p: int(line.get(f"{p}_allocated_bytes") or 0) for p in PHASES}}
        if "forward_reserved_bytes" in line:  # measured on a GPU
            r["device"] = "cuda"
            r["reserved"] = max(int(line.get(f"{p}_reserved_bytes") or 0) for p in PHASES)
            if line.get("step_ms"):
                r["step_ms"] = float(line["step_ms"])
        out.append(r)
    return out


# Differences between shardscope and PyTorch that are understood but not yet modelled, each with
# the rows it covers, the phase, the bound it is held to (a test fails beyond it) and its cause
# (docs/validation.md, "Against PyTorch itself").
KNOWN_DIFFERENCES = [
    {
        "name": "block backward's gradients at once",
        "applies": lambda r: r["keys"].get("training.loss") in ("fused", "chunked")
        and not gpt_on_gpu(r),
        "phases": ("backward",),
        "bound": 0.10,
        "cause": "when the backward peak falls inside a block's backward (the fused and chunked "
                 "losses keep the loss below it), shardscope holds (FSDP2) all the block's weight "
                 "gradients from the start of its backward op, where PyTorch makes them one "
                 "linear at a time; the activations' gradients and the saved tensors released "
                 "as the backward consumes them are priced at the backward's largest moment "
                 "(block_backward_workspace). FSDP2 rows are 3-5 % high; Llama's FSDP1 rows 5-9 % "
                 "high, with and without checkpointing, for a reason not yet found",
    },
    {
        "name": "FSDP1 cast beside the MLP",
        "applies": lambda r: r["model"].startswith("mpt-"),
        "phases": ("forward",),
        "bound": 0.04,
        "cause": "a checkpointed block's forward under FSDP1 and autocast: shardscope holds its "
                 "largest weight cast beside the MLP's intermediates; PyTorch frees each cast after "
                 "its projection, before GELU makes the second intermediate (+3.3 % at MPT-30B's "
                 "width, within 3 % at 13B's)",
    },
]


def on_gpu(r: dict) -> bool:
    return r.get("device") == "cuda"


def gpt_fsdp1(r: dict) -> bool:
    return r["model"] == "gpt" and r["keys"].get("fsdp.api") == "fsdp1"


def gpt_on_gpu(r: dict) -> bool:
    return on_gpu(r) and r["model"] == "gpt"


# What the first GPU measurement (tests/data/measured/2026-11-27-h200, an H200) found beyond the
# tolerance and shardscope does not explain yet: each held at the size it was measured at, so that
# a change that makes it worse fails, until its cause is found and modelled (docs/validation.md,
# "The first GPU campaign"). The CPU's rows of the same settings are within 3 %.
OPEN_ON_GPU = [
    {
        "name": "math attention on CUDA",
        "applies": lambda r: on_gpu(r) and r["keys"].get("model.attention") == "math"
        and "fsdp.mixed_precision.param_dtype" in r["keys"],
        "phases": ("forward", "backward", "optimizer"),
        "bound": 0.40,
        "cause": "bf16 with SDPA's math path: PyTorch allocates about 65 MiB more than shardscope "
                 "from the forward on and keeps it through the optimizer step (-16 % forward, "
                 "-37 % optimizer); not seen on the CPU, nor with fp32 (whose math rows match)",
    },
    {
        "name": "FSDP1 GPT-2 on CUDA",
        "applies": lambda r: on_gpu(r) and gpt_fsdp1(r),
        "phases": ("forward", "optimizer"),
        "bound": 0.05,
        "cause": "FSDP1 with the tied-embedding GPT-2: 5.0 MiB more in the optimizer step with "
                 "the default allocator settings (none with expandable segments) and 3-5 % more "
                 "in the fused and chunked losses' forward; not a block's unsplit remainder, "
                 "which shardscope's allocator model already counts as allocated",
    },
    {
        "name": "GPT block backward on CUDA",
        "applies": lambda r: gpt_on_gpu(r) and r["keys"].get("training.loss") != "upcast_fp32",
        "phases": ("backward",),
        "bound": 0.10,
        "cause": "GPT-style blocks (GELU, LayerNorm, biases, fused qkv, tied embeddings) with the "
                 "fused and chunked losses: PyTorch's backward peak on the H200 is 3.5-9.2 % above "
                 "shardscope's, whose block backward is priced at its largest moment (FSDP1 5-9 %, "
                 "FSDP2 3.5-5 %), while the CPU's rows of the same settings are within 1.3 % "
                 "(FSDP1) and Llama's CUDA rows within 5 %: PyTorch holds about 14 MB more on CUDA "
                 "than on the CPU beyond the cuBLAS workspaces, for a reason not yet found",
    },
    {
        "name": "root fp32 output on CUDA",
        "applies": lambda r: on_gpu(r) and r["keys"].get("fsdp.mixed_precision.output_dtype")
        == "fp32" and r["keys"].get("training.loss") == "fused",
        "phases": ("forward",),
        "bound": 0.04,
        "cause": "FSDP2's root fp32 output with the fused loss: PyTorch's forward peak is 3.0-3.2 % "
                 "above shardscope's on CUDA, within 3 % on the CPU",
    },
]


def tolerance(r: dict, phase: str) -> tuple[float, str]:
    for k in KNOWN_DIFFERENCES + OPEN_ON_GPU:
        if phase in k["phases"] and k["applies"](r):
            return k["bound"], k["name"]
    return TOLERANCE, ""


def same_measurements(measured: list[dict], expected: list[dict]) -> bool:
    """PyTorch's accounting is deterministic: the committed CSV must be what it measures now."""
    want = {r["name"]: r for r in expected}
    differ = [r["name"] for r in measured
              if r["name"] not in want or r["measured"] != want[r["name"]]["measured"]]
    for name in differ:
        print(f"FAIL  {name}: PyTorch now measures {next(r['measured'] for r in measured if r['name'] == name)}, "
              f"the committed CSV says {want.get(name, {}).get('measured', 'nothing')}")
    if differ:
        print("re-measure with: tests/pytorch/memory_oracle.py --measure --out "
              "tests/data/pytorch/fsdp_memory_cpu.csv (and review the change)")
    return not differ


def check(rows: list[dict]) -> int:
    """Simulates every row; prints the table; returns the number of rows off by more than their
    tolerance in a phase (TOLERANCE, or a known difference's bound)."""
    from shardscope_torch import shardscope

    failed, within, errors = 0, 0, {p: [] for p in PHASES}
    reserved_errors = []
    print(f"{'row':44} {'phase':9} {'pytorch':>12} {'shardscope':>12} {'error':>8}")
    for r in rows:
        summary = shardscope.simulate(scenario_keys(r))
        predicted = summary["peak_allocated_by_phase_bytes"]
        if "reserved" in r:  # a GPU row: the step's peak reserved, reported (not yet held)
            m, s = r["reserved"], summary["peak_memory"]["reserved_bytes"]
            err = (s - m) / m if m else 0.0
            reserved_errors.append(abs(err))
            print(f"{r['name']:44} {'reserved':9} {m:12,} {s:12,} {100 * err:+7.2f}%")
        bad, strict = False, True
        for p in PHASES:
            m, s = r["measured"][p], predicted[p]
            if m == 0 and s == 0:  # a phase the row does not have (generation)
                continue
            err = (s - m) / m if m else 0.0
            errors[p].append(abs(err))
            bound, known = tolerance(r, p)
            flag = abs(err) > bound
            bad |= flag
            strict &= abs(err) <= TOLERANCE
            note = "  FAIL" if flag else f"  ({known})" if abs(err) > TOLERANCE else ""
            print(f"{r['name']:44} {p:9} {m:12,} {s:12,} {100 * err:+7.2f}%{note}")
        failed += bad
        within += strict
    for p in PHASES:
        e = errors[p]
        if e:
            print(f"{p}: mean |error| {100 * sum(e) / len(e):.2f} %, max {100 * max(e):.2f} % "
                  f"over {len(e)} rows")
    if reserved_errors:
        print(f"reserved (peak of the step): mean |error| "
              f"{100 * sum(reserved_errors) / len(reserved_errors):.2f} %, max "
              f"{100 * max(reserved_errors):.2f} % over {len(reserved_errors)} rows")
    print(f"{within} of {len(rows)} rows within {100 * TOLERANCE:.0f} % in every phase; "
          f"{failed} beyond their tolerance")
    return failed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--list", action="store_true", help="print the rows and stop")
    p.add_argument("--row", default="", help="only rows whose name contains this text")
    p.add_argument("--measure", action="store_true", help="run PyTorch (needs the venv)")
    p.add_argument("--out", type=Path, help="--measure: write the CSV here")
    p.add_argument("--expect", type=Path,
                   help="--measure: fail unless PyTorch measures exactly this CSV's numbers")
    p.add_argument("--check", type=Path, help="simulate every row of this CSV and compare")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: real tensors on this machine's GPU, allocated and reserved bytes")
    p.add_argument("--grid", choices=sorted(GRIDS), default="oracle",
                   help="the rows: the oracle's (default), CI's share of them (pairwise) or\n"
                        "GPU-sized ones (large, large-quick, llama-8b), or MPT blocks (mpt)")
    p.add_argument("--part", default="1/1", metavar="K/N",
                   help="only every N-th row from the K-th (to measure in N processes)")
    args = p.parse_args()
    try:
        part, parts = (int(x) for x in args.part.split("/"))
        if not 1 <= part <= parts:
            raise ValueError
    except ValueError:
        p.error(f"--part: {args.part!r} is not K/N with 1 <= K <= N")
    rows = GRIDS[args.grid]()
    if args.device == "cuda":
        rows = on_cuda(rows)
    rows = [r for r in rows if args.row in r["name"]][part - 1::parts]
    if args.list:
        for r in rows:
            print(f"{r['name']:44} world {r['world']:3} {'fake' if r['fake'] else 'real'}  "
                  f"{r['keys']}")
        return 0
    if args.measure:
        if args.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                print("--device cuda: no CUDA device is usable here", file=sys.stderr)
                return 2
        started = time.monotonic()
        results = measure(rows)
        out = args.out or Path(tempfile.mkdtemp()) / f"fsdp_memory_{args.device}.csv"
        failed = write_csv(out, rows, results)
        print(f"wrote {out}: {len(rows) - failed} rows in {time.monotonic() - started:.0f} s",
              file=sys.stderr)
        if failed:
            return 1
        measured = [r for r in read_csv(out) if args.row in r["name"]]
        if args.expect and not same_measurements(measured, read_csv(args.expect)):
            return 1
        return 1 if check(measured) else 0
    if args.check:
        return 1 if check([r for r in read_csv(args.check) if args.row in r["name"]]) else 0
    p.error("give --measure, --check CSV or --list")
    return 2


if __name__ == "__main__":
    sys.exit(main())
