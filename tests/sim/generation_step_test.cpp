// training.generation in the simulator: decode steps priced by the roofline's operand bound, the
// training ops left as they were, and the generation phase in the summary (docs/semantics.md,
// "Generation" and "Kernels").
#include <gtest/gtest.h>

#include "shardscope/core/scenario.hpp"
#include "shardscope/sim/cost_model.hpp"
#include "sim/sim_test_util.hpp"

namespace shardscope {
namespace {

using testing::run_text;

const std::string kLlama8b =
    "model: {preset: llama3.1-8b}\n"
    "cluster: {preset: h100-sxm-80gb, nodes: 1, gpus_per_node: 8}\n"
    "training: {seq_len: 4096, micro_batch: 1, iterations: 1}\n"
    "fsdp: {mixed_precision: {param_dtype: bf16, reduce_dtype: fp32}}\n";

const std::vector<std::string> kGenerate = {
    "training.generation.calls=1", "training.generation.batch=8",
    "training.generation.prompt_tokens=256", "training.generation.new_tokens=4"};

// A decode block reads its weights for 8 tokens and its attention the whole cache: moving the
// operands takes longer than the FLOPs, so its time is the kernel floor plus every byte at the
// HBM's effective bandwidth (3.35 TB/s × 0.80).
TEST(GenerationCost, DecodeBlocksAreBoundByTheirOperandBytes) {
  const Scenario s = scenario_from_text(kLlama8b, kGenerate);
  const Schedule schedule = lower(s);
  const sim::CostModel costs(s);
  int decode = 0;
  for (const Op& op : schedule.ops) {
    if (op.label < 0 || op_label(schedule, op) != "decode") continue;
    ++decode;
    const auto terms = costs.compute_terms(schedule, op);
    ASSERT_TRUE(terms);
    EXPECT_TRUE(costs.bandwidth_bound(*terms));
    // One Llama 3.1 8B block's 218,112,000 weights in bf16 are most of what it moves.
    EXPECT_GT(terms->operand_bytes, 2 * 218'112'000);
    const double bandwidth = s.cluster.gpu.hbm_bandwidth * 0.80;
    const double expected_ns =
        4000.0 + static_cast<double>(terms->operand_bytes + terms->memory_bytes) / bandwidth * 1e9;
    EXPECT_NEAR(static_cast<double>(costs.cost(schedule, op).duration), expected_ns, 2.0);
  }
  EXPECT_EQ(decode, 3 * 32);
}

// Training ops move their weights once per thousands of tokens: none is bandwidth-bound, so the
// operand bound changes no training prediction.
TEST(GenerationCost, TrainingOpsAreNeverBandwidthBound) {
  for (const char* ac : {"none", "full", "selective_op"}) {
    const Scenario s =
        scenario_from_text(kLlama8b, {std::string("training.activation_checkpointing=") + ac});
    const Schedule schedule = lower(s);
    const sim::CostModel costs(s);
    for (const Op& op : schedule.ops) {
      if (op.kind != OpKind::forward && op.kind != OpKind::backward && op.kind != OpKind::recompute)
        continue;
      const auto terms = costs.compute_terms(schedule, op);
      ASSERT_TRUE(terms);
      EXPECT_FALSE(costs.bandwidth_bound(*terms)) << ac << " " << op_label(schedule, op);
    }
  }
}

// The step gains the generation phase; gathering each block once per call instead of once per
// forward makes it shorter (every decode forward of 8B on 8 H100s waits on its all-gathers).
TEST(GenerationCost, GenerationIsItsOwnPhaseOfTheStep) {
  const auto plain = run_text(kLlama8b);
  EXPECT_EQ(plain.summary.generation_time, 0);
  const auto gathered = run_text(kLlama8b, kGenerate);
  std::vector<std::string> kept = kGenerate;
  kept.push_back("training.generation.keep_unsharded=true");
  const auto unsharded = run_text(kLlama8b, kept);
  EXPECT_GT(gathered.summary.generation_time, 0);
  EXPECT_LT(unsharded.summary.generation_time, gathered.summary.generation_time);
  EXPECT_GT(gathered.summary.step_time,
            plain.summary.step_time + gathered.summary.generation_time / 2);
  EXPECT_EQ(gathered.summary.collectives.at("all_gather"), 1 + 4 * 32 + 1 + 2 * 32);
  EXPECT_GT(gathered.summary.peak_allocated_by_phase[static_cast<std::size_t>(Phase::generation)],
            0);
}

}  // namespace
}  // namespace shardscope
