// Simulates a tiny scenario through the installed libraries and prints its step time.
#include <cstdio>

#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/sim/engine.hpp"

int main() {
  const auto scenario =
      shardscope::scenario_from_text("model: {preset: tiny}\ntraining: {seq_len: 256}\n");
  const auto schedule = shardscope::lower(scenario);
  const shardscope::sim::CostModel costs(scenario);
  const auto result = shardscope::sim::simulate(schedule, costs);
  std::printf("consumer: %zu ops, ends at %lld ns\n", schedule.ops.size(),
              static_cast<long long>(result.timeline.end_time()));
  return schedule.ops.empty() ? 1 : 0;
}
