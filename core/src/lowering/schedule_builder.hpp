#pragma once
// Appends streams, communicators, groups, buffers and ops to a Schedule in issue order, stamping
// each op with the current iteration, micro-batch and phase.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../label_table.hpp"
#include "shardscope/core/schedule.hpp"

namespace shardscope::lowering {

class ScheduleBuilder {
 public:
  explicit ScheduleBuilder(std::string name);

  StreamId add_stream(std::string name, StreamKind kind);
  CommId add_communicator(std::string name, int size, int nodes);
  GroupId add_group(ParamGroup group);
  // Forced inline: GCC keeps it a call (its push_back has a regrowth path), and lowering calls it
  // for every buffer of every sweep point.
  [[gnu::always_inline]] BufferId add_buffer(BufferName name, Bytes size, DType dtype,
                                             BufferCategory category, GroupId group,
                                             Location location = Location::gpu,
                                             bool live_at_start = false) {
    schedule_.buffers.push_back({name, size, dtype, category, group, location, live_at_start});
    return static_cast<BufferId>(schedule_.buffers.size() - 1);
  }

  void set_step(int iteration, int microbatch) {
    iteration_ = iteration;
    microbatch_ = microbatch;
  }
  void set_phase(Phase phase) { phase_ = phase; }
  Phase phase() const { return phase_; }
  int iteration() const { return iteration_; }
  int microbatch() const { return microbatch_; }

  /// The index of a buffer-name label in Schedule::buffer_labels.
  std::int32_t label(std::string_view text) {
    return buffer_labels_.id(schedule_.buffer_labels, text);
  }
  /// The index of an op label ("prefetch", "rate limiter") in Schedule::op_labels.
  std::int32_t op_label(std::string_view text) { return op_labels_.id(schedule_.op_labels, text); }
  /// The index of `kernels` in Schedule::kernel_sets (an equal set is shared).
  std::int32_t kernel_set(const KernelSet& kernels);
  /// Name parts "<group>/<label>@i<iteration>m<microbatch>" at the current step.
  BufferName step_name(std::int32_t label) const { return {label, true, iteration_, microbatch_}; }

  /// Appends `op` (its iteration, micro-batch and phase are taken from the builder).
  OpId emit(Op&& op);
  /// Appends an op of `kind`, stamped as emit() would, to be filled in place: lowering fills
  /// thousands of ops, and building each in a temporary to move it in cost as much as filling it.
  /// The reference is good until the next op is added, which takes the next id. Inline: lowering
  /// calls it for every op, from three files.
  Op& add_op(OpKind kind, StreamId stream, GroupId group) {
    Op& op = schedule_.ops.emplace_back();
    op.kind = kind;
    op.stream = stream;
    op.group = group;
    stamp_last();
    return op;
  }
  /// The id of the op added last.
  OpId last_op() const { return static_cast<OpId>(schedule_.ops.size()) - 1; }
  /// The last op issued on `stream`, or kNone.
  OpId last_on(StreamId stream) const;
  Op& op(OpId id) { return schedule_.ops[static_cast<std::size_t>(id)]; }
  const Buffer& buffer(BufferId id) const {
    return schedule_.buffers[static_cast<std::size_t>(id)];
  }

  /// All of buffer `id`, as a data-moving op's input or output.
  BufferRef whole(BufferId id) const {
    const Buffer& b = buffer(id);
    return {id, b.size / bytes_per_element(b.dtype), b.dtype, 0, false};
  }
  /// The first `count` elements of buffer `id`.
  BufferRef first(BufferId id, std::int64_t count) const {
    return {id, count, buffer(id).dtype, 0, false};
  }
  /// The rank's own chunk of `count` elements in buffer `id` (an in-place all-gather's input).
  BufferRef rank_chunk(BufferId id, std::int64_t count) const {
    return {id, count, buffer(id).dtype, 0, true};
  }

  Schedule& schedule() { return schedule_; }
  Schedule take() { return std::move(schedule_); }

 private:
  // The op just appended gets the current step and phase and becomes its stream's last.
  void stamp_last() {
    Op& op = schedule_.ops.back();
    op.iteration = iteration_;
    op.microbatch = microbatch_;
    op.phase = phase_;
    last_on_stream_[static_cast<std::size_t>(op.stream)] = last_op();
  }

  Schedule schedule_;
  std::vector<OpId> last_on_stream_;
  LabelTable buffer_labels_, op_labels_;
  int iteration_ = 0;
  int microbatch_ = 0;
  Phase phase_ = Phase::forward;
};

/// Shorthand for an op of a kind on a stream for a group.
Op make_op(OpKind kind, StreamId stream, GroupId group);

}  // namespace shardscope::lowering
