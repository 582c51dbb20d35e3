#pragma once
// OpCostCache: op costs looked up by what decides them (sim-internal; the engine and
// step_time_floor cost every op of a schedule).

#include <array>
#include <bit>
#include <cstdint>

#include "shardscope/core/schedule.hpp"
#include "shardscope/sim/cost_model.hpp"

namespace shardscope::sim {

// Ops repeat: every layer and every iteration issues the same kernels, collectives and waits, and
// an op's cost depends only on what the key below holds (a fixed time bypasses the model). So
// costs are looked up, not recomputed: a collective's model is the costly one (log, pow, protocol
// choice), and even a kernel's roofline costs more than the lookup.
class OpCostCache {
 public:
  OpCost cost(const CostModel& model, const Schedule& s, const Op& op) {
    if (op.fixed_time) return model.cost(s, op);
    // Compared as bits: equal bits are equal values (values equal in other bits, as -0.0 and 0.0,
    // only miss the cache).
    const Key key{static_cast<std::uint64_t>(op.bytes), std::bit_cast<std::uint64_t>(op.flops),
                  std::bit_cast<std::uint64_t>(op.attention_flops),
                  static_cast<std::uint64_t>(static_cast<std::uint32_t>(op.stream)) << 32 |
                      static_cast<std::uint32_t>(op.comm),
                  (static_cast<std::uint64_t>(op.kernels + 1) << 8) +
                      static_cast<std::uint64_t>(op.kind) + 1};
    // Sizes are multiples of large powers of two: mix, then take the high bits.
    const std::uint64_t mixed =
        (key.bytes ^ key.flops ^ (key.kind + 64 * key.queues)) * std::uint64_t{0x9E3779B97F4A7C15};
    const auto h = static_cast<std::size_t>(mixed >> 58);  // 6 bits: kSlots = 64
    for (std::size_t probe = 0; probe < kSlots; ++probe) {
      Slot& slot = slots_[(h + probe) % kSlots];
      if (slot.key.kind == 0) {
        slot = {key, model.cost(s, op)};
        return slot.cost;
      }
      if (slot.key == key) return slot.cost;
    }
    return model.cost(s, op);  // full: more distinct ops than slots are computed each time
  }

 private:
  struct Key {
    std::uint64_t bytes;
    std::uint64_t flops;
    std::uint64_t attention_flops;
    std::uint64_t queues;  // stream (high half), communicator (low half)
    std::uint64_t kind;    // OpKind + 1 (and the kernel set, above bit 8); 0: an empty slot
    bool operator==(const Key&) const = default;
  };
  struct Slot {
    Key key{};
    OpCost cost;
  };
  static constexpr std::size_t kSlots = 64;
  std::array<Slot, kSlots> slots_{};
};

}  // namespace shardscope::sim
