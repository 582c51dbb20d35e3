#include "shardscope/sim/op_duration.hpp"

#include <fmt/format.h>

#include <cmath>

#include "shardscope/core/error.hpp"

namespace shardscope::sim {

TimeNs op_duration_ns(double seconds, std::string_view what) {
  if (!(seconds <= kMaxOpSeconds)) {  // also catches NaN
    throw ValidationError({Problem{"", "",
                                   fmt::format("{} would take {:.3g} s on one GPU, more than the "
                                               "{:g} s shardscope simulates for one op",
                                               what, seconds, kMaxOpSeconds),
                                   "a model, sequence or micro-batch this cluster can run (more "
                                   "GPUs, faster links, shorter sequences)"}});
  }
  return static_cast<TimeNs>(std::ceil(seconds * 1e9));
}

}  // namespace shardscope::sim
