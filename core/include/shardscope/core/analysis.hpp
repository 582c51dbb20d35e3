#pragma once
// What a user reads off any Timeline — simulated, measured or imported. Every consumer (CLI, GUI,
// sweeps, compare) computes its numbers here, from the Timeline alone. Definitions:
//   steady state   the last iteration: step time = end of its last op − end of the iteration
//                  before (the whole run when there is one iteration)
//   tokens/s/GPU   facts.tokens_per_iteration / step time
//   MFU            tokens/s/GPU × facts.model_flops_per_token / facts.peak_flops, with
//                  torchtitan's FLOPs per token: 6·(parameters − token embedding) +
//                  12·layers·heads·head_dim·seq (custom models: their forward + backward FLOPs)
//   HFU            MFU × executed / model FLOPs of the step's ops (recompute counted): ≥ MFU
//   phase times    each instant of the step counted once, for the phase that started last
//   exposed comm   time a collective runs while the compute streams run nothing; overlap is
//                  1 − exposed / total collective time
//   peaks          the producer's (Timeline::peaks), over the whole run
//   critical path  from the op that ended last, back through what it waited for (its
//                  dependencies, the op before it on its stream and on its communicator): the
//                  one that ended last binds it; a gap before the op is CPU issue time ("cpu").
//                  Needs dependencies. A producer that knows what bound each start (the
//                  simulator) records its exact path in Timeline::critical_path; then that.
//   CPU lane       the issuing thread's busy time, where the producer recorded it
//   retries, OOM   the producer's allocator's, from the Timeline
// The summary of a simulation is exactly the summary of its Timeline: nothing is added beside it.

#include <array>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shardscope/core/timeline.hpp"

namespace shardscope::analysis {

struct CriticalPath {
  std::vector<OpId> ops;                  // last op first
  std::map<std::string, TimeNs> by_kind;  // time on the path by op kind ("cpu" for issue gaps)
  bool operator==(const CriticalPath&) const = default;
};

/// Whether a run's reserved memory stayed within the GPU's capacity; unknown where the producer
/// recorded no reserved memory or no capacity (an imported CPU trace).
enum class Fit { fits, does_not_fit, unknown };

// Where a producer did not record what a number needs, the number is nullopt: reports print
// unknown (null in JSON), never 0.
struct Summary {
  std::string name;
  std::string source;  // the timeline's: simulated, measured, imported
  int world_size = 1;
  TimeNs step_time = 0;
  std::optional<double> tokens_per_s_per_gpu;  // needs facts.tokens_per_iteration
  double model_flops_per_token = 0;            // 0: unknown
  std::optional<double> mfu;  // needs tokens, model FLOPs per token and the GPU's peak
  std::optional<double> hfu;
  TimeNs forward_time = 0;
  TimeNs backward_time = 0;
  TimeNs optimizer_time = 0;
  TimeNs generation_time = 0;  // training.generation's calls of a registered forward method
  TimeNs comm_total = 0;
  TimeNs comm_exposed = 0;
  std::optional<double> overlap_fraction;  // nullopt: no communication to overlap
  // By stream, in stream order. A CPU lane is the issuing thread: its busy time is known only
  // where the producer recorded it (Timeline::cpu_busy_by_iteration); nullopt: unknown.
  std::vector<std::pair<std::string, std::optional<TimeNs>>> stream_busy;
  CriticalPath critical_path;           // empty without dependencies or when not recorded (sweeps)
  std::optional<Bytes> peak_allocated;  // nullopt: the producer recorded no memory
  std::optional<Bytes> peak_reserved;   // nullopt: no reserved memory recorded (CPU traces)
  std::optional<Bytes> capacity;        // nullopt: the GPU's memory is not known
  Fit fit = Fit::unknown;
  std::optional<Bytes> headroom;        // capacity − peak reserved, where both are known
  bool tight = false;                   // fits with less than tight_margin of the capacity free
  double tight_margin = 0.02;           // Timeline::memory_tight_margin
  std::vector<Bytes> peak_by_category;  // allocated bytes by category at the allocated peak
  std::string peak_op;                  // the op that made the allocated peak
  std::vector<Bytes> peak_allocated_by_phase;  // by Phase
  std::map<std::string, int> collectives;  // per iteration: all_gather, reduce_scatter, all_reduce
  std::string out_of_memory;  // where the allocator first could not make room; empty: it never
                              // failed (Timeline::out_of_memory)
  std::optional<int> allocator_retries;  // cached segments released to make room; nullopt: unknown
  // Of those, in the last iteration (the steady state): the allocator releasing its cache in a
  // step after the first; nullopt: unknown (not recorded, or a run of one iteration).
  std::optional<int> allocator_retries_per_step;
  // GPU time compute lost beside collectives in the last iteration
  // (Timeline::contention_by_iteration); nullopt: the producer did not record it.
  std::optional<TimeNs> contention;
  bool operator==(const Summary&) const = default;
};

/// The summary of a timeline. The critical path is included when `with_critical_path` and the ops
/// carry dependencies.
Summary summarize(const Timeline& timeline, bool with_critical_path = true);

/// The critical path of the last iteration (see above); empty without dependencies.
CriticalPath critical_path(const Timeline& timeline);

/// Adds up a critical path as it is walked back from its last op: the ops, their time by kind,
/// and the CPU issue gaps on it ("cpu"). The analysis and the simulator walk differently (from
/// dependencies, or from the engine's exact bindings) and record the same way.
class CriticalPathBuilder {
 public:
  void add_op(OpId op, OpKind kind, TimeNs duration) {
    path_.ops.push_back(op);
    by_kind_[static_cast<std::size_t>(kind)] += duration;
    on_path_[static_cast<std::size_t>(kind)] = true;
  }
  void add_cpu_gap(TimeNs gap) {
    cpu_ += gap;
    cpu_on_path_ = true;
  }
  /// The path; `by_kind` holds only the kinds (and "cpu") that lie on it.
  CriticalPath finish() &&;

 private:
  CriticalPath path_;
  std::array<TimeNs, kOpKindCount> by_kind_{};
  std::array<bool, kOpKindCount> on_path_{};
  TimeNs cpu_ = 0;
  bool cpu_on_path_ = false;
};

/// "backward layers.3 (backward, iteration 1)": an op as reports name it ("-" for no group).
std::string op_description(OpKind kind, std::string_view group, Phase phase, int iteration);
std::string op_description(const Timeline& timeline, const TimelineOp& op);

/// What happened in a time range (drag-select in the GUI): compute time (union of compute-stream
/// work), communication time (union of collectives), the communication no compute hid, and the
/// memory peaks inside the range.
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

/// The public summary JSON (keys documented in docs/simulator.md).
std::string summary_to_json(const Summary& summary);
/// Pieces of a summary as reports print them, "unknown" for nullopt: "6441 tokens/s/GPU",
/// "37.7 %" (of a fraction), "78.79 GiB".
std::string throughput_text(const std::optional<double>& tokens_per_s_per_gpu);
/// Whether the run fits, and by how much: "fits, 12.40 GiB free", "TIGHT: fits with 40.00 MiB
/// free, under 2.0 % of capacity", "DOES NOT FIT: why", "fit unknown".
std::string fit_text(const Summary& summary);
std::string percent_text(const std::optional<double>& fraction);
std::string bytes_text(const std::optional<Bytes>& bytes);
/// A readable table; every number with its unit.
std::string summary_table(const Summary& summary);

}  // namespace shardscope::analysis
