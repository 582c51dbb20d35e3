#pragma once
// Owning handles for CUDA streams, events and pinned host memory: released on every path out,
// an exception included (destructors log a failure and go on, as the *_LOG checks do).

#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <type_traits>

#include "cuda_check.hpp"

namespace shardscope::exec::cuda {

struct StreamDeleter {
  void operator()(cudaStream_t s) const noexcept { SHARDSCOPE_CUDA_LOG(cudaStreamDestroy(s)); }
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const noexcept { SHARDSCOPE_CUDA_LOG(cudaEventDestroy(e)); }
};
struct PinnedDeleter {
  void operator()(void* p) const noexcept { SHARDSCOPE_CUDA_LOG(cudaFreeHost(p)); }
};

using UniqueStream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;
using UniqueEvent = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;
using UniquePinned = std::unique_ptr<void, PinnedDeleter>;

inline UniqueStream make_stream(unsigned flags = cudaStreamNonBlocking) {
  cudaStream_t s = nullptr;
  SHARDSCOPE_CUDA(cudaStreamCreateWithFlags(&s, flags));
  return UniqueStream(s);
}

inline UniqueEvent make_event(unsigned flags = cudaEventDefault) {
  cudaEvent_t e = nullptr;
  SHARDSCOPE_CUDA(cudaEventCreateWithFlags(&e, flags));
  return UniqueEvent(e);
}

inline UniquePinned make_pinned(std::size_t bytes) {
  void* p = nullptr;
  SHARDSCOPE_CUDA(cudaMallocHost(&p, bytes));
  return UniquePinned(p);
}

/// Pinned host memory the GPU reads and writes in place (cudaHostAllocMapped), zeroed.
inline UniquePinned make_mapped(std::size_t bytes) {
  void* p = nullptr;
  SHARDSCOPE_CUDA(cudaHostAlloc(&p, bytes, cudaHostAllocMapped));
  std::memset(p, 0, bytes);
  return UniquePinned(p);
}

}  // namespace shardscope::exec::cuda
