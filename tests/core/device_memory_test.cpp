// Memory outside PyTorch's caching allocator (the CUDA context, NCCL's buffers) and the cuBLAS
// workspaces inside it, in closed form from the constants docs/semantics.md cites.
#include "shardscope/core/device_memory.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "lowering_test_util.hpp"

namespace shardscope {
namespace {

using testing::lower_text;

const std::string kBase =
    "model: {preset: llama3.1-8b, layers: 2}\n"
    "cluster: {preset: h100-sxm-80gb, nodes: 2, gpus_per_node: 8}\n"
    "training: {seq_len: 2048, micro_batch: 1}\n";

// NCCL's three protocol buffers per connection: LL 8·512·8·16 B, LL128 120·640·8·8 B and the
// 4 MiB NCCL_BUFFSIZE: 9.1875 MiB.
TEST(DeviceMemory, AnNcclConnectionHoldsTheThreeProtocolsBuffers) {
  const NcclSpec nccl;
  EXPECT_EQ(nccl_connection_bytes(nccl), 8 * 512 * 8 * 16 + 120 * 640 * 8 * 8 + 4 * kMiB);
  EXPECT_EQ(nccl_connection_bytes(nccl), 9'633'792);
  EXPECT_EQ(nccl_communicator_bytes(nccl, 8), 24 * 9'633'792);
  EXPECT_EQ(nccl_communicator_bytes(nccl, 1), 0);  // a lone rank connects to nobody
  EXPECT_EQ(nccl_communicator_bytes(NcclSpec{kMiB, 8}, 16), 8 * (kMiB + 524'288 + 4'915'200));
  EXPECT_EQ(nccl_communicator_bytes(NcclSpec{kMiB, 0}, 16), 0);  // a fake process group
}

// One buffer set per communicator a collective runs on: FSDP's shard group; HSDP adds the
// replicate group, a separate reduce-scatter group adds its own.
TEST(DeviceMemory, EveryCommunicatorACollectiveUsesHoldsBuffers) {
  const Bytes per_comm = Bytes{24} * 9'633'792;
  const auto outside = [](const Schedule& s) {
    return memory_outside_allocator(*find_cluster_preset("h100-sxm-80gb"), s);
  };
  auto o = outside(lower_text(kBase));
  EXPECT_EQ(o.cuda_context, 512 * kMiB);
  EXPECT_EQ(o.nccl_communicators, 1);
  EXPECT_EQ(o.nccl_buffers, per_comm);
  o = outside(lower_text(kBase, {"fsdp.mesh.replicate=2", "fsdp.mesh.shard=8"}));
  EXPECT_EQ(o.nccl_communicators, 2);
  EXPECT_EQ(o.nccl_buffers, 2 * per_comm);
  o = outside(lower_text(kBase, {"fsdp.separate_reduce_scatter_group=true"}));
  EXPECT_EQ(o.nccl_communicators, 2);
  o = outside(lower_text(kBase, {"cluster.nodes=1", "cluster.gpus_per_node=1"}));
  EXPECT_EQ(o.nccl_communicators, 0);
  EXPECT_EQ(o.nccl_buffers, 0);
  EXPECT_EQ(o.total(), 512 * kMiB);
}

TEST(DeviceMemory, TheAllocatorGetsTheRestCappedByAMemoryFraction) {
  EXPECT_EQ(allocator_capacity(80 * kGiB, AllocatorParams{}, kGiB), 79 * kGiB);
  AllocatorParams half;
  half.memory_fraction = 0.5;
  EXPECT_EQ(allocator_capacity(80 * kGiB, half, kGiB), 40 * kGiB);  // a share of the total
  AllocatorParams most;
  most.memory_fraction = 0.99;
  EXPECT_EQ(allocator_capacity(80 * kGiB, most, 2 * kGiB), 78 * kGiB);
  EXPECT_EQ(allocator_capacity(kGiB, AllocatorParams{}, 2 * kGiB), 0);
  // The scenario's capacity: 81,559 MiB less the context and one communicator's buffers.
  const Scenario s = scenario_from_text(kBase, {});
  EXPECT_EQ(allocator_capacity(s.cluster, s.allocator, lower(s)),
            81'559 * kMiB - 512 * kMiB - Bytes{24} * 9'633'792);
}

std::vector<const Buffer*> cublas_workspaces(const Schedule& s) {
  std::vector<const Buffer*> out;
  for (std::size_t b = 0; b < s.buffers.size(); ++b) {
    if (buffer_name(s, static_cast<BufferId>(b)).rfind("cublas_workspace", 0) == 0)
      out.push_back(&s.buffers[b]);
  }
  return out;
}

// One workspace per thread that runs GEMMs (the forward's Python thread, autograd's device
// thread), allocated by its first GEMM and never freed; sized as CUBLAS_WORKSPACE_CONFIG's
// default for the GPU.
TEST(DeviceMemory, EachThreadRunningGemmsHoldsACublasWorkspace) {
  for (const auto& [preset, size] :
       {std::pair{"h100-sxm-80gb", 32 * kMiB}, std::pair{"a100-sxm-80gb", 8 * kMiB + 128 * kKiB}}) {
    const Schedule s =
        lower_text(kBase, {std::string("cluster.preset=") + preset, "training.iterations=2"});
    const auto workspaces = cublas_workspaces(s);
    ASSERT_EQ(workspaces.size(), 2u) << preset;
    for (const Buffer* b : workspaces) EXPECT_EQ(b->size, size) << preset;
    int allocated = 0, freed = 0;
    for (const Op& op : s.ops) {
      for (BufferId id : op.allocs) {
        if (buffer_name(s, id).rfind("cublas_workspace", 0) == 0) {
          ++allocated;
          EXPECT_EQ(op.iteration, 0);
          EXPECT_TRUE(op.kind == OpKind::forward || op.kind == OpKind::backward) << preset;
        }
      }
      for (BufferId id : op.frees) freed += buffer_name(s, id).rfind("cublas_workspace", 0) == 0;
    }
    EXPECT_EQ(allocated, 2);
    EXPECT_EQ(freed, 0);
  }
  EXPECT_TRUE(cublas_workspaces(lower_text(kBase, {"cluster.gpu.cublas_workspace=0"})).empty());
}

TEST(DeviceMemory, ScenarioKeysSetThemAndRefuseNonsense) {
  const Scenario s = scenario_from_text(
      kBase, {"cluster.gpu.context_memory=700 MiB", "cluster.gpu.cublas_workspace=8 MiB",
              "cluster.nccl.buffsize=1 MiB", "cluster.nccl.channels=8"});
  EXPECT_EQ(s.cluster.gpu.context_memory, 700 * kMiB);
  EXPECT_EQ(s.cluster.gpu.cublas_workspace, 8 * kMiB);
  EXPECT_EQ(s.cluster.nccl.buffsize, kMiB);
  EXPECT_EQ(s.cluster.nccl.channels, 8);
  for (const char* bad : {"cluster.nccl.channels=-1", "cluster.nccl.channels=65",
                          "cluster.nccl.buffsize=1 KiB", "cluster.gpu.context_memory=-1 MiB"}) {
    EXPECT_THROW((void)scenario_from_text(kBase, {bad}), ValidationError) << bad;
  }
}

}  // namespace
}  // namespace shardscope
