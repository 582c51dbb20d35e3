#include "shardscope/core/device_memory.hpp"

#include <algorithm>
#include <vector>

namespace shardscope {

Bytes nccl_connection_bytes(const NcclSpec& nccl) {
  return kNcclLlBuffer + kNcclLl128Buffer + nccl.buffsize;
}

Bytes nccl_communicator_bytes(const NcclSpec& nccl, int ranks) {
  if (ranks <= 1 || nccl.channels <= 0) return 0;
  return static_cast<Bytes>(nccl.channels) * nccl_connection_bytes(nccl);
}

MemoryOutsideAllocator memory_outside_allocator(const ClusterSpec& cluster,
                                                const Schedule& schedule) {
  MemoryOutsideAllocator out;
  out.cuda_context = cluster.gpu.context_memory;
  // PyTorch creates a process group's NCCL communicator on its first collective: a
  // communicator no op uses holds nothing.
  std::vector<bool> used(schedule.communicators.size(), false);
  std::size_t unused = used.size();
  // Every communicator is usually met within the first backward pass: stop looking then.
  for (std::size_t i = 0; i < schedule.ops.size() && unused > 0; ++i) {
    const CommId comm = schedule.ops[i].comm;
    if (comm == kNone || used[static_cast<std::size_t>(comm)]) continue;
    used[static_cast<std::size_t>(comm)] = true;
    --unused;
  }
  for (std::size_t c = 0; c < used.size(); ++c) {
    const Bytes bytes = nccl_communicator_bytes(cluster.nccl, schedule.communicators[c].size);
    if (!used[c] || bytes == 0) continue;
    out.nccl_buffers += bytes;
    ++out.nccl_communicators;
  }
  return out;
}

Bytes allocator_capacity(Bytes device_memory, const AllocatorParams& params, Bytes outside) {
  Bytes capacity = std::max<Bytes>(0, device_memory - outside);
  if (params.memory_fraction > 0) {
    capacity = std::min(
        capacity, static_cast<Bytes>(params.memory_fraction * static_cast<double>(device_memory)));
  }
  return capacity;
}

Bytes allocator_capacity(const ClusterSpec& cluster, const AllocatorParams& params,
                         const Schedule& schedule) {
  return allocator_capacity(cluster.gpu.memory, params,
                            memory_outside_allocator(cluster, schedule).total());
}

}  // namespace shardscope
