// FSDP1 counts and backward-prefetch orders asserted by PyTorch's test_fsdp_comm.py and
// test_fsdp_backward_prefetch.py (../shared/reference/fsdp_oracles.md).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/lowering_test_util.hpp"
#include "shardscope/core/schedule_check.hpp"

namespace shardscope {
namespace {

using testing::count;
using testing::lower_text;
using testing::short_name;

std::string fsdp1(int blocks, const std::string& strategy, const std::string& extra = "") {
  return fmt::format(
      "model: {{preset: tiny, layers: {}}}\ncluster: {{nodes: 1, gpus_per_node: 2}}\n"
      "training: {{seq_len: 64, iterations: 2}}\nfsdp: {{api: fsdp1, sharding_strategy: {}{}}}\n",
      blocks, strategy, extra);
}

TEST(Fsdp1Counts, FullShard) {
  const int n = 4;  // root + 3 blocks
  const auto s = lower_text(fsdp1(3, "FULL_SHARD"));
  for (int it = 0; it < 2; ++it) {
    EXPECT_EQ(count(s, OpKind::all_gather, Phase::forward, it), n);
    EXPECT_EQ(count(s, OpKind::all_gather, Phase::backward, it),
              n - 1);  // the root keeps its parameters
    EXPECT_EQ(count(s, OpKind::reduce_scatter, Phase::backward, it), n);
  }
  EXPECT_TRUE(check_schedule(s).empty());
}

TEST(Fsdp1Counts, FullShardInsideNoSync) {
  const auto s =
      lower_text(fsdp1(3, "FULL_SHARD", ", requires_gradient_sync: last_microbatch") + "",
                 {"training.grad_accum=2"});
  EXPECT_EQ(count(s, OpKind::reduce_scatter, Phase::backward, 0, 0), 0);
  EXPECT_EQ(count(s, OpKind::reduce_scatter, Phase::backward, 0, 1), 4);
  EXPECT_EQ(count(s, OpKind::all_gather, Phase::forward, 0, 1),
            4);  // FULL_SHARD frees in backward even without sync
  EXPECT_TRUE(check_schedule(s).empty());
}

TEST(Fsdp1Counts, ShardGradOp) {
  const int n = 4;
  const auto s = lower_text(fsdp1(3, "SHARD_GRAD_OP"));
  for (int it = 0; it < 2; ++it) {
    EXPECT_EQ(count(s, OpKind::all_gather, Phase::forward, it), n);
    EXPECT_EQ(count(s, OpKind::all_gather, Phase::backward, it), 0);
    EXPECT_EQ(count(s, OpKind::reduce_scatter, Phase::backward, it), n);
  }
  // After a no_sync micro-batch the parameters are still unsharded: the next forward gathers
  // nothing.
  const auto nosync =
      lower_text(fsdp1(3, "SHARD_GRAD_OP", ", requires_gradient_sync: last_microbatch"),
                 {"training.grad_accum=2"});
  EXPECT_EQ(count(nosync, OpKind::all_gather, Phase::forward, 0, 0), n);
  EXPECT_EQ(count(nosync, OpKind::all_gather, Phase::forward, 0, 1), 0);
  EXPECT_EQ(count(nosync, OpKind::reduce_scatter, Phase::backward, 0, 0), 0);
  EXPECT_EQ(count(nosync, OpKind::reduce_scatter, Phase::backward, 0, 1), n);
  EXPECT_TRUE(check_schedule(nosync).empty());
}

TEST(Fsdp1Counts, NoShardAllReducesFullGradients) {
  const auto s = lower_text(fsdp1(3, "NO_SHARD"));
  EXPECT_EQ(count(s, OpKind::all_gather, Phase::forward), 0);
  EXPECT_EQ(count(s, OpKind::reduce_scatter, Phase::backward), 0);
  EXPECT_EQ(count(s, OpKind::all_reduce, Phase::backward), 4);
  EXPECT_TRUE(check_schedule(s).empty());
}

// FSDP1 runs NO_SHARD in a world of one whatever strategy it is given (_init_core_state warns
// "FSDP is switching to use NO_SHARD"; seen on the GPU campaign's one-GPU emitted plan).
TEST(Fsdp1Counts, AWorldOfOneRunsNoShardWhateverTheStrategy) {
  const auto no_shard = lower_text(fsdp1(3, "NO_SHARD"), {"cluster.gpus_per_node=1"});
  for (const char* strategy : {"FULL_SHARD", "SHARD_GRAD_OP"}) {
    const auto s = lower_text(fsdp1(3, strategy), {"cluster.gpus_per_node=1"});
    EXPECT_EQ(count(s, OpKind::all_gather, Phase::forward), 0) << strategy;
    EXPECT_EQ(count(s, OpKind::all_gather, Phase::backward), 0) << strategy;
    EXPECT_EQ(count(s, OpKind::all_reduce, Phase::backward),
              count(no_shard, OpKind::all_reduce, Phase::backward))
        << strategy;
    EXPECT_EQ(s.ops.size(), no_shard.ops.size()) << strategy;
  }
}

// nn.Transformer with 6 encoder and 6 decoder layers, one FSDP unit per layer, 2 ranks.
std::string twelve_units(const std::string& prefetch) {
  std::string groups = "    - {name: root, params: 4096, forward_flops: 1.0e6}\n";
  for (const char* stack : {"encoder", "decoder"}) {
    for (int i = 0; i < 6; ++i)
      groups += fmt::format("    - {{name: {}.layers.{}, params: 65536, forward_flops: 1.0e9}}\n",
                            stack, i);
  }
  return "model:\n  family: custom\n  groups:\n" + groups +
         "cluster: {nodes: 1, gpus_per_node: 2}\ntraining: {iterations: 1}\n"
         "fsdp: {api: fsdp1, sharding_strategy: FULL_SHARD, backward_prefetch: " +
         prefetch + "}\n";
}

std::vector<std::string> prefetched(const Schedule& s) {
  std::vector<std::string> out;
  for (const auto& op : s.ops) {
    if (op.kind == OpKind::all_gather && op.phase == Phase::backward &&
        op_label(s, op) == "prefetch") {
      out.push_back(s.groups[static_cast<std::size_t>(op.group)].name);
    }
  }
  return out;
}

std::vector<std::string> names(const std::string& stack, std::initializer_list<int> indices) {
  std::vector<std::string> out;
  for (int i : indices) out.push_back(fmt::format("{}.layers.{}", stack, i));
  return out;
}

TEST(Fsdp1BackwardPrefetch, BackwardPreTwelvePrefetchesOneNothing) {
  const auto s = lower_text(twelve_units("BACKWARD_PRE"));
  auto expected = names("decoder", {5, 4, 3, 2, 1, 0});
  const auto enc = names("encoder", {5, 4, 3, 2, 1, 0});
  expected.insert(expected.end(), enc.begin(), enc.end());
  EXPECT_EQ(prefetched(s), expected);
  const int hooks = 13;  // 12 units + root run a pre-backward hook each
  EXPECT_EQ(hooks - static_cast<int>(prefetched(s).size()), 1);
  EXPECT_TRUE(check_schedule(s).empty());
}

TEST(Fsdp1BackwardPrefetch, BackwardPostElevenPrefetchesTwoNothing) {
  const auto s = lower_text(twelve_units("BACKWARD_POST"));
  auto expected = names("decoder", {4, 3, 2, 1, 0});
  const auto enc = names("encoder", {5, 4, 3, 2, 1, 0});
  expected.insert(expected.end(), enc.begin(), enc.end());
  EXPECT_EQ(prefetched(s), expected);
  EXPECT_EQ(13 - static_cast<int>(prefetched(s).size()), 2);
}

TEST(Fsdp1BackwardPrefetch, NoneGathersEachUnitInItsOwnHook) {
  const auto s = lower_text(twelve_units("none"));
  EXPECT_TRUE(prefetched(s).empty());
  EXPECT_EQ(count(s, OpKind::all_gather, Phase::backward), 12);
}

TEST(Fsdp1BackwardPrefetch, PreIssuesTheNextGatherBeforeTheCurrentGradientComputation) {
  // BACKWARD_PRE: next all-gather before the current backward; BACKWARD_POST: after it, before its
  // reduce-scatter.
  for (const char* mode : {"BACKWARD_PRE", "BACKWARD_POST"}) {
    const auto s = lower_text(twelve_units(mode));
    int current = -1;
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      const auto& op = s.ops[i];
      if (op.kind == OpKind::backward &&
          s.groups[static_cast<std::size_t>(op.group)].name == "decoder.layers.4")
        current = static_cast<int>(i);
    }
    ASSERT_GE(current, 0);
    int prefetch_of_3 = -1, rs_of_4 = -1;
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      const auto& op = s.ops[i];
      const auto& name =
          op.group == kNone ? std::string() : s.groups[static_cast<std::size_t>(op.group)].name;
      if (op.kind == OpKind::all_gather && op_label(s, op) == "prefetch" &&
          name == "decoder.layers.3")
        prefetch_of_3 = static_cast<int>(i);
      if (op.kind == OpKind::reduce_scatter && name == "decoder.layers.4")
        rs_of_4 = static_cast<int>(i);
    }
    if (std::string(mode) == "BACKWARD_PRE") {
      EXPECT_LT(prefetch_of_3, current);
    } else {
      EXPECT_GT(prefetch_of_3, current);
      EXPECT_LT(prefetch_of_3, rs_of_4);
    }
  }
}

