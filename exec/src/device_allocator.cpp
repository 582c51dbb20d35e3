#include "shardscope/exec/device_allocator.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace shardscope::exec {
namespace {

constexpr std::uintptr_t kSegmentAlignment = 2ULL << 20;  // cudaMalloc's granularity
constexpr Bytes kPage = CachingAllocator::kExpandablePage;

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
    : memory_(memory), policy_(capacity, params) {}

DeviceAllocator::~DeviceAllocator() {
  for (std::size_t s = 0; s < segments_.size(); ++s) {
    Mirror& m = segments_[s];
    if (m.base == nullptr) continue;
    if (m.address_span == 0) {
      memory_.release(m.base, policy_.segment_bytes(static_cast<int>(s)));
      continue;
    }
    for (std::size_t page = 0; page < m.mapped.size(); ++page) {
      if (m.mapped[page]) memory_.unmap(m.base + page * kPage, kPage);
    }
    memory_.release_address(m.base, m.address_span);
  }
}

Bytes DeviceAllocator::address_span() const {
  // Twice the capacity: the policy's expandable segment is mapped pages (at most the capacity)
  // plus unmapped holes it keeps for reuse. Bounded for the host's unlimited capacity.
  constexpr Bytes kMaxSpan = 1LL << 44;
  return std::min(kMaxSpan, (policy_.capacity() / kPage + 1) * kPage * 2);
}

void DeviceAllocator::give_back_released() {
  for (std::size_t s = 0; s < segments_.size(); ++s) {
    Mirror& m = segments_[s];
    if (m.base == nullptr) continue;
    if (m.address_span > 0) {
      update_pages(static_cast<int>(s), false);
    } else if (!policy_.segment_live(static_cast<int>(s))) {
      const Bytes bytes = policy_.segment_bytes(static_cast<int>(s));
      memory_.release(m.base, bytes);
      m.base = nullptr;
      events_.push_back({static_cast<int>(s), -bytes});
    }
  }
}

bool DeviceAllocator::take_new() {
  while (segments_.size() < static_cast<std::size_t>(policy_.segment_count())) {
    const int s = static_cast<int>(segments_.size());
    Mirror& m = segments_.emplace_back();
    if (policy_.segment_expandable(s)) {
      m.address_span = address_span();
      m.base = memory_.reserve_address(m.address_span);
      if (m.base == nullptr) return false;
      continue;
    }
    const Bytes bytes = policy_.segment_bytes(s);
    m.base = memory_.reserve(bytes);
    if (m.base == nullptr) return false;
    events_.push_back({s, bytes});
  }
  for (std::size_t s = 0; s < segments_.size(); ++s) {
    if (segments_[s].address_span > 0 && !update_pages(static_cast<int>(s), true)) return false;
  }
  return true;
}

bool DeviceAllocator::update_pages(int segment, bool want) {
  Mirror& m = segments_[static_cast<std::size_t>(segment)];
  const Bytes bytes = policy_.segment_bytes(segment);
  if (bytes > m.address_span) {
    throw Error(
        fmt::format("expandable segment {} grew to {}, past the {} of address space "
                    "reserved for it",
                    segment, format_bytes(bytes), format_bytes(m.address_span)));
  }
  // The policy's mapped pages (its extents are whole pages; a partial one counts as mapped).
  std::vector<bool> policy(static_cast<std::size_t>((bytes + kPage - 1) / kPage), false);
  for (const auto& e : policy_.mapped_extents(segment)) {
    for (Bytes page = e.offset / kPage; page * kPage < e.offset + e.size; ++page)
      policy[static_cast<std::size_t>(page)] = true;
  }
  if (m.mapped.size() < policy.size()) m.mapped.resize(policy.size(), false);
  // Runs of pages where the policy says `want` and the mirror does not, in one call each.
  const auto differs = [&](std::size_t p) {
    return (p < policy.size() && policy[p]) == want && m.mapped[p] != want;
  };
  std::size_t page = 0;
  while (page < m.mapped.size()) {
    if (!differs(page)) {
      ++page;
      continue;
    }
    std::size_t end = page;
    while (end < m.mapped.size() && differs(end)) ++end;
    std::byte* at = m.base + static_cast<Bytes>(page) * kPage;
    const Bytes run = static_cast<Bytes>(end - page) * kPage;
    if (want) {
      if (!memory_.map(at, run)) return false;
    } else {
      memory_.unmap(at, run);
    }
    for (std::size_t p = page; p < end; ++p) m.mapped[p] = want;
    events_.push_back({segment, want ? run : -run});
    page = end;
  }
  return true;
}

bool DeviceAllocator::mirror_segments() {
  give_back_released();
  return take_new();
}

std::byte* DeviceAllocator::allocate(BufferId id, Bytes size, StreamId stream, MemoryPool pool) {
  const bool fits = policy_.allocate(id, size, stream, pool);
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
  return segments_[static_cast<std::size_t>(p.segment)].base + p.offset;
}

}  // namespace shardscope::exec
