// training.generation: calls of a method registered with register_fsdp_forward_method before the
// step (docs/semantics.md, "Generation"). The collective counts are the ones real FSDP2 issues
// (tests/pytorch/collective_oracle.py, the "generate" cases); the sizes are closed forms.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "core/lowering_test_util.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/schedule_check.hpp"

namespace shardscope {
namespace {

using testing::count;
using testing::events;
using testing::lower_text;
using testing::split;

// tiny: hidden 256, 8 heads, 4 kv heads of 32 (kv_dim 128); bf16 compute.
std::string generating(int blocks, const std::string& generation) {
  return fmt::format(
      "model: {{preset: tiny, layers: {}}}\ncluster: {{nodes: 1, gpus_per_node: 2}}\n"
      "training: {{seq_len: 64, iterations: 1, generation: {{{}}}}}\n"
      "fsdp: {{mixed_precision: {{param_dtype: bf16}}}}\n",
      blocks, generation);
}

std::vector<const Op*> ops_labelled(const Schedule& s, std::string_view label) {
  std::vector<const Op*> out;
  for (const Op& op : s.ops)
    if (op.phase == Phase::generation && op.label >= 0 && op_label(s, op) == label)
      out.push_back(&op);
  return out;
}

// Every forward of generate (the prefill and one per further token) all-gathers each block,
// which reshards after it; the root, kept unsharded after forward, is gathered once per call and
// resharded when generate returns (the registered method's post-forward finds its group idle),
// so the training forward gathers it again.
TEST(Generation, EveryForwardGathersEveryBlockOnce) {
  const Schedule s = lower_text(generating(3, "calls: 2, new_tokens: 4, prompt_tokens: 8"));
  EXPECT_TRUE(check_schedule(s).empty());
  EXPECT_EQ(count(s, OpKind::all_gather, Phase::generation), 2 * (1 + 4 * 3));
  EXPECT_EQ(count(s, OpKind::reshard, Phase::generation), 2 * (4 * 3 + 1));
  const auto gen = events(s, Phase::generation, 0, "U");
  EXPECT_EQ(std::vector<std::string>(gen.begin(), gen.begin() + 7),
            split("U root, U0, U1, U2, U0, U1, U2"));
  EXPECT_EQ(events(s, Phase::forward, 0, "U"), split("U root, U0, U1, U2"));
  EXPECT_EQ(ops_labelled(s, "prefill").size(), 2u * 3);
  EXPECT_EQ(ops_labelled(s, "decode").size(), 2u * 3 * 3);
}

// keep_unsharded: set_reshard_after_forward(False) for the call, reshard() on every module after
// it: each group is gathered once per call, every group (the root too) resharded at the end.
TEST(Generation, KeepUnshardedGathersEachGroupOncePerCall) {
  const Schedule s =
      lower_text(generating(3, "calls: 2, new_tokens: 4, prompt_tokens: 8, keep_unsharded: true"));
  EXPECT_TRUE(check_schedule(s).empty());
  EXPECT_EQ(count(s, OpKind::all_gather, Phase::generation), 2 * 4);
  EXPECT_EQ(count(s, OpKind::reshard, Phase::generation), 2 * 4);
  EXPECT_EQ(events(s, Phase::forward, 0, "U"), split("U root, U0, U1, U2"));
}

// Prefill: the prompts' tokens, causal; decode step i: one token per sequence attending to
// prompt + i positions, unmasked, through GEMMs of m = sequences.
TEST(Generation, DecodeStepsAttendToTheCacheWithThinGemms) {
  const Schedule s =
      lower_text(generating(1, "batch: 3, new_tokens: 3, prompt_tokens: 8, calls: 1"));
  const auto attention_of = [&](const Op& op) {
    for (const Kernel& k : op_kernels(s, op))
      if (const auto* a = std::get_if<Attention>(&k.shape)) return *a;
    throw std::runtime_error("no attention");
  };
  const auto prefill = ops_labelled(s, "prefill");
  const auto decode = ops_labelled(s, "decode");
  ASSERT_EQ(prefill.size(), 1u);
  ASSERT_EQ(decode.size(), 2u);
  const Attention p = attention_of(*prefill[0]);
  EXPECT_EQ(p.batch, 3);
  EXPECT_EQ(p.q_len, 8);
  EXPECT_EQ(p.kv_len, 8);
  EXPECT_TRUE(p.causal);
  for (std::size_t i = 0; i < decode.size(); ++i) {
    const Attention a = attention_of(*decode[i]);
    EXPECT_EQ(a.q_len, 1);
    EXPECT_EQ(a.kv_len, static_cast<std::int64_t>(8 + i + 1));
    EXPECT_FALSE(a.causal);
    for (const Kernel& k : op_kernels(s, *decode[i]))
      if (const auto* g = std::get_if<Gemm>(&k.shape)) {
        EXPECT_EQ(g->m, 3) << k.label;
      }
  }
  // The head projects each sequence's last position only.
  for (const Op* head : ops_labelled(s, "head"))
    for (const Kernel& k : op_kernels(s, *head))
      if (const auto* g = std::get_if<Gemm>(&k.shape)) {
        EXPECT_EQ(g->m, 3);
      }
}

// One block's cache: keys and values, 2 × batch × positions × kv_dim (128) × 2 bytes (bf16).
// A StaticCache holds prompt + new tokens from the prefill on; a DynamicCache grows by a new
// tensor per step (torch.cat), the last holding prompt + new - 1 (the last token is never fed
// back). Both go when generate returns.
TEST(Generation, KvCacheSizesAndLifetimes) {
  const auto caches = [](const Schedule& s) {
    std::vector<Bytes> out;
    for (std::size_t b = 0; b < s.buffers.size(); ++b)
      if (buffer_name(s, static_cast<BufferId>(b)).find("kv_cache") != std::string::npos)
        out.push_back(s.buffers[b].size);
    return out;
  };
  const Schedule fixed = lower_text(generating(
      2, "batch: 4, prompt_tokens: 10, new_tokens: 5, kv_cache: preallocated, calls: 1"));
  EXPECT_TRUE(check_schedule(fixed).empty());
  const Bytes whole = Bytes{2} * 4 * 15 * 128 * 2;
  EXPECT_EQ(caches(fixed), (std::vector<Bytes>{whole, whole}));
  const Schedule grown =
      lower_text(generating(1, "batch: 4, prompt_tokens: 10, new_tokens: 5, calls: 1"));
  EXPECT_TRUE(check_schedule(grown).empty());
  std::vector<Bytes> expected;
  for (Bytes positions = 10; positions <= 14; ++positions)
    expected.push_back(positions * 2 * 4 * 128 * 2);
  EXPECT_EQ(caches(grown), expected);
  // A fused qkv projection (GPT-style): the prefill's keys and values are views of its output, so
  // the DynamicCache keeps all of it (q too: hidden 256 + 2 × kv 256) until the first decode
  // step's torch.cat (real PyTorch: tests/pytorch/memory_oracle.py "gpt fsdp2 generate").
  const Schedule fused = lower_text(
      "model: {family: transformer, hidden: 256, layers: 1, heads: 4, kv_heads: 4, "
      "ffn_hidden: 1024, vocab: 1024, mlp: gelu, norm: layernorm, pos_emb: learned, "
      "max_seq: 512}\ncluster: {nodes: 1, gpus_per_node: 2}\n"
      "training: {seq_len: 64, iterations: 1, generation: {batch: 4, prompt_tokens: 10, "
      "new_tokens: 3, calls: 1}}\nfsdp: {mixed_precision: {param_dtype: bf16}}\n");
  EXPECT_EQ(caches(fused),
            (std::vector<Bytes>{Bytes{4} * 10 * (256 + 2 * 256) * 2, Bytes{2} * 4 * 11 * 256 * 2,
                                Bytes{2} * 4 * 12 * 256 * 2}));
}

TEST(Generation, RefusedWhereItCannotRun) {
  const auto problem = [](const std::string& yaml) {
    try {
      (void)scenario_from_text(yaml);
    } catch (const ValidationError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(problem(generating(2, "calls: 1") + "fsdp: {api: fsdp1}\n").find("summon_full_params"),
            std::string::npos);
  EXPECT_NE(
      problem("model: {family: custom, groups: [{name: a, params: 1000, forward_flops: 1e9}]}\n"
              "cluster: {nodes: 1, gpus_per_node: 2}\n"
              "training: {generation: {calls: 1}}\n")
          .find("no attention shapes"),
      std::string::npos);
  EXPECT_NE(problem("model: {preset: gpt3-175b}\ncluster: {nodes: 1, gpus_per_node: 2}\n"
                    "training: {seq_len: 512, generation: {calls: 1, prompt_tokens: 2000, "
                    "new_tokens: 100}}\n")
                .find("learned position table"),
            std::string::npos);
  EXPECT_NE(problem("model: {preset: tiny}\ncluster: {nodes: 1, gpus_per_node: 4}\n"
                    "training: {generation: {calls: 1, keep_unsharded: true}}\n"
                    "fsdp: {reshard_after_forward: 2}\n")
                .find("should be a bool"),
            std::string::npos);
  // Every forward is lowered op by op: lower() refuses a schedule past kMaxScheduleOps before
  // building it, naming the generation.
  try {
    (void)lower_text(
        "model: {preset: tiny}\ncluster: {nodes: 1, gpus_per_node: 2}\n"
        "training: {iterations: 1000, generation: {calls: 1000, new_tokens: 10}}\n");
    ADD_FAILURE() << "lowered";
  } catch (const ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("training.generation.new_tokens"), std::string::npos);
  }
}

}  // namespace
}  // namespace shardscope