TEST(Fsdp1RateLimiter, CpuWaitsOnceTwoAllGathersAreInFlight) {
  const auto limited = lower_text(fsdp1(6, "FULL_SHARD", ", limit_all_gathers: true"));
  const auto unlimited = lower_text(fsdp1(6, "FULL_SHARD", ", limit_all_gathers: false"));
  EXPECT_GT(count(limited, OpKind::cpu_wait, Phase::forward, 0) +
                count(limited, OpKind::cpu_wait, Phase::backward, 0),
            0);
  EXPECT_EQ(count(unlimited, OpKind::cpu_wait, Phase::forward, 0), 0);
  for (const auto& op : limited.ops) {
    if (op.kind != OpKind::cpu_wait || op_label(limited, op) != "rate limiter") continue;
    ASSERT_EQ(op.deps.size(), 1u);
    EXPECT_EQ(limited.ops[static_cast<std::size_t>(op.deps[0])].kind, OpKind::reshard);
  }
  EXPECT_TRUE(check_schedule(limited).empty());
}

TEST(Fsdp1Hsdp, HybridShardReducesWithinNodesAndAllReducesAcross) {
  const auto s = lower_text(
      "model: {preset: tiny}\ncluster: {nodes: 4, gpus_per_node: 8}\ntraining: {seq_len: 64, "
      "iterations: 1}\n"
      "fsdp: {api: fsdp1, sharding_strategy: HYBRID_SHARD}\n");
  EXPECT_EQ(count(s, OpKind::reduce_scatter, Phase::backward), 5);
  EXPECT_EQ(count(s, OpKind::all_reduce, Phase::backward), 5);
  for (const auto& op : s.ops) {
    if (op.kind == OpKind::all_reduce) {
      EXPECT_EQ(s.communicators[static_cast<std::size_t>(op.comm)].size, 4);
    }
    if (op.kind == OpKind::reduce_scatter) {
      EXPECT_EQ(s.communicators[static_cast<std::size_t>(op.comm)].size, 8);
    }
  }
  EXPECT_TRUE(check_schedule(s).empty());
}

