#pragma once
// What happened (or is predicted to happen) on one rank: executed ops with start and end per
// stream, memory over time and the run's facts. This is the contract between whoever produces a
// run (the simulator, the executor, an importer) and whoever reads it (analysis, the GUI, traces,
// the CLI): a Timeline stands alone, with no Schedule or simulator result beside it.

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/schedule.hpp"

namespace shardscope {

struct TimelineOp {
  OpId op = kNone;  // index in the schedule it came from (kNone: not from a schedule)
  OpKind kind = OpKind::forward;
  StreamId stream = 0;
  GroupId group = kNone;
  Phase phase = Phase::forward;
  int iteration = 0;
  int microbatch = 0;
  CommId comm = kNone;
  std::int32_t label = kNone;  // index into Timeline::op_labels
  Bytes bytes = 0;
  Flops flops = 0;  // FLOPs the op executes (MFU/HFU)
  IdList deps;      // schedule op ids (TimelineOp::op) this op waited for
  TimeNs start = 0;
  TimeNs end = 0;
  // When the CPU issued this device op (its launch call) and when that call returned. Unknown
  // (-1) where the producer did not see it, and for ops on a CPU stream, which run where they are
  // issued: their span is start..end.
  TimeNs issue_start = -1;
  TimeNs issue_end = -1;

  TimeNs duration() const { return end - start; }
  bool issue_known() const { return issue_start >= 0; }
};

struct MemorySample {
  TimeNs time = 0;
  Bytes allocated = 0;
  Bytes reserved = 0;
  std::vector<Bytes> by_category;  // indexed by BufferCategory
  OpId op = kNone;                 // the op whose allocation or free made it (kNone: the start)
};

/// The highest memory of a run and what was allocated at that moment.
struct MemoryPeak {
  Bytes bytes = 0;
  TimeNs time = 0;
  OpId op = kNone;                 // the op whose allocation made the peak (kNone: the start)
  std::vector<Bytes> by_category;  // allocated bytes by BufferCategory at that moment
};

/// Peaks as the producer saw them. A producer that tracks its allocator (the simulator, the
/// executor) sees every allocation; one that only has samples fills them with peaks_from_samples.
struct MemoryPeaks {
  MemoryPeak allocated;
  MemoryPeak reserved;
  std::vector<Bytes> allocated_by_phase;  // by Phase
};

/// Where a timeline came from, for reports and for telling runs apart.
struct Provenance {
  std::string scenario;  // the scenario or IR file ("" when built in memory)
  std::string device;    // "simulated h100-sxm-80gb", "host (4 ranks as threads)", ...
  std::string backend;   // "simulator", "host", "cuda", "kineto"
  std::string version;   // the shardscope version that wrote it
  int rank = 0;          // the rank this timeline is of
  // The overrides (--set, and the shortcuts as keys) the scenario was read with: the scenario
  // file and these are the exact job. Empty where none or unknown.
  std::vector<std::string> overrides = {};
  // The job as the key table's labelled keys spell it (model, GPU, nodes, batch, FSDP knobs:
  // job_settings), for telling whether two runs are the same job; empty where unknown (imports).
  std::vector<std::pair<std::string, std::string>> job = {};
};

/// What a consumer needs besides the ops to compute throughput and utilisation.
struct RunFacts {
  int world_size = 1;
  int iterations = 1;
  std::int64_t tokens_per_iteration = 0;  // per rank, all micro-batches
  double model_flops_per_token = 0;       // MFU's numerator (analysis::model_flops_per_token)
  double peak_flops = 0;                  // dense peak of the compute dtype, FLOP/s per GPU
};

/// Host-side costs a run measured, for calibrating the CPU side of the cost model: the CPU time of
/// each kernel or collective launch call (cudaLaunchKernel and kin) and of each FSDP pre/post hook
/// less the launches it made. An imported trace has them; the simulator and the executors record
/// none. At most kMaxHostSamples of each, thinned evenly in time order.
struct HostOverheads {
  std::vector<TimeNs> launch;
  std::vector<TimeNs> fsdp_hook;
};
inline constexpr std::size_t kMaxHostSamples = 10'000;

/// Where the producer's allocator first could not make room. The simulator goes on past it (the
/// rest of the run is still there to inspect); an executor stops there.
struct OutOfMemoryEvent {
  OpId op = kNone;     // the op whose allocation failed (kNone: before the first op)
  std::string buffer;  // its name
  BufferCategory category = BufferCategory::activations;
  Bytes size = 0;
  Bytes reserved = 0;  // reserved when it failed
};

/// One op of the producer's exact critical path, walked back from the op that ended last.
struct CriticalStep {
  OpId op = kNone;
  bool issue_bound = false;  // its start waited for the CPU to issue it
  TimeNs cpu_gap = 0;        // then: the CPU issue time before it on the path
};

struct Timeline {
  std::string name;
  std::string source;  // "simulated", "measured" or "imported"
  Provenance provenance;
  RunFacts facts;
  std::vector<Stream> streams;
  std::vector<std::string> groups;
  std::vector<Communicator> communicators;
  std::vector<std::string> op_labels;  // TimelineOp::label texts
  std::vector<TimelineOp> ops;         // sorted by (start, stream, op)
  std::vector<MemorySample> memory;    // sorted by time; may be empty (sweeps)
  MemoryPeaks peaks;
  Bytes memory_capacity = 0;  // what the allocator may reserve; 0: unknown
  // A fit with less than this share of memory_capacity free is reported as tight (the scenario's
  // allocator.tight_margin; 2 % for runs that do not say).
  double memory_tight_margin = 0.02;
  HostOverheads host;
  // What only some producers know (the simulator all of it); empty or nullopt where unknown, and
  // reports print unknown, never 0.
  std::vector<TimeNs> cpu_busy_by_iteration;  // the issuing CPU thread: overheads and CPU work
  // GPU time compute lost beside collectives, by iteration: the work GPU ops did not do while
  // collectives held SMs (or ran at a calibration's fitted slowdown), in ns of the whole GPU.
  std::vector<TimeNs> contention_by_iteration;
  std::optional<int> allocator_retries;  // cached segments released to make room, whole run
  // The same by iteration (of the op that allocated); empty: unknown. A retry in the last
  // iteration means the allocator's cache had not settled after the steps before it.
  std::vector<int> allocator_retries_by_iteration;
  std::optional<OutOfMemoryEvent> out_of_memory;  // nullopt: every allocation fitted (or unknown)
  std::vector<CriticalStep> critical_path;        // last op first; empty: analysis derives one

