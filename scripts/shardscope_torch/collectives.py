"""Every collective PyTorch issues, as shardscope's IR names them.

``CollectiveRecorder`` is a ``TorchDispatchMode``: every c10d op (``_allgather_base_``,
``_reduce_scatter_base_``, ``allreduce_``, ...) passes through it whatever Python API issued it.
Each row has the kind, the process group (mapped to shardscope's communicator name: ``shard``,
``replicate``, ``post_forward``), the bytes in shardscope's convention (an all-gather's output, a
reduce-scatter's input, an all-reduce's tensor), the FSDP group and hook that issued it, and the
phase, iteration and micro-batch the training loop was in.

The FSDP group and hook come from wrapping FSDP's own functions for the duration of a
``tag_fsdp_calls()`` block: FSDP2's ``FSDPParamGroup.unshard`` / ``post_backward`` /
``pre_forward`` / ``pre_backward`` / ``_prefetch_unshard`` and FSDP1's ``_unshard`` /
``_reduce_grad`` / ``_pre_forward`` / ``_pre_backward_hook`` / ``_post_backward_hook`` /
``_prefetch_handle`` (torch/distributed/fsdp/_runtime_utils.py).
"""

from __future__ import annotations

import contextlib
import functools
import re

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

KINDS = {
    "_allgather_base_": "all_gather",
    "allgather_into_tensor_coalesced_": "all_gather",
    "_reduce_scatter_base_": "reduce_scatter",
    "reduce_scatter_tensor_coalesced_": "reduce_scatter",
    "allreduce_": "all_reduce",
    "allreduce_coalesced_": "all_reduce",
    "allgather_": "all_gather",
    "reduce_scatter_": "reduce_scatter",
    "broadcast_": "broadcast",
    "barrier": "barrier",
}


def group_name(fqn: str | None) -> str:
    """shardscope's name for an FSDP module path: '' is the root; 'layers.0, layers.1' (a
    grouped fully_shard) is 'layers.0-1'; FSDP1's and checkpoint_wrapper's inner module names
    are dropped."""
    if fqn is None:
        return "-"
    fqn = re.sub(r"(^|\.)_(fsdp_wrapped|checkpoint_wrapped)_module", "", fqn).strip(".")
    if fqn == "":
        return "root"
    layers = [int(m) for m in re.findall(r"layers\.(\d+)", fqn)]
    if len(layers) > 1:
        return f"layers.{min(layers)}-{max(layers)}"
    return f"layers.{layers[0]}" if layers else fqn


class CollectiveRecorder(TorchDispatchMode):
    def __init__(self, communicators: dict[str, str] | None = None, matmuls: bool = False,
                 loss_in_forward: bool = False):
        super().__init__()
        self.loss_in_forward = loss_in_forward  # the model's forward computes the loss
        self.matmuls = matmuls  # also record each matmul as a "matmul" row (a diagnostic)
        self.pending: list[tuple[str, str]] = []  # compute markers placed at the next matmul
        self.rows: list[dict] = []
        self.communicators = communicators or {}  # process group name -> shardscope's name
        self.context = {"phase": "setup", "iteration": 0, "microbatch": 0}
        self.groups: list[str] = []  # FSDP groups of the calls in progress, innermost last
        self.hooks: list[str] = []  # FSDP hooks in progress, outermost first

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        ns = func.namespace if hasattr(func, "namespace") else ""
        if ns == "c10d":
            self._record(func, args)
        elif ns == "aten" and func._opname in ("mm", "addmm", "bmm") and self.pending:
            self.compute(*self.pending.pop(0))
        elif ns == "aten" and func._opname == "embedding":
            self.compute("forward", "root")
        elif ns == "aten" and func._opname == "embedding_dense_backward":
            self.compute("backward", "root")
        if self.matmuls and ns == "aten" and func._opname in ("mm", "addmm", "bmm"):
            self.rows.append({**self.context, "kind": "matmul", "op": func._opname,
                              "communicator": "-", "ranks": [], "bytes": 0, "dtype": "",
                              "group": self.groups[-1] if self.groups else "-",
                              "hook": "/".join(self.hooks) if self.hooks else "-"})
        return func(*args, **kwargs)

    def set_phase(self, phase: str, iteration: int, microbatch: int) -> None:
        """The training loop's position; backward starts with the root's head and loss."""
        self.context.update(phase=phase, iteration=iteration, microbatch=microbatch)
        self.pending.clear()
        if phase == "backward":
            # A loss outside the model runs its backward first, before the root's pre-backward
            # hook (which fires on the model output's gradient); the head's starts at its first
            # matmul. A loss inside forward runs after that hook, from its first matmul.
            if not self.loss_in_forward:
                self.compute("backward", "root")
            self.pending.append(("backward", "root"))

    def compute(self, kind: str, group: str) -> None:
        """A compute op of shardscope's IR (forward, backward or recompute of a group) starts;
        consecutive markers of one op (GPT's two embeddings) are one."""
        last = self.rows[-1] if self.rows else None
        if last and last["kind"] == kind and last["group"] == group and \
                all(last[k] == v for k, v in self.context.items()):
            return
        self.rows.append({**self.context, "kind": kind, "op": "", "communicator": "compute",
                          "ranks": [], "bytes": 0, "dtype": "", "group": group,
                          "hook": "/".join(self.hooks) if self.hooks else "-"})

    def _record(self, func, args) -> None:
        op = func._opname if hasattr(func, "_opname") else str(func).split(".")[1]
        kind = KINDS.get(op, op)
        pg = None
        for a in args:
            if isinstance(a, torch.ScriptObject):
                try:
                    pg = torch._C._distributed_c10d.ProcessGroup.unbox(a)
                    break
                except RuntimeError:
                    continue
        data = counted_tensors(op, args)
        pg_key = pg.group_name if pg is not None else ""
        self.rows.append({
            **self.context,
            "kind": kind,
            "op": op,
            "communicator": self.communicators.get(pg_key, f"pg:{pg_key}"),
            "ranks": dist.get_process_group_ranks(pg) if pg is not None else [],
            "bytes": sum(t.numel() * t.element_size() for t in data),
            "dtype": str(data[0].dtype).replace("torch.", "") if data else "",
            "group": self.groups[-1] if self.groups else "-",
            "hook": "/".join(self.hooks) if self.hooks else "-",
        })