TEST(Fsdp1ForwardPrefetch, StartsAfterTheFirstIteration) {
  const auto s = lower_text(fsdp1(3, "FULL_SHARD", ", forward_prefetch: true"));
  int prefetches[2] = {0, 0};
  for (const auto& op : s.ops) {
    if (op.kind == OpKind::all_gather && op.phase == Phase::forward &&
        op_label(s, op) == "prefetch")
      ++prefetches[op.iteration];
  }
  EXPECT_EQ(prefetches[0], 0);
  EXPECT_EQ(prefetches[1], 3);  // root prefetches layers.0, layers.0 → 1, layers.1 → 2
}

// A handle prefetched in forward made its parameter views in the previous handle's pre-forward,
// so autograd reaches its post-backward hook only after the previous handle's backward compute
// (fsdp1_lowerer.cpp, post_backward_after). Real PyTorch 2.11 issues exactly this order
// (tests/pytorch/collective_oracle.py, the "fwd-prefetch" cases): U = all-gather, B = backward
// compute, PB = reduce-scatter.
TEST(Fsdp1ForwardPrefetch, DefersEachPostBackwardPastThePreviousHandlesBackward) {
  const auto order = [](const Schedule& s, int iteration, int microbatch) {
    std::string out;
    for (const auto& op : s.ops) {
      if (op.phase != Phase::backward || op.iteration != iteration || op.microbatch != microbatch ||
          op.group == kNone)
        continue;
      const char* tag = op.kind == OpKind::all_gather       ? "U"
                        : op.kind == OpKind::backward       ? "B"
                        : op.kind == OpKind::reduce_scatter ? "PB"
                                                            : nullptr;
      if (tag == nullptr) continue;
      out +=
          fmt::format("{}{} ", tag, short_name(s.groups[static_cast<std::size_t>(op.group)].name));
    }
    return out;
  };
  const std::string yaml =
      fsdp1(3, "FULL_SHARD", ", forward_prefetch: true, backward_prefetch: none");
  // The root's loss and head backward first (two ops: fp32 logits need no cast), its
  // embedding last.
  const std::string recorded = "Broot Broot U2 B2 PB2 U1 B1 PB1 U0 B0 PB0 Broot PBroot ";
  const std::string deferred = "Broot Broot U2 B2 U1 B1 PB2 U0 B0 PB1 Broot PB0 PBroot ";
  const auto s = lower_text(yaml);
  EXPECT_EQ(order(s, 0, 0), recorded);  // the first backward records the execution order
  EXPECT_EQ(order(s, 1, 0), deferred);
  const auto accumulate = lower_text(yaml, {"training.grad_accum=2"});
  EXPECT_EQ(order(accumulate, 0, 0), recorded);
  EXPECT_EQ(order(accumulate, 0, 1), deferred);  // the second micro-batch prefetches already
  EXPECT_TRUE(check_schedule(s).empty());
  EXPECT_TRUE(check_schedule(accumulate).empty());
}

