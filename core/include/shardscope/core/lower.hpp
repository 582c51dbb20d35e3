#pragma once
// core::lower: a scenario → the schedule IR PyTorch's FSDP would issue on one rank, for the
// configured iterations and micro-batches. docs/semantics.md explains every op it emits and the
// PyTorch function it follows.

#include <string>

#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule.hpp"

namespace shardscope {

Schedule lower(const Scenario& scenario);

/// One line per op for `shardscope lower --order`: "<kind> <group>" then phase, iteration,
/// micro-batch, stream, communicator, bytes and label.
std::string describe_op(const Schedule& schedule, const Op& op);

}  // namespace shardscope
