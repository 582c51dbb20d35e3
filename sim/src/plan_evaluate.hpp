#pragma once
// How the planner's search evaluates configurations (sim-internal, planner.cpp): in full (the
// exhaustive search, the ranked entries), by memory first with the floors before lowering and one
// lowering for configurations that differ only in the allocator (the pruned search), and their
// step time alone once they fit.

#include <functional>
#include <string>
#include <vector>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/config_tree.hpp"
#include "shardscope/sim/planner.hpp"

namespace shardscope::sim::planning {

struct Evaluated {
  std::size_t index = 0;
  bool done = false;  // false: not run (cancelled)
  bool valid = false;
  bool fits = false;
  bool screened = false;   // its memory replayed, not simulated: it does not fit
  bool unlowered = false;  // screened before lowering, by its resident state
  bool beyond = false;     // lowered; its floor is beyond the reach: it cannot rank, fit or not
  TimeNs floor = 0;  // its schedule's step_time_floor when computed (lowered under a known reach,
                     // or it or a member of its timing_of fits), else 0
  TimeNs step_time = 0;  // when it fits and was timed
  Bytes peak_reserved = 0;
  std::vector<Problem> problems;  // why it is not valid
  // Thread time spent on it: its full simulation (the exhaustive search); or its read, and when
  // lowered its share of the lowering and floor its timing_of shares, and its own replay.
  double seconds = 0;
};

/// Configuration `index` simulated in full: what a ranked entry shows. Throws ValidationError for
/// knobs that do not combine.
analysis::Summary simulated_summary(const ConfigTree& base, const std::string& file,
                                    const PlanSpace& space, std::size_t index, bool critical_path);

/// The configurations of one wave, `to_run`, evaluated on `threads` threads; results in their
/// order. The exhaustive search (PlanOptions::exhaustive) simulates each in full; the pruned one
/// settles what it can by memory and gives the rest that fit their step-time floor, the
/// configurations of one timing_of together. `reach`: the step time beyond which no
/// configuration can rank (top_entries_reach of the predictions so far; infinity while too few);
/// a schedule whose floor is beyond it is not replayed (Evaluated::beyond).
std::vector<Evaluated> evaluate_wave(const ConfigTree& base, const std::string& file,
                                     const PlanSpace& space, const std::vector<std::size_t>& to_run,
                                     const PlanOptions& options, double reach, unsigned threads,
                                     const std::function<bool()>& cancelled);

/// The step time of configuration `index` and of every other configuration of its timing_of,
/// simulated without memory (their memory was replayed). Throws ValidationError for an op too
/// long to simulate.
TimeNs time_alike(const ConfigTree& base, const std::string& file, const PlanSpace& space,
                  std::size_t index);

}  // namespace shardscope::sim::planning