// FSDP1 shows the head's weight as its shard outside forward, so the chunked loss runs inside the
// root's forward: the root's pre-backward hook fires on the loss, and with BACKWARD_PRE its
// prefetch of the last block comes before the loss's backward. Real PyTorch 2.11 issues exactly
// this (tests/pytorch/collective_oracle.py, the "fsdp1 chunked loss" cases).
TEST(Fsdp1ChunkedLoss, RunsInsideTheRootsForward) {
  const auto first_backward_ops = [](const std::string& loss) {
    const auto s = lower_text(fsdp1(3, "FULL_SHARD"), {"training.loss=" + loss});
    std::string out;
    for (const auto& op : s.ops) {
      if (op.phase != Phase::backward || op.iteration != 0 || op.group == kNone) continue;
      if (op.kind != OpKind::all_gather && op.kind != OpKind::backward) continue;
      out += fmt::format("{}{} ", op.kind == OpKind::all_gather ? "U" : "B",
                         short_name(s.groups[static_cast<std::size_t>(op.group)].name));
      if (out.size() > 12) break;
    }
    EXPECT_TRUE(check_schedule(s).empty());
    return out;
  };
  // The loss outside the model, the root's pre-backward (prefetch), the head inside it.
  EXPECT_EQ(first_backward_ops("upcast_fp32"), "Broot U2 Broot ");
  // The pre-backward first; the chunked loss applies the head itself.
  EXPECT_EQ(first_backward_ops("chunked"), "U2 Broot Broot ");
}

