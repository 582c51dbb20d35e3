#include "shardscope/exec/host_world.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "dtype_codec.hpp"

namespace shardscope::exec {

// Named, not anonymous: HostWorld::Slot, a class the header declares, points at it.
namespace host_region {

// What a rank publishes for its collective: who it is and what it issued.
struct Published {
  std::int64_t sequence_plus_one;  // 0: nothing published yet (the region starts zero-filled)
  std::int32_t op;
  std::int32_t kind;
  std::int32_t dtype;
  std::int32_t unused;
  std::int64_t elements;
  std::int64_t arrival_ns;      // steady clock: one clock for every process of a machine
  std::uint64_t read_plus_one;  // the last collective this position has read the peers' data of
};

}  // namespace host_region

using host_region::Published;

namespace {

constexpr std::size_t kAlign = 64;

std::size_t align_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

std::uint64_t load(const std::uint64_t& word) {
  return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(word))
      .load(std::memory_order_acquire);
}

void add_one(std::uint64_t& word) {
  std::atomic_ref<std::uint64_t>(word).fetch_add(1, std::memory_order_acq_rel);
}

std::size_t instances(const Communicator& c, int world) {
  return static_cast<std::size_t>(std::max(1, world / std::max(1, c.size)));
}

int comm_size(const Communicator& c, int world) {
  return std::min(c.size, world);
}

std::size_t slot_bytes(int size, std::int64_t max_chunk_bytes) {
  const auto n = static_cast<std::size_t>(size);
  return align_up(2 * sizeof(std::uint64_t) + n * sizeof(Published)) +
         n * n * align_up(static_cast<std::size_t>(max_chunk_bytes));
}

std::string_view kind_name(std::int32_t kind) {
  return kind >= 0 && static_cast<std::size_t>(kind) < kOpKindCount
             ? to_string(static_cast<OpKind>(kind))
             : std::string_view("?");
}

}  // namespace

// One communicator instance's part of the region.
struct HostWorld::Slot {
  std::uint64_t* arrived;
  std::uint64_t* departed;
  Published* published;  // by position
  std::byte* data;       // by position: up to size × chunk bytes each
  std::size_t data_stride;
};

std::size_t HostWorld::region_bytes(const HostWorldLayout& layout) {
  std::size_t total = kAlign;  // the abort word
  for (const auto& c : layout.communicators) {
    total += instances(c, layout.world_size) *
             slot_bytes(comm_size(c, layout.world_size), layout.max_chunk_bytes);
  }
  return total;
}

std::int64_t HostWorld::chunk_elements(const HostWorldLayout& layout, Bytes bytes, DType dtype,
                                       int size) {
  const Bytes element = bytes_per_element(dtype);
  const Bytes per_rank = bytes / std::max(1, size) / element;
  return std::max<std::int64_t>(1, std::min(per_rank, layout.max_chunk_bytes / element));
}

HostWorld::HostWorld(std::byte* region, HostWorldLayout layout)
    : region_(region), layout_(std::move(layout)) {
  std::vector<Problem> problems;
  std::size_t offset = kAlign;
  for (const auto& c : layout_.communicators) {
    if (c.size < 1 || layout_.world_size % std::min(c.size, layout_.world_size) != 0) {
      problems.push_back(
          {"", "communicators." + c.name,
           fmt::format("{} ranks do not divide the world of {}", c.size, layout_.world_size),
           "a divisor of the world size"});
    }
    comm_offset_.push_back(offset);
    offset += instances(c, layout_.world_size) *
              slot_bytes(comm_size(c, layout_.world_size), layout_.max_chunk_bytes);
  }
  throw_if_any(std::move(problems));
  sequence_.assign(static_cast<std::size_t>(layout_.world_size) * layout_.communicators.size(), 0);
}

HostWorld::Slot HostWorld::slot(CommId comm, int instance) const {
  const auto& c = layout_.communicators[static_cast<std::size_t>(comm)];
  const int size = comm_size(c, layout_.world_size);
  std::byte* base = region_ + comm_offset_[static_cast<std::size_t>(comm)] +
                    static_cast<std::size_t>(instance) * slot_bytes(size, layout_.max_chunk_bytes);
  const auto n = static_cast<std::size_t>(size);
  Slot s{};
  s.arrived = reinterpret_cast<std::uint64_t*>(base);
  s.departed = s.arrived + 1;
  s.published = reinterpret_cast<Published*>(base + 2 * sizeof(std::uint64_t));
  s.data = base + align_up(2 * sizeof(std::uint64_t) + n * sizeof(Published));
  s.data_stride = n * align_up(static_cast<std::size_t>(layout_.max_chunk_bytes));
  return s;
}

void HostWorld::abort() {
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(region_))
      .store(1, std::memory_order_release);
}

bool HostWorld::aborted() const {
  return load(*reinterpret_cast<const std::uint64_t*>(region_)) != 0;
}

