#pragma once
// The caching allocator's settings a run uses (PYTORCH_CUDA_ALLOC_CONF and
// torch.cuda.set_per_process_memory_fraction): the scenario's `allocator` section, read by the
// simulator's model and the executor's allocator alike.

#include "shardscope/core/units.hpp"

namespace shardscope {

struct AllocatorParams {
  bool expandable_segments = false;  // expandable_segments:True
  // max_split_size_mb:N, in bytes: blocks this large are never split, a smaller request never
  // takes one, and they are released first when memory runs short. 0: unlimited (the default).
  Bytes max_split_size = 0;
  // roundup_power2_divisions:N (a power of two): a request rounds up to the next of N equal steps
  // between two powers of two instead of to 512 B. 0 or 1: off.
  int roundup_power2_divisions = 0;
  // set_per_process_memory_fraction(F): the allocator may reserve F of the device (the capacity
  // an allocator is given is already that share: device_memory.hpp). 0: not set.
  double memory_fraction = 0;
  // garbage_collection_threshold:T: with a memory fraction set, reserved memory above T of the
  // allowed maximum frees the cached segments unused the longest before a new one is made. 0: off.
  double garbage_collection_threshold = 0;
  // Not PyTorch's: reports call a fit with less than this share of the capacity free tight.
  double tight_margin = 0.02;
};

}  // namespace shardscope
