#include "shardscope/sim/collective_model.hpp"

#include <gtest/gtest.h>

#include "shardscope/core/cluster_spec.hpp"

namespace shardscope::sim {
namespace {

CollectiveModel h100() {
  return CollectiveModel(*find_cluster_preset("h100-sxm-80gb"));
}

TEST(CollectiveModel, RingLatencyMatchesWhatNcclPrintedOnTwoH100Nodes) {
  // nccl issue #1519: 16 ranks on 2 nodes, ring all-gather latency LL 23.3, LL128 44.6, Simple 70.0
  // µs.
  const auto m = h100();
  EXPECT_NEAR(m.latency_us(OpKind::all_gather, 16, 2, NcclProtocol::ll), 23.3, 1e-9);
  EXPECT_NEAR(m.latency_us(OpKind::all_gather, 16, 2, NcclProtocol::ll128), 44.6, 1e-9);
  EXPECT_NEAR(m.latency_us(OpKind::all_gather, 16, 2, NcclProtocol::simple), 70.0, 1e-9);
}

TEST(CollectiveModel, DerivedSimpleLatenciesByScale) {
  const auto m = h100();
  EXPECT_NEAR(m.latency_us(OpKind::all_gather, 8, 1, NcclProtocol::simple), 32.2, 1e-9);
  EXPECT_NEAR(m.latency_us(OpKind::all_gather, 32, 4, NcclProtocol::simple), 145.6, 1e-9);
  EXPECT_NEAR(m.latency_us(OpKind::all_gather, 64, 8, NcclProtocol::simple), 296.8, 1e-9);
  EXPECT_NEAR(m.latency_us(OpKind::all_gather, 128, 16, NcclProtocol::simple), 599.2, 1e-9);
  // all-reduce takes twice the steps
  EXPECT_NEAR(m.latency_us(OpKind::all_reduce, 8, 1, NcclProtocol::simple), 8.4 + 14 * 3.4, 1e-9);
}

// NCCL's tree all-reduce (tuning.cc): base + 2·((ranks per node − 1)·NVLink hop + ⌊log2 nodes⌋·net
// hop), tree constants LL 6.8 / 0.6 / 5.0, LL128 14.0 / 1.25 / 8.5, Simple 8.4 / 4.0 / 14 µs; a
// ring with one rank per node pays the tree's network hop at each of its 2(n−1) steps.
TEST(CollectiveModel, TreeLatencyGrowsWithLog2OfTheNodes) {
  const auto m = h100();
  EXPECT_NEAR(m.tree_latency_us(16, 16, NcclProtocol::simple), 8.4 + 2 * 4 * 14.0, 1e-9);
  EXPECT_NEAR(m.tree_latency_us(16, 16, NcclProtocol::ll), 6.8 + 2 * 4 * 5.0, 1e-9);
  EXPECT_NEAR(m.tree_latency_us(128, 16, NcclProtocol::ll), 6.8 + 2 * (7 * 0.6 + 4 * 5.0), 1e-9);
  EXPECT_NEAR(m.tree_latency_us(24, 3, NcclProtocol::ll128), 14.0 + 2 * (7 * 1.25 + 1 * 8.5), 1e-9);
  EXPECT_NEAR(m.latency_us(OpKind::all_reduce, 16, 16, NcclProtocol::ll), 6.6 + 2 * 15 * 5.0, 1e-9);
  // With several ranks per node the ring keeps its own network hop (the H100 pair above).
  EXPECT_NEAR(m.latency_us(OpKind::all_gather, 16, 2, NcclProtocol::ll), 23.3, 1e-9);
}

// A small all-reduce across many nodes (HSDP's replicas: one rank per node) is latency-bound and
// runs as a tree; a large one keeps the ring, whose bandwidth the tree's (0.92 of it, halved by
// reduce-then-broadcast against the ring's 2(n−1)/n) does not reach. All-gathers never use it.
TEST(CollectiveModel, AllReducesAcrossNodesPickTheTreeWhenItIsFaster) {
  const auto m = h100();
  const auto small = m.estimate(OpKind::all_reduce, kMiB, 64, 64);
  EXPECT_EQ(small.algorithm, NcclAlgorithm::tree);
  const double ring_small = m.latency_us(OpKind::all_reduce, 64, 64, small.protocol);
  EXPECT_LT(small.time, static_cast<TimeNs>(ring_small * 1e3));
  const auto large = m.estimate(OpKind::all_reduce, kGiB, 16, 2);
  EXPECT_EQ(large.algorithm, NcclAlgorithm::ring);
  EXPECT_EQ(m.estimate(OpKind::all_gather, kMiB, 64, 64).algorithm, NcclAlgorithm::ring);
  EXPECT_EQ(m.estimate(OpKind::all_reduce, kMiB, 8, 1).algorithm, NcclAlgorithm::ring);
  // The tree's time in closed form: 256 MiB and up is past NCCL's size correction, Simple.
  const Bytes s = 512 * kMiB;
  const auto tree = m.estimate(OpKind::all_reduce, s, 512, 512);
  ASSERT_EQ(tree.algorithm, NcclAlgorithm::tree);
  ASSERT_EQ(tree.protocol, NcclProtocol::simple);
  const double busbw = m.bus_bandwidth(OpKind::all_reduce, 512, 512);
  const double seconds =
      (8.4 + 2 * 9 * 14.0) * 1e-6 + static_cast<double>(s) / (0.5 * busbw * 0.92);
  EXPECT_NEAR(static_cast<double>(tree.time), seconds * 1e9, 2.0);
}

TEST(CollectiveModel, LargeAllGatherIsLatencyPlusRingTrafficOverBusBandwidth) {
  const auto m = h100();
  const Bytes s = kGiB;
  const auto e = m.estimate(OpKind::all_gather, s, 8, 1);
  EXPECT_EQ(e.protocol, NcclProtocol::simple);
  const double busbw = 450e9 * 0.80;  // ≈360 GB/s measured on 8×H100
  const double expected_s = 32.2e-6 + static_cast<double>(s) * 7.0 / 8.0 / busbw;
  EXPECT_NEAR(static_cast<double>(e.time), expected_s * 1e9, 1.0);
  EXPECT_NEAR(e.busbw / 1e9, 360.0, 8.0);  // large messages approach the measured busbw
}

TEST(CollectiveModel, AllReduceMovesTwiceTheTrafficOfReduceScatter) {
  const auto m = h100();
  const auto rs = m.estimate(OpKind::reduce_scatter, 4 * kGiB, 8, 1);
  const auto ar = m.estimate(OpKind::all_reduce, 4 * kGiB, 8, 1);
  // NVLS gives all-reduce more bus bandwidth, but it still moves 2(n−1)/n of the buffer.
  const double ratio = static_cast<double>(ar.time) / static_cast<double>(rs.time);
  EXPECT_NEAR(ratio, 2.0 / 1.32, 0.02);
}

TEST(CollectiveModel, SmallMessagesAreLatencyBoundAndPickLowLatencyProtocols) {
  const auto m = h100();
  const auto e = m.estimate(OpKind::all_gather, 4 * kKiB, 8, 1);
  EXPECT_EQ(e.protocol, NcclProtocol::ll);
  EXPECT_LT(e.time, 20 * kNsPerUs);
}

// NCCL's channel tuning (enqueue.cc): one channel fewer while the buffer is smaller than
// channels · threads · bytes per thread (Simple 512 · 64 = 32 KiB a channel, LL 512 · 8 · ranks
// on a ring, LL128 640 · 8), never under one.
TEST(CollectiveModel, SmallBuffersRunOnFewerChannels) {
  using enum NcclProtocol;
  EXPECT_EQ(channels_for(NcclAlgorithm::ring, simple, 1 * kGiB, 8, 24), 24);
  EXPECT_EQ(channels_for(NcclAlgorithm::ring, simple, kKiB * 24 * 32, 8, 24), 24);
  EXPECT_EQ(channels_for(NcclAlgorithm::ring, simple, kKiB * 24 * 32 - 1, 8, 24), 23);
  EXPECT_EQ(channels_for(NcclAlgorithm::ring, simple, kKiB * 5 * 32, 8, 24), 5);
  EXPECT_EQ(channels_for(NcclAlgorithm::ring, ll, kKiB * 5 * 4 * 16, 16, 24), 5);
  EXPECT_EQ(channels_for(NcclAlgorithm::tree, ll, kKiB * 5 * 4, 16, 24), 5);
  EXPECT_EQ(channels_for(NcclAlgorithm::ring, ll128, kKiB * 5 * 5, 8, 24), 5);
  EXPECT_EQ(channels_for(NcclAlgorithm::ring, simple, 1, 8, 24), 1);
  EXPECT_EQ(channels_for(NcclAlgorithm::ring, simple, 1 * kGiB, 8, 0), 0);  // no NCCL
  // The estimate runs on the channels of the protocol it picks.
  const auto m = h100();
  EXPECT_EQ(m.estimate(OpKind::all_gather, 256 * kMiB, 8, 1).channels, 24);
  const auto small = m.estimate(OpKind::all_gather, 4 * kKiB, 8, 1);
  EXPECT_EQ(small.channels, channels_for(small.algorithm, small.protocol, 4 * kKiB, 8, 24));
  EXPECT_EQ(small.channels, 1);
}

TEST(CollectiveModel, MultiNodeBusBandwidthFollowsTheMeasuredCurve) {
  const auto m = h100();
  EXPECT_NEAR(m.bus_bandwidth(OpKind::all_gather, 16, 2) / 1e9, 185.0, 1e-6);
  EXPECT_NEAR(m.bus_bandwidth(OpKind::all_gather, 128, 16) / 1e9, 55.0, 1e-6);
  const double between = m.bus_bandwidth(OpKind::all_gather, 24, 3) / 1e9;
  EXPECT_LT(between, 185.0);
  EXPECT_GT(between, 119.0);
  EXPECT_NEAR(m.bus_bandwidth(OpKind::all_reduce, 16, 2) / 1e9, 95.0, 1e-6);
  EXPECT_EQ(m.estimate(OpKind::all_gather, kGiB, 1, 1).time, 0);  // one rank moves nothing
}

// A rail-optimised fabric: a ring crosses nodes on as many NICs as the communicator has ranks on
// each node, at the share of the line rate nccl-tests measured on 4 × 8 H100 with 8 × 400 Gb/s
// InfiniBand (323.5 GB/s all-gather, 330.9 GB/s all-reduce busbw), never faster than the NVLink
// ring inside a node, and the same at any node count (a ring's bandwidth does not depend on its
// length).
TEST(CollectiveModel, ARailOptimisedFabricCrossesNodesOnEveryNicOfANode) {
  ClusterSpec ib = *find_cluster_preset("h100-sxm-80gb");
  ib.fabric = NetworkFabric::infiniband;
  const CollectiveModel m(ib);
  EXPECT_NEAR(m.bus_bandwidth(OpKind::all_gather, 32, 4) / 1e9, 323.5, 1e-6);
  EXPECT_NEAR(m.bus_bandwidth(OpKind::reduce_scatter, 512, 64) / 1e9, 323.5, 1e-6);
  EXPECT_NEAR(m.bus_bandwidth(OpKind::all_reduce, 32, 4) / 1e9, 330.9, 1e-6);
  // HSDP's replicate group, one rank a node: one NIC.
  EXPECT_NEAR(m.bus_bandwidth(OpKind::all_reduce, 16, 16) / 1e9, 330.9 / 8, 1e-6);
  // Within a node nothing changes: the NVLink ring (80 % of 450 GB/s).
  EXPECT_NEAR(m.bus_bandwidth(OpKind::all_gather, 8, 1) / 1e9, 360.0, 1e-6);
  // A100 nodes with 8 × 200 Gb/s InfiniBand: 8 × 25 GB/s × 0.809, under NVLink's 240 GB/s.
  ClusterSpec a100 = *find_cluster_preset("a100-sxm-80gb");
  a100.fabric = NetworkFabric::infiniband;
  EXPECT_NEAR(CollectiveModel(a100).bus_bandwidth(OpKind::all_gather, 64, 8) / 1e9,
              8 * 25 * 323.5 / 400, 1e-6);
  // EFA (the default) keeps the measured curve: 69 GB/s on 8 nodes; RoCE, the other Ethernet
  // fabric, the same curve at its NIC rate: 69 × 25 / 50 on the A100's 200 Gb/s NICs.
  EXPECT_NEAR(h100().bus_bandwidth(OpKind::all_gather, 64, 8) / 1e9, 69.0, 1e-6);
  a100.fabric = NetworkFabric::roce;
  EXPECT_NEAR(CollectiveModel(a100).bus_bandwidth(OpKind::all_gather, 64, 8) / 1e9, 69.0 / 2, 1e-6);
}

// cluster.network.nics_per_node: a node's NICs are shared by its GPUs. Four NICs of 400 Gb/s on a
// node of 8 GPUs give each GPU what one 200 Gb/s NIC per GPU gives it, on every fabric: the rail
// fabric crosses nodes on the node's NICs (4 × 50 GB/s × 0.809), the Ethernet curve scales by
// each GPU's share, and HSDP's replicate group (one rank a node) gets half a NIC.
TEST(CollectiveModel, FewerNicsThanGpusShareTheNodesBandwidth) {
  for (const NetworkFabric fabric :
       {NetworkFabric::infiniband, NetworkFabric::efa, NetworkFabric::roce}) {
    ClusterSpec shared = *find_cluster_preset("h100-sxm-80gb");
    shared.fabric = fabric;
    shared.nics_per_node = 4;
    ClusterSpec own = shared;
    own.nics_per_node = 0;
    own.network.bandwidth = shared.network.bandwidth / 2;
    EXPECT_DOUBLE_EQ(shared.network_bandwidth_per_gpu(), 25e9);
    for (const auto& [ranks, nodes] : {std::pair{64, 8}, std::pair{32, 4}, std::pair{16, 16}}) {
      for (const OpKind kind : {OpKind::all_gather, OpKind::all_reduce}) {
        EXPECT_DOUBLE_EQ(CollectiveModel(shared).bus_bandwidth(kind, ranks, nodes),
                         CollectiveModel(own).bus_bandwidth(kind, ranks, nodes))
            << "fabric " << static_cast<int>(fabric) << ", " << ranks << " ranks on " << nodes
            << " nodes";
      }
    }
  }
  ClusterSpec ib = *find_cluster_preset("h100-sxm-80gb");
  ib.fabric = NetworkFabric::infiniband;
  ib.nics_per_node = 4;
  EXPECT_NEAR(CollectiveModel(ib).bus_bandwidth(OpKind::all_gather, 64, 8) / 1e9,
              4 * 50 * 323.5 / 400, 1e-6);
  EXPECT_NEAR(CollectiveModel(ib).bus_bandwidth(OpKind::all_reduce, 16, 16) / 1e9, 330.9 / 8 / 2,
              1e-6);
  // Inside a node the NICs play no part.
  EXPECT_NEAR(CollectiveModel(ib).bus_bandwidth(OpKind::all_gather, 8, 1) / 1e9, 360.0, 1e-6);
}

}  // namespace
}  // namespace shardscope::sim
