"""The ranks of a job as processes on one machine: gloo over loopback, one process per rank, and
the way out of a rank's process that gloo's teardown needs."""

from __future__ import annotations

import os
import socket
import sys
from datetime import timedelta


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(fn, world: int, *args, processes: int | None = None) -> None:
    """Calls fn(rank, world, port, *args) in `processes` (default: world) new processes and
    waits for them; a process that fails raises here."""
    import torch.multiprocessing as mp

    mp.spawn(fn, args=(world, free_port(), *args), nprocs=processes or world, join=True)


def init_gloo(rank: int, world: int, port: int, timeout_s: int = 120,
              backend: str = "gloo") -> None:
    """Joins the process group (gloo; nccl for a GPU run, whose rank then uses GPU `rank`). A rank
    that fails alone leaves the others waiting in a collective: they time out after `timeout_s`
    instead of hanging."""
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout_s))


def finish_rank() -> None:
    """Ends a rank's process once its results are written: destroys the process groups, then
    exits at once. Left to the interpreter's own exit, gloo's worker threads can still hold work
    that refers to Python objects, and finalisation aborts the process now and then (SIGABRT,
    "terminate called without an active exception"; pytorch#179291): about one run in eight of
    tests/pytorch/emitted_plan_oracle.py's FSDP1 cases on torch 2.11. os._exit skips it."""
    import torch.distributed as dist

    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
