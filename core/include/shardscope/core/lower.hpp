#pragma once
// core::lower: a scenario → the schedule IR PyTorch's FSDP would issue on one rank, for the
// configured iterations and micro-batches. docs/semantics.md explains every op it emits and the
// PyTorch function it follows.

#include <string>

#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule.hpp"

namespace shardscope {

/// The most ops one schedule may have: about 200 bytes each in the IR and again in a simulation, so
/// this bounds a run to a few GiB and a few seconds. A realistic step (405B, 126 layers, grad_accum
/// 64, two iterations) has about 400,000.
inline constexpr std::int64_t kMaxScheduleOps = 4'000'000;

/// Lowers a valid scenario. Throws ValidationError, before building anything, when the schedule
/// would exceed kMaxScheduleOps.
Schedule lower(const Scenario& scenario);
/// About how many ops lowering `scenario` issues (an upper estimate; no lowering is done).
std::int64_t estimated_schedule_ops(const Scenario& scenario);

/// One line per op for `shardscope lower --order`: "<kind> <group>" then phase, iteration,
/// micro-batch, stream, communicator, bytes and label.
std::string describe_op(const Schedule& schedule, const Op& op);

}  // namespace shardscope
