"""PyTorch's own accounting of FSDP memory, per phase: FSDP2 through ``FSDPMemTracker``
(torch/distributed/_tools/fsdp2_mem_tracker.py), FSDP1 through ``MemTracker``
(torch/distributed/_tools/mem_tracker.py), as torchtitan's memory estimator uses them.

Both count tensor storages by reference type (parameters, gradients, activations, temporaries,
optimizer states, FSDP's all-gather and reduce-scatter buffers) as they are created and freed.
``PhaseTracker`` adds what shardscope reports: the highest total while each phase (forward,
backward, optimizer) runs, with the breakdown at that moment. The trackers round a CUDA storage up
to 512 bytes, as the caching allocator's allocated_bytes does; on the CPU they do not, so
``rounded_like_cuda()`` applies the same rule to CPU storages.
"""

from __future__ import annotations

import contextlib
import math

import torch

PHASES = ("forward", "backward", "optimizer", "generation")


@contextlib.contextmanager
def rounded_like_cuda():
    """CPU storages count as the CUDA caching allocator counts them: up to a 512-byte multiple."""
    from torch.distributed._tools import mem_tracker

    info = mem_tracker._WeakRefInfo
    original = info._calculate_mem_consumed

    def rounded(self) -> int:
        mem = self.size * self.element_size
        return math.ceil(mem / mem_tracker._PYTORCH_MIN_ALLOCATE) * mem_tracker._PYTORCH_MIN_ALLOCATE

    info._calculate_mem_consumed = rounded
    try:
        yield
    finally:
        info._calculate_mem_consumed = original


@contextlib.contextmanager
def untracked_sharding_propagation(tracker):
    """DTensor's sharding propagation builds fake tensors of the global shapes to learn an op's
    output metadata (_sharding_prop.py, _propagate_tensor_meta_non_cached; on a cache miss, so on
    the first optimizer step). The tracker's dispatch mode sees them and counts them as live
    activations (265 MB for a 10 MB shard in this suite's Llama row): none is a real
    allocation, so the tracker ignores what is made while the propagator runs."""
    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    original = ShardingPropagator._propagate_tensor_meta_non_cached

    def propagate(self, *args, **kwargs):
        tracker.inside_propagation += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            tracker.inside_propagation -= 1

    ShardingPropagator._propagate_tensor_meta_non_cached = propagate
    try:
        yield
    finally:
        ShardingPropagator._propagate_tensor_meta_non_cached = original


class CudaPhasePeaks:
    """The caching allocator's peaks per phase of a GPU run: the highest allocated and reserved
    bytes (torch.cuda.max_memory_allocated / max_memory_reserved) while each phase ran, over all
    iterations, and each step's time (CUDA events, first forward to the end of the optimizer
    step). ``set_phase`` and ``step_done`` are the training loop's ``phases`` and ``on_step``
    callbacks."""

    def __init__(self):
        self.phase: str | None = None
        self.allocated: dict[str, int] = {}
        self.reserved: dict[str, int] = {}
        self.step_ms: list[float] = []
        self.retries = 0  # num_alloc_retries after the last step
        self.retries_by_step: list[int] = []  # num_alloc_retries after each step
        self._start = None
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()

    def _close(self) -> None:
        """The phase that ends: its peaks, then fresh peaks for the next."""
        if self.phase is not None:
            a, r = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
            self.allocated[self.phase] = max(self.allocated.get(self.phase, 0), a)
            self.reserved[self.phase] = max(self.reserved.get(self.phase, 0), r)
        torch.cuda.reset_peak_memory_stats()

    def set_phase(self, phase: str, iteration: int, microbatch: int) -> None:
        if phase == "forward" and microbatch == 0:
            self._start = torch.cuda.Event(enable_timing=True)
            self._start.record()
        if phase != self.phase:
            self._close()
            self.phase = phase

    def step_done(self, iteration: int) -> None:
        self._close()
        self.phase = None
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        torch.cuda.synchronize()
        if self._start is not None:
            self.step_ms.append(self._start.elapsed_time(end))
        self.retries = torch.cuda.memory_stats().get("num_alloc_retries", 0)
        self.retries_by_step.append(self.retries)


def phase_tracker_class(base):
    """A subclass of ``base`` (FSDPMemTracker or MemTracker) that keeps, per phase, the highest
    total and the breakdown by reference type at it. ``set_phase`` is the training loop's
    ``phases`` callback."""

    class PhaseTracker(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.phase = "setup"
            self.iteration = 0
            self.peaks: dict[str, int] = {}
            self.breakdown: dict[str, dict[str, int]] = {}
            self.peak_at: dict[str, int] = {}  # the iteration each phase peaked in
            self.transitions: list[tuple[str, int, int]] = []  # (phase, iteration, total) at entry
            self.inside_propagation = 0  # see untracked_sharding_propagation

        def set_phase(self, phase: str, iteration: int, microbatch: int) -> None:
            self.phase, self.iteration = phase, iteration
            self.transitions.append((phase, iteration, sum(
                snap.get("Total", 0) for snap in self._curr_mem_snap.values())))
            if phase in ("forward", "generation"):
                # The trackers keep module snapshots for one forward; the phase peaks here are
                # kept across forwards (torchtitan's estimator resets the same way). Before the
                # first forward there are none to reset.
                self.reset_mod_stats()
            self._note()

        def track_generation(self, model) -> None:
            """Generation runs the root's forward once per token: FSDPMemTracker refuses a
            second root forward in one iteration, so its module snapshots are reset before each
            (the phase peaks here do not depend on them). Call it inside the tracker's context:
            the hook must run before the FSDP hooks the tracker installs there (prepend)."""
            model.register_forward_pre_hook(
                lambda module, args: self.reset_mod_stats() if self.phase == "generation"
                else None, prepend=True)

        def _note(self) -> None:
            for snap in self._curr_mem_snap.values():
                total = snap.get("Total", 0)
                if total > self.peaks.get(self.phase, -1):
                    self.peaks[self.phase] = total
                    self.breakdown[self.phase] = {str(k): v for k, v in snap.items()}
                    self.peak_at[self.phase] = self.iteration

        def _track_module_params_and_buffers(self, module, install_grad_hooks=True):
            # FSDP1 (MemTracker) exposes its original parameters as views during forward:
            # gradient hooks cannot go on them. Gradients are counted where they are made.
            if base.__name__ == "MemTracker":
                install_grad_hooks = False
            return super()._track_module_params_and_buffers(module, install_grad_hooks)

        def track_flat_parameters(self, model) -> None:
            """FSDP1's sharded FlatParameters, which exist before the tracker starts."""
            from torch.distributed._tools.mem_tracker import _MemRefType
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

            for state in FSDP.fsdp_modules(model):
                handle = state._handle
                if handle is not None:
                    self._update_and_maybe_create_winfos(handle.flat_param, _MemRefType.PARAM)

        def _track(self, reftype, t) -> None:
            if self.inside_propagation == 0:
                super()._track(reftype, t)

        def _update_peak_stats(self, peak_state) -> None:
            super()._update_peak_stats(peak_state)
            self._note()

    return PhaseTracker