def counted_tensors(op: str, args) -> list[torch.Tensor]:
    """The tensors whose bytes shardscope's IR counts for a c10d op (an all-gather's output, a
    reduce-scatter's input, an all-reduce's data), by the op's schema in
    torch/csrc/distributed/c10d/Ops.cpp. FSDP1 on the CPU issues the list forms (allgather_
    with one output chunk per rank, _flat_param.py's `if sharded_flat_param.is_cpu`); CUDA the
    flat ones: the bytes are the same."""
    def flat(x):
        if isinstance(x, torch.Tensor):
            return [x]
        if isinstance(x, (list, tuple)):
            return [t for item in x for t in flat(item)]
        return []

    if op in ("_allgather_base_", "allgather_", "allgather_into_tensor_coalesced_"):
        return flat(args[0])  # outputs
    if op in ("_reduce_scatter_base_", "reduce_scatter_", "reduce_scatter_tensor_coalesced_"):
        return flat(args[1])  # inputs
    return flat(args[0])  # allreduce_, broadcast_, ...: the data, in place


def mark_compute(model: torch.nn.Module, recorder: CollectiveRecorder,
                 blocks_per_group: int = 1) -> list:
    """Hooks that place shardscope's compute ops among the collectives: a block's forward,
    recompute (its forward again inside backward, under activation checkpointing) and backward
    start at the block's first matmul after its forward pre-hook or full backward pre-hook; the
    root's head and loss at the final norm's forward pre-hook and, in backward, at the first
    matmul; its embedding at aten.embedding and embedding_dense_backward. A block's marker names
    its FSDP group (``layers.0-1`` with two blocks per group). Returns the handles."""
    from .model import Block

    handles = []
    names = {id(m): group_name(n) for n, m in model.named_modules()}
    for module in model.modules():
        if isinstance(module, Block):
            g = names[id(module)]
            if blocks_per_group > 1:
                first = int(g.split(".")[1]) // blocks_per_group * blocks_per_group
                g = f"layers.{first}-{first + blocks_per_group - 1}"

            def pre_forward(mod, args, g=g):
                kind = "recompute" if recorder.context.get("phase") == "backward" else "forward"
                recorder.pending.insert(0, (kind, g)) if kind == "recompute" \
                    else recorder.pending.append((kind, g))

            def pre_backward(mod, grad_output, g=g):
                recorder.pending.append(("backward", g))

            handles.append(module.register_forward_pre_hook(pre_forward))
            handles.append(module.register_full_backward_pre_hook(pre_backward))
    norm = getattr(model, "norm", None)
    if norm is None:  # FSDP1 keeps the model one level down
        norm = model.module.norm if hasattr(model, "module") else None
    if norm is not None:
        handles.append(norm.register_forward_pre_hook(
            lambda mod, args: recorder.pending.append(("forward", "root"))))
    return handles


