#include "shardscope/core/scenario.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/scenario_test_util.hpp"

namespace shardscope {
namespace {

const std::string kExamples = SHARDSCOPE_EXAMPLES_DIR;

using testing::has_problem;
using testing::problems_of;

TEST(Scenario, DefaultExampleLoads) {
  const auto s = load_scenario(kExamples + "/llama3-8b-h100x8.yaml");
  EXPECT_EQ(s.model.total_params(), 8'030'261'248);
  EXPECT_EQ(s.cluster.world_size(), 8);
  EXPECT_EQ(s.fsdp.api, FsdpApi::fsdp2);
  EXPECT_EQ(s.fsdp.mesh_shard, 8);
  EXPECT_EQ(s.fsdp.mixed_precision.param_dtype, DType::bf16);
  EXPECT_EQ(s.fsdp.mixed_precision.reduce_dtype, DType::fp32);
  EXPECT_EQ(s.training.activation_checkpointing, ActivationCheckpointing::selective_op);
}

TEST(Scenario, OverridesApplyBeforeValidation) {
  const auto s =
      load_scenario(kExamples + "/llama3-8b-h100x8.yaml",
                    {"cluster.nodes=2", "fsdp.reshard_after_forward=2", "cluster.gpu.memory=96GB"});
  EXPECT_EQ(s.cluster.world_size(), 16);
  EXPECT_EQ(s.fsdp.reshard_after_forward.mode, ReshardAfterForward::Mode::to_size);
  EXPECT_EQ(s.fsdp.reshard_after_forward.size, 2);
  EXPECT_EQ(s.cluster.gpu.memory, 96'000'000'000);
}

TEST(Scenario, ReportsEveryProblemAtOnce) {
  const auto p = problems_of(R"(
model: {preset: llama3.1-8b, hiden: 1}
cluster: {preset: h100-sxm-81gb}
training: {seq_len: long, micro_batch: 0}
fsdp: {api: fsdp3}
)");
  EXPECT_EQ(p.size(), 5u);
  EXPECT_TRUE(has_problem(p, "model.hiden", "did you mean 'model.hidden'"));
  EXPECT_TRUE(has_problem(p, "cluster.preset", "h100-sxm-80gb"));
  EXPECT_TRUE(has_problem(p, "training.seq_len", "integer"));
  EXPECT_TRUE(has_problem(p, "training.micro_batch", "out of range"));
  EXPECT_TRUE(has_problem(p, "fsdp.api", "fsdp2, fsdp1"));
}

TEST(Scenario, ReshardAfterForwardIntMustBeANonTrivialDivisorOfTheShardSize) {
  const std::string base = "model: {preset: tiny}\ncluster: {nodes: 1, gpus_per_node: 8}\n";
  EXPECT_TRUE(problems_of(base + "fsdp: {reshard_after_forward: 4}").empty());
  EXPECT_TRUE(has_problem(problems_of(base + "fsdp: {reshard_after_forward: 3}"),
                          "fsdp.reshard_after_forward"));
  EXPECT_TRUE(has_problem(problems_of(base + "fsdp: {reshard_after_forward: 8}"),
                          "fsdp.reshard_after_forward"));
  EXPECT_TRUE(has_problem(problems_of(base + "fsdp: {reshard_after_forward: 1}"),
                          "fsdp.reshard_after_forward"));
  EXPECT_TRUE(has_problem(problems_of(base + "fsdp: {reshard_after_forward: maybe}"),
                          "fsdp.reshard_after_forward"));
}

TEST(Scenario, MeshProductMustEqualWorldSize) {
  const std::string base = "model: {preset: tiny}\ncluster: {nodes: 2, gpus_per_node: 8}\n";
  const auto s = scenario_from_text(base + "fsdp: {mesh: {replicate: 2, shard: 8}}");
  EXPECT_TRUE(s.fsdp.is_hybrid());
  EXPECT_TRUE(has_problem(problems_of(base + "fsdp: {mesh: {replicate: 3, shard: 8}}"), "fsdp.mesh",
                          "world size 16"));
  const auto derived = scenario_from_text(base + "fsdp: {mesh: {replicate: 4}}");
  EXPECT_EQ(derived.fsdp.mesh_shard, 4);
}

TEST(Scenario, HybridShardNeedsSomethingToReplicateAcross) {
  const auto p =
      problems_of("model: {preset: tiny}\nfsdp: {api: fsdp1, sharding_strategy: HYBRID_SHARD}\n");
  EXPECT_TRUE(has_problem(p, "fsdp.sharding_strategy", "one node"));
  const auto s = scenario_from_text(
      "model: {preset: tiny}\ncluster: {nodes: 4}\nfsdp: {api: fsdp1, sharding_strategy: "
      "HYBRID_SHARD}\n");
  EXPECT_EQ(s.fsdp.mesh_replicate, 4);
  EXPECT_EQ(s.fsdp.mesh_shard, 8);
}

TEST(Scenario, ApiOnlyKnobsNameTheirEquivalent) {
  auto p = problems_of(
      "model: {preset: tiny}\nfsdp: {api: fsdp2, backward_prefetch: BACKWARD_POST, "
      "limit_all_gathers: true}\n");
  EXPECT_TRUE(has_problem(p, "fsdp.backward_prefetch", "backward_prefetch_modules"));
  EXPECT_TRUE(has_problem(p, "fsdp.limit_all_gathers", "fsdp1"));
  p = problems_of("model: {preset: tiny}\nfsdp: {api: fsdp1, reshard_after_forward: false}\n");
  EXPECT_TRUE(has_problem(p, "fsdp.reshard_after_forward", "sharding_strategy"));
  p = problems_of("model: {preset: tiny}\nfsdp: {sharding_strategy: SHARD_GRAD_OP}\n");
  EXPECT_TRUE(has_problem(p, "fsdp.sharding_strategy", "reshard_after_forward"));
}

TEST(Scenario, CustomModelGroups) {
  const auto s = scenario_from_text(R"(
model:
  family: custom
  groups:
    - {name: lin0, params: 1000, forward_time_ms: 25, backward_time_ms: 50, all_gather_time_ms: 10}
    - {name: lin1, params: 1000, forward_flops: 1.0e9}
cluster: {nodes: 1, gpus_per_node: 2}
)");
  ASSERT_EQ(s.model.groups.size(), 2u);
  EXPECT_EQ(s.model.groups[0].forward_time, 25 * kNsPerMs);
  EXPECT_EQ(s.model.groups[0].all_gather_time, 10 * kNsPerMs);
  EXPECT_EQ(s.model.total_params(), 2000);
  const auto p = problems_of(R"(
model:
  family: custom
  hidden: 5
  groups: [{name: a}, {name: a, params: 1, forward_flops: 1}]
)");
  EXPECT_TRUE(has_problem(p, "model.groups[0].params"));
  EXPECT_TRUE(has_problem(p, "model.groups[0]", "forward_flops or forward_time_ms"));
  EXPECT_TRUE(has_problem(p, "model.groups[1].name", "duplicate"));
  EXPECT_TRUE(has_problem(p, "model.hidden", "only used with model.family: transformer"));
}

TEST(Scenario, TransformerFamilyNeedsItsShape) {
  const auto p = problems_of("model: {family: transformer, hidden: 64, heads: 5}\n");
  EXPECT_TRUE(has_problem(p, "model.layers"));
  EXPECT_TRUE(has_problem(p, "model.vocab"));
  const auto s = scenario_from_text(
      "model: {family: transformer, hidden: 64, layers: 2, heads: 4, ffn_hidden: 128, vocab: "
      "100}\n");
  EXPECT_EQ(s.model.transformer.kv_heads, 4);
}

TEST(Scenario, LearnedPositionsBoundTheSequenceLength) {
  const auto p = problems_of("model: {preset: pytorch-fsdp2-test}\ntraining: {seq_len: 32}\n");
  EXPECT_TRUE(has_problem(p, "training.seq_len", "model.max_seq = 16"));
}

TEST(Scenario, ActivationCheckpointingPolicies) {
  const std::string base = "model: {preset: tiny}\n";
  EXPECT_EQ(scenario_from_text(base + "training: {activation_checkpointing: every_3}")
                .training.checkpoint_every,
            3);
  EXPECT_EQ(scenario_from_text(base + "training: {activation_checkpointing: every_1}")
                .training.activation_checkpointing,
            ActivationCheckpointing::full);
  EXPECT_TRUE(has_problem(problems_of(base + "training: {activation_checkpointing: every_x}"),
                          "training.activation_checkpointing"));
}

TEST(Scenario, PowerCapAboveTheBoardLimitIsImpossible) {
  EXPECT_TRUE(
      has_problem(problems_of("model: {preset: tiny}\ncluster: {gpu: {power_cap_w: 900}}\n"),
                  "cluster.gpu.power_cap_w"));
  const auto s = scenario_from_text(
      "model: {preset: tiny}\ncluster: {gpu: {power_cap_w: 500, memory: 96GB}}\n");
  EXPECT_EQ(s.cluster.gpu.power_cap_w, 500.0);
}

TEST(Scenario, MissingFileIsAProblemNamingTheFile) {
  try {
    load_scenario("/nonexistent/scenario.yaml");
    FAIL();
  } catch (const ValidationError& e) {
    EXPECT_EQ(e.problems().at(0).file, "/nonexistent/scenario.yaml");
  }
}

}  // namespace
}  // namespace shardscope
