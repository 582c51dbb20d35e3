#pragma once
// How much of a real GPU a run's caching allocator may reserve. The plan's capacity is the
// device less what PyTorch's process holds outside its allocator (core/device_memory.hpp); on the
// GPU the run is given, the backend's own buffers (scratch regions, the cuBLASLt workspace), the
// CUDA context and NCCL's communicators already hold memory when the allocator starts, and NCCL
// connects its channels (allocating their buffers) lazily at a communicator's first collective.
// The allocator gets no more than what remains once those are paid for, so an out-of-memory is the
// allocator's own (with its numbers), never a cudaMalloc failing inside NCCL or a kernel.

#include <string>

#include "shardscope/core/units.hpp"

namespace shardscope::exec {

struct DeviceBudget {
  Bytes planned = 0;           // the plan's allocator capacity; 0 when the plan gave none
  Bytes free_after_setup = 0;  // cudaMemGetInfo's free bytes once the backend's own buffers and
                               // the communicators exist
  Bytes outside_to_come = 0;   // what NCCL will still allocate when it connects (the simulator's
                               // memory_outside_allocator().nccl_buffers; 0 without NCCL)
  /// Free after setup less what is still to come outside the allocator (0 when that is more).
  Bytes available() const;
  /// What the allocator may reserve: the plan's capacity where the device has room for it, else
  /// what the device has.
  Bytes capacity() const;
  /// The device gives less than the plan: an out-of-memory between `capacity` and `planned` is
  /// this device's, not the plan's.
  bool short_of_plan() const { return planned > 0 && available() < planned; }
};

/// One line for the run's report: "the allocator may reserve 60 GiB of 61.2 GiB free after setup
/// less 1.2 GiB NCCL will allocate (the plan: 74.1 GiB; an out-of-memory above 60 GiB is this
/// device's)".
std::string describe(const DeviceBudget& budget);

}  // namespace shardscope::exec
