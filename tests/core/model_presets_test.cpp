#include "shardscope/core/model_presets.hpp"

#include <gtest/gtest.h>

#include "shardscope/core/param_groups.hpp"
#include "shardscope/core/scenario.hpp"

namespace shardscope {
namespace {

std::int64_t params_of(std::string_view preset) {
  return find_model_preset(preset)->total_params();
}

TEST(ModelPresets, HaveThePublishedExactParameterCounts) {
  EXPECT_EQ(params_of("llama3.1-8b"), 8'030'261'248);
  EXPECT_EQ(params_of("llama3.1-70b"), 70'553'706'496);
  EXPECT_EQ(params_of("llama3.1-405b"), 405'853'388'800);
  EXPECT_EQ(params_of("llama2-7b"), 6'738'415'616);
  EXPECT_EQ(params_of("llama2-13b"), 13'015'864'320);
  EXPECT_EQ(params_of("llama2-70b"), 68'976'648'192);
  // GPT-3 175B: 96 × (4h² + 8h² + biases + 2 LayerNorms) + token and position tables, tied head.
  EXPECT_EQ(params_of("gpt3-175b"), 174'604'259'328);
}

TEST(ModelPresets, ReproducePyTorchFsdp2MemoryTestModel) {
  // test_fully_shard_memory.py: B = largest block, N = non-block, T = total.
  const auto spec = find_model_preset("pytorch-fsdp2-test");
  ASSERT_TRUE(spec);
  const auto p = count_params(spec->transformer);
  EXPECT_EQ(p.block(), 7'084'800);
  EXPECT_EQ(p.root(), 62'976);
  EXPECT_EQ(spec->total_params(), 21'317'376);
}

TEST(ModelPresets, TensorShapesSumToTheClosedFormCountForEveryPreset) {
  for (const auto& preset : model_presets()) {
    const auto& c = preset.config;
    const auto p = count_params(c);
    std::int64_t block = 0, root = 0;
    for (const auto& s : block_param_shapes(c)) block += s.numel();
    for (const auto& s : root_param_shapes(c)) root += s.numel();
    EXPECT_EQ(block, p.block()) << preset.name;
    EXPECT_EQ(root, p.root()) << preset.name;
  }
}

TEST(ModelPresets, UnknownNameIsNotFound) {
  EXPECT_FALSE(find_model_preset("llama5"));
}

TEST(ParamGroups, Fsdp2ShardOfTheMemoryTestModelIsExactlyS) {
  const auto s = scenario_from_text(R"(
model: {preset: pytorch-fsdp2-test}
cluster: {preset: h100-sxm-80gb, nodes: 1, gpus_per_node: 2}
training: {seq_len: 16}
)");
  const auto groups = param_groups(s);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0].name, "root");
  EXPECT_EQ(groups[1].name, "layers.0");
  EXPECT_EQ(groups[3].name, "layers.2");
  std::int64_t shard = 0;
  for (const auto& g : groups) shard += g.sharded_numel;
  EXPECT_EQ(shard, 10'658'688);  // S
}

TEST(ParamGroups, Fsdp2PadsDimZeroPerParameterWhileFsdp1PadsTheFlatParameter) {
  // A [5, 3] weight over 4 ranks: FSDP2 chunks dim 0 → ceil(5/4)=2 rows × 3 = 6 per rank;
  // FSDP1 flattens 15 elements → ceil(15/4) = 4 per rank.
  const std::vector<ParamShape> shapes{{5, 3}};
  EXPECT_EQ(sharded_numel(shapes, 4, FsdpApi::fsdp2), 6);
  EXPECT_EQ(sharded_numel(shapes, 4, FsdpApi::fsdp1), 4);
}

TEST(ParamGroups, BlocksPerGroupNamesRangesAndKeepsTheRemainder) {
  const auto s = scenario_from_text(R"(
model: {preset: tiny, layers: 5}
fsdp: {wrap: {blocks_per_group: 2}}
)");
  const auto groups = param_groups(s);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[1].name, "layers.0-1");
  EXPECT_EQ(groups[2].name, "layers.2-3");
  EXPECT_EQ(groups[3].name, "layers.4");
  EXPECT_EQ(groups[3].block_count, 1);
}

}  // namespace
}  // namespace shardscope
