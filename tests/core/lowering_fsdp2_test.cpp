// FSDP2 issue orders and collective counts asserted by PyTorch's test_fully_shard_comm.py
// (../shared/reference/fsdp_oracles.md).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/lowering_test_util.hpp"
#include "shardscope/core/schedule_check.hpp"

namespace shardscope {
namespace {

using testing::count;
using testing::events;
using testing::lower_text;
using testing::split;

std::string transformer(int blocks, int gpus = 2) {
  return fmt::format(
      "model: {{preset: tiny, layers: {}}}\ncluster: {{nodes: 1, gpus_per_node: {}}}\n"
      "training: {{seq_len: 64, iterations: 1}}\n",
      blocks, gpus);
}

TEST(Fsdp2Counts, ForwardGathersEveryGroupOnceForEveryReshardSetting) {
  for (const char* raf : {"true", "false", "2"}) {
    const auto s =
        lower_text(transformer(2, 4), {fmt::format("fsdp.reshard_after_forward={}", raf)});
    EXPECT_EQ(count(s, OpKind::all_gather, Phase::forward), 3) << raf;
    EXPECT_EQ(count(s, OpKind::reduce_scatter, Phase::backward), 3) << raf;
    EXPECT_TRUE(check_schedule(s).empty()) << raf;
  }
}

TEST(Fsdp2Counts, BackwardGathersOnlyResharedBlocks) {
  EXPECT_EQ(count(lower_text(transformer(2, 4), {"fsdp.reshard_after_forward=false"}),
                  OpKind::all_gather, Phase::backward),
            0);
  EXPECT_EQ(count(lower_text(transformer(2, 4), {"fsdp.reshard_after_forward=true"}),
                  OpKind::all_gather, Phase::backward),
            2);
  EXPECT_EQ(count(lower_text(transformer(2, 4), {"fsdp.reshard_after_forward=2"}),
                  OpKind::all_gather, Phase::backward),
            2);
}

// torchtitan keeps the last block unsharded after forward: backward gathers only the others.
TEST(Fsdp2Counts, TheLastBlockCanKeepItsParametersForBackward) {
  const auto s = lower_text(transformer(3, 4), {"fsdp.reshard_last_after_forward=false"});
  EXPECT_EQ(count(s, OpKind::all_gather, Phase::forward), 4);
  EXPECT_EQ(count(s, OpKind::all_gather, Phase::backward), 2);  // blocks 0 and 1
  EXPECT_EQ(count(s, OpKind::reduce_scatter, Phase::backward), 4);
  EXPECT_TRUE(check_schedule(s).empty());
  EXPECT_EQ(count(lower_text(transformer(3, 4)), OpKind::all_gather, Phase::backward), 3);
}

TEST(Fsdp2Order, ForwardThreeBlocks) {
  EXPECT_EQ(events(lower_text(transformer(3)), Phase::forward, 0, "U"),
            split("U root, U0, U1, U2"));
}

// FSDPModule.unshard(async_op=True) on the first two blocks before the forward: their
// all-gathers are issued before the root's (the order real PyTorch issues them in,
// tests/pytorch/collective_oracle.py "unshard ahead"), their copy-ins run on the default stream
// (get_all_gather_streams with async_op), and each output is freed after its own copy-out.
TEST(Fsdp2Order, UnshardAheadGathersTheFirstBlocksBeforeTheRoot) {
  const Schedule s = lower_text(transformer(3), {"fsdp.unshard_ahead=2"});
  EXPECT_TRUE(check_schedule(s).empty());
  EXPECT_EQ(events(s, Phase::forward, 0, "U"), split("U0, U1, U root, U2"));
  EXPECT_EQ(count(s, OpKind::all_gather, Phase::forward), 4);
  int async_copy_ins = 0;
  for (const Op& op : s.ops) {
    if (op.iteration != 0 || op.phase != Phase::forward) continue;
    const std::string_view stream = s.streams[static_cast<std::size_t>(op.stream)].name;
    if (op.kind == OpKind::copy_in && stream == "compute") ++async_copy_ins;
    if (op.kind == OpKind::copy_out &&
        op_label(s, s.ops[static_cast<std::size_t>(op.deps[0])]) == "unshard(async_op=True)") {
      // The copy-out frees its own all-gather output.
      EXPECT_TRUE(std::any_of(op.frees.begin(), op.frees.end(), [&](BufferId b) {
        return s.buffers[static_cast<std::size_t>(b)].category ==
                   BufferCategory::all_gather_output &&
               s.buffers[static_cast<std::size_t>(b)].group == op.group;
      }));
    }
  }
  EXPECT_EQ(async_copy_ins, 2);
  // Without it, nothing changes: the default is no explicit unshard.
  EXPECT_EQ(events(lower_text(transformer(3), {"fsdp.unshard_ahead=0"}), Phase::forward, 0, "U"),
            split("U root, U0, U1, U2"));
}

// fsdp.all_gather_buffer: persistent (a custom AllGather whose allocate() keeps one buffer per
// group): each group's all-gather output is allocated once, reused by every later all-gather of
// the group, forward and backward, in every iteration, and never freed; nothing else changes.
TEST(Fsdp2Memory, PersistentAllGatherBuffersAreAllocatedOncePerGroupAndKept) {
  const std::string scenario =
      "model: {preset: tiny, layers: 3}\ncluster: {nodes: 1, gpus_per_node: 2}\n"
      "training: {seq_len: 64, iterations: 2}\n";
  const Schedule kept = lower_text(scenario, {"fsdp.all_gather_buffer=persistent"});
  const Schedule plain = lower_text(scenario);
  EXPECT_TRUE(check_schedule(kept).empty());
  const auto all_gather_outputs = [](const Schedule& s) {
    std::vector<Bytes> sizes;
    for (const Buffer& b : s.buffers)
      if (b.category == BufferCategory::all_gather_output) sizes.push_back(b.size);
    return sizes;
  };
  // One per group (root and three blocks), against one per all-gather: 4 forward + 3 backward
  // per iteration.
  EXPECT_EQ(all_gather_outputs(kept).size(), 4U);
  EXPECT_EQ(all_gather_outputs(plain).size(), 2U * 7U);
  for (const Op& op : kept.ops) {
    for (BufferId b : op.frees)
      EXPECT_NE(kept.buffers[static_cast<std::size_t>(b)].category,
                BufferCategory::all_gather_output);
  }
  EXPECT_EQ(count(kept, OpKind::all_gather, Phase::forward, 1),
            count(plain, OpKind::all_gather, Phase::forward, 1));
  EXPECT_EQ(events(kept, Phase::backward, 1), events(plain, Phase::backward, 1));
}

// fsdp.comm_buffer_pool: process_group (set_allocate_memory_from_process_group_for_comm): every
// buffer foreach_all_gather and foreach_reduce get from allocate() comes from the process group's
// pool (all-gather outputs, reduce-scatter inputs and outputs, the latter being the fp32 sharded
// gradient here), nothing else does, and nothing else changes; on a GPU without multicast
// PyTorch falls back to torch.empty, so no buffer moves.
TEST(Fsdp2Memory, CommBuffersComeFromTheProcessGroupPoolWhereTheGpuHasMulticast) {
  const std::string scenario =
      "model: {preset: tiny, layers: 3}\ncluster: {nodes: 1, gpus_per_node: 2}\n"
      "training: {seq_len: 64, iterations: 2}\n"
      "fsdp: {mixed_precision: {param_dtype: bf16, reduce_dtype: fp32}}\n";
  const Schedule pooled = lower_text(scenario, {"fsdp.comm_buffer_pool=process_group"});
  const Schedule plain = lower_text(scenario);
  const Schedule no_multicast =
      lower_text(scenario, {"fsdp.comm_buffer_pool=process_group", "cluster.gpu.multicast=false"});
  EXPECT_TRUE(check_schedule(pooled).empty());
  ASSERT_EQ(pooled.buffers.size(), plain.buffers.size());
  std::map<BufferCategory, int> in_pool;
  for (std::size_t b = 0; b < pooled.buffers.size(); ++b) {
    const Buffer& x = pooled.buffers[b];
    EXPECT_EQ(x.size, plain.buffers[b].size);
    EXPECT_EQ(plain.buffers[b].pool, MemoryPool::caching_allocator);
    EXPECT_EQ(no_multicast.buffers[b].pool, MemoryPool::caching_allocator);
    if (x.pool == MemoryPool::process_group) ++in_pool[x.category];
  }
  // Per iteration: 4 forward + 3 backward all-gathers (the root's output is kept unsharded for
  // backward), 4 reductions, each with an input and an output.
  EXPECT_EQ(in_pool[BufferCategory::all_gather_output], 2 * 7);
  EXPECT_EQ(in_pool[BufferCategory::reduce_scatter_input], 2 * 4);
  EXPECT_EQ(in_pool[BufferCategory::sharded_grads] + in_pool[BufferCategory::reduce_scatter_output],
            2 * 4);
  for (const auto& [category, n] : in_pool) {
    EXPECT_TRUE(category == BufferCategory::all_gather_output ||
                category == BufferCategory::reduce_scatter_input ||
                category == BufferCategory::reduce_scatter_output ||
                category == BufferCategory::sharded_grads)
        << to_string(category);
  }
  EXPECT_EQ(events(pooled, Phase::backward, 1), events(plain, Phase::backward, 1));
}

// set_is_last_backward(False) on every micro-batch but the last: its final callback skips
// finalize_backward and the wait on the last reduce-scatter, so that reduce-scatter's input stays
// allocated until the next backward's first reduce waits on it (PyTorch's memory tracker sees the
// same: tests/pytorch/memory_oracle.py, "is_last_backward" rows).
TEST(Fsdp2GradAccumulation, ANonLastBackwardLeavesTheLastReduceScatterPending) {
  const auto waits = [](const Schedule& s, int microbatch, std::string_view label) {
    int n = 0;
    for (const Op& op : s.ops)
      n += op.kind == OpKind::stream_wait && op.microbatch == microbatch &&
           op.phase == Phase::backward && op_label(s, op) == label;
    return n;
  };
  const Schedule every = lower_text(transformer(2), {"training.grad_accum=3"});
  const Schedule last = lower_text(
      transformer(2), {"training.grad_accum=3", "fsdp.is_last_backward=last_microbatch"});
  EXPECT_TRUE(check_schedule(last).empty());
  for (int mb = 0; mb < 3; ++mb) {
    EXPECT_EQ(waits(every, mb, "last reduce-scatter"), 1) << mb;
    EXPECT_EQ(waits(last, mb, "last reduce-scatter"), mb == 2 ? 1 : 0) << mb;
    // The next micro-batch's first reduce frees the one left pending.
    EXPECT_EQ(waits(last, mb, "previous reduce-scatter"),
              waits(every, mb, "previous reduce-scatter") + (mb > 0 ? 1 : 0))
        << mb;
  }
  // The collectives are the same.
  EXPECT_EQ(count(last, OpKind::reduce_scatter, Phase::backward, 0, -1),
            count(every, OpKind::reduce_scatter, Phase::backward, 0, -1));
}

TEST(Fsdp2Order, BackwardThreeBlocksImplicitPrefetch) {
  const auto expected = split("U2, U1, PB2, U0, PB1, PB0, PB root");
  EXPECT_EQ(events(lower_text(transformer(3)), Phase::backward, 0, "U PB"), expected);
  // Activation checkpointing does not change it.
  for (const char* ac : {"full", "selective_op", "every_2"}) {
    const auto s =
        lower_text(transformer(3), {fmt::format("training.activation_checkpointing={}", ac)});
    EXPECT_EQ(events(s, Phase::backward, 0, "U PB"), expected) << ac;
  }
  // Without resharding after forward, the same list without the U entries.
  EXPECT_EQ(events(lower_text(transformer(3), {"fsdp.reshard_after_forward=false"}),
                   Phase::backward, 0, "U PB"),
            split("PB2, PB1, PB0, PB root"));
}

TEST(Fsdp2Order, ExplicitForwardPrefetch) {
  EXPECT_EQ(events(lower_text(transformer(4), {"fsdp.forward_prefetch_modules=1"}), Phase::forward,
                   0, "U R"),
            split("U root, U0, U1, R0, U2, R1, U3, R2, R3"));
  EXPECT_EQ(events(lower_text(transformer(4), {"fsdp.forward_prefetch_modules=2"}), Phase::forward,
                   0, "U R"),
            split("U root, U0, U1, U2, R0, U3, R1, R2, R3"));
}

TEST(Fsdp2Order, BackwardFourBlocksDefaultAndExplicitPrefetch) {
  EXPECT_EQ(events(lower_text(transformer(4)), Phase::backward, 0),
            split("U3, U2, R3, PB3, U1, R2, PB2, U0, R1, PB1, R0, PB0, R root, PB root"));
  EXPECT_EQ(
      events(lower_text(transformer(4), {"fsdp.backward_prefetch_modules=2"}), Phase::backward, 0),
      split("U3, U2, U1, R3, PB3, U0, R2, PB2, R1, PB1, R0, PB0, R root, PB root"));
}

TEST(Fsdp2Order, NewerPyTorchReshardsTheRootWhenAskedExplicitly) {
  const auto s = lower_text(transformer(2), {"fsdp.reshard_root_after_forward=true"});
  const auto fwd = events(s, Phase::forward, 0, "U R");
  EXPECT_EQ(fwd.back(), "R root");
  EXPECT_EQ(events(s, Phase::backward, 0, "U").front(), "U root");
}

TEST(Fsdp2Hsdp, ReduceScatterOnShardThenAllReduceOnReplicatePerGroup) {
  const auto s = lower_text(
      "model: {preset: tiny}\ncluster: {nodes: 2, gpus_per_node: 8}\n"
      "training: {seq_len: 64, iterations: 1}\nfsdp: {mesh: {replicate: 2, shard: 8}}\n");
  EXPECT_TRUE(check_schedule(s).empty());
  std::vector<std::pair<std::string, std::string>> seen;  // (kind, group) in order for reductions
  for (const auto& op : s.ops) {
    if (op.kind != OpKind::reduce_scatter && op.kind != OpKind::all_reduce) continue;
    const auto& comm = s.communicators[static_cast<std::size_t>(op.comm)];
    if (op.kind == OpKind::reduce_scatter) {
      EXPECT_EQ(comm.name, "shard");
      EXPECT_EQ(comm.size, 8);
      EXPECT_EQ(comm.nodes, 1);
    } else {
      EXPECT_EQ(comm.name, "replicate");
      EXPECT_EQ(comm.size, 2);
      EXPECT_EQ(comm.nodes, 2);
      ASSERT_FALSE(seen.empty());
      EXPECT_EQ(seen.back().first, "reduce_scatter");  // directly after its own reduce-scatter
      EXPECT_EQ(seen.back().second, s.groups[static_cast<std::size_t>(op.group)].name);
      EXPECT_EQ(op.deps.size(), 1u);
      EXPECT_EQ(s.ops[static_cast<std::size_t>(op.deps[0])].kind, OpKind::reduce_scatter);
    }
    seen.emplace_back(std::string(to_string(op.kind)),
                      s.groups[static_cast<std::size_t>(op.group)].name);
  }
  EXPECT_EQ(seen.size(), 2u * 5u);  // root + 4 blocks, each RS then AR
}

TEST(Fsdp2Hsdp, AllReduceOnlyOnTheLastMicrobatchWhenAsked) {
  const auto s = lower_text(
      "model: {preset: tiny}\ncluster: {nodes: 2, gpus_per_node: 8}\ntraining: {seq_len: 64, "
      "iterations: 1, grad_accum: 2}\n"
      "fsdp: {mesh: {replicate: 2, shard: 8}, requires_all_reduce: last_microbatch}\n");
  EXPECT_EQ(count(s, OpKind::reduce_scatter, Phase::backward, 0, 0), 5);
  EXPECT_EQ(count(s, OpKind::all_reduce, Phase::backward, 0, 0), 0);
  EXPECT_EQ(count(s, OpKind::all_reduce, Phase::backward, 0, 1), 5);
  EXPECT_TRUE(check_schedule(s).empty());
}

TEST(Fsdp2GradAccumulation, NoReduceScatterUntilTheLastMicrobatch) {
  const auto s = lower_text(
      transformer(2), {"training.grad_accum=3", "fsdp.requires_gradient_sync=last_microbatch"});
  EXPECT_EQ(count(s, OpKind::reduce_scatter, Phase::backward, 0, 0), 0);
  EXPECT_EQ(count(s, OpKind::reduce_scatter, Phase::backward, 0, 1), 0);
  EXPECT_EQ(count(s, OpKind::reduce_scatter, Phase::backward, 0, 2), 3);
  EXPECT_TRUE(check_schedule(s).empty());
  // reshard_after_backward=false keeps parameters unsharded into the next micro-batch.
  const auto kept = lower_text(
      transformer(2), {"training.grad_accum=2", "fsdp.requires_gradient_sync=last_microbatch",
                       "fsdp.reshard_after_backward=false", "fsdp.reshard_after_forward=false"});
  EXPECT_EQ(count(kept, OpKind::all_gather, Phase::forward, 0, 1), 0);
  EXPECT_TRUE(check_schedule(kept).empty());
}

// A communicator spans NVLink domains, not nodes: a GB200 NVL72 rack's 18 nodes of 4 GPUs are
// one domain, so its 72-rank shard group runs on NVLink; 72 B200s in 9 HGX nodes span 9.
TEST(Fsdp2NvlinkDomain, ACommunicatorSpansDomainsNotNodes) {
  const auto nodes_of = [](const std::string& cluster, const std::vector<std::string>& sets) {
    const auto s = lower_text(
        "model: {preset: tiny}\ncluster: " + cluster + "\ntraining: {seq_len: 64, iterations: 1}\n",
        sets);
    EXPECT_TRUE(check_schedule(s).empty());
    std::map<std::string, int> out;
    for (const auto& c : s.communicators) out[c.name] = c.nodes;
    return out;
  };
  EXPECT_EQ(nodes_of("{preset: gb200-nvl72}", {}).at("shard"), 1);
  EXPECT_EQ(nodes_of("{preset: b200-sxm-180gb, nodes: 9}", {}).at("shard"), 9);
  // Two racks under HSDP: shard within a rack, replicate across the two.
  const auto hsdp =
      nodes_of("{preset: gb200-nvl72, nodes: 36}", {"fsdp.mesh.replicate=2", "fsdp.mesh.shard=72"});
  EXPECT_EQ(hsdp.at("shard"), 1);
  EXPECT_EQ(hsdp.at("replicate"), 2);
  // The key joins nodes into one domain on any cluster.
  EXPECT_EQ(nodes_of("{nodes: 4, gpus_per_node: 8, nvlink: {domain: 16}}", {}).at("shard"), 2);
}

TEST(Fsdp2ReshardToSmallerMesh, BackwardGathersOnThePostForwardCommunicator) {
  const auto s = lower_text(transformer(2, 8), {"fsdp.reshard_after_forward=4"});
  for (const auto& op : s.ops) {
    if (op.kind != OpKind::all_gather || op.group == kNone) continue;
    const auto& comm = s.communicators[static_cast<std::size_t>(op.comm)];
    if (op.phase == Phase::forward) {
      EXPECT_EQ(comm.name, "shard");
    }
    if (op.phase == Phase::backward) {
      EXPECT_EQ(comm.name, "post_forward");
      EXPECT_EQ(comm.size, 4);
    }
  }
  EXPECT_TRUE(check_schedule(s).empty());
}

}  // namespace
}  // namespace shardscope
