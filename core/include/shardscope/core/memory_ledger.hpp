#pragma once
// Device memory as a run sees it, in issue order: bytes live per buffer category, the allocated
// and reserved peaks with the breakdown at each, the highest allocated per phase, and samples.
// The simulator and the executor each keep one, so a simulated and a measured timeline mean the
// same by "peak", "at" and "by category"; the allocator (the simulator's model, a real backend's)
// supplies the allocated and reserved totals.

#include <algorithm>
#include <vector>

#include "shardscope/core/schedule.hpp"
#include "shardscope/core/timeline.hpp"

namespace shardscope {

class MemoryLedger {
 public:
  MemoryLedger() : by_category_(all_buffer_categories().size(), 0) {
    peaks_.allocated_by_phase.assign(kPhaseCount, 0);
    peaks_.allocated.by_category = by_category_;
    peaks_.reserved.by_category = by_category_;
  }

  /// `buffer` became live for `op` (kNone: before the first op); `allocated` and `reserved` are
  /// the allocator's totals with it. Host buffers are not device memory and are not counted.
  void allocated(const Buffer& buffer, OpId op, Phase phase, Bytes allocated, Bytes reserved) {
    if (buffer.location != Location::gpu) return;
    by_category_[static_cast<std::size_t>(buffer.category)] += buffer.size;
    Bytes& by_phase = peaks_.allocated_by_phase[static_cast<std::size_t>(phase)];
    by_phase = std::max(by_phase, allocated);
    if (allocated > peaks_.allocated.bytes) record(peaks_.allocated, allocated, op);
    if (reserved > peaks_.reserved.bytes) record(peaks_.reserved, reserved, op);
  }

  void freed(const Buffer& buffer) {
    if (buffer.location == Location::gpu)
      by_category_[static_cast<std::size_t>(buffer.category)] -= buffer.size;
  }

  /// A sample after `op`'s allocations (at_end = false) or frees (at_end = true); `time` is kept
  /// only for samples of no op.
  void sample(OpId op, bool at_end, Bytes allocated, Bytes reserved, TimeNs time = 0) {
    samples_.push_back({time, allocated, reserved, by_category_, op});
    at_end_.push_back(at_end);
  }

  const MemoryPeaks& peaks() const { return peaks_; }

  /// Moves the samples and peaks into `timeline`, placed on the spans of `schedule`'s ops
  /// (place_memory_at_ops); `spans[op]` has `start` and `end`. The ledger is empty afterwards.
  template <typename Spans>
  void move_into(Timeline& timeline, const Schedule& schedule, const Spans& spans) {
    timeline.memory = std::move(samples_);
    timeline.peaks = std::move(peaks_);
    place_memory_at_ops(timeline, schedule, at_end_, spans);
  }

 private:
  // In place: while memory grows every allocation is a new peak, and a fresh copy of the category
  // table each time would be a heap allocation.
  void record(MemoryPeak& peak, Bytes bytes, OpId op) {
    peak.bytes = bytes;
    peak.op = op;
    std::copy(by_category_.begin(), by_category_.end(), peak.by_category.begin());
  }

  std::vector<Bytes> by_category_;  // live bytes by BufferCategory
  MemoryPeaks peaks_;
  std::vector<MemorySample> samples_;
  std::vector<bool> at_end_;  // per sample: placed at its op's end, not its start
};

}  // namespace shardscope
