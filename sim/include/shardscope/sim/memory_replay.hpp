#pragma once
// A schedule's memory without its time. The simulator allocates and frees at issue, in op order
// (sim/src/engine.cpp, Engine::memory), and the caching allocator's decisions depend on that order
// alone, never on when a kernel runs: so replaying the allocations in op order through the same
// allocator gives exactly a simulation's peak allocated, peak reserved and whether it runs out of
// memory, for a fraction of its cost. The planner uses it to settle configurations that cannot
// fit without simulating them (MemoryReplay.* check it against the simulator).

#include <limits>

#include "shardscope/core/allocator_params.hpp"
#include "shardscope/core/cluster_spec.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule.hpp"
#include "shardscope/core/units.hpp"

namespace shardscope::sim {

struct MemoryOutcome {
  Bytes peak_allocated = 0;
  Bytes peak_reserved = 0;
  bool out_of_memory = false;  // an allocation did not fit the allocator's capacity
  bool stopped = false;        // given up early (`stop_above`): the peaks are those so far
};

/// `schedule`'s allocations on `cluster` with `params` (the scenario's allocator section), as
/// simulate() makes them. It stops at the first allocation that does not fit, or once reserved
/// memory exceeds `stop_above`, when all a caller asks is whether the schedule fits.
MemoryOutcome replay_memory(const Schedule& schedule, const ClusterSpec& cluster,
                            const AllocatorParams& params,
                            Bytes stop_above = std::numeric_limits<Bytes>::max());
/// The same with the allocator's capacity given (allocator_capacity), for callers that replay
/// one schedule under several allocator settings.
MemoryOutcome replay_memory(const Schedule& schedule, Bytes capacity, const AllocatorParams& params,
                            Bytes stop_above = std::numeric_limits<Bytes>::max());

/// What one forward pass of `scenario` saves for backward, every part of every group (the
/// lowering allocates them in forward and frees them in backward): the compute knobs (micro-batch,
/// checkpointing, loss, dtypes) decide it, not sharding, prefetching or offload.
Bytes saved_activation_bytes(const Scenario& scenario);

/// A floor under the peak allocated of `scenario`'s step that needs no lowering, the larger of
/// two moments the lowering (core/src/lowering/lowerer.cpp) always reaches: the first optimizer
/// step, when the GPU holds every sharded parameter (live from the start) and the states that
/// step creates, both fp32; and the end of a forward pass, when it holds the sharded parameters
/// and every part's saved activations (and, from the second iteration on, the states), and the
/// unsharded parameters forward leaves for backward: the root's (FSDP1 never reshards it after
/// forward, FSDP2 unless fsdp.reshard_root_after_forward), and every group's under FSDP2 with
/// reshard_after_forward false or FSDP1's SHARD_GRAD_OP and _HYBRID_SHARD_ZERO2 (their numel in
/// the parameter dtype; FSDP1's flat parameter is padded beyond it). Sharded state counts 0 on
/// the host (CPU offload). A configuration whose floor is above a budget does not fit it, so the
/// planner settles it before lowering it.
Bytes resident_state_floor(const Scenario& scenario);

}  // namespace shardscope::sim
