#pragma once
// Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing). Each timeline is one
// process, named by its rank; in it one track per stream, a track of the CPU's launch calls where
// the producer saw them, counter tracks for allocated and reserved memory and for allocated memory
// by category. Every op is a slice, waits included (a wait that did not block lasts 0 ns).
//
// Flow arrows: one per cross-stream dependency (from the op waited on to the op that waited) and
// one per launch (from the launch call to the op it issued). A flow's ends are v1 flow events
// placed strictly inside their slices ("s", and "f" with "bp": "e", which Perfetto's JSON importer
// binds to the slice enclosing the event on its track), at least 2 ns from either edge, so the
// microsecond timestamps' rounding cannot move them onto a neighbour. A slice under 4 ns cannot
// hold a flow end: a flow into one (a wait that did not block) lands on the next slice of its
// track, which is what the wait held; a flow out of one leaves from the previous slice of its
// track. A flow with no slice to land on is left out and counted in the trace's "otherData".
//
// Needs nothing but Timelines, so simulated, measured and imported runs export alike.

#include <span>
#include <string>

#include "shardscope/core/timeline.hpp"

namespace shardscope::traces {

/// Every rank of one run, one process each, in the order given.
std::string chrome_trace_json(std::span<const Timeline> ranks);

/// One rank's run.
std::string chrome_trace_json(const Timeline& timeline);

}  // namespace shardscope::traces
