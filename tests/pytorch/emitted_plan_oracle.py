#!/usr/bin/env python3
"""Emitted plans run: every `shardscope plan --emit` target, planned for a tiny Llama, under real
PyTorch.

    emitted_plan_oracle.py [--case TEXT] [--list] [--keep DIR] [--device cuda]

For each case the CLI plans the tiny scenario with the case's --fix / --set and emits its best
configuration. An fsdp2 or fsdp1 file is imported, unchanged but for DEVICE = "cpu", by one gloo
process per rank; it shards the model with its own apply_fsdp, builds its own optimizer and runs
its own train_step for two optimizer steps of random tokens. Each run must train (every
micro-batch's loss finite, every parameter changed on some rank), and the settings read back from
the live objects must equal the plan's (its ranked settings and the case's --set keys): the mesh,
reshard_after_forward per group, mixed precision, offload, the groups and their prefetch lists
(FSDP2), the sharding strategy, prefetch and rate limiter (FSDP1), the checkpoint wrappers, the
loss the code called, autocast inside forward, the gradient-sync calls, the optimizer and the
allocator setting. A torchtitan TOML is loaded by torchtitan's own ConfigManager and the JobConfig
it makes, mapped to scenario keys by tests/cli/plan_readback.py, must equal the plan.

flash-attn's and Liger's losses are not installable without CUDA: stand-ins with their call
signatures (plain PyTorch, the memory behaviour of the recipe, shardscope_torch.model) are put
under their module names and record that they were called. CPU offload runs under
shardscope_torch.fsdp.offload_without_cuda (pinning is a no-op without a CUDA driver).

--device cuda (scripts/gpu-campaign) runs the best plan of each target for one GPU there instead:
DEVICE stays "cuda", one rank over NCCL (NCCL takes one GPU per rank).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import re
import sys
import tempfile
import time
import traceback
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "tests" / "cli"))

from shardscope_torch import shardscope  # noqa: E402
from shardscope_torch.shapes import TINY_LLAMA  # noqa: E402

STEPS = 2
SEQUENCES_PER_STEP = 8  # --global-batch-seqs: micro_batch × grad_accum × world


def case(name: str, target: str, nodes: int, gpus_per_node: int, *plan_args: str,
         refused: str = "") -> dict:
    """A plan to emit and run. `refused`: text the emitted code's error must contain instead (a
    setting this PyTorch cannot apply, which the code must refuse clearly)."""
    return {"name": name, "target": target, "nodes": nodes, "gpus_per_node": gpus_per_node,
            "world": nodes * gpus_per_node, "args": list(plan_args), "refused": refused}


def generation(**keys) -> list[str]:
    """--set arguments of training.generation.<key>=<value>."""
    return [a for k, v in keys.items() for a in ("--set", f"training.generation.{k}={v}")]


def all_cases() -> list[dict]:
    one = "--fix fsdp.separate_reduce_scatter_group=false".split()  # see fsdp2-separate-rs
    return [
        case("fsdp2-best", "fsdp2", 1, 2, *one),
        case("fsdp2-prefetch-chunked", "fsdp2", 1, 2, *one,
             "--fix", "fsdp.wrap.blocks_per_group=1", "--fix", "fsdp.forward_prefetch_modules=2",
             "--fix", "fsdp.backward_prefetch_modules=2", "--fix", "training.loss=chunked",
             "--fix", "training.activation_checkpointing=selective_op",
             "--fix", "fsdp.reshard_after_forward=true",
             "--fix", "fsdp.reshard_last_after_forward=true",
             "--fix", "allocator.expandable_segments=true", "--fix", "training.micro_batch=2",
             "--set", "fsdp.requires_gradient_sync=last_microbatch",
             "--set", "fsdp.post_optim_event=true", "--set", "fsdp.reshard_after_backward=false",
             "--set", "fsdp.comm_buffer_pool=process_group",
             *generation(calls=2, batch=2, prompt_tokens=4, new_tokens=3)),
        case("fsdp2-hsdp-groups-offload-autocast", "fsdp2", 2, 2, *one,
             "--fix", "fsdp.mesh.shard=2", "--fix", "fsdp.cpu_offload.params=true",
             "--fix", "fsdp.wrap.blocks_per_group=2",
             "--fix", "training.activation_checkpointing=every_2",
             "--fix", "fsdp.mixed_precision.param_dtype=bf16", "--fix", "training.loss=fused",
             "--fix", "training.micro_batch=1", "--set", "training.autocast=bf16",
             "--set", "fsdp.is_last_backward=last_microbatch",
             "--set", "fsdp.reshard_root_after_forward=true",
             "--set", "fsdp.requires_all_reduce=last_microbatch",
             "--set", "fsdp.cpu_offload.pin_memory=false",
             *generation(calls=1, batch=1, prompt_tokens=5, new_tokens=2, keep_unsharded="true",
                         kv_cache="preallocated")),
        case("fsdp2-int-reshard", "fsdp2", 2, 2, *one,
             "--fix", "fsdp.mesh.shard=4", "--fix", "fsdp.reshard_after_forward=2", "--fix", "training.activation_checkpointing=full",
             "--fix", "training.loss=upcast_fp32", "--fix", "fsdp.mixed_precision.reduce_dtype=fp32",
             "--set", "training.optimizer=adam", "--set", "training.optimizer_impl=fused",
             "--set", "fsdp.mixed_precision.output_dtype=fp32",
             "--set", "fsdp.mixed_precision.output_dtype_modules=root",
             "--set", "fsdp.mixed_precision.cast_forward_inputs=false",
             "--set", "fsdp.all_gather_buffer=persistent"),
        case("fsdp2-separate-rs", "fsdp2", 1, 2, "--fix", "fsdp.separate_reduce_scatter_group=true",
             refused="pytorch#186335"),
        case("fsdp1-best", "fsdp1", 1, 2),
        case("fsdp1-knobs", "fsdp1", 1, 2,
             "--fix", "fsdp.sharding_strategy=SHARD_GRAD_OP", "--fix", "fsdp.backward_prefetch=none",
             "--fix", "fsdp.forward_prefetch=true", "--fix", "fsdp.limit_all_gathers=false",
             "--fix", "training.activation_checkpointing=full", "--fix", "training.loss=upcast_fp32",
             "--fix", "training.micro_batch=1", "--fix", "fsdp.mixed_precision.param_dtype=bf16",
             "--fix", "fsdp.mixed_precision.reduce_dtype=bf16",
             "--set", "fsdp.api=fsdp1", "--set", "fsdp.mixed_precision.keep_low_precision_grads=true",
             "--set", "training.optimizer=sgd",
             "--set", "fsdp.requires_gradient_sync=last_microbatch",
             "--set", "fsdp.mixed_precision.buffer_dtype=bf16",
             "--set", "fsdp.mixed_precision.cast_forward_inputs=true",
             "--set", "fsdp.mixed_precision.cast_root_forward_inputs=false",
             "--set", "fsdp.mixed_precision.module_classes_to_ignore=_BatchNorm,SyncBatchNorm"),
        case("fsdp1-hybrid-chunked-offload", "fsdp1", 2, 2,
             "--fix", "fsdp.sharding_strategy=HYBRID_SHARD", "--fix", "fsdp.backward_prefetch=BACKWARD_POST",
             "--fix", "training.loss=chunked", "--fix", "fsdp.cpu_offload.params=true",
             "--fix", "training.activation_checkpointing=every_2"),
        case("torchtitan-best", "torchtitan", 1, 2),
        case("torchtitan-hsdp", "torchtitan", 2, 2, "--fix", "fsdp.mesh.shard=2",
             "--fix", "fsdp.reshard_after_forward=false",
             "--fix", "training.activation_checkpointing=selective_op"),
    ]


def gpu_cases() -> list[dict]:
    """The best plan of each target for one GPU (NCCL takes one GPU per rank)."""
    return [case("fsdp2-best-1gpu", "fsdp2", 1, 1,
                 "--fix", "fsdp.separate_reduce_scatter_group=false"),
            case("fsdp1-best-1gpu", "fsdp1", 1, 1),
            case("torchtitan-best-1gpu", "torchtitan", 1, 1)]


def scenario_keys(c: dict) -> dict[str, str]:
    keys = TINY_LLAMA.scenario_keys()
    keys.update({
        "cluster.preset": "h100-sxm-80gb",
        "cluster.nodes": str(c["nodes"]),
        "cluster.gpus_per_node": str(c["gpus_per_node"]),
        "training.seq_len": "16",
        "training.micro_batch": "1",
        "training.iterations": str(STEPS),
    })
    return keys


def plan(c: dict, workdir: Path) -> tuple[Path, dict[str, str]]:
    """Plans and emits the case; returns the emitted file and the settings it must have (the
    plan's ranked settings and the case's --set keys)."""
    scenario = workdir / f"{c['name']}.yaml"
    scenario.write_text(shardscope.scenario_yaml(scenario_keys(c)))
    emitted = workdir / f"{c['name']}.{'toml' if c['target'] == 'torchtitan' else 'py'}"
    ranking = workdir / f"{c['name']}.plan.json"
    shardscope.run(["plan", str(scenario), "--top", "1", "--threads", "1",
                    "--global-batch-seqs", str(SEQUENCES_PER_STEP), *c["args"],
                    "--emit", c["target"], str(emitted), "--json", str(ranking)])
    expected = dict(json.loads(ranking.read_text())["ranked"][0]["settings"])
    args = c["args"]
    for flag, kv in zip(args, args[1:]):
        if flag == "--set":
            key, value = kv.split("=", 1)
            expected[key] = value
    return emitted, expected


# ---------------------------------------------------------------------------------------------
# Stand-ins for the loss packages the emitted code imports


def install_loss_stand_ins(called: list[str]) -> None:
    """flash_attn.losses.cross_entropy.CrossEntropyLoss and
    liger_kernel.transformers.LigerFusedLinearCrossEntropyLoss, with their call signatures."""
    from shardscope_torch.model import FusedCrossEntropy, compute_loss

    class CrossEntropyLoss:
        def __init__(self, inplace_backward: bool = False, **kwargs):
            self.inplace_backward = inplace_backward

        def __call__(self, logits, labels):
            called.append("fused" if self.inplace_backward else "flash-attn out of place")
            return FusedCrossEntropy.apply(logits, labels)

    class LigerFusedLinearCrossEntropyLoss:
        def __call__(self, lin_weight, _input, target, bias=None):
            called.append("chunked")
            return compute_loss("chunked", _input, lin_weight, target)

    modules = {
        "flash_attn": {}, "flash_attn.losses": {},
        "flash_attn.losses.cross_entropy": {"CrossEntropyLoss": CrossEntropyLoss},
        "liger_kernel": {},
        "liger_kernel.transformers": {
            "LigerFusedLinearCrossEntropyLoss": LigerFusedLinearCrossEntropyLoss},
    }
    for name, attrs in modules.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module


def load_emitted(path: Path, called: list[str], device_type: str):
    """Imports an emitted file as a fresh module for `device_type`; records the cross-entropy it
    calls."""
    import torch.nn.functional as F

    os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)  # the module sets it when the plan says so
    spec = importlib.util.spec_from_file_location(f"emitted_{path.stem.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.DEVICE = device_type
    if hasattr(module, "F"):  # the upcast recipe: F.cross_entropy on an fp32 copy
        def cross_entropy(logits, labels, *args, **kwargs):
            called.append("upcast_fp32" if logits.dtype.is_floating_point
                          and logits.element_size() == 4 else f"cross_entropy on {logits.dtype}")
            return F.cross_entropy(logits, labels, *args, **kwargs)

        module.F = types.SimpleNamespace(cross_entropy=cross_entropy)
    return module


def build_model(module, chunked: bool):
    """The tiny Llama as the emitted code expects it: logits, or under a chunked loss the final
    hidden states (FSDP2) or, given labels, the emitted chunked_loss of them (FSDP1)."""
    from shardscope_torch.model import Transformer

    class Model(Transformer):
        def forward(self, tokens, labels=None, caches=None):  # caches: the rollout's generate
            out = super().forward(tokens, caches=caches)
            return out if labels is None else module.chunked_loss(self.head_weight(), out, labels)

    return Model(TINY_LLAMA, loss="chunked" if chunked else "upcast_fp32")


# ---------------------------------------------------------------------------------------------
# Reading the settings back from the live objects

DTYPE_NAMES = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}


def dtype_key(dtype) -> str:
    return "fp32" if dtype is None else DTYPE_NAMES[str(dtype)]


def checkpointing(model) -> str:
    """The policy the checkpoint wrappers implement, from which blocks they wrap and whether they
    carry a selective context."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

    blocks, selective = set(), set()
    for name, m in model.named_modules():
        if isinstance(m, CheckpointWrapper):
            blocks.add(int(re.search(r"layers\.(\d+)", name).group(1)))
            selective.add(m.checkpoint_fn.keywords.get("context_fn") is not None)
    layers = TINY_LLAMA.layers
    if not blocks:
        return "none"
    if blocks == set(range(layers)):
        return "selective_op" if selective == {True} else "full" if selective == {False} else "mixed"
    for n in range(2, layers + 1):
        if blocks == {i for i in range(layers) if (i + 1) % n == 0} and selective == {False}:
            return f"every_{n}"
    return f"blocks {sorted(blocks)}"


