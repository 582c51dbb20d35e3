#pragma once
// PyTorch profiler (Kineto) Chrome-trace JSON → Timeline (source "imported"). The file, plain or
// gzip, is read as a stream of SAX events: one trace event at a time is built, classified and
// reduced to a compact record, so memory grows with the events kept, never with the file.
//
// What maps to what (docs/traces.md):
//   NCCL kernels (ncclKernel_* and ncclDevKernel_*, any case)  → all_gather / reduce_scatter /
//       all_reduce by the kernel's "Collective name" arg or its name; bytes from "Out msg nelems"
//       (all-gather) or "In msg nelems" × the dtype's size; the communicator from the process
//       group's name and size
//   kernels launched inside fsdp::all_gather_copy_in / fsdp::split_with_sizes_copy /
//       fsdp::chunk_cat                                        → copy_in / copy_out /
//       reduce_copy_in
//   other kernels                                              → forward, backward or
//       optimizer_step by where they were launched (Optimizer.step, autograd's thread)
//   Memcpy HtoD / DtoH                                         → h2d / d2h; other copies, memsets
//       and kernels of no phase                                → other
//   FSDP2 "FSDP::pre_forward (layers.0)"-style ranges name the groups; work launched after a
//       group's pre-forward (pre-backward) hook on the same thread belongs to that group
//   FSDP1's ranges name no module: its units are named by the order their hooks run
//   ProfilerStep#N                                              → iterations
//   [memory] instant events                                     → memory samples
//   a CPU-only trace (gloo): outermost CPU ops → compute, gloo collectives paired with the c10d
//       ops that issued them → collectives, the CPU's [memory] events → memory samples
// Nothing is dropped silently: every event is counted in the report, recognised or not.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "shardscope/core/timeline.hpp"

namespace shardscope::traces {

/// What an import recognised and what it did not, for `shardscope import --report`.
struct ImportReport {
  std::string file;
  std::int64_t events = 0;  // trace events read
  // Events skipped for a field no profiler writes (a time beyond ±4e15 µs, a negative duration, a
  // size beyond 1 PiB, a group of no ranks), by that field.
  std::map<std::string, std::int64_t> malformed;
  std::map<std::string, std::int64_t> by_category;   // every event, by its "cat"
  std::map<std::string, std::int64_t> ops_by_kind;   // GPU work, by the op kind it became
  std::map<std::string, std::int64_t> fsdp_ranges;   // FSDP::* / FullyShardedDataParallel.*
  std::map<std::string, std::int64_t> unrecognised;  // GPU work imported as "other", by name
  std::int64_t gpu_ops_without_launch = 0;           // no CPU launch found (no group or phase)
  std::int64_t memory_samples = 0;
  std::int64_t launch_calls = 0;  // launch API calls (before thinning to the timeline's samples)
  TimeNs launch_median = 0;
  std::int64_t fsdp_hooks = 0;  // FSDP hook ranges (HostOverheads)
  TimeNs fsdp_hook_median = 0;  // less the launches each made
  int iterations = 0;
  std::string kineto_schema;  // schemaVersion, when the trace has one
  // FSDP ranges attributed to no group, by kind (FSDP2 names its modules, FSDP1 units are named
  // by order), and the FSDP1 units named (0: no FSDP1 ranges).
  std::map<std::string, std::int64_t> unmapped_fsdp_ranges;
  int fsdp1_units = 0;
  // FSDP2 root forwards after which no backward ran (a registered generate's, an evaluation's):
  // their work is imported in Phase::generation.
  std::int64_t no_grad_forwards = 0;
  // A CPU-only trace (a gloo run): its CPU ops are the device's work, gloo's collectives its
  // communication, each paired with the c10d op that issued it.
  bool cpu_device = false;
  std::int64_t unpaired_host_collectives = 0;   // gloo collectives no c10d op issued
  std::int64_t unpaired_collective_issues = 0;  // c10d collective ops gloo ran nothing for
};

struct ImportedTrace {
  Timeline timeline;
  ImportReport report;
};

/// Imports the trace at `path` (plain or gzip JSON). Throws ValidationError naming the file for
/// anything that is not a Kineto trace (not JSON, no traceEvents, malformed events).
ImportedTrace import_kineto(const std::filesystem::path& path);

/// The same from bytes in memory (tests, fuzzing); `origin` names them in errors.
ImportedTrace import_kineto_text(std::string_view json, const std::string& origin);

/// The report as text: every count with its unit, unrecognised names most frequent first.
std::string import_report_text(const ImportReport& report);

/// Whether the file looks like a Kineto trace rather than a shardscope timeline: gzip, or JSON
/// whose first key within the first 64 KiB is "traceEvents", "schemaVersion", "deviceProperties"
/// or "distributedInfo".
bool looks_like_kineto_trace(const std::filesystem::path& path);

/// A run to analyse: a timeline file or a Kineto trace (imported on the way in), so that whatever
/// reads a run takes either. Throws ValidationError naming the file for a bad file, a scenario,
/// and a run in which no op took any time (no events, no device work): its step time, throughput
/// and every ratio would be numbers made of nothing.
Timeline read_timeline_or_trace(const std::filesystem::path& path);

}  // namespace shardscope::traces