  TimeNs end_time() const;
  /// The highest iteration any op has: the steady state (0 for a timeline with no ops).
  int last_iteration() const;
};

inline std::string_view op_label(const Timeline& t, const TimelineOp& op) {
  return op.label == kNone ? std::string_view()
                           : std::string_view(t.op_labels[static_cast<std::size_t>(op.label)]);
}

/// The op's group name, "-" for an op of no group.
inline std::string_view group_name(const Timeline& t, const TimelineOp& op) {
  return op.group == kNone ? std::string_view("-")
                           : std::string_view(t.groups[static_cast<std::size_t>(op.group)]);
}

/// A timeline of `schedule` with no ops yet: its name, streams, groups, communicators, op labels
/// and the facts the schedule knows (world, iterations, tokens). Producers fill in the rest.
Timeline timeline_of(const Schedule& schedule);

/// Op `id` of `schedule` as it ran from `start` to `end`.
inline TimelineOp timeline_op_of(const Schedule& schedule, OpId id, TimeNs start, TimeNs end) {
  const Op& op = schedule.ops[static_cast<std::size_t>(id)];
  return {id,      op.kind,  op.stream, op.group, op.phase, op.iteration, op.microbatch,
          op.comm, op.label, op.bytes,  op.flops, op.deps,  start,        end};
}

/// Places memory samples taken in issue order on the device timeline, as the simulator and the
/// executor both record them: sample k at the start of its op, or at its end where at_end[k]
/// (what an op allocates shows from its start, what it frees until its end); samples of no op
/// keep their time. An op on a CPU stream (zero_grad, a CPU optimizer step) runs when the CPU gets
/// to it, often a whole iteration ahead of the GPU, but what it allocates or frees describes the
/// device where the issue sequence stands: its sample takes the time of the sample before it in
/// issue order. Then sorts them by time (stable) and puts each peak where its op's sample is.
/// `spans[op]` has `start` and `end`.
template <typename Spans>
void place_memory_at_ops(Timeline& t, const Schedule& schedule, const std::vector<bool>& at_end,
                         const Spans& spans) {
  const auto on_cpu = [&](OpId op) {
    const auto stream = schedule.ops[static_cast<std::size_t>(op)].stream;
    return schedule.streams[static_cast<std::size_t>(stream)].kind == StreamKind::cpu;
  };
  TimeNs device_time = 0;  // where the issue sequence stands on the device
  for (std::size_t k = 0; k < t.memory.size(); ++k) {
    const OpId op = t.memory[k].op;
    if (op != kNone) {
      const auto& span = spans[static_cast<std::size_t>(op)];
      t.memory[k].time = on_cpu(op) ? device_time : at_end[k] ? span.end : span.start;
    }
    device_time = t.memory[k].time;
  }
  for (MemoryPeak* peak : {&t.peaks.allocated, &t.peaks.reserved}) {
    if (peak->op == kNone) continue;
    peak->time = spans[static_cast<std::size_t>(peak->op)].start;
    if (!on_cpu(peak->op)) continue;
    for (const MemorySample& sample : t.memory)
      if (sample.op == peak->op) peak->time = sample.time;
  }
  std::stable_sort(t.memory.begin(), t.memory.end(),
                   [](const MemorySample& a, const MemorySample& b) { return a.time < b.time; });
}

/// The shardscope version (the project version CMake was given).
std::string_view shardscope_version();

/// Sorts ops by (start, stream, op), the order a Timeline keeps them in.
void sort_timeline_ops(std::vector<TimelineOp>& ops);

/// Peaks from the memory samples (for producers that have only samples).
MemoryPeaks peaks_from_samples(const Timeline& timeline);

/// Version 3 added the CPU busy time, allocator retries, the out-of-memory event and the exact
/// critical path; version 2 files are read with those unknown.
inline constexpr std::string_view kTimelineSchema = "shardscope.timeline/3";

std::string timeline_to_json(const Timeline& timeline);
/// Throws ValidationError listing every malformed field.
Timeline timeline_from_json(std::string_view text, const std::string& origin = "<timeline>");

}  // namespace shardscope