def sync_schedule(calls: list[bool], grad_accum: int) -> str | None:
    """every_microbatch or last_microbatch from the per-micro-batch calls; None when one
    micro-batch per step cannot tell them apart."""
    if grad_accum == 1:
        return None
    return "every_microbatch" if all(calls) else "last_microbatch"


def reshard_value(group) -> str:
    info = group.post_forward_mesh_info
    if info is None:
        return "false"
    return "true" if info is group.mesh_info else str(info.shard_mesh_size)


def fsdp2_settings(model) -> dict[str, str]:
    from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule

    states = []  # one per fully_shard call, forward order of the blocks, the root last
    for m in model.modules():
        if isinstance(m, FSDPModule):
            state = m._get_fsdp_state()
            if all(state is not s for s in states):
                states.append(state)
    root = model._get_fsdp_state()
    blocks = [s for s in states if s is not root]
    out = {"fsdp.api": "fsdp2"}
    groups = [s._fsdp_param_group for s in states]
    # The groups before the last say reshard_after_forward and the group size; with one group,
    # that group.
    leading = blocks[:-1] or blocks
    first = groups[0]
    mesh = first.mesh_info.mesh
    replicate, shard = (1, mesh.shape[0]) if mesh.ndim == 1 else tuple(mesh.shape)
    out["fsdp.mesh.replicate"], out["fsdp.mesh.shard"] = str(replicate), str(shard)
    for key, values in {
        "fsdp.mixed_precision.param_dtype": {dtype_key(g.mp_policy.param_dtype) for g in groups},
        "fsdp.mixed_precision.reduce_dtype": {
            dtype_key(g.mp_policy.reduce_dtype or g.mp_policy.param_dtype) for g in groups},
        "fsdp.cpu_offload.params": {str(isinstance(g.offload_policy, CPUOffloadPolicy)).lower()
                                    for g in groups},
        "fsdp.reshard_after_backward": {str(g.reshard_after_backward).lower() for g in groups},
        "fsdp.reshard_after_forward": {reshard_value(s._fsdp_param_group) for s in leading},
        "fsdp.wrap.blocks_per_group": {str(len(s._modules)) for s in leading},
    }.items():
        out[key] = values.pop() if len(values) == 1 else f"differs by group: {sorted(values)}"
    if isinstance(first.offload_policy, CPUOffloadPolicy):
        out["fsdp.cpu_offload.pin_memory"] = str(first.offload_policy.pin_memory).lower()
    comms = {type(g._all_gather_comm).__name__ for g in groups}
    comms |= {type(g._reduce_scatter_comm).__name__ for g in groups}
    pooled = {"ProcessGroupAllocAllGather", "ProcessGroupAllocReduceScatter"}
    default = {"DefaultAllGather", "DefaultReduceScatter"}
    out["fsdp.all_gather_buffer"] = ("persistent" if comms == {"PersistentAllGather",
                                                               "DefaultReduceScatter"}
                                     else "caching_allocator" if comms in (default, pooled)
                                     else f"differs by group: {sorted(comms)}")
    out["fsdp.comm_buffer_pool"] = ("process_group" if comms == pooled
                                    else "caching_allocator" if not comms & pooled
                                    else f"differs by group: {sorted(comms)}")
    output = root._mp_policy.output_dtype
    out["fsdp.mixed_precision.output_dtype"] = "none" if output is None else dtype_key(output)
    out["fsdp.mixed_precision.output_dtype_modules"] = (
        "every_module" if all(s._mp_policy.output_dtype == output for s in blocks) else "root")
    casts = {str(s._mp_policy.cast_forward_inputs).lower() for s in states}
    out["fsdp.mixed_precision.cast_forward_inputs"] = (
        casts.pop() if len(casts) == 1 else f"differs by group: {sorted(casts)}")
    last = reshard_value(blocks[-1]._fsdp_param_group)
    out["fsdp.reshard_last_after_forward"] = str(last == out["fsdp.reshard_after_forward"]).lower()
    out["fsdp.reshard_root_after_forward"] = str(
        reshard_value(root._fsdp_param_group) != "false").lower()
    for key, attr, step in (("fsdp.forward_prefetch_modules", "_states_to_forward_prefetch", 1),
                            ("fsdp.backward_prefetch_modules", "_states_to_backward_prefetch", -1)):
        out[key] = prefetch_depth(blocks, attr, step)
    if not hasattr(model, "set_separate_reduce_scatter_group"):
        out["fsdp.separate_reduce_scatter_group"] = "false"  # the emitted code refuses otherwise
    return out


