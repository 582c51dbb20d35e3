#pragma once
// Seconds since a point, for the planner's measure of what its steps cost (sim-internal).

#include <chrono>

namespace shardscope::sim::planning {

class Stopwatch {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace shardscope::sim::planning
