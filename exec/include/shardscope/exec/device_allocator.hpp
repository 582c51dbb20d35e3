#pragma once
// The caching allocator's policy over real memory. The decisions (which block, when a segment is
// created, which cached segments are released to make room, which pages of an expandable segment
// are mapped) are core's CachingAllocator — the very model the simulator runs — so a backend's
// "reserved" means what the simulator's does; this class only mirrors each decided segment with
// memory from a SegmentMemory (cudaMalloc'd or cuMemMap'd on a GPU, plain address space on the
// host backend) and hands out segment base + offset.

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

  // Expandable segments: address space reserved once, pages of it backed by memory on demand.
  /// `bytes` of address space with no memory behind it (cuMemAddressReserve); nullptr if refused.
  virtual std::byte* reserve_address(Bytes bytes) = 0;
  /// Backs [at, at + bytes), whole pages of reserved address space, with memory (cuMemCreate,
  /// cuMemMap, cuMemSetAccess); false when the device has no room.
  virtual bool map(std::byte* at, Bytes bytes) = 0;
  /// Gives the memory behind [at, at + bytes) back (cuMemUnmap, cuMemRelease). Must not throw.
  virtual void unmap(std::byte* at, Bytes bytes) noexcept = 0;
  /// Gives reserved address space back (cuMemAddressFree), after its pages are unmapped.
  virtual void release_address(std::byte* base, Bytes bytes) noexcept = 0;
};

/// Address space only: distinct, aligned addresses that are never touched (the host backend
/// moves no data through buffers; collectives use their own shared memory).
class AddressSpaceMemory final : public SegmentMemory {
 public:
  std::byte* reserve(Bytes bytes) override;
  void release(std::byte*, Bytes) noexcept override {}
  std::byte* reserve_address(Bytes bytes) override { return reserve(bytes); }
  bool map(std::byte*, Bytes) override { return true; }
  void unmap(std::byte*, Bytes) noexcept override {}
  void release_address(std::byte*, Bytes) noexcept override {}

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

/// One segment reserved (bytes > 0) or released (bytes < 0), or pages of an expandable segment
/// mapped (> 0) or unmapped (< 0), in order: what tests compare.
struct SegmentEvent {
  int segment = 0;
  Bytes bytes = 0;
  bool operator==(const SegmentEvent&) const = default;
};

class DeviceAllocator {
 public:
  /// With `params.expandable_segments`, each expandable segment reserves twice `capacity` of
  /// address space (the policy's segment grows within it) and maps pages as the
  /// policy does.
  DeviceAllocator(SegmentMemory& memory, Bytes capacity, AllocatorParams params = {});
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  /// The buffer's memory, allocated for `stream` from `pool`; throws OutOfMemory. The process
  /// group's pool is placed like any other (its segments are not registered with NCCL here).
  std::byte* allocate(BufferId id, Bytes size, StreamId stream,
                      MemoryPool pool = MemoryPool::caching_allocator);
  void free(BufferId id);
  std::byte* address(BufferId id) const;

  Bytes allocated() const { return policy_.allocated(); }
  Bytes reserved() const { return policy_.reserved(); }
  int retries() const { return policy_.retries(); }
  const std::vector<SegmentEvent>& events() const { return events_; }

 private:
  // A policy segment's real counterpart.
  struct Mirror {
    std::byte* base = nullptr;  // nullptr once released
    Bytes address_span = 0;     // expandable: the address space reserved; 0 otherwise
    std::vector<bool> mapped;   // expandable: per page, backed by memory
  };

  // Makes the real segments match the policy's: releases and unmaps first (the policy released
  // cached memory to make room), then reserves and maps. False when the device refuses.
  bool mirror_segments();
  Bytes address_span() const;
  void give_back_released();
  bool take_new();
  // An expandable segment's pages: unmaps (`want` false) or maps (`want` true) the pages whose
  // state differs from the policy's, in runs; false when the device refuses a map.
  bool update_pages(int segment, bool want);

  SegmentMemory& memory_;
  CachingAllocator policy_;
  std::vector<Mirror> segments_;  // per policy segment
  std::vector<SegmentEvent> events_;
};

}  // namespace shardscope::exec