def prefetch_depth(blocks: list, attr: str, step: int) -> str:
    """N when every group's explicit prefetch list is the next N groups (forward, step 1) or the
    previous N, nearest first (backward, step -1); 0 for empty lists (implicit prefetch)."""
    for n in range(len(blocks)):
        if all([blocks[j] for j in range(i + step, i + step * (n + 1), step)
                if 0 <= j < len(blocks)] == getattr(s, attr) for i, s in enumerate(blocks)):
            return str(n)
    return f"not the N-ahead pattern: {[len(getattr(s, attr)) for s in blocks]}"


def fsdp1_settings(model, world: int) -> dict[str, str]:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy

    from shardscope_torch.model import Block

    out = {"fsdp.api": "fsdp1", "fsdp.sharding_strategy": model.sharding_strategy.name}
    strategy = model.sharding_strategy
    if strategy in (ShardingStrategy.HYBRID_SHARD, ShardingStrategy._HYBRID_SHARD_ZERO2):
        replicate, shard = model._inter_node_pg.size(), model.process_group.size()
    elif strategy == ShardingStrategy.NO_SHARD:
        replicate, shard = world, 1
    else:
        replicate, shard = 1, model.process_group.size()
    out["fsdp.mesh.replicate"], out["fsdp.mesh.shard"] = str(replicate), str(shard)
    mp = model.mixed_precision
    out["fsdp.mixed_precision.param_dtype"] = dtype_key(mp.param_dtype)
    out["fsdp.mixed_precision.reduce_dtype"] = dtype_key(mp.reduce_dtype or mp.param_dtype)
    out["fsdp.mixed_precision.keep_low_precision_grads"] = str(mp.keep_low_precision_grads).lower()
    if mp.buffer_dtype is not None:
        out["fsdp.mixed_precision.buffer_dtype"] = dtype_key(mp.buffer_dtype)
    out["fsdp.mixed_precision.cast_forward_inputs"] = str(mp.cast_forward_inputs).lower()
    out["fsdp.mixed_precision.cast_root_forward_inputs"] = str(
        mp.cast_root_forward_inputs).lower()
    out["fsdp.mixed_precision.module_classes_to_ignore"] = ",".join(
        c.__name__ for c in mp._module_classes_to_ignore)
    out["fsdp.cpu_offload.params"] = str(model.cpu_offload.offload_params).lower()
    prefetch = model.backward_prefetch
    out["fsdp.backward_prefetch"] = "none" if prefetch is None else prefetch.name
    out["fsdp.forward_prefetch"] = str(model.forward_prefetch).lower()
    out["fsdp.limit_all_gathers"] = str(model.limit_all_gathers).lower()
    units = [m for m in model.modules() if isinstance(m, FSDP) and m is not model]
    per_unit = {sum(isinstance(x, Block) for x in u.modules()) for u in units}
    out["fsdp.wrap.blocks_per_group"] = str(per_unit.pop()) if len(per_unit) == 1 else str(per_unit)
    return out


