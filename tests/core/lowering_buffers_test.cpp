// Buffers of the lowered IR: exact sizes (PyTorch's FSDP2 memory-test model), dtypes under mixed
// precision, CPU offload, and properties over random valid scenarios.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "core/lowering_test_util.hpp"
#include "shardscope/core/param_groups.hpp"
#include "shardscope/core/schedule_check.hpp"
#include "shardscope/core/schedule_io.hpp"

namespace shardscope {
namespace {

using testing::count;
using testing::lower_text;

constexpr std::int64_t kB = 7'084'800, kN = 62'976, kS = 10'658'688;

const std::string kMemoryTestModel =
    "model: {preset: pytorch-fsdp2-test}\ncluster: {nodes: 1, gpus_per_node: 2}\n"
    "training: {seq_len: 16, optimizer: adam, iterations: 1}\n";

std::vector<const Buffer*> buffers_of(const Schedule& s, BufferCategory category,
                                      const std::string& group = "") {
  std::vector<const Buffer*> out;
  for (const auto& b : s.buffers) {
    if (b.category != category) continue;
    if (!group.empty() &&
        (b.group == kNone || s.groups[static_cast<std::size_t>(b.group)].name != group))
      continue;
    out.push_back(&b);
  }
  return out;
}

TEST(LoweringBuffers, Fsdp2MemoryTestModelHasExactParameterTerms) {
  const auto s = lower_text(kMemoryTestModel);
  Bytes sharded = 0;
  for (const auto* b : buffers_of(s, BufferCategory::sharded_params)) sharded += b->size;
  EXPECT_EQ(sharded, kS * 4);  // S, fp32
  for (const char* block : {"layers.0", "layers.1", "layers.2"}) {
    for (const auto* b : buffers_of(s, BufferCategory::all_gather_output, block))
      EXPECT_EQ(b->size, kB * 4) << block;
    for (const auto* b : buffers_of(s, BufferCategory::unsharded_params, block))
      EXPECT_EQ(b->size, kB * 4) << block;
    for (const auto* b : buffers_of(s, BufferCategory::reduce_scatter_input, block))
      EXPECT_EQ(b->size, kB * 4) << block;
  }
  for (const auto* b : buffers_of(s, BufferCategory::unsharded_params, "root"))
    EXPECT_EQ(b->size, kN * 4);
  // Adam: two states of S each, created by the first step.
  const auto states = buffers_of(s, BufferCategory::optimizer_states);
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[0]->size, kS * 4);
  EXPECT_FALSE(states[0]->live_at_start);
}

// torch.optim's implementations: foreach keeps sqrt(exp_avg_sq) of every parameter as one fp32
// temporary through the step and passes over the states eight times (AdamW; Adam, with no
// weight decay by default, seven); fused does neither. SGD without momentum keeps no state.
TEST(LoweringBuffers, OptimizerImplementationsKeepAndMoveWhatPyTorchsDo) {
  auto step_of = [](const Schedule& s) {
    for (const auto& op : s.ops)
      if (op.kind == OpKind::optimizer_step) return op;
    return Op{};
  };
  auto temporaries = [](const Schedule& s) {
    std::vector<Bytes> sizes;
    for (std::size_t b = 0; b < s.buffers.size(); ++b)
      if (buffer_name(s, static_cast<BufferId>(b)).starts_with("optimizer/foreach_temp"))
        sizes.push_back(s.buffers[b].size);
    return sizes;
  };
  const auto foreach = lower_text(kMemoryTestModel);
  const auto fused = lower_text(kMemoryTestModel, {"training.optimizer_impl=fused"});
  EXPECT_EQ(temporaries(foreach), std::vector<Bytes>{kS * 4});
  EXPECT_TRUE(temporaries(fused).empty());
  EXPECT_EQ(step_of(foreach).bytes, kS * 4 * 18);
  EXPECT_EQ(step_of(fused).bytes, kS * 4 * 7);
  const auto adamw = lower_text(kMemoryTestModel, {"training.optimizer=adamw"});
  EXPECT_EQ(step_of(adamw).bytes, kS * 4 * 20);
  const auto sgd = lower_text(kMemoryTestModel, {"training.optimizer=sgd"});
  EXPECT_TRUE(buffers_of(sgd, BufferCategory::optimizer_states).empty());
  EXPECT_TRUE(temporaries(sgd).empty());
  EXPECT_EQ(step_of(sgd).bytes, kS * 4 * 3);
}

TEST(LoweringBuffers, MixedPrecisionGathersInParamDtypeAndReducesInReduceDtype) {
  const auto s = lower_text(kMemoryTestModel, {"fsdp.mixed_precision.param_dtype=bf16",
                                               "fsdp.mixed_precision.reduce_dtype=fp32"});
  for (const auto& op : s.ops) {
    if (op.group == kNone || op.phase == Phase::checkpoint) continue;
    const auto& g = s.groups[static_cast<std::size_t>(op.group)];
    if (op.kind == OpKind::all_gather) {
      EXPECT_EQ(op.bytes, g.sharded_numel * 2 * 2);
    }  // 2 ranks × bf16
    if (op.kind == OpKind::reduce_scatter) {
      EXPECT_EQ(op.bytes, g.sharded_numel * 2 * 4);
    }  // fp32
  }
  for (const auto* b : buffers_of(s, BufferCategory::unsharded_grads))
    EXPECT_EQ(b->dtype, DType::bf16);
  for (const auto* b : buffers_of(s, BufferCategory::sharded_grads))
    EXPECT_EQ(b->dtype, DType::fp32);
  for (const auto* b : buffers_of(s, BufferCategory::activations)) EXPECT_EQ(b->dtype, DType::bf16);
}

TEST(LoweringBuffers, Fsdp2CpuOffloadCopiesParametersInAndGradientsOut) {
  const auto s = lower_text(kMemoryTestModel, {"fsdp.cpu_offload.params=true"});
  EXPECT_TRUE(check_schedule(s).empty());
  EXPECT_EQ(count(s, OpKind::h2d, Phase::forward), count(s, OpKind::all_gather, Phase::forward));
  EXPECT_EQ(count(s, OpKind::h2d, Phase::backward), count(s, OpKind::all_gather, Phase::backward));
  EXPECT_EQ(count(s, OpKind::d2h, Phase::backward),
            count(s, OpKind::reduce_scatter, Phase::backward));
  for (std::size_t i = 0; i + 1 < s.ops.size(); ++i) {
    if (s.ops[i + 1].kind == OpKind::copy_in) {
      EXPECT_EQ(s.ops[i].kind, OpKind::h2d);
    }  // h2d right before each copy-in
  }
  for (const auto* b : buffers_of(s, BufferCategory::sharded_params)) {
    if (b->live_at_start) {
      EXPECT_EQ(b->location, Location::host);
    }
  }
  for (const auto* b : buffers_of(s, BufferCategory::optimizer_states))
    EXPECT_EQ(b->location, Location::host);
  for (const auto& op : s.ops) {
    if (op.kind == OpKind::optimizer_step) {
      EXPECT_EQ(s.streams[static_cast<std::size_t>(op.stream)].kind, StreamKind::cpu);
    }
  }
  // The CPU blocks on the gradient copies before the CPU optimizer step.
  EXPECT_EQ(count(s, OpKind::cpu_wait, Phase::backward), 1);
}

TEST(LoweringBuffers, ActivationCheckpointingShrinksSavedActivations) {
  const std::string base =
      "model: {preset: llama3.1-8b}\ntraining: {seq_len: 8192, micro_batch: 2, iterations: 1}\n"
      "fsdp: {mixed_precision: {param_dtype: bf16}}\n";
  auto saved = [&](const char* ac) {
    Bytes total = 0;
    // The schedule must outlive the loop: buffers_of returns pointers into it.
    const Schedule s = lower_text(base, {fmt::format("training.activation_checkpointing={}", ac)});
    for (const auto* b : buffers_of(s, BufferCategory::activations)) {
      total += b->size;
    }
    return total;
  };
  const Bytes none = saved("none"), sac = saved("selective_op"), every2 = saved("every_2"),
              full = saved("full");
  EXPECT_GT(none, every2);
  EXPECT_GT(every2, sac);
  EXPECT_GT(sac, full);
  // full: only each block's input, t·h·2 bytes × 32 blocks, and the final norm's input and
  // output (the head's).
  EXPECT_EQ(full, 32LL * 16384 * 4096 * 2 + 2LL * 16384 * 4096 * 2);
}

TEST(LoweringBuffers, CheckpointsGatherOnlyForFullStateDict) {
  const std::string base = kMemoryTestModel + "fsdp: {checkpoint: {every: 1, state_dict_type: ";
  const auto full =
      lower_text(base + "FULL_STATE_DICT, offload_to_cpu: true, rank0_only: true}}\n");
  const auto sharded = lower_text(base + "SHARDED_STATE_DICT, offload_to_cpu: true}}\n");
  EXPECT_EQ(count(full, OpKind::all_gather, Phase::checkpoint),
            4 * 3);  // parameters and two Adam states per group
  EXPECT_EQ(count(full, OpKind::d2h, Phase::checkpoint), 4 * 3);
  EXPECT_EQ(count(sharded, OpKind::all_gather, Phase::checkpoint), 0);
  EXPECT_EQ(count(sharded, OpKind::d2h, Phase::checkpoint), 4);
  EXPECT_TRUE(check_schedule(full).empty());
  EXPECT_TRUE(check_schedule(sharded).empty());
}

// ---- properties over random valid scenarios
std::string random_scenario(std::mt19937& rng) {
  auto pick = [&](std::initializer_list<const char*> xs) {
    std::uniform_int_distribution<std::size_t> d(0, xs.size() - 1);
    return *(xs.begin() + static_cast<std::ptrdiff_t>(d(rng)));
  };
  auto between = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int nodes = between(1, 3);
  const int gpus = pick({"2", "4", "8"})[0] - '0';
  const bool fsdp2 = between(0, 1) == 1;
  std::string fsdp;
  if (fsdp2) {
    const std::string raf = pick({"true", "false", gpus >= 4 ? "2" : "true"});
    fsdp = fmt::format(
        "{{api: fsdp2, reshard_after_forward: {}, forward_prefetch_modules: {}, "
        "backward_prefetch_modules: {}, "
        "requires_gradient_sync: {}, reshard_after_backward: {}, post_optim_event: {}",
        raf, between(0, 2), between(0, 2), pick({"every_microbatch", "last_microbatch"}),
        pick({"true", "false"}), pick({"true", "false"}));
    if (nodes > 1 && between(0, 1))
      fsdp += fmt::format(", mesh: {{replicate: {}, shard: {}}}, requires_all_reduce: {}", nodes,
                          gpus, pick({"every_microbatch", "last_microbatch"}));
  } else {
    const std::string strategy = nodes > 1 ? pick({"FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD",
                                                   "_HYBRID_SHARD_ZERO2", "NO_SHARD"})
                                           : pick({"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"});
    fsdp = fmt::format(
        "{{api: fsdp1, sharding_strategy: {}, backward_prefetch: {}, forward_prefetch: {}, "
        "limit_all_gathers: {}, "
        "requires_gradient_sync: {}",
        strategy, pick({"BACKWARD_PRE", "BACKWARD_POST", "none"}), pick({"true", "false"}),
        pick({"true", "false"}), pick({"every_microbatch", "last_microbatch"}));
  }
  fsdp += fmt::format(", cpu_offload: {{params: {}}}, wrap: {{blocks_per_group: {}}}",
                      pick({"true", "false", "false"}), between(1, 3));
  fsdp += fmt::format(", mixed_precision: {{param_dtype: {}, reduce_dtype: {}}}",
                      pick({"fp32", "bf16"}), pick({"fp32", "bf16"}));
  fsdp += fmt::format(", checkpoint: {{every: {}, state_dict_type: {}}}}}", between(0, 2),
                      pick({"SHARDED_STATE_DICT", "FULL_STATE_DICT", "LOCAL_STATE_DICT"}));
  return fmt::format(
      "model: {{preset: tiny, layers: {}}}\ncluster: {{nodes: {}, gpus_per_node: {}}}\n"
      "training: {{seq_len: 64, micro_batch: {}, grad_accum: {}, iterations: {}, "
      "activation_checkpointing: {}, optimizer: {}}}\n"
      "fsdp: {}\n",
      between(1, 6), nodes, gpus, between(1, 2), between(1, 3), between(1, 3),
      pick({"none", "full", "selective_op", "every_2"}), pick({"adamw", "sgd"}), fsdp);
}

TEST(LoweringProperties, RandomValidScenariosLowerToValidLeakFreeSchedules) {
  std::mt19937 rng(20261121);
  for (int trial = 0; trial < 300; ++trial) {
    const std::string yaml = random_scenario(rng);
    SCOPED_TRACE(yaml);
    const Scenario scenario = scenario_from_text(yaml);
    const Schedule s = lower(scenario);
    const auto problems = check_schedule(s);
    ASSERT_TRUE(problems.empty()) << problems.front().to_string();

    // Every buffer is freed by the end, except sharded parameters, optimizer states, cuBLAS
    // workspaces and (FSDP2 with reshard_after_backward=false) parameters left unsharded for the
    // next forward.
    const bool keeps_unsharded =
        scenario.fsdp.api == FsdpApi::fsdp2 && !scenario.fsdp.reshard_after_backward;
    const auto life = buffer_lifetimes(s);
    for (std::size_t b = 0; b < s.buffers.size(); ++b) {
      const auto cat = s.buffers[b].category;
      if (cat == BufferCategory::sharded_params && s.buffers[b].live_at_start) continue;
      if (cat == BufferCategory::optimizer_states) continue;
      if (cat == BufferCategory::unsharded_params && keeps_unsharded) continue;
      if (buffer_name(s, static_cast<BufferId>(b)).starts_with("cublas_workspace")) continue;
      EXPECT_NE(life[b].free, kNone) << buffer_name(s, static_cast<BufferId>(b));
    }
    // Each all-gather moves the group's padded unsharded bytes in the gather dtype; so the bytes of
    // all-gathers per iteration are those bytes × the number of gathers.
    const Bytes param_elem =
        bytes_per_element(scenario.fsdp.mixed_precision.param_dtype.value_or(DType::fp32));
    for (int it = 0; it < s.iterations; ++it) {
      Bytes total = 0, expected = 0;
      for (const auto& op : s.ops) {
        if (op.kind != OpKind::all_gather || op.iteration != it || op.phase == Phase::checkpoint)
          continue;
        const auto& g = s.groups[static_cast<std::size_t>(op.group)];
        const Bytes unsharded = g.sharded_numel * scenario.fsdp.mesh_shard * param_elem;
        EXPECT_EQ(op.bytes, unsharded) << g.name;
        total += op.bytes;
        expected += unsharded;
      }
      EXPECT_EQ(total, expected);
    }
  }
}

TEST(LoweringProperties, SameScenarioSameBytesAndJsonRoundTrips) {
  const std::string yaml =
      std::string(kMemoryTestModel) + "fsdp: {mixed_precision: {param_dtype: bf16}}\n";
  const std::string a = schedule_to_json(lower_text(yaml));
  const std::string b = schedule_to_json(lower_text(yaml));
  EXPECT_EQ(a, b);
  EXPECT_EQ(schedule_to_json(schedule_from_json(a)), a);
}

}  // namespace
}  // namespace shardscope
