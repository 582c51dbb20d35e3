#pragma once
// Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing): one track per stream
// plus the CPU, counter tracks for allocated and reserved memory and for allocated memory by
// category, and flow arrows for cross-stream waits (from the ops' dependencies). Needs nothing but
// the Timeline, so simulated, measured and imported runs export alike.

#include <string>

#include "shardscope/core/timeline.hpp"

namespace shardscope::traces {

std::string chrome_trace_json(const Timeline& timeline);

}  // namespace shardscope::traces