# ---------------------------------------------------------------------------------------------
# One rank


def local_parameters(model) -> dict[str, "torch.Tensor"]:
    """This rank's values of every parameter: a DTensor's local shard, FSDP1's sharded view."""
    return {n: (p.to_local() if hasattr(p, "to_local") else p).detach().clone()
            for n, p in model.named_parameters()}


def run_case(c: dict, path: Path, world: int, device: "torch.device") -> dict:
    import torch
    import torch.distributed as dist

    from shardscope_torch.fsdp import offload_without_cuda
    from shardscope_torch.model import Block

    called: list[str] = []
    install_loss_stand_ins(called)
    module = load_emitted(path, called, device.type)
    expandable = "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    torch.manual_seed(0)  # the same initial parameters on every rank
    model = build_model(module, hasattr(module, "LigerFusedLinearCrossEntropyLoss"))
    autocast = set()
    model.register_forward_pre_hook(lambda m, args: autocast.add(
        str(torch.get_autocast_dtype(device.type)) if torch.is_autocast_enabled(device.type)
        else "none"))
    losses, syncs, all_reduces, post_optim_events, last_backwards = [], [], [], [], []
    original_loss = module.compute_loss

    def compute_loss(model, batch):
        value = original_loss(model, batch)
        losses.append(float(value.detach()))
        return value

    module.compute_loss = compute_loss
    with offload_without_cuda():
        if c["target"] == "fsdp2":
            model = module.apply_fsdp(model, model.layers)
            # What train_step asks of FSDP per micro-batch and per step. The post-optimizer event
            # is read from the call: on the CPU a stream records no event (torch.cpu.Stream).
            for name, record in (("set_requires_gradient_sync", syncs),
                                 ("set_requires_all_reduce", all_reduces),
                                 ("set_post_optim_event", post_optim_events),
                                 ("set_is_last_backward", last_backwards)):
                method = getattr(model, name)
                setattr(model, name, lambda arg, method=method, record=record: (
                    record.append(arg), method(arg))[1])
        else:
            model = module.apply_fsdp(model, Block)
            no_sync, inside = model.no_sync, {"no_sync": False}

            def recording_no_sync():
                inside["no_sync"] = True
                return no_sync()

            def fsdp1_compute_loss(model, batch):  # runs inside no_sync() when it skips the sync
                syncs.append(not inside["no_sync"])
                inside["no_sync"] = False
                return compute_loss(model, batch)

            model.no_sync = recording_no_sync
            module.compute_loss = fsdp1_compute_loss
        optimizer = module.build_optimizer(model)
        before = local_parameters(model)
        gen = torch.Generator().manual_seed(1)
        generated, reshard_settings, registered = record_generation(module, model)
        for _ in range(STEPS):
            for _ in range(getattr(module, "GENERATION_CALLS", 0)):
                prompts = torch.randint(0, TINY_LLAMA.vocab,
                                        (module.GENERATION_BATCH, module.PROMPT_TOKENS),
                                        generator=gen).to(device)
                module.rollout(model, prompts)
            batches = [{k: torch.randint(0, TINY_LLAMA.vocab, (module.MICRO_BATCH, module.SEQ_LEN),
                                         generator=gen).to(device)
                        for k in ("input_ids", "labels")}
                       for _ in range(module.GRAD_ACCUM)]
            module.train_step(model, optimizer, batches)
        after = local_parameters(model)
    changed = torch.tensor([float(not torch.equal(before[n], after[n])) for n in before],
                           device=device)
    dist.all_reduce(changed, op=dist.ReduceOp.MAX)
    unchanged = [n for n, flag in zip(before, changed.tolist()) if not flag]

    settings = fsdp2_settings(model) if c["target"] == "fsdp2" else fsdp1_settings(model, world)
    settings["training.seq_len"] = str(module.SEQ_LEN)
    settings["training.micro_batch"] = str(module.MICRO_BATCH)
    settings["training.grad_accum"] = str(module.GRAD_ACCUM)
    settings["training.activation_checkpointing"] = checkpointing(model)
    settings["training.loss"] = called[0] if len(set(called)) == 1 else f"calls {sorted(set(called))}"
    settings["training.autocast"] = (
        "none" if autocast == {"none"} else dtype_key(autocast.pop()) if len(autocast) == 1
        else str(autocast))
    settings["training.optimizer"] = type(optimizer).__name__.lower()
    # fused only when asked for; otherwise torch.optim picks foreach where it can (CUDA).
    settings["training.optimizer_impl"] = "fused" if optimizer.defaults.get("fused") else "foreach"
    settings.update(generation_settings(generated, reshard_settings, registered))
    settings["allocator.expandable_segments"] = str(expandable).lower()
    if c["target"] == "fsdp2":
        settings["fsdp.post_optim_event"] = str(len(post_optim_events) == STEPS).lower()
    if c["target"] == "fsdp2" and not last_backwards:
        settings["fsdp.is_last_backward"] = "every_microbatch"  # PyTorch's default, never called
    for key, calls in (("fsdp.requires_gradient_sync", syncs),
                       ("fsdp.requires_all_reduce", all_reduces),
                       ("fsdp.is_last_backward", last_backwards)):
        schedule = sync_schedule(calls, module.GRAD_ACCUM) if calls else None
        if schedule is not None:
            settings[key] = schedule
    return {"losses": losses, "unchanged": unchanged, "settings": settings}


