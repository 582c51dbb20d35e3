"""FSDP2 and FSDP1 applied to a model from shardscope's ``fsdp.*`` and ``training.*`` keys.

The same calls ``shardscope plan --emit fsdp2|fsdp1`` writes (sim/src/plan_emit_python.cpp): one
``fully_shard`` per group of blocks then the root, explicit prefetch lists on each group's first
block, ``set_reshard_after_backward``; FSDP1 with ``ModuleWrapPolicy`` over the blocks. Keys not
given take shardscope's defaults (``shardscope keys fsdp``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class FsdpSettings:
    api: str = "fsdp2"
    world: int = 2
    mesh_replicate: int = 1
    mesh_shard: int = 0  # 0: the world (fsdp1 hybrid: gpus per node)
    sharding_strategy: str = "FULL_SHARD"
    reshard_after_forward: str = "true"  # true | false | an int
    reshard_root_after_forward: bool = False
    reshard_last_after_forward: bool = True
    forward_prefetch_modules: int = 0
    unshard_ahead: int = 0
    all_gather_buffer: str = "caching_allocator"
    comm_buffer_pool: str = "caching_allocator"
    backward_prefetch_modules: int = 0
    backward_prefetch: str = "BACKWARD_PRE"
    forward_prefetch: bool = False
    limit_all_gathers: bool = True
    param_dtype: str = ""  # "": the parameters' own dtype (fp32)
    reduce_dtype: str = ""  # "": param_dtype
    keep_low_precision_grads: bool = False
    output_dtype: str = ""
    output_dtype_modules: str = "every_module"
    buffer_dtype: str = ""
    cast_forward_inputs: str = ""  # "": the API's default
    cast_root_forward_inputs: bool = True
    module_classes_to_ignore: str = "_BatchNorm"
    cpu_offload: bool = False
    pin_memory: bool = True
    blocks_per_group: int = 1
    requires_gradient_sync: str = "every_microbatch"
    requires_all_reduce: str = "every_microbatch"
    is_last_backward: str = "every_microbatch"
    reshard_after_backward: bool = True
    gpus_per_node: int = 0

    @staticmethod
    def from_keys(keys: dict[str, str], world: int, gpus_per_node: int) -> "FsdpSettings":
        def get(key, default):
            return keys.get(key, default)

        def flag(key, default):
            value = keys.get(key)
            return default if value is None else value == "true"

        return FsdpSettings(
            api=get("fsdp.api", "fsdp2"),
            world=world,
            gpus_per_node=gpus_per_node,
            mesh_replicate=int(get("fsdp.mesh.replicate", "0")),
            mesh_shard=int(get("fsdp.mesh.shard", "0")),
            sharding_strategy=get("fsdp.sharding_strategy", "FULL_SHARD"),
            reshard_after_forward=get("fsdp.reshard_after_forward", "true"),
            reshard_root_after_forward=flag("fsdp.reshard_root_after_forward", False),
            reshard_last_after_forward=flag("fsdp.reshard_last_after_forward", True),
            forward_prefetch_modules=int(get("fsdp.forward_prefetch_modules", "0")),
            unshard_ahead=int(get("fsdp.unshard_ahead", "0")),
            all_gather_buffer=get("fsdp.all_gather_buffer", "caching_allocator"),
            comm_buffer_pool=get("fsdp.comm_buffer_pool", "caching_allocator"),
            backward_prefetch_modules=int(get("fsdp.backward_prefetch_modules", "0")),
            backward_prefetch=get("fsdp.backward_prefetch", "BACKWARD_PRE"),
            forward_prefetch=flag("fsdp.forward_prefetch", False),
            limit_all_gathers=flag("fsdp.limit_all_gathers", True),
            param_dtype=get("fsdp.mixed_precision.param_dtype", ""),
            reduce_dtype=get("fsdp.mixed_precision.reduce_dtype", ""),
            keep_low_precision_grads=flag("fsdp.mixed_precision.keep_low_precision_grads", False),
            output_dtype=get("fsdp.mixed_precision.output_dtype", ""),
            output_dtype_modules=get("fsdp.mixed_precision.output_dtype_modules", "every_module"),
            buffer_dtype=get("fsdp.mixed_precision.buffer_dtype", ""),
            cast_forward_inputs=get("fsdp.mixed_precision.cast_forward_inputs", ""),
            cast_root_forward_inputs=flag("fsdp.mixed_precision.cast_root_forward_inputs", True),
            module_classes_to_ignore=get("fsdp.mixed_precision.module_classes_to_ignore",
                                         "_BatchNorm"),
            cpu_offload=flag("fsdp.cpu_offload.params", False),
            pin_memory=flag("fsdp.cpu_offload.pin_memory", True),
            blocks_per_group=int(get("fsdp.wrap.blocks_per_group", "1")),
            requires_gradient_sync=get("fsdp.requires_gradient_sync", "every_microbatch"),
            requires_all_reduce=get("fsdp.requires_all_reduce", "every_microbatch"),
            is_last_backward=get("fsdp.is_last_backward", "every_microbatch"),
            reshard_after_backward=flag("fsdp.reshard_after_backward", True),
        )

    @property
    def hybrid(self) -> bool:
        return self.api == "fsdp1" and self.sharding_strategy in ("HYBRID_SHARD",
                                                                  "_HYBRID_SHARD_ZERO2")

    def mesh_shape(self) -> tuple[int, int]:
        """(replicate, shard), with shardscope's defaults."""
        if self.hybrid:
            shard = self.mesh_shard or self.gpus_per_node or self.world
            return (self.mesh_replicate or self.world // shard, shard)
        shard = self.mesh_shard or self.world // max(1, self.mesh_replicate)
        return (self.mesh_replicate or self.world // shard, shard)

    def reshard_literal(self, last: bool = False):
        if last and not self.reshard_last_after_forward:
            return False
        r = self.reshard_after_forward
        return True if r == "true" else False if r == "false" else int(r)


@contextlib.contextmanager
def offload_without_cuda():
    """Lets CPU offload run where the compute device is the CPU. Offload pins host memory
    (FSDP2's CPUOffloadPolicy(pin_memory=True), FSDP1's CPUOffload always), which needs a CUDA
    driver: pin_memory() returns the tensor unchanged instead; pinning changes how fast copies
    run, not what FSDP allocates or issues. FSDP1's _post_backward_final_callback synchronizes
    the current stream under offload, and torch.cpu.Stream has no synchronize(): a no-op, as CPU
    kernels run synchronously. Nothing changes where CUDA is available."""
    if torch.cuda.is_available():
        yield
        return
    pin = torch.Tensor.pin_memory
    had_sync = hasattr(torch.cpu.Stream, "synchronize")
    torch.Tensor.pin_memory = lambda self, *args, **kwargs: self
    if not had_sync:
        torch.cpu.Stream.synchronize = lambda self: None
    try:
        yield
    finally:
        torch.Tensor.pin_memory = pin
        if not had_sync:
            del torch.cpu.Stream.synchronize


def device_mesh(settings: FsdpSettings, device_type: str):
    from torch.distributed.device_mesh import init_device_mesh

    replicate, shard = settings.mesh_shape()
    if replicate > 1 or settings.hybrid:
        return init_device_mesh(device_type, (replicate, shard),
                                mesh_dim_names=("replicate", "shard"))
    return init_device_mesh(device_type, (shard,), mesh_dim_names=("shard",))


def root_reshard_literal(s: FsdpSettings):
    """The root's reshard_after_forward: False (torchtitan's, and FSDP2's own choice for the
    root) unless fsdp.reshard_root_after_forward."""
    return s.reshard_literal() if s.reshard_root_after_forward else False


def group_heads(model: nn.Module, s: FsdpSettings) -> list:
    """The first block of each fully_shard group (apply_fsdp2's grouping): a group's modules
    share one state, so the head stands for the group."""
    inner = getattr(model, "module", model)
    return list(inner.layers[:: s.blocks_per_group])


def restore_reshard_after_forward(model: nn.Module, s: FsdpSettings) -> None:
    """Each FSDP module's reshard_after_forward as apply_fsdp2 set it, after a
    set_reshard_after_forward(False) (training.generation.keep_unsharded)."""
    heads = group_heads(model, s)
    for i, head in enumerate(heads):
        head.set_reshard_after_forward(s.reshard_literal(last=i == len(heads) - 1), recurse=False)
    model.set_reshard_after_forward(root_reshard_literal(s), recurse=False)


def apply_fsdp2(model: nn.Module, blocks: nn.ModuleList, s: FsdpSettings, device_type: str,
                mesh=None):
    from torch.distributed.fsdp import (CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy,
                                        fully_shard)

    mesh = mesh or device_mesh(s, device_type)
    cast_inputs = {} if not s.cast_forward_inputs else {
        "cast_forward_inputs": s.cast_forward_inputs == "true"}
    root_mp = MixedPrecisionPolicy(param_dtype=DTYPES.get(s.param_dtype),
                                   reduce_dtype=DTYPES.get(s.reduce_dtype),
                                   output_dtype=DTYPES.get(s.output_dtype), **cast_inputs)
    mp = root_mp if s.output_dtype_modules == "every_module" else MixedPrecisionPolicy(
        param_dtype=DTYPES.get(s.param_dtype), reduce_dtype=DTYPES.get(s.reduce_dtype),
        **cast_inputs)
    offload = CPUOffloadPolicy(pin_memory=s.pin_memory) if s.cpu_offload else OffloadPolicy()
    groups = [list(blocks[i : i + s.blocks_per_group])
              for i in range(0, len(blocks), s.blocks_per_group)]
    for i, group in enumerate(groups):
        fully_shard(group if len(group) > 1 else group[0], mesh=mesh, mp_policy=mp,
                    offload_policy=offload,
                    reshard_after_forward=s.reshard_literal(last=i == len(groups) - 1))
    fully_shard(model, mesh=mesh, mp_policy=root_mp, offload_policy=offload,
                reshard_after_forward=root_reshard_literal(s))
    heads = [group[0] for group in groups]
    for i, head in enumerate(heads):
        if s.forward_prefetch_modules > 0:
            head.set_modules_to_forward_prefetch(heads[i + 1 : i + 1 + s.forward_prefetch_modules])
        if s.backward_prefetch_modules > 0:
            ahead = heads[max(0, i - s.backward_prefetch_modules) : i]
            head.set_modules_to_backward_prefetch(list(reversed(ahead)))
    if not s.reshard_after_backward:
        model.set_reshard_after_backward(False)
    if s.all_gather_buffer == "persistent":
        for module in [*heads, model]:
            module.set_custom_all_gather(PersistentAllGather())
    if s.comm_buffer_pool == "process_group":
        for module in [*heads, model]:
            module.set_allocate_memory_from_process_group_for_comm(True)
    return model


class PersistentAllGather(AllGather):
    """fsdp.all_gather_buffer: persistent. One all-gather output per FSDP group, allocated by the
    first allocate() and returned by every later one (a group's size never changes); the
    collective is the default one."""

    def __init__(self):
        self.buffer = None

    def allocate(self, size, *, dtype, device):
        if self.buffer is None:
            self.buffer = torch.empty(*size, dtype=dtype, device=device)
        return self.buffer

    def __call__(self, output_tensor, input_tensor, group, async_op=False):
        return torch.distributed.all_gather_into_tensor(output_tensor, input_tensor, group=group,
                                                        async_op=async_op)


def _module_class(name: str) -> type:
    """A batch-norm class by its torch.nn name (the only ones the scenario accepts)."""
    import torch.nn.modules.batchnorm as batchnorm

    return getattr(batchnorm, name.strip())


def apply_fsdp1(model: nn.Module, block_class: type, s: FsdpSettings, device: torch.device,
                mesh=None):
    from torch.distributed.fsdp import (BackwardPrefetch, CPUOffload, MixedPrecision,
                                        ShardingStrategy)
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    param = DTYPES.get(s.param_dtype)
    reduce = DTYPES.get(s.reduce_dtype) or param
    mp = None
    if param is not None or reduce is not None or s.buffer_dtype:
        classes = tuple(_module_class(name) for name in s.module_classes_to_ignore.split(",")
                        if name.strip())
        mp = MixedPrecision(param_dtype=param, reduce_dtype=reduce,
                            buffer_dtype=DTYPES.get(s.buffer_dtype),
                            keep_low_precision_grads=s.keep_low_precision_grads,
                            cast_forward_inputs=s.cast_forward_inputs == "true",
                            cast_root_forward_inputs=s.cast_root_forward_inputs,
                            _module_classes_to_ignore=classes)
    prefetch = None if s.backward_prefetch == "none" else getattr(BackwardPrefetch,
                                                                   s.backward_prefetch)
    kwargs = {}
    if s.hybrid:
        kwargs["device_mesh"] = mesh or device_mesh(s, device.type)
    if any(p.is_meta for p in model.parameters()):  # built on the meta device: FSDP allocates
        kwargs["param_init_fn"] = lambda m: m.to_empty(device=device, recurse=False)
    return FSDP(
        model,
        sharding_strategy=getattr(ShardingStrategy, s.sharding_strategy),
        auto_wrap_policy=ModuleWrapPolicy({block_class}),
        mixed_precision=mp,
        cpu_offload=CPUOffload(offload_params=s.cpu_offload),
        backward_prefetch=prefetch,
        forward_prefetch=s.forward_prefetch,
        limit_all_gathers=s.limit_all_gathers,
        use_orig_params=True,
        device_id=device,
        **kwargs,
    )


def materialize(model: nn.Module, device: torch.device) -> None:
    """Allocates on `device` what a model built on the meta device still lacks (FSDP2's shards;
    FSDP1 allocated its own in its constructor) and fills every parameter from N(0, 0.02): the
    values change neither the memory nor the time a step takes."""
    if any(p.is_meta for p in model.parameters()):
        model.to_empty(device=device)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)


def shard_model(model, settings: FsdpSettings, checkpointing: str, device: torch.device,
                mesh=None):
    """Checkpoints and shards a ``model.Transformer`` in the order the emitted plans do: under
    FSDP2 the blocks are wrapped in checkpoint_wrapper first and each wrapper is sharded; under
    FSDP1 each block becomes an FSDP unit and is checkpointed inside it afterwards. ``mesh``
    (else made here) must be made outside FakeTensorMode: init_device_mesh reads ranks."""
    from .model import Block, apply_checkpointing, checkpointed_blocks

    if settings.api == "fsdp2":
        apply_checkpointing(model, checkpointing)
        return apply_fsdp2(model, model.layers, settings, device.type, mesh)
    wrapped = apply_fsdp1(model, Block, settings, device, mesh)
    chosen = checkpointed_blocks(checkpointing, len(model.layers))
    if chosen:
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            apply_activation_checkpointing, checkpoint_wrapper)
        import functools

        from .model import selective_op_context

        blocks = [m for m in wrapped.modules() if isinstance(m, Block)]
        ids = {id(blocks[i]) for i in chosen}
        fn = functools.partial(checkpoint_wrapper, preserve_rng_state=False)
        if checkpointing == "selective_op":
            fn = functools.partial(checkpoint_wrapper, context_fn=selective_op_context,
                                   preserve_rng_state=False)
        apply_activation_checkpointing(wrapped, checkpoint_wrapper_fn=fn,
                                       check_fn=lambda m: id(m) in ids)
    return wrapped
