#pragma once
// What happened in a time range of a timeline (drag-select in the GUI): compute time (union of
// compute-stream work), communication time (union of collectives), the communication no compute
// hid, and the memory peaks inside the range.

#include "shardscope/core/timeline.hpp"

namespace shardscope::gui {

struct RangeSummary {
  TimeNs start = 0;
  TimeNs end = 0;
  int ops = 0;
  TimeNs compute = 0;
  TimeNs communication = 0;
  TimeNs exposed_communication = 0;
  double overlap = 1.0;  // share of communication hidden behind compute
  Bytes peak_allocated = 0;
  Bytes peak_reserved = 0;
};

RangeSummary summarize_range(const Timeline& timeline, TimeNs start, TimeNs end);

}  // namespace shardscope::gui
