#include "shardscope/exec/device_budget.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace shardscope::exec {

Bytes DeviceBudget::available() const {
  return std::max<Bytes>(0, free_after_setup - outside_to_come);
}

Bytes DeviceBudget::capacity() const {
  return planned > 0 ? std::min(planned, available()) : available();
}

std::string describe(const DeviceBudget& b) {
  std::string line = fmt::format("the allocator may reserve {} of {} free after setup",
                                 format_bytes(b.capacity()), format_bytes(b.free_after_setup));
  if (b.outside_to_come > 0)
    line += fmt::format(" less {} NCCL will allocate", format_bytes(b.outside_to_come));
  if (b.planned <= 0) return line + " (the plan gave no capacity)";
  if (!b.short_of_plan()) return line + fmt::format(" (the plan's {})", format_bytes(b.planned));
  return line + fmt::format(" (the plan: {}; an out-of-memory above {} is this device's)",
                            format_bytes(b.planned), format_bytes(b.capacity()));
}

}  // namespace shardscope::exec
