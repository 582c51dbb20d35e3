#include "schedule_builder.hpp"

namespace shardscope::lowering {

ScheduleBuilder::ScheduleBuilder(std::string name) { schedule_.name = std::move(name); }

StreamId ScheduleBuilder::add_stream(std::string name, StreamKind kind) {
  schedule_.streams.push_back({std::move(name), kind});
  last_on_stream_.push_back(kNone);
  return static_cast<StreamId>(schedule_.streams.size() - 1);
}

CommId ScheduleBuilder::add_communicator(std::string name, int size, int nodes) {
  schedule_.communicators.push_back({std::move(name), size, nodes});
  return static_cast<CommId>(schedule_.communicators.size() - 1);
}

GroupId ScheduleBuilder::add_group(ParamGroup group) {
  schedule_.groups.push_back(std::move(group));
  return static_cast<GroupId>(schedule_.groups.size() - 1);
}

BufferId ScheduleBuilder::add_buffer(BufferName name, Bytes size, DType dtype, BufferCategory category, GroupId group,
                                     Location location, bool live_at_start) {
  schedule_.buffers.push_back({name, size, dtype, category, group, location, live_at_start});
  return static_cast<BufferId>(schedule_.buffers.size() - 1);
}

OpId ScheduleBuilder::emit(Op&& op) {
  schedule_.ops.push_back(std::move(op));
  stamp_last();
  return last_op();
}

OpId ScheduleBuilder::last_on(StreamId stream) const { return last_on_stream_[static_cast<std::size_t>(stream)]; }

Op& ScheduleBuilder::add_op(OpKind kind, StreamId stream, GroupId group) {
  Op& op = schedule_.ops.emplace_back();
  op.kind = kind;
  op.stream = stream;
  op.group = group;
  stamp_last();
  return op;
}

// The op just appended gets the current step and phase and becomes its stream's last.
void ScheduleBuilder::stamp_last() {
  Op& op = schedule_.ops.back();
  op.iteration = iteration_;
  op.microbatch = microbatch_;
  op.phase = phase_;
  last_on_stream_[static_cast<std::size_t>(op.stream)] = last_op();
}

Op make_op(OpKind kind, StreamId stream, GroupId group) {
  Op op;
  op.kind = kind;
  op.stream = stream;
  op.group = group;
  return op;
}

}  // namespace shardscope::lowering
