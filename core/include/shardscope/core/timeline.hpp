#pragma once
// What happened (or is predicted to happen): executed ops with start and end per stream, memory
// over time, and metrics. The simulator and the GPU executor both produce it; the GUI, traces and
// CLI read it. Self-contained: it carries stream, group and communicator names.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/schedule.hpp"

namespace shardscope {

struct TimelineOp {
  OpId op = kNone;  // index in the schedule it came from
  OpKind kind = OpKind::forward;
  StreamId stream = 0;
  GroupId group = kNone;
  Phase phase = Phase::forward;
  int iteration = 0;
  int microbatch = 0;
  CommId comm = kNone;
  Bytes bytes = 0;
  TimeNs start = 0;
  TimeNs end = 0;

  TimeNs duration() const { return end - start; }
};

struct MemorySample {
  TimeNs time = 0;
  Bytes allocated = 0;
  Bytes reserved = 0;
  std::vector<Bytes> by_category;  // indexed by BufferCategory
};

struct Timeline {
  std::string name;
  std::string source;  // "simulated" or "measured"
  std::vector<Stream> streams;
  std::vector<std::string> groups;
  std::vector<Communicator> communicators;
  std::vector<TimelineOp> ops;       // sorted by (start, stream, op)
  std::vector<MemorySample> memory;  // sorted by time
  Bytes memory_capacity = 0;
  std::map<std::string, double>
      metrics;  // keys end in their unit: step_time_s, peak_reserved_bytes

  TimeNs end_time() const;
};

inline constexpr std::string_view kTimelineSchema = "shardscope.timeline/1";

std::string timeline_to_json(const Timeline& timeline);
/// Throws ValidationError listing every malformed field.
Timeline timeline_from_json(std::string_view text, const std::string& origin = "<timeline>");

}  // namespace shardscope