def _wrap(owner, name: str, recorder: CollectiveRecorder, group_of=None, hook: str | None = None,
          is_static: bool = False):
    """Replaces owner.name with a function that pushes its FSDP group and hook while it runs."""
    original = owner.__dict__[name] if name in owner.__dict__ else getattr(owner, name)
    func = original.__func__ if isinstance(original, staticmethod) else original

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        group = group_of(*args, **kwargs) if group_of else None
        if group is not None:
            recorder.groups.append(group)
        if hook is not None:
            recorder.hooks.append(hook(*args, **kwargs) if callable(hook) else hook)
        try:
            return func(*args, **kwargs)
        finally:
            if hook is not None:
                recorder.hooks.pop()
            if group is not None:
                recorder.groups.pop()

    setattr(owner, name, staticmethod(wrapper) if is_static else wrapper)
    return lambda: setattr(owner, name, original)


@contextlib.contextmanager
def tag_fsdp_calls(recorder: CollectiveRecorder, fsdp1_module_names: dict[int, str] | None = None):
    """While active, collectives are tagged with the FSDP group and hook that issued them.
    ``fsdp1_module_names`` maps id(module) to its path, for FSDP1's handles (and FSDP2 groups
    not yet lazily initialised)."""
    from torch.distributed.fsdp import _runtime_utils as rt
    from torch.distributed.fsdp import fully_sharded_data_parallel as fsdp1_module
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup
    from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState

    names = fsdp1_module_names or {}

    def fsdp2_group(self, *args, **kwargs):
        # Before the root's lazy init (an explicit unshard() ahead of the first forward) the
        # group has no FQN yet: its modules' paths say the same.
        if self._module_fqn is None and all(id(m) in names for m in self.modules):
            return group_name(", ".join(names[id(m)] for m in self.modules))
        return group_name(self._module_fqn)

    def fsdp1_handle_group(handle):
        if handle is None:
            return None
        return group_name(names.get(id(handle._fully_sharded_module), "?"))

    undo = [
        _wrap(FSDPParamGroup, "unshard", recorder, group_of=fsdp2_group),
        _wrap(FSDPParamGroup, "post_backward", recorder, group_of=fsdp2_group,
              hook="post_backward"),
        _wrap(FSDPParamGroup, "pre_forward", recorder, hook="pre_forward"),
        _wrap(FSDPParamGroup, "pre_backward", recorder, hook="pre_backward"),
        _wrap(FSDPParamGroup, "_prefetch_unshard", recorder, is_static=True,
              hook=lambda target, pass_type: f"{pass_type}_prefetch"),
        _wrap(FSDPState, "_root_post_backward_final_callback", recorder,
              hook="root_post_backward_callback"),
        _wrap(rt, "_unshard", recorder, group_of=lambda state, handle, *a: fsdp1_handle_group(handle)),
        _wrap(rt, "_reduce_grad", recorder, group_of=lambda state, handle: fsdp1_handle_group(handle)),
        _wrap(rt, "_reduce_grad_no_shard", recorder, group_of=lambda state, handle: fsdp1_handle_group(handle)),
        _wrap(rt, "_pre_backward_hook", recorder, hook="pre_backward"),
        _wrap(rt, "_post_backward_hook", recorder, hook="post_backward"),
        _wrap(rt, "_prefetch_handle", recorder,
              hook=lambda state, handle, mode: f"{mode.name.lower()}_prefetch"),
        _wrap(rt, "_post_backward_final_callback", recorder, hook="post_backward_final_callback"),
        _wrap(fsdp1_module, "_pre_forward", recorder, hook="pre_forward"),
    ]
    try:
        yield recorder
    finally:
        for u in reversed(undo):
            u()


def fsdp2_communicators(model: torch.nn.Module) -> dict[str, str]:
    """Process group name -> shardscope communicator name, from FSDP2's mesh infos."""
    out: dict[str, str] = {}
    for module in model.modules():
        state = getattr(module, "_get_fsdp_state", None)
        if state is None:
            continue
        group = state()._fsdp_param_group
        if group is None:
            continue
        info = group.mesh_info
        out.setdefault(info.shard_process_group.group_name, "shard")
        if getattr(info, "replicate_process_group", None) is not None:
            out.setdefault(info.replicate_process_group.group_name, "replicate")
        post = group.post_forward_mesh_info
        if post is not None and post.shard_process_group is not info.shard_process_group:
            out.setdefault(post.shard_process_group.group_name, "post_forward")
    return out


def fsdp1_communicators(model: torch.nn.Module, strategy: str) -> dict[str, str]:
    """Process group name -> shardscope communicator name, from FSDP1's states. NO_SHARD's
    all-reduce spans every rank and is shardscope's ``replicate`` communicator."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    out: dict[str, str] = {}
    for state in FSDP.fsdp_modules(model):
        pg = state.process_group
        out.setdefault(pg.group_name, "replicate" if strategy == "NO_SHARD" else "shard")
        inter = getattr(state, "_inter_node_pg", None)
        if inter is not None:
            out.setdefault(inter.group_name, "replicate")
    return out
