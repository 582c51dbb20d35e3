#pragma once
// Structural checks of a schedule: ids in range, dependencies exist and point to earlier-issued
// ops, the op graph (dependencies + per-stream order) is acyclic (Boost.Graph), and every buffer is
// allocated once before use and freed at most once, after its last use. Never throws.

#include <vector>

#include "shardscope/core/error.hpp"
#include "shardscope/core/schedule.hpp"

namespace shardscope {

std::vector<Problem> check_schedule(const Schedule& schedule,
                                    const std::string& origin = "<schedule>");

/// Where each buffer is allocated and freed (kNone: live at start / never freed).
struct BufferLifetime {
  OpId alloc = kNone;
  OpId free = kNone;
};
std::vector<BufferLifetime> buffer_lifetimes(const Schedule& schedule);

}  // namespace shardscope
