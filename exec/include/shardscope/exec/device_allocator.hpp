#pragma once
// The caching allocator's policy over real memory. The decisions (which block, when a segment is
// created, which cached segments are released to make room) are core's CachingAllocator — the
// very model the simulator runs — so a backend's "reserved" means what the simulator's does; this
// class only mirrors each decided segment with memory from a SegmentMemory (cudaMalloc'd on a
// GPU, plain address space on the host backend) and hands out segment base + offset.

#include <cstddef>
#include <string>
#include <vector>

#include "shardscope/core/caching_allocator.hpp"
#include "shardscope/core/error.hpp"

namespace shardscope::exec {

/// Where segments come from.
class SegmentMemory {
 public:
  virtual ~SegmentMemory() = default;
  SegmentMemory() = default;
  SegmentMemory(const SegmentMemory&) = delete;
  SegmentMemory& operator=(const SegmentMemory&) = delete;

  /// `bytes` of memory (cudaMalloc); nullptr when the device has no room.
  virtual std::byte* reserve(Bytes bytes) = 0;
  /// Gives a segment back (cudaFree). Must not throw.
  virtual void release(std::byte* base, Bytes bytes) noexcept = 0;
};

/// Address space only: distinct, aligned addresses that are never touched (the host backend
/// moves no data through buffers; collectives use their own shared memory).
class AddressSpaceMemory final : public SegmentMemory {
 public:
  std::byte* reserve(Bytes bytes) override;
  void release(std::byte*, Bytes) noexcept override {}

 private:
  std::uintptr_t next_ = 1ULL << 40;
};

/// An allocation the policy or the device could not satisfy: what PyTorch's OOM message says.
struct OutOfMemory : Error {
  OutOfMemory(BufferId buffer, Bytes requested, Bytes allocated, Bytes reserved, Bytes capacity,
              bool device_refused);
  BufferId buffer;
  Bytes requested;
  Bytes allocated;
  Bytes reserved;
};

/// One segment reserved (bytes > 0) or released (bytes < 0), in order: what tests compare.
struct SegmentEvent {
  int segment = 0;
  Bytes bytes = 0;
  bool operator==(const SegmentEvent&) const = default;
};

class DeviceAllocator {
 public:
  /// Expandable segments need virtual-memory mapping (cuMemMap), which no backend implements yet:
  /// they are refused here with a clear error.
  DeviceAllocator(SegmentMemory& memory, Bytes capacity, AllocatorParams params = {});
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  /// The buffer's memory, allocated for `stream`; throws OutOfMemory.
  std::byte* allocate(BufferId id, Bytes size, StreamId stream);
  void free(BufferId id);
  std::byte* address(BufferId id) const;

  Bytes allocated() const { return policy_.allocated(); }
  Bytes reserved() const { return policy_.reserved(); }
  int retries() const { return policy_.retries(); }
  const std::vector<SegmentEvent>& events() const { return events_; }

 private:
  // Makes the real segments match the policy's: releases first (the policy released cached
  // segments to make room), then reserves new ones.
  bool mirror_segments();

  SegmentMemory& memory_;
  CachingAllocator policy_;
  std::vector<std::byte*> bases_;  // per policy segment; nullptr once released
  std::vector<SegmentEvent> events_;
};

}  // namespace shardscope::exec
