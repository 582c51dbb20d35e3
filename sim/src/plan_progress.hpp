#pragma once
// The planner's estimate of the work ahead, for a time left one can trust (sim-internal,
// planner.cpp; docs/planner.md, "The work, before it starts"). Work is thread time: measured for
// every step the search has run, and predicted for those ahead from what each kind of step has
// cost so far per schedule op, so the rate it is extrapolated at does not depend on which steps
// come first (the same counts of steps cost 20-60 M ops/s on one thread across the 405B plan's
// tenths when weighted by constants).

#include <array>
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
  std::int64_t ops = 0;            // its class's estimated schedule size
  std::size_t part = 0;            // its class's part of the space
};
using TimingQueue = std::map<std::pair<TimeNs, std::size_t>, ToTime>;  // by (floor, first index)

// What the search does with a configuration or a group, each a kind of cost.
enum class Step {
  read,      // read and settled without lowering (its resident state is over the budget)
  beyond,    // lowered (its share of a lowering shared by its timing_of), its floor beyond reach
  replayed,  // lowered and its memory replayed
  timed,     // a timing_of group read, lowered and simulated for its step time
};

// What a wave of the memory pass did with its members.
struct WaveCounts {
  std::size_t members = 0;
  std::size_t read = 0;     // not skipped by a memory rule
  std::size_t lowered = 0;  // of those read: not settled by the floor before lowering
  std::size_t beyond = 0;   // of those lowered: not replayed, their step-time floor beyond reach
  std::size_t groups = 0;   // timing groups its fits started
  // Whether the reach was known when it ran. Then a member whose floor is beyond it is settled
  // without knowing whether it fits, so it skips nothing above it: the memory rules skip less
  // (70B plan: read 19 % of the first class's members, 49-72 % of the later ones').
  bool reach_known = false;
};

// The thread time of each Step, measured as the search runs: a read by the configuration (reading
// one does not lower it), the others by the op of its class's estimated schedule size.
class StepCosts {
 public:
  /// `lowering`: seconds per op of lowering a schedule for its bound, what a step not yet
  /// measured is priced from (× its prior).
  explicit StepCosts(double lowering) : lowering_(lowering) {}

  /// A step of a class of part `part` whose schedules have `ops` ops took `seconds`.
  void add(Step step, std::size_t part, double seconds, std::int64_t ops);
  /// The seconds `step` takes for a class of part `part` whose schedules have `ops` ops: as
  /// measured so far in that part, else in all parts, or until it has run anywhere, its prior
  /// times a replayed member's cost (or a lowering's, before a member has been replayed). Parts
  /// differ per op (70B plan: an FSDP1 schedule makes each block's flat gradient beside its
  /// views' gradients, so it costs more to lower and replay than an FSDP2 one of as many ops).
  double seconds(Step step, std::size_t part, std::int64_t ops) const;

 private:
  struct Measured {
    std::array<double, 4> seconds{}, units{};  // per Step: configurations read, else ops
    void add(Step step, double seconds, double units);
    // Seconds per unit of `step`; 0 until it has run.
    double per_unit(Step step) const;
  };
  // Priors relative to a replayed member, measured in thread time on the 70B plan of
  // docs/planner.md: a read 0.05 ms, a lowering with its floor 0.59 ms for two members, a replay
  // 0.23 ms, a timing 1.6 ms (0.53 ms a replayed member). Each is replaced once measured.
  static constexpr std::array<double, 4> kPrior = {0.1, 0.55, 1.0, 3.0};
  double lowering_;
  Measured all_;
  std::map<std::size_t, Measured> by_part_;
};

class WorkEstimate {
 public:
  /// `classes` in the order the search visits them; they must outlive the estimate. `lowering`:
  /// as StepCosts's.
  WorkEstimate(const PlanSpace& space, const PlanOptions& options,
               const std::vector<ComputeClass>& classes, double lowering)
      : space_(space), options_(options), classes_(classes), costs_(lowering) {}

  /// A step of a class of part `part` whose schedules have `ops` ops took `seconds` of thread
  /// time.
  void step_done(Step step, std::size_t part, double seconds, std::int64_t ops) {
    costs_.add(step, part, seconds, ops);
  }
  /// A wave of `cls` is done.
  void wave_done(const ComputeClass& cls, const WaveCounts& wave);
  /// A member of `cls` was lowered once the reach was known: its schedule's step-time floor.
  void floor_seen(const ComputeClass& cls, TimeNs floor);
  /// A member of `cls` fits, with step-time floor `floor`; `new_group`: the first of its timing_of.
  void fit_found(const ComputeClass& cls, TimeNs floor, Bytes peak_reserved, std::size_t strategy,
                 bool new_group);
  /// The class being visited is done.
  void class_done(const ComputeClass& cls);
  /// A group whose floor is `floor` was timed at `step`.
  void group_timed(TimeNs step, TimeNs floor);

