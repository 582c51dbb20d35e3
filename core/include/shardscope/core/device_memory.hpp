#pragma once
// What of a GPU's memory PyTorch's caching allocator may reserve: the device's total less what the
// process holds outside the allocator (the CUDA context, NCCL's buffers), and no more than a
// memory fraction allows. "Fits" compares peak reserved memory with this capacity.
// docs/semantics.md ("Memory outside PyTorch") derives each term and cites its source.

#include "shardscope/core/allocator_params.hpp"
#include "shardscope/core/cluster_spec.hpp"
#include "shardscope/core/schedule.hpp"

namespace shardscope {

/// NCCL's LL and LL128 protocol buffers per connection (NVIDIA/nccl src/init.cc,
/// DEFAULT_LL_BUFFSIZE = 8 lines · 512 threads · 8 steps · 16 B and DEFAULT_LL128_BUFFSIZE =
/// 120 elements · 640 threads · 8 steps · 8 B); the Simple protocol's is NCCL_BUFFSIZE.
inline constexpr Bytes kNcclLlBuffer = 524'288;
inline constexpr Bytes kNcclLl128Buffer = 4'915'200;

/// Device memory one process holds outside the caching allocator.
struct MemoryOutsideAllocator {
  Bytes cuda_context = 0;
  Bytes nccl_buffers = 0;      // every communicator the schedule runs a collective on
  int nccl_communicators = 0;  // those communicators (of more than one rank)
  Bytes total() const { return cuda_context + nccl_buffers; }
};

/// One connection's buffers: the three protocols' (LL, LL128, Simple).
Bytes nccl_connection_bytes(const NcclSpec& nccl);

/// One rank's buffers in a communicator of `ranks`: a ring connection per channel (its
/// receiving side; NCCL connects an algorithm when it first runs, and FSDP's all-gathers and
/// reduce-scatters run rings). No buffers for a single rank.
Bytes nccl_communicator_bytes(const NcclSpec& nccl, int ranks);

MemoryOutsideAllocator memory_outside_allocator(const ClusterSpec& cluster,
                                                const Schedule& schedule);

/// What the caching allocator may reserve: the device less `outside`, and at most a memory
/// fraction of the device (PyTorch's allowed_memory_maximum is a share of total_memory).
Bytes allocator_capacity(Bytes device_memory, const AllocatorParams& params, Bytes outside);

/// The capacity a simulation of `schedule` on `cluster` compares reserved memory with.
Bytes allocator_capacity(const ClusterSpec& cluster, const AllocatorParams& params,
                         const Schedule& schedule);

}  // namespace shardscope
