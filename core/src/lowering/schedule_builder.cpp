#include "schedule_builder.hpp"

namespace shardscope::lowering {

ScheduleBuilder::ScheduleBuilder(std::string name) {
  schedule_.name = std::move(name);
  // Lowering adds a handful of streams and communicators: room for them without regrowing.
  constexpr std::size_t kStreams = 8, kCommunicators = 4;
  schedule_.streams.reserve(kStreams);
  last_on_stream_.reserve(kStreams);
  schedule_.communicators.reserve(kCommunicators);
}

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

OpId ScheduleBuilder::emit(Op&& op) {
  schedule_.ops.push_back(std::move(op));
  stamp_last();
  return last_op();
}

std::int32_t ScheduleBuilder::kernel_set(const KernelSet& kernels) {
  auto& sets = schedule_.kernel_sets;
  for (std::size_t i = 0; i < sets.size(); ++i) {
    if (sets[i] == kernels) return static_cast<std::int32_t>(i);
  }
  sets.push_back(kernels);
  return static_cast<std::int32_t>(sets.size() - 1);
}

OpId ScheduleBuilder::last_on(StreamId stream) const {
  return last_on_stream_[static_cast<std::size_t>(stream)];
}

Op make_op(OpKind kind, StreamId stream, GroupId group) {
  Op op;
  op.kind = kind;
  op.stream = stream;
  op.group = group;
  return op;
}

}  // namespace shardscope::lowering