HostWorld::Clock::time_point HostWorld::run(int rank, const CollectiveCall& call,
                                            Clock::time_point deadline) {
  const auto& comm = layout_.communicators.at(static_cast<std::size_t>(call.comm));
  const Membership me = membership(comm, layout_.world_size, rank);
  const auto n = static_cast<std::size_t>(me.size);
  const Slot s = slot(call.comm, me.instance);
  auto& sequence = sequence_[static_cast<std::size_t>(rank) * layout_.communicators.size() +
                             static_cast<std::size_t>(call.comm)];
  const std::int64_t seq = sequence++;
  const auto all = static_cast<std::uint64_t>(me.size) * static_cast<std::uint64_t>(seq + 1);
  const auto element = static_cast<std::size_t>(bytes_per_element(call.dtype));
  const auto chunk = static_cast<std::size_t>(call.chunk_elements);
  const std::string what = fmt::format("op {} ({} on communicator '{}', its collective #{})",
                                       call.op, to_string(call.kind), comm.name, seq);

  // A stage is done when every position has passed it: `passed(p)` says whether p has, to name
  // the ranks that have not when the deadline comes.
  const auto wait = [&](std::uint64_t* counter, std::string_view stage, auto passed) {
    for (int spin = 0; load(*counter) < all; ++spin) {
      if (aborted()) throw CollectiveError(fmt::format("{}: stopped (another rank failed)", what));
      if (Clock::now() > deadline) {
        std::string missing;
        for (std::size_t p = 0; p < n; ++p) {
          if (!passed(p)) {
            const int peer = rank_at(comm, layout_.world_size, me.instance, static_cast<int>(p));
            missing += fmt::format("{}{}", missing.empty() ? "" : ", ", peer);
          }
        }
        throw CollectiveError(
            fmt::format("{}: timed out {}: {} of {} ranks arrived{}", what, stage,
                        load(*s.arrived) - (all - static_cast<std::uint64_t>(me.size)), me.size,
                        missing.empty() ? "" : fmt::format(" (not yet: rank {})", missing)));
      }
      if (spin < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  };

  // Publish: my input, then what I issued, then arrive.
  const std::size_t input_elements = call.kind == OpKind::all_gather ? chunk : n * chunk;
  if (call.input.size() < input_elements * element ||
      call.output.size() < (call.kind == OpKind::reduce_scatter ? chunk : n * chunk) * element)
    throw CollectiveError(fmt::format("{}: buffers smaller than the collective", what));
  std::byte* mine = s.data + static_cast<std::size_t>(me.position) * s.data_stride;
  std::copy_n(call.input.data(), input_elements * element, mine);
  const auto arrival = Clock::now();
  Published& pub = s.published[static_cast<std::size_t>(me.position)];
  pub = {seq + 1,
         call.op,
         static_cast<std::int32_t>(call.kind),
         static_cast<std::int32_t>(call.dtype),
         0,
         call.chunk_elements,
         std::chrono::duration_cast<std::chrono::nanoseconds>(arrival.time_since_epoch()).count(),
         static_cast<std::uint64_t>(seq)};
  add_one(*s.arrived);
  wait(s.arrived, "waiting for its peers",
       [&](std::size_t p) { return s.published[p].sequence_plus_one >= seq + 1; });

  // Everyone issued the same op? Then read the peers' chunks.
  std::int64_t last_arrival = 0;
  for (std::size_t p = 0; p < n; ++p) {
    const Published& peer = s.published[p];
    if (peer.op != call.op || peer.kind != pub.kind || peer.dtype != pub.dtype ||
        peer.elements != pub.elements) {
      // Every peer sees the mismatch too. The caller aborts the world once it has recorded this
      // error: aborting here first would let this rank's own issuing thread report "another rank
      // failed" before the cause.
      throw CollectiveError(fmt::format(
          "{}: ranks issued different collectives: position {} issued op {} ({}, {} elements), "
          "position {} issued op {} ({}, {} elements)",
          what, me.position, call.op, to_string(call.kind), call.chunk_elements, p, peer.op,
          kind_name(peer.kind), peer.elements));
    }
    last_arrival = std::max(last_arrival, peer.arrival_ns);
  }
  std::byte* out = call.output.data();
  switch (call.kind) {
    case OpKind::all_gather:
      for (std::size_t p = 0; p < n; ++p)
        std::copy_n(s.data + p * s.data_stride, chunk * element, out + p * chunk * element);
      break;
    case OpKind::reduce_scatter:
    case OpKind::all_reduce: {
      const bool scatter = call.kind == OpKind::reduce_scatter;
      const std::size_t first = scatter ? static_cast<std::size_t>(me.position) * chunk : 0;
      const std::size_t count = scatter ? chunk : n * chunk;
      for (std::size_t e = 0; e < count; ++e) {
        float sum = 0;
        for (std::size_t p = 0; p < n; ++p) {
          sum += detail::load(s.data + p * s.data_stride, static_cast<std::int64_t>(first + e),
                              call.dtype);
        }
        detail::store(out, static_cast<std::int64_t>(e), call.dtype, sum);
      }
      break;
    }
    default:
      throw CollectiveError(fmt::format("{}: not a collective", what));
  }
  std::atomic_ref<std::uint64_t>(pub.read_plus_one)
      .store(static_cast<std::uint64_t>(seq + 1), std::memory_order_release);
  add_one(*s.departed);
  wait(s.departed, "waiting for its peers to read", [&](std::size_t p) {
    return load(s.published[p].read_plus_one) >= static_cast<std::uint64_t>(seq + 1);
  });
  return Clock::time_point(std::chrono::nanoseconds(last_arrival));
}

}  // namespace shardscope::exec
