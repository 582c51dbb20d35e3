#pragma once
// Building small timelines by hand (tests only).

#include "shardscope/core/timeline.hpp"

namespace shardscope::testing {

/// An op of iteration 0, micro-batch 0, with no group, communicator or bytes unless set after.
inline TimelineOp timeline_op(OpId id, OpKind kind, StreamId stream, TimeNs start, TimeNs end,
                              Phase phase = Phase::forward) {
  TimelineOp op;
  op.op = id;
  op.kind = kind;
  op.stream = stream;
  op.phase = phase;
  op.start = start;
  op.end = end;
  return op;
}

inline std::vector<Bytes> no_categories() {
  return std::vector<Bytes>(all_buffer_categories().size(), 0);
}

}  // namespace shardscope::testing
