#include "shardscope/sim/memory_replay.hpp"

#include <algorithm>

#include "shardscope/core/caching_allocator.hpp"
#include "shardscope/core/device_memory.hpp"
#include "shardscope/core/group_compute.hpp"
#include "shardscope/core/param_groups.hpp"

namespace shardscope::sim {

MemoryOutcome replay_memory(const Schedule& schedule, const ClusterSpec& cluster,
                            const AllocatorParams& params, Bytes stop_above) {
  return replay_memory(schedule, allocator_capacity(cluster, params, schedule), params, stop_above);
}

MemoryOutcome replay_memory(const Schedule& schedule, Bytes capacity, const AllocatorParams& params,
                            Bytes stop_above) {
  CachingAllocator allocator(capacity, params);
  allocator.reserve_buffers(schedule.buffers.size());
  MemoryOutcome out;
  // As Engine::allocate_buffer: a GPU buffer through the allocator; one that does not fit is
  // skipped (the simulation goes on without it), and the peaks are read after each allocation.
  auto allocate = [&](BufferId b, StreamId stream) {
    const Buffer& buffer = schedule.buffers[static_cast<std::size_t>(b)];
    if (buffer.location != Location::gpu) return;
    if (!allocator.allocate(b, buffer.size, stream, buffer.pool)) {
      out.out_of_memory = true;
      return;
    }
    out.peak_allocated = std::max(out.peak_allocated, allocator.allocated());
    out.peak_reserved = std::max(out.peak_reserved, allocator.reserved());
  };
  auto stop = [&] { return out.out_of_memory || out.peak_reserved > stop_above; };
  // As Engine::allocate_live_at_start, then Engine::memory for every op in issue (id) order.
  const StreamId compute = default_stream(schedule);
  for (std::size_t b = 0; b < schedule.buffers.size(); ++b)
    if (schedule.buffers[b].live_at_start) allocate(static_cast<BufferId>(b), compute);
  for (const Op& op : schedule.ops) {
    if (stop()) {
      out.stopped = true;
      return out;
    }
    for (BufferId b : op.allocs) allocate(b, op.stream);
    for (BufferId b : op.frees)
      if (schedule.buffers[static_cast<std::size_t>(b)].location == Location::gpu)
        allocator.free(b);
  }
  return out;
}

namespace {

// Named apart from the public overload: the CI's unity build joins this file's anonymous
// namespace with planner.cpp's, where the name would hide saved_activation_bytes(scenario).
Bytes saved_bytes_of(const Scenario& scenario, const std::vector<GroupLayout>& groups) {
  Bytes saved = 0;
  for (const ComputePart& part : group_compute(scenario, groups).parts) saved += part.saved_bytes;
  return saved;
}

// The parameters that stay unsharded from the end of a forward pass to backward
// (resident_state_floor); 0 without sharding, where no all-gather buffer exists.
Bytes kept_unsharded_bytes(const Scenario& scenario, const std::vector<GroupLayout>& groups) {
  const FsdpPolicy& fsdp = scenario.fsdp;
  if (fsdp.mesh_shard <= 1) return 0;
  bool root = false, blocks = false;
  if (fsdp.api == FsdpApi::fsdp1) {
    const ShardingStrategy strategy = fsdp.sharding_strategy;
    if (strategy == ShardingStrategy::no_shard) return 0;
    root = true;
    blocks = strategy == ShardingStrategy::shard_grad_op ||
             strategy == ShardingStrategy::hybrid_shard_zero2;
  } else {
    root = !fsdp.reshard_root_after_forward;
    blocks = fsdp.reshard_after_forward.mode == ReshardAfterForward::Mode::off;
  }
  std::int64_t numel = 0;
  for (const GroupLayout& g : groups) numel += (g.is_root ? root : blocks) ? g.numel : 0;
  return numel * bytes_per_element(param_dtype(fsdp.mixed_precision));
}

}  // namespace

Bytes saved_activation_bytes(const Scenario& scenario) {
  return saved_bytes_of(scenario, param_groups(scenario));
}

Bytes resident_state_floor(const Scenario& scenario) {
  const std::vector<GroupLayout> groups = param_groups(scenario);
  std::int64_t sharded = 0;
  for (const GroupLayout& g : groups) sharded += g.sharded_numel;
  const bool on_gpu = !scenario.fsdp.cpu_offload.params;
  const Bytes parameters = on_gpu ? sharded * bytes_per_element(DType::fp32) : 0;
  const Bytes states = parameters * optimizer_states_per_param(scenario.training.optimizer);
  // At the end of a forward pass every part's saved activations are live (backward frees them);
  // from the second iteration on, beside the optimizer states the first step created.
  const Bytes after_forward = parameters + saved_bytes_of(scenario, groups) +
                              kept_unsharded_bytes(scenario, groups) +
                              (scenario.training.iterations >= 2 ? states : 0);
  return std::max(parameters + states, after_forward);
}

}  // namespace shardscope::sim
