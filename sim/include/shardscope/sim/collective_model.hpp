#pragma once
// NCCL collective cost model (docs/simulator.md, "Cost models"; NCCL's src/graph/tuning.cc):
// NCCL's tuner predicts
//   time = latency + bytes / algbw
// for each algorithm and protocol and picks the fastest. Ring all-gather/reduce-scatter move
// S·(n−1)/n bytes through the slowest link (busbw), all-reduce 2·S·(n−1)/n.
// Latency = base(protocol) + intra_steps · intra_hop(protocol) + inter_steps · net_hop(protocol),
// with n−1 ring steps (2(n−1) for all-reduce), nodes−1 of them (2(nodes−1)) across the network,
// and each intra-node step costing at least the per-step network overhead once several nodes are
// involved (1 µs, ×3 for Simple). An all-reduce across nodes may also run as NCCL's tree: a chain
// inside each node and a binary tree across nodes, reduce then broadcast, whose latency grows with
// log2(nodes) instead of nodes.

#include <array>
#include <string_view>

#include "shardscope/core/calibration.hpp"
#include "shardscope/core/cluster_spec.hpp"
#include "shardscope/core/schedule.hpp"

namespace shardscope::sim {

enum class NcclProtocol { ll, ll128, simple };
std::string_view to_string(NcclProtocol protocol);
enum class NcclAlgorithm { ring, tree };
std::string_view to_string(NcclAlgorithm algorithm);

struct CollectiveEstimate {
  TimeNs time = 0;
  TimeNs latency = 0;
  NcclAlgorithm algorithm = NcclAlgorithm::ring;
  NcclProtocol protocol = NcclProtocol::simple;
  BytesPerSecond busbw = 0;  // achieved bus bandwidth at this size
  // The SMs its kernel holds while it runs: one thread block per channel, NCCL's channels cut
  // for a small buffer (channels_for).
  int channels = 0;
};

struct CollectiveModelParams {
  // Microseconds per protocol (LL, LL128, Simple), NCCL's tuning constants.
  std::array<double, 3> base_latency_us{6.6, 14.0, 8.4};
  std::array<double, 3> nvlink_hop_us{0.6, 1.9, 3.4};
  std::array<double, 3> network_hop_us{2.7, 4.0, 14.0};
  double min_intra_step_us = 1.0;  // per-step network overhead with several nodes (×3 for Simple)
  // Share of the Simple bandwidth each protocol reaches.
  std::array<double, 3> protocol_bandwidth{0.5, 0.92, 1.0};
  // Measured large-message busbw as a share of the line rate.
  double nvlink_efficiency = 0.80;    // 8×H100: ≈360 GB/s of 450 GB/s for AG/RS and ring AR
  double nvls_allreduce_gain = 1.32;  // NVLink SHARP all-reduce: ≈475 GB/s on the same fabric
  // Multi-node large-message busbw measured on 8-GPU H100 nodes with a 50 GB/s NIC per GPU,
  // by node count (Hugging Face ultrascale playbook, 256 MB all-gathers); interpolated
  // log-linearly, scaled by the cluster's NIC rate over 50 GB/s. All-reduce across nodes reaches
  // ≈95 GB/s on 2 nodes (NCCL maintainers) and falls with the same curve.
  std::array<std::pair<int, double>, 6> multi_node_allgather_busbw_gbps{
      {{2, 185.0}, {4, 119.0}, {8, 69.0}, {16, 55.0}, {32, 28.0}, {64, 11.0}}};
  double multi_node_allreduce_busbw_2_nodes_gbps = 95.0;
  // That curve was measured on EFA and falls to 11 GB/s at 64 nodes; a ring whose inter-node steps
  // each cross one NIC keeps at least this share of the NIC line rate on a rail-optimised fabric.
  double multi_node_min_nic_fraction = 0.8;
  double reference_nic_gbps = 50.0;
  // A rail-optimised fabric (cluster.network.fabric infiniband): the ring's inter-node
  // steps run over every NIC of a node at once, so a communicator with r ranks on each node
  // reaches r NICs' line rate at these shares, bounded by the NVLink ring inside a node. Measured
  // on 4 nodes of 8 H100 with 8 × 400 Gb/s InfiniBand (NCCL 2.24.3; Voltage Park and Georgia
  // Tech's cluster benchmark, aigatech/vpbenchmarking): all-gather 323.5 GB/s busbw and
  // all-reduce 330.9 GB/s, of 400 GB/s. A ring's bandwidth does not depend on its length; its
  // latency does (latency_us).
  double rail_allgather_efficiency = 323.5 / 400.0;
  double rail_allreduce_efficiency = 330.9 / 400.0;
  // Tree all-reduce (NCCL's tuning.cc at 5067397, June 2026): base latency, NVLink hop (the
  // chain inside a node) and network hop per protocol (LL, LL128, Simple); the network hop is
  // also what a ring with one rank per node pays per inter-node step ("with ppn=1 latencies are
  // fully exposed"). Latency = base + 2·((ranks per node − 1)·nvlink hop + ⌊log2 nodes⌋·net hop).
  std::array<double, 3> tree_base_latency_us{6.8, 14.0, 8.4};
  std::array<double, 3> tree_nvlink_hop_us{0.6, 1.25, 4.0};
  std::array<double, 3> tree_network_hop_us{5.0, 8.5, 14.0};
  // Its bus bandwidth as a share of the ring's Simple busbw: 0.92 for an all-reduce tree, LL a
  // further 1/3.8, LL128 120/128. Its algorithm bandwidth is half of it (reduce, then broadcast).
  std::array<double, 3> tree_bandwidth{0.92 / 3.8, 0.92 * 120.0 / 128.0, 0.92};
  // NCCL's correction of the tree's bandwidth at medium sizes, by protocol and ⌊log2(bytes / 64)⌋
  // from 0 (64 B) to 22 (256 MiB); 1 beyond (tuning.cc, treeCorrectionFactor).
  std::array<std::array<double, 23>, 3> tree_size_correction{
      {{1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6, .5,
        .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
       {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6, .6,
        .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0},
       {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5,
        .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}}};
};

/// The channels NCCL runs a collective of `bytes` on (enqueue.cc, topoGetAlgoInfo, at 5067397):
/// the communicator's `channels`, one fewer while bytes < channels · threads · threshold, at
/// least one. Threads per channel: 512 (LL, Simple), 640 (LL128); bytes per thread: 8 (LL, ×
/// ranks for a ring), 8 (LL128), 64 (Simple). Each channel is one thread block on its own SM.
int channels_for(NcclAlgorithm algorithm, NcclProtocol protocol, Bytes bytes, int ranks,
                 int channels);

/// The bytes a ring moves through the slowest link for a collective of S = `bytes` on `ranks`:
/// S·(n−1)/n for all-gather and reduce-scatter, 2·S·(n−1)/n for all-reduce (nccl-tests' busbw).
double bus_bytes(OpKind kind, Bytes bytes, int ranks);

class CollectiveModel {
 public:
  CollectiveModel(const ClusterSpec& cluster, CollectiveModelParams params = {});

  /// `bytes` = S, the gathered (all-gather), pre-scatter (reduce-scatter) or reduced buffer. A
  /// shape the cluster's calibration fitted is priced latency + bus bytes / busbw, as fitted.
  CollectiveEstimate estimate(OpKind kind, Bytes bytes, int ranks, int nodes) const;
  /// Latency of one protocol (exposed for tests against NCCL's printed tables).
  double latency_us(OpKind kind, int ranks, int nodes, NcclProtocol protocol) const;
  /// The same for a tree all-reduce across `nodes` > 1.
  double tree_latency_us(int ranks, int nodes, NcclProtocol protocol) const;
  /// The channels of a collective whose time the model did not price (a fitted or a fixed
  /// time, its protocol unknown): a Simple ring's.
  int unpriced_channels(Bytes bytes, int ranks) const;
  /// Large-message Simple busbw for this group shape.
  BytesPerSecond bus_bandwidth(OpKind kind, int ranks, int nodes) const;

  const CollectiveModelParams& params() const { return params_; }

 private:
  ClusterSpec cluster_;
  CollectiveModelParams params_;
};

}  // namespace shardscope::sim
