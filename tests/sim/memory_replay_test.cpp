// replay_memory against the simulator: the same peaks and the same out-of-memory answer on every
// configuration of a plan space, allocator settings included. The planner settles configurations
// that do not fit on the replay alone, so a difference here would be a wrong plan.
#include "shardscope/sim/memory_replay.hpp"

#include <gtest/gtest.h>

#include <map>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/sim/pipeline.hpp"
#include "shardscope/sim/plan_space.hpp"

namespace shardscope::sim {
namespace {

const std::string kReplayExample = std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml";

// Every `stride`-th configuration of the space the fixes leave: replayed and simulated.
void expect_replay_matches_simulation(
    const std::vector<Setting>& fixed,
    const std::vector<std::pair<std::string, std::vector<std::string>>>& allowed,
    std::size_t stride, std::size_t& checked, std::size_t& oom) {
  PlanInputs inputs;
  inputs.global_batch_tokens = 8192 * 8 * 4;  // 4 sequences per rank: micro-batches 1, 2, 4
  inputs.fixed = fixed;
  inputs.fixed.emplace_back("training.iterations", "2");
  inputs.allowed = allowed;
  const PlanBase base = plan_base(load_config_file(kReplayExample), kReplayExample, inputs);
  for (std::size_t i = 0; i < base.space.size(); i += stride) {
    Scenario scenario;
    try {
      scenario = read_scenario(configuration_tree(base.tree, base.space, i), kReplayExample);
    } catch (const ValidationError&) {
      continue;  // knobs that do not combine
    }
    const Schedule schedule = lower(scenario);
    const MemoryOutcome replay = replay_memory(schedule, scenario.cluster, scenario.allocator);
    PipelineOptions options;
    options.sim.record_memory_samples = false;
    options.sim.record_critical_path = false;
    const auto simulated = simulate_schedule(scenario, schedule, options).summary;
    const std::string what = configuration_text(base.space, decode(base.space, i));
    ++checked;
    oom += replay.out_of_memory;
    EXPECT_EQ(replay.out_of_memory, !simulated.out_of_memory.empty()) << what;
    // Told to stop once reserved passes a budget, it answers "does not fit" exactly when the
    // whole replay does.
    const Bytes budget = Bytes{40} * kGiB;
    const MemoryOutcome early =
        replay_memory(schedule, scenario.cluster, scenario.allocator, budget);
    EXPECT_EQ(early.out_of_memory || early.peak_reserved > budget,
              replay.out_of_memory || replay.peak_reserved > budget)
        << what;
    if (replay.out_of_memory) continue;  // the peaks then stop at the failed allocation
    // The floor the planner settles configurations by before lowering them is one.
    const Bytes floor = resident_state_floor(scenario);
    EXPECT_LE(floor, replay.peak_allocated) << what;
    EXPECT_GT(floor, 0) << what;  // saved activations at least
    EXPECT_EQ(replay.peak_allocated, simulated.peak_allocated.value_or(-1)) << what;
    EXPECT_EQ(replay.peak_reserved, simulated.peak_reserved.value_or(-1)) << what;
  }
}

TEST(MemoryReplay, EqualsTheSimulationOnEveryKindOfConfiguration) {
  std::size_t checked = 0, oom = 0;
  // Both APIs, every searched knob: a spread sample of the plan's own space.
  expect_replay_matches_simulation({{"training.loss", "fused"}}, {}, 211, checked, oom);
  // The allocator's own knobs and FSDP2's communication buffers in their own pool.
  expect_replay_matches_simulation(
      {{"fsdp.api", "fsdp2"},
       {"training.activation_checkpointing", "none"},
       {"fsdp.mixed_precision.param_dtype", "bf16"},
       {"fsdp.forward_prefetch_modules", "1"},
       {"fsdp.backward_prefetch_modules", "1"},
       {"fsdp.separate_reduce_scatter_group", "false"},
       {"fsdp.wrap.blocks_per_group", "1"},
       {"fsdp.cpu_offload.params", "false"}},
      {{"fsdp.comm_buffer_pool", {"caching_allocator", "process_group"}},
       {"allocator.garbage_collection_threshold", {"0.6", "0.9"}},
       {"allocator.max_split_size_mb", {"128", "4096"}}},
      3, checked, oom);
  EXPECT_GT(checked, 150u);
  EXPECT_GT(oom, 0u);  // some run out of memory: the answer the planner relies on most
}

TEST(MemoryReplay, EveryConfigurationOfAComputeClassSavesTheSame) {
  // The planner settles a whole compute class when what one forward pass saves is over the
  // budget, having read one member: so sharding, prefetching, wrapping, offload and the allocator
  // must not change it. Both APIs, every searched knob, a spread sample.
  PlanInputs inputs;
  inputs.global_batch_tokens = 8192 * 8 * 4;
  inputs.api = "either";
  const PlanBase base = plan_base(load_config_file(kReplayExample), kReplayExample, inputs);
  std::map<std::vector<std::size_t>, Bytes> by_class;  // part, then the compute choices
  std::size_t compared = 0;
  for (std::size_t i = 0; i < base.space.size(); i += 97) {
    Scenario scenario;
    try {
      scenario = read_scenario(configuration_tree(base.tree, base.space, i), kReplayExample);
    } catch (const ValidationError&) {
      continue;
    }
    const PlanConfig c = decode(base.space, i);
    std::vector<std::size_t> key{c.part};
    const auto& dims = base.space.parts[c.part].dimensions;
    for (std::size_t d = 0; d < dims.size(); ++d)
      if (dims[d].compute) key.push_back(c.choices[d]);
    const Bytes saved = saved_activation_bytes(scenario);
    const auto [it, added] = by_class.emplace(key, saved);
    if (added) continue;
    ++compared;
    EXPECT_EQ(saved, it->second) << configuration_text(base.space, c);
  }
  EXPECT_GT(compared, 1000u);
}

}  // namespace
}  // namespace shardscope::sim