def record_generation(module, model) -> tuple[list, list, bool]:
    """Records the emitted rollout's calls of model.generate (prompt and output shapes, the cache
    asked for) and of set_reshard_after_forward; whether apply_fsdp registered generate with
    register_fsdp_forward_method (its wrapper keeps the original as __wrapped__)."""
    generated, reshard_settings = [], []
    if not hasattr(module, "rollout"):
        return generated, reshard_settings, False
    registered = getattr(model.generate, "__wrapped__", None) is not None
    generate, set_reshard = model.generate, model.set_reshard_after_forward

    def recording_generate(prompts, **kwargs):
        out = generate(prompts, **kwargs)
        generated.append((list(prompts.shape), list(out.shape),
                          kwargs.get("cache_implementation")))
        return out

    def recording_set_reshard(value, recurse=True):
        reshard_settings.append(value)
        return set_reshard(value, recurse=recurse)

    model.generate = recording_generate
    model.set_reshard_after_forward = recording_set_reshard
    return generated, reshard_settings, registered


def generation_settings(generated: list, reshard_settings: list, registered: bool) -> dict:
    """training.generation.* as the live run did it (nothing when the plan does not generate)."""
    if not generated:
        return {}
    (batch, prompt), (_, new), cache = generated[0]
    return {
        "training.generation.calls": str(len(generated) // STEPS) if registered
        else "generate not registered with register_fsdp_forward_method",
        "training.generation.batch": str(batch),
        "training.generation.prompt_tokens": str(prompt),
        "training.generation.new_tokens": str(new),
        "training.generation.keep_unsharded": str(bool(reshard_settings)
                                                  and reshard_settings[0] is False).lower(),
        "training.generation.kv_cache": "preallocated" if cache == "static" else "dynamic",
    }


def run_rank(rank: int, world: int, port: int, cases: list[dict], paths: dict[str, str],
             out: str, device_type: str) -> None:
    import torch
    import torch.distributed as dist

    from shardscope_torch.ranks import finish_rank, init_gloo

    torch.set_num_threads(1)
    cuda = device_type == "cuda"
    init_gloo(rank, world, port, backend="nccl" if cuda else "gloo")
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    results = []
    for c in cases:
        started = time.monotonic()
        try:
            r = run_case(c, Path(paths[c["name"]]), world, device)
        except Exception as e:  # reported per case; the other cases go on
            r = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        r["seconds"] = time.monotonic() - started
        gathered = [None] * world
        dist.all_gather_object(gathered, r)
        results.append({"name": c["name"], "ranks": gathered})
    if rank == 0:
        Path(out).write_text(json.dumps(results))
    finish_rank()


def run_pytorch(cases: list[dict], paths: dict[str, str], device_type: str) -> dict[str, dict]:
    from shardscope_torch.ranks import spawn

    results = {}
    for world in sorted({c["world"] for c in cases}):
        batch = [c for c in cases if c["world"] == world]
        with tempfile.TemporaryDirectory() as tmp:
            out = str(Path(tmp) / "results.json")
            print(f"pytorch: {len(batch)} emitted plans on {world} {device_type} processes",
                  file=sys.stderr, flush=True)
            spawn(run_rank, world, batch, paths, out, device_type)
            for r in json.loads(Path(out).read_text()):
                results[r["name"]] = r
    return results


# ---------------------------------------------------------------------------------------------
# Checks


def differences(expected: dict[str, str], live: dict[str, str]) -> list[str]:
    out = []
    for key, value in sorted(expected.items()):
        if key not in live:
            out.append(f"{key}: the plan says {value}, nothing live to read it from")
        elif live[key] != value:
            out.append(f"{key}: the plan says {value}, the live run has {live[key]}")
    return out


def check_python(c: dict, expected: dict[str, str], result: dict) -> list[str]:
    """What is wrong with the run of an emitted Python file, one line each."""
    problems = []
    for rank, r in enumerate(result["ranks"]):
        if "error" in r:
            if c["refused"] and c["refused"] in r["error"]:
                continue
            problems.append(f"rank {rank}: {r['error']}\n{r.get('traceback', '')}")
        elif c["refused"]:
            problems.append(f"rank {rank}: ran, though this PyTorch cannot apply the plan")
        else:
            micro_batches = STEPS * int(r["settings"]["training.grad_accum"])
            if len(r["losses"]) != micro_batches or not all(map(math.isfinite, r["losses"])):
                problems.append(f"rank {rank}: losses {r['losses']}")
            if rank == 0 and r["unchanged"]:
                problems.append(f"parameters unchanged on every rank: {r['unchanged']}")
            problems += [f"rank {rank}: {d}" for d in differences(expected, r["settings"])]
    return problems


def check_torchtitan(path: Path, expected: dict[str, str]) -> list[str]:
    """The TOML through torchtitan's ConfigManager, its JobConfig mapped to scenario keys."""
    from plan_readback import torchtitan_keys, yaml_scalar
    from torchtitan.config import ConfigManager

    job = ConfigManager().parse_args(["--job.config_file", str(path)])
    live = {k: yaml_scalar(v) for k, v in torchtitan_keys(dataclasses.asdict(job)).items()}
    live["training.optimizer"] = job.optimizer.name.lower()
    live["training.optimizer_impl"] = job.optimizer.implementation
    return differences(expected, live)


def torchtitan_installed() -> bool:
    """The lent GPU machine's image has no torchtitan (and no network to install it); CI's venv
    must have it, so there a missing torchtitan fails instead of skipping."""
    return importlib.util.find_spec("torchtitan") is not None or bool(os.environ.get("CI"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--list", action="store_true", help="print the cases and stop")
    p.add_argument("--case", default="", help="only cases whose name contains this text")
    p.add_argument("--keep", help="write the scenarios, plans and emitted files here")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: the best plan of each target for one GPU, run on this machine's")
    args = p.parse_args()
    cases = [c for c in (gpu_cases() if args.device == "cuda" else all_cases())
             if args.case in c["name"]]
    if args.list:
        for c in cases:
            print(f"{c['name']:32} {c['target']:10} world {c['world']}  {' '.join(c['args'])}")
        return 0
    if not cases:
        print(f"no case matches {args.case!r}", file=sys.stderr)
        return 2
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="shardscope-emitted-") as tmp:
        workdir = Path(args.keep or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        planned = {c["name"]: plan(c, workdir) for c in cases}
        python = [c for c in cases if c["target"] != "torchtitan"]
        paths = {n: str(f) for n, (f, _) in planned.items()}
        results = run_pytorch(python, paths, args.device) if python else {}
        failed = skipped = 0
        for c in cases:
            path, expected = planned[c["name"]]
            if c["target"] == "torchtitan" and not torchtitan_installed():
                skipped += 1
                print(f"skip {c['name']}: torchtitan is not installed here")
                continue
            if c["target"] == "torchtitan":
                problems = check_torchtitan(path, expected)
            else:
                problems = check_python(c, expected, results[c["name"]])
            failed += bool(problems)
            if problems:
                print(f"FAIL {c['name']}: " + "; ".join(problems))
            elif c["refused"]:
                print(f"ok   {c['name']}: refused, as this PyTorch cannot apply it")
            else:
                print(f"ok   {c['name']}: the plan's {len(expected)} settings read back"
                      + ("" if c["target"] == "torchtitan" else ", trained"))
    print(f"{len(cases) - failed - skipped}/{len(cases)} emitted plans run as planned"
          + (f", {skipped} skipped" if skipped else "")
          + f" ({time.monotonic() - started:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
