#pragma once
// The caching allocator's settings a run uses (PYTORCH_CUDA_ALLOC_CONF): the scenario's
// `allocator` section, read by the simulator's model and the executor's allocator alike.

namespace shardscope {

struct AllocatorParams {
  bool expandable_segments = false;  // expandable_segments:True
};

}  // namespace shardscope
