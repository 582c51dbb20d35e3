#include "shardscope/exec/device_allocator.hpp"

#include <fmt/format.h>

namespace shardscope::exec {
namespace {

constexpr std::uintptr_t kSegmentAlignment = 2ULL << 20;  // cudaMalloc's granularity

std::string oom_message(BufferId buffer, Bytes requested, Bytes allocated, Bytes reserved,
                        Bytes capacity, bool device_refused) {
  return fmt::format("out of memory allocating buffer {} ({}): {} allocated, {} reserved of {}{}",
                     buffer, format_bytes(requested), format_bytes(allocated),
                     format_bytes(reserved), format_bytes(capacity),
                     device_refused
                         ? "; the device refused a new segment the allocator's model had room for "
                           "(memory outside the caching allocator: CUDA context, cuBLAS, NCCL)"
                         : "");
}

}  // namespace

std::byte* AddressSpaceMemory::reserve(Bytes bytes) {
  const std::uintptr_t base = next_;
  next_ += (static_cast<std::uintptr_t>(bytes) + kSegmentAlignment - 1) / kSegmentAlignment *
           kSegmentAlignment;
  return reinterpret_cast<std::byte*>(base);  // NOLINT(performance-no-int-to-ptr): never read
}

OutOfMemory::OutOfMemory(BufferId id, Bytes request, Bytes live, Bytes held, Bytes capacity,
                         bool device_refused)
    : Error(oom_message(id, request, live, held, capacity, device_refused)),
      buffer(id),
      requested(request),
      allocated(live),
      reserved(held) {}

DeviceAllocator::DeviceAllocator(SegmentMemory& memory, Bytes capacity, AllocatorParams params)
    : memory_(memory), policy_(capacity, params) {
  if (params.expandable_segments) {
    throw Error(
        "expandable segments are not implemented by the executor's allocator yet (they need "
        "cuMemMap); run without expandable_segments");
  }
}

DeviceAllocator::~DeviceAllocator() {
  for (std::size_t s = 0; s < bases_.size(); ++s) {
    if (bases_[s] != nullptr)
      memory_.release(bases_[s], policy_.segment_bytes(static_cast<int>(s)));
  }
}

bool DeviceAllocator::mirror_segments() {
  for (std::size_t s = 0; s < bases_.size(); ++s) {
    if (bases_[s] == nullptr || policy_.segment_live(static_cast<int>(s))) continue;
    const Bytes bytes = policy_.segment_bytes(static_cast<int>(s));
    memory_.release(bases_[s], bytes);
    bases_[s] = nullptr;
    events_.push_back({static_cast<int>(s), -bytes});
  }
  while (bases_.size() < static_cast<std::size_t>(policy_.segment_count())) {
    const int s = static_cast<int>(bases_.size());
    const Bytes bytes = policy_.segment_bytes(s);
    std::byte* base = memory_.reserve(bytes);
    bases_.push_back(base);
    if (base == nullptr) return false;
    events_.push_back({s, bytes});
  }
  return true;
}

std::byte* DeviceAllocator::allocate(BufferId id, Bytes size, StreamId stream) {
  const bool fits = policy_.allocate(id, size, stream);
  if (!mirror_segments()) {
    throw OutOfMemory(id, size, policy_.allocated(), policy_.reserved(), policy_.capacity(), true);
  }
  if (!fits) {
    throw OutOfMemory(id, size, policy_.allocated(), policy_.reserved(), policy_.capacity(), false);
  }
  return address(id);
}

void DeviceAllocator::free(BufferId id) {
  if (!policy_.free(id)) throw Error(fmt::format("buffer {} freed but not allocated", id));
}

std::byte* DeviceAllocator::address(BufferId id) const {
  const auto p = policy_.placement(id);
  if (p.segment < 0) return nullptr;
  return bases_[static_cast<std::size_t>(p.segment)] + p.offset;
}

}  // namespace shardscope::exec
