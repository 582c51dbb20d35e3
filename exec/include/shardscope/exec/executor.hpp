#pragma once
// exec::run: one CPU thread issues a schedule's ops through a Backend in IR order, exactly as the
// IR says, and returns the measured Timeline of this rank.
//   * a dependency on another stream's op becomes a stream wait on that op's event; a CPU op or a
//     cpu_wait blocks the CPU on its dependencies' events (event.synchronize());
//   * buffers are allocated and freed as their op is issued (the caching allocator's CPU-side
//     order, as the simulator models it); memory is sampled at each op that changes it and placed
//     at that op's start (allocations) or end (frees), as the simulator places its samples;
//   * the first error stops the run cleanly: the backend is aborted and ExecError names the op
//     (index, kind, group, communicator).

#include <atomic>
#include <functional>
#include <string>

#include "shardscope/core/error.hpp"
#include "shardscope/core/schedule.hpp"
#include "shardscope/core/timeline.hpp"
#include "shardscope/exec/backend.hpp"

namespace shardscope::exec {

/// A run that failed at an op; what() names it and says why.
class ExecError : public Error {
 public:
  ExecError(OpId op, const std::string& message) : Error(message), op_(op) {}
  OpId op() const { return op_; }

 private:
  OpId op_;
};

/// The run was stopped from outside (Ctrl-C).
class Interrupted : public Error {
 public:
  using Error::Error;
};

struct RunOptions {
  RunFacts facts;  // for MFU: model FLOPs per token and peak FLOP/s (the rest is the schedule's)
  Bytes memory_capacity = 0;           // of the device the run stands for; the Timeline records the
                                       // smaller of it and what the backend's allocator may reserve
  std::string scenario;                // Provenance::scenario
  std::vector<std::string> overrides;  // Provenance::overrides
  std::vector<std::pair<std::string, std::string>> job;  // Provenance::job
  const std::atomic<bool>* stop = nullptr;               // set it to stop the run (Ctrl-C)
  std::function<void(int iteration)> on_iteration;       // called as each iteration starts issuing
};

/// "op 12 (all_gather layers.3, forward, iteration 0, communicator shard)".
std::string describe_op(const Schedule& schedule, OpId id);

Timeline run(const Schedule& schedule, Backend& backend, const RunOptions& options = {});

}  // namespace shardscope::exec
