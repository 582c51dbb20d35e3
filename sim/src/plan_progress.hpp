#pragma once
// The planner's estimate of the work ahead, for a time left one can trust (sim-internal,
// planner.cpp; docs/planner.md, "The work, before it starts"). Work is counted in estimated
// schedule ops weighted by what each step costs relative to lowering a configuration and
// replaying its memory (1).

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "plan_classes.hpp"
#include "plan_evaluate.hpp"
#include "shardscope/sim/plan_entries.hpp"

namespace shardscope::sim::planning {

// Configurations that fit, found by the memory pass, to be timed: groups of one timing_of, in the
// order of their step-time floors, which lets the search stop before timing those that cannot
// rank (a class's bound is the same for all its members; the floor is each schedule's own).
struct ToTime {
  std::vector<Evaluated> members;  // that fit; the first stands for the group
  std::int64_t ops = 0;            // its class's estimated schedule size, for progress
};
using TimingQueue = std::map<std::pair<TimeNs, std::size_t>, ToTime>;  // by (floor, first index)

// What a wave of the memory pass did with its members.
struct WaveCounts {
  std::size_t members = 0;
  std::size_t read = 0;     // not skipped by a memory rule
  std::size_t lowered = 0;  // of those read: not settled by the floor before lowering
  std::size_t beyond = 0;   // of those lowered: not replayed, their step-time floor beyond reach
};

class WorkEstimate {
 public:
  // The unit is a member's share of a lowering and its own memory replay: 0.53 ms per member in
  // the 70B plan of docs/planner.md (thread time; a lowering with its floor takes 0.59 ms and
  // serves two members, who differ in the allocator; a replay 0.23 ms). The other steps there:
  // a read 0.05 ms.
  static constexpr double kReadWork = 0.1;
  // A lowered member whose floor is beyond the reach: its share of the lowering, no replay.
  static constexpr double kBeyondWork = 0.55;
  // Reading, lowering and timing a group: 1.6 ms.
  static constexpr double kTimingWork = 3.0;

  /// `classes` in the order the search visits them; they must outlive the estimate.
  WorkEstimate(const PlanSpace& space, const PlanOptions& options,
               const std::vector<ComputeClass>& classes)
      : space_(space), options_(options), classes_(classes) {}

  /// The work of a wave of `cls`.
  static std::int64_t wave_work(const ComputeClass& cls, const WaveCounts& wave);
  /// The work of timing `group`.
  static std::int64_t timing_work(const ToTime& group);

  /// A wave of `cls` is done.
  void wave_done(const ComputeClass& cls, const WaveCounts& wave);
  /// The class being visited is done; `best_floor`: its lowest step-time floor (0: none fits).
  void class_done(const ComputeClass& cls, TimeNs best_floor);
  /// A group whose floor is `floor` was timed at `step`.
  void group_timed(TimeNs step, TimeNs floor);

  /// The work the search will still do, with `unsettled` members of class `k` still to come.
  /// Step times stand in for the predictions still to come: each waiting group's floor times
  /// the median step over floor of the groups timed so far (the floors are tight: StepFloor.*),
  /// and for each class not yet visited whose sampled members show some may fit, its bound
  /// times the median of best floor over bound of the classes visited (a strategy of its own, as
  /// large as the budget, so that it joins rather than leads where it can). The classes it will
  /// still visit are those within the reach of the entries these form; each costs its members
  /// at the read and lowered shares the finished classes most like it had (the lowered one
  /// scaled by its own floor share); every waiting group within that reach is timed.
  std::int64_t ahead(std::size_t k, std::size_t unsettled, const std::set<Prediction>& predictions,
                     const TimingQueue& to_time) const;

 private:
  // What classes did: their members, those read (not skipped by a memory rule), lowered and
  // beyond the reach, against what their sampled floor shares expected to be lowered.
  struct Visited {
    double members = 0, read = 0, lowered = 0, beyond = 0, expected = 0;
    void add(const Visited& other);
  };
  const Visited& most_like(const ComputeClass& c) const;
  double class_work(const ComputeClass& c, std::size_t members) const;

  const PlanSpace& space_;
  const PlanOptions& options_;
  const std::vector<ComputeClass>& classes_;
  // By part of the space and schedule size (the APIs' spaces differ in their memory rules, and a
  // micro-batch split, which sets the schedule's size, in how many configurations fit).
  std::map<std::pair<std::size_t, std::int64_t>, Visited> visited_;  // classes done
  Visited visited_all_;
  Visited visiting_;  // the class being visited, so far: its first waves, the leanest, fit more
  std::vector<double> best_over_bound_;  // per class visited with some fit
  std::vector<double> step_over_floor_;  // per group timed (at least 1)
};

}  // namespace shardscope::sim::planning