  /// Whether a class has been visited to its end: what ahead() says rests on the shares of its
  /// steps (before, on the first waves of the first class, which nothing yet skips).
  bool grounded() const {
    return visited_all_.blind.total.members > 0 || visited_all_.reached.total.members > 0;
  }

  /// The thread time in seconds the search will still take, with `unsettled` members of class
  /// `k` still to come. Predictions stand in for those still to come: each waiting group's floor
  /// times the median step over floor of the groups timed so far (the floors are tight:
  /// StepFloor.*), and each class not yet visited and not over the budget by its saved
  /// activations yields what the finished class of its part most like it yielded, scaled to its
  /// own bound: that class's fastest strategies (up to the top's size), each at its floor over
  /// its class's bound and its peak reserved, as strategies of its own (before a class of its
  /// part yielded one: a single one at its bound, as large as the budget; parts differ in how far
  /// above their bounds they run); the class being visited, until its last wave, promises those
  /// of that yield its strategies found so far do not beat. The classes it will still visit are
  /// those within the reach of the entries these form (when they form too few: of the top's size of
  /// them, each its own entry). Each costs its members at the shares of reads and lowerings the
  /// finished classes most like it had, visited under a known reach where any was (the lowered one
  /// scaled by its own floor share; the rest of the class being visited at what the waves after as
  /// many had); of those lowered, the share whose floors lie beyond the reach, and the timing
  /// groups of those that fit within it, as the floors over their bounds seen in its part say;
  /// every waiting group within the reach is timed. Steps are priced by StepCosts.
  double ahead(std::size_t k, std::size_t unsettled, const std::set<Prediction>& predictions,
               const TimingQueue& to_time) const;

 private:
  // What classes did: their members, those read (not skipped by a memory rule), lowered and
  // beyond the reach, against what their sampled floor shares expected to be lowered.
  struct Visited {
    double members = 0, read = 0, lowered = 0, beyond = 0, expected = 0;
    double groups = 0;  // timing groups its fits formed
    void add(const Visited& other);
  };
  // The same, in all and wave by wave: a class's waves run by increasing memory depth, and the
  // deeper skip more (405B plan: a class's first wave of six took more than half its time), so
  // the rest of the class being visited follows the waves after as many as it has run. The waves
  // of classes of one part line up (the same layout dimensions).
  struct Record {
    Visited total;
    std::vector<Visited> waves;
    void add(const Record& other);
  };
  // By whether the reach was known from a class's first wave on (WaveCounts::reach_known): the
  // classes ahead are visited so once a reach is known, and read more of their members then (a
  // class whose first waves ran blind counts as blind).
  struct Shares {
    Record blind, reached;
    void add(const Shares& other);
    const Record& of(bool under_reach) const { return under_reach ? reached : blind; }
  };
  // Floors over their class's bound, in a part of the space, sorted when a class is done.
  struct Ratios {
    std::vector<double> lowered;  // of members lowered once the reach was known
    std::vector<double> groups;   // of timing groups formed
  };
  // What a class yielded: its fastest strategies' floors over its bound and their peak reserved,
  // fastest first.
  using Yield = std::vector<std::pair<double, Bytes>>;
  const Record* nearest_visited(const ComputeClass& c, bool reached) const;
  const Record& most_like(const ComputeClass& c) const;
  const Yield* yield_like(const ComputeClass& c) const;
  Yield visiting_yield(const ComputeClass& cls) const;
  double class_seconds(const ComputeClass& c, std::size_t members, double reach,
                       std::size_t from_wave = 0) const;

  const PlanSpace& space_;
  const PlanOptions& options_;
  const std::vector<ComputeClass>& classes_;
  StepCosts costs_;
  // By part of the space and schedule size (the APIs' spaces differ in their memory rules, and a
  // micro-batch split, which sets the schedule's size, in how many configurations fit).
  std::map<std::pair<std::size_t, std::int64_t>, Shares> visited_;  // classes done
  Shares visited_all_;
  Record visiting_;  // the class being visited, so far: its first waves, the leanest, fit more
  bool visiting_blind_ = false;  // whether a wave of it ran before the reach was known
  std::map<std::pair<std::size_t, std::int64_t>, Yield> yields_;   // the latest of each kind
  std::map<std::size_t, std::pair<TimeNs, Bytes>> visiting_fits_;  // by strategy: its fastest
  std::vector<double> step_over_floor_;                            // per group timed (at least 1)
  std::map<std::size_t, Ratios> ratios_;                           // by part
};

}  // namespace shardscope::sim::planning