// A block's flat gradient is torch.cat of its views' gradients, made once the backward has run
// (its recomputed tensors freed) and before the post-backward hook reshards: the reshard op
// allocates it beside the views' gradients, which it frees — as tensors no larger than the
// largest projection weight (the tiny Llama's: q, k and v together; o; w1; w3; w2; the norms). The
// root (a tied head's gradient is made early) and gradients accumulated under no_sync keep theirs
// from the backward op on. PyTorch's own tracker at MPT-30B's width finds the backward peak this
// way to 0.01 % (tests/data/pytorch/fsdp_memory_mpt_cpu.csv).
TEST(Fsdp1FlatGradient, MadeByTheCatBeforeTheReshardBesideTheViewsGradients) {
  const auto s = lower_text(fsdp1(2, "FULL_SHARD"));
  EXPECT_TRUE(check_schedule(s).empty());
  int blocks = 0;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    if (op.iteration != 0) continue;
    Bytes flat = 0, views = 0;
    int view_tensors = 0;
    for (BufferId b : op.allocs) {
      const std::string name = buffer_name(s, b);
      const Bytes size = s.buffers[static_cast<std::size_t>(b)].size;
      if (name.find("unsharded_flat_grad") != std::string::npos) flat += size;
      if (name.find("view_grad") != std::string::npos) {
        views += size;
        ++view_tensors;
        EXPECT_NE(std::find(op.frees.begin(), op.frees.end(), b), op.frees.end()) << name;
      }
    }
    if (flat == 0) continue;
    const std::string group = s.groups[static_cast<std::size_t>(op.group)].name;
    if (group == "root") {
      EXPECT_EQ(op.kind, OpKind::backward);
      EXPECT_EQ(views, 0);
      continue;
    }
    ++blocks;
    EXPECT_EQ(op.kind, OpKind::reshard) << group;
    EXPECT_EQ(views, flat) << group;  // one padding-free world of 2: the same bytes
    EXPECT_EQ(view_tensors, 6) << group;
  }
  EXPECT_EQ(blocks, 2);
  // Inside no_sync the flat gradient accumulates from the first backward op on.
  const auto accumulating =
      lower_text(fsdp1(2, "FULL_SHARD", ", requires_gradient_sync: last_microbatch"),
                 {"training.grad_accum=2"});
  for (const Op& op : accumulating.ops) {
    for (BufferId b : op.allocs) {
      if (buffer_name(accumulating, b).find("unsharded_flat_grad") != std::string::npos) {
        EXPECT_EQ(op.kind, OpKind::backward);
      }
    }
  }
}

// keep_low_precision_grads keeps the sharded gradients in the reduce dtype (bf16 here) instead of
// upcasting them to the fp32 parameters: half the gradient bytes.
TEST(Fsdp1MixedPrecision, KeepLowPrecisionGradsKeepsTheReduceDtype) {
  const auto grads = [](const std::string& keep) {
    // SGD: PyTorch's Adam and AdamW refuse gradients of another dtype than the parameters.
    const auto s = lower_text(fsdp1(2, "FULL_SHARD",
                                    ", mixed_precision: {param_dtype: bf16, reduce_dtype: bf16, "
                                    "keep_low_precision_grads: " +
                                        keep + "}"),
                              {"training.optimizer=sgd"});
    Bytes bytes = 0;
    DType dtype = DType::fp32;
    for (const Buffer& b : s.buffers) {
      if (b.category != BufferCategory::sharded_grads || b.name.iteration != 0) continue;
      bytes += b.size;
      dtype = b.dtype;
    }
    return std::make_pair(bytes, dtype);
  };
  const auto upcast = grads("false");
  const auto kept = grads("true");
  EXPECT_EQ(upcast.second, DType::fp32);
  EXPECT_EQ(kept.second, DType::bf16);
  EXPECT_EQ(kept.first * 2, upcast.first);
  try {
    lower_text(fsdp1(2, "FULL_SHARD",
                     ", mixed_precision: {param_dtype: bf16, reduce_dtype: bf16, "
                     "keep_low_precision_grads: true}"));
    FAIL() << "keep_low_precision_grads with AdamW was accepted";
  } catch (const ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("which PyTorch's adamw refuses"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace shardscope
