#pragma once
// The executor allocator's segments on a GPU: cudaMalloc'd for classic segments; for expandable
// segments, address space reserved once and 2 MiB pages mapped into it with the driver's
// virtual-memory calls (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess), as PyTorch's
// ExpandableSegment does. Each page is its own physical allocation, so any page can be given back.
//
// The driver calls are reached through the runtime (cudaGetDriverEntryPointByVersion) rather than
// by linking libcuda: programs built with the CUDA backend still start on machines without a
// driver, where the GPU tests skip.

#include <cuda.h>

#include <unordered_map>

#include "shardscope/exec/device_allocator.hpp"

namespace shardscope::exec::cuda {

class CudaSegmentMemory final : public SegmentMemory {
 public:
  explicit CudaSegmentMemory(int device) : device_(device) {}
  ~CudaSegmentMemory() override;
  CudaSegmentMemory(const CudaSegmentMemory&) = delete;
  CudaSegmentMemory& operator=(const CudaSegmentMemory&) = delete;

  std::byte* reserve(Bytes bytes) override;
  void release(std::byte* base, Bytes bytes) noexcept override;
  std::byte* reserve_address(Bytes bytes) override;
  bool map(std::byte* at, Bytes bytes) override;
  void unmap(std::byte* at, Bytes bytes) noexcept override;
  void release_address(std::byte* base, Bytes bytes) noexcept override;

 private:
  void unmap_page(CUdeviceptr page) noexcept;

  int device_;
  std::unordered_map<CUdeviceptr, CUmemGenericAllocationHandle> pages_;  // mapped page → memory
};

}  // namespace shardscope::exec::cuda
