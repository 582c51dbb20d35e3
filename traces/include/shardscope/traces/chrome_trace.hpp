#pragma once
// Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing): one track per stream
// plus the CPU, counter tracks for allocated and reserved memory and for allocated memory by
// category, and flow arrows for cross-stream waits (when the schedule is given).

#include <string>

#include "shardscope/core/schedule.hpp"
#include "shardscope/core/timeline.hpp"

namespace shardscope::traces {

/// `schedule` (optional) supplies dependencies for flow arrows; it must be the timeline's source.
std::string chrome_trace_json(const Timeline& timeline, const Schedule* schedule = nullptr);

}  // namespace shardscope::traces
