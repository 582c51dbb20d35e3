#!/usr/bin/env python3
"""Every buffer real FSDP2 asks its process group to allocate, shardscope puts in the process
group's pool: same buffers, same sizes, same dtypes, same order (fsdp.comm_buffer_pool).

With `set_allocate_memory_from_process_group_for_comm(True)` FSDP2's all-gathers and reductions
get their buffers from `ProcessGroupAllocMixin.allocate` (torch/distributed/fsdp/_fully_shard/
_fsdp_collectives.py): all-gather outputs, reduce-scatter inputs and reduce-scatter outputs. Each
case trains the memory oracle's tiny model for two steps on the fake process group (FakeTensorMode,
world 8) with that call recorded; `shardscope lower` of the same scenario must list, in issue
order, exactly those buffers with `"pool": "process_group"`. On the CPU the process group cannot
allocate (supports_tensor_alloc is false) and PyTorch falls back to torch.empty; which buffers are
asked for does not depend on that. docs/semantics.md, "Communication buffers".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import memory_oracle as m  # noqa: E402  (the rows and scenarios of the memory oracle)

POOL = {"fsdp__comm_buffer_pool": "process_group"}
DTYPES = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}


def cases() -> list[dict]:
    return [
        m.row("fsdp2 fp32", **POOL),
        m.row("fsdp2 bf16 params, fp32 reduce", **POOL, **m.BF16),
        m.row("fsdp2 bf16 params and reduce", **POOL, fsdp__mixed_precision__param_dtype="bf16",
              fsdp__mixed_precision__reduce_dtype="bf16"),
        m.row("fsdp2 hsdp 2x4", **POOL, **m.BF16, fsdp__mesh__replicate=2, fsdp__mesh__shard=4),
        m.row("fsdp2 two micro-batches, sync last", **POOL, **m.BF16, training__grad_accum=2,
              fsdp__requires_gradient_sync="last_microbatch"),
        m.row("fsdp2 cpu offload", **POOL, fsdp__cpu_offload__params=True),
    ]


def pytorch_allocations(r: dict) -> list[tuple[int, str]]:
    """(bytes, dtype) of every ProcessGroupAllocMixin.allocate call while the row trains."""
    import math

    from torch.distributed.fsdp._fully_shard import _fsdp_collectives as collectives

    calls: list[tuple[int, str]] = []
    original = collectives.ProcessGroupAllocMixin.allocate

    def recording(self, size, *, dtype, device):
        tensor = original(self, size, dtype=dtype, device=device)
        calls.append((math.prod(int(s) for s in size) * tensor.element_size(),
                      DTYPES[str(dtype)]))
        return tensor

    collectives.ProcessGroupAllocMixin.allocate = recording
    try:
        m.measure_row(r)
    finally:
        collectives.ProcessGroupAllocMixin.allocate = original
    return calls


def shardscope_allocations(r: dict) -> list[tuple[int, str]]:
    """(bytes, dtype) of the buffers the lowered schedule allocates in the process group's pool,
    in issue order."""
    from shardscope_torch import shardscope

    ir = shardscope.lower(m.scenario_keys(r))
    buffers = ir["buffers"]
    return [(buffers[b]["size"], buffers[b]["dtype"]) for op in ir["ops"]
            for b in op.get("allocs", []) if buffers[b].get("pool") == "process_group"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--case", default="", help="only cases whose name contains this text")
    args = p.parse_args()
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=0, world_size=8, store=FakeStore())
    failed = 0
    for r in [c for c in cases() if args.case in c["name"]]:
        torch_calls, lowered = pytorch_allocations(r), shardscope_allocations(r)
        same = torch_calls == lowered
        failed += not same
        print(f"{'ok  ' if same else 'FAIL'} {r['name']:40} pytorch {len(torch_calls)} "
              f"allocate() calls, {sum(b for b, _ in torch_calls):,} B; shardscope "
              f"{len(lowered)} pooled buffers, {sum(b for b, _ in lowered):,} B")
        if not same:
            for i, (a, b) in enumerate(zip(torch_calls + [None] * len(lowered),
                                           lowered + [None] * len(torch_calls))):
                if a != b:
                    print(f"     first difference at allocation {i}: pytorch {a}, shardscope {b}")
                    break
    print(f"{failed} case(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
