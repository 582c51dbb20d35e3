#include "shardscope/sim/collective_model.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "shardscope/sim/op_duration.hpp"

namespace shardscope::sim {

std::string_view to_string(NcclProtocol protocol) {
  switch (protocol) {
    case NcclProtocol::ll:
      return "LL";
    case NcclProtocol::ll128:
      return "LL128";
    case NcclProtocol::simple:
      return "Simple";
  }
  return "Simple";
}

std::string_view to_string(NcclAlgorithm algorithm) {
  return algorithm == NcclAlgorithm::tree ? "Tree" : "Ring";
}

CollectiveModel::CollectiveModel(const ClusterSpec& cluster, CollectiveModelParams params)
    : cluster_(cluster), params_(params) {}

double CollectiveModel::latency_us(OpKind kind, int ranks, int nodes, NcclProtocol protocol) const {
  const auto p = static_cast<std::size_t>(protocol);
  const int factor = kind == OpKind::all_reduce ? 2 : 1;
  const int steps = factor * (ranks - 1);
  const int inter = factor * (nodes - 1);
  const int intra = steps - inter;
  double intra_hop = params_.nvlink_hop_us[p];
  if (nodes > 1) {
    const double floor = params_.min_intra_step_us * (protocol == NcclProtocol::simple ? 3.0 : 1.0);
    intra_hop = std::max(intra_hop, floor);
  }
  // One rank per node: every step crosses the network, at the tree's network latency.
  const double net_hop =
      ranks == nodes ? params_.tree_network_hop_us[p] : params_.network_hop_us[p];
  return params_.base_latency_us[p] + intra * intra_hop + inter * net_hop;
}

double CollectiveModel::tree_latency_us(int ranks, int nodes, NcclProtocol protocol) const {
  const auto p = static_cast<std::size_t>(protocol);
  const int levels = static_cast<int>(std::bit_width(static_cast<unsigned>(nodes))) - 1;  // ⌊log2⌋
  const int chain = ranks / nodes - 1;  // a node's ranks in a chain: whole ranks per node
  return params_.tree_base_latency_us[p] +
         2 * (chain * params_.tree_nvlink_hop_us[p] + levels * params_.tree_network_hop_us[p]);
}

BytesPerSecond CollectiveModel::bus_bandwidth(OpKind kind, int ranks, int nodes) const {
  const double nvlink = cluster_.nvlink.bandwidth * params_.nvlink_efficiency;
  const double nic = cluster_.network_bandwidth_per_gpu();  // each GPU's share of its node's NICs
  if (nodes > 1 && cluster_.fabric == NetworkFabric::infiniband) {
    const double efficiency = kind == OpKind::all_reduce ? params_.rail_allreduce_efficiency
                                                         : params_.rail_allgather_efficiency;
    const double rails = static_cast<double>(std::max(1, ranks / nodes));
    return std::min(nvlink, rails * nic * efficiency);
  }
  if (nodes > 1) {
    const auto& table = params_.multi_node_allgather_busbw_gbps;
    double gbps = table.back().second;
    if (nodes <= table.front().first) {
      gbps = table.front().second;
    } else {
      for (std::size_t i = 0; i + 1 < table.size(); ++i) {
        const auto [n0, b0] = table[i];
        const auto [n1, b1] = table[i + 1];
        if (nodes <= n1) {
          const double f =
              std::log(static_cast<double>(nodes) / n0) / std::log(static_cast<double>(n1) / n0);
          gbps = std::exp(std::log(b0) + f * (std::log(b1) - std::log(b0)));
          break;
        }
      }
      if (nodes > table.back().first) gbps = table.back().second * table.back().first / nodes;
    }
    if (kind == OpKind::all_reduce)
      gbps *= params_.multi_node_allreduce_busbw_2_nodes_gbps / table.front().second;
    const double scaled = gbps * 1e9 * (nic / (params_.reference_nic_gbps * 1e9));
    return std::max(scaled, nic * params_.multi_node_min_nic_fraction);
  }
  return kind == OpKind::all_reduce ? nvlink * params_.nvls_allreduce_gain : nvlink;
}

int channels_for(NcclAlgorithm algorithm, NcclProtocol protocol, Bytes bytes, int ranks,
                 int channels) {
  if (channels <= 0) return 0;  // no NCCL (a fake process group)
  const std::int64_t threads = protocol == NcclProtocol::ll128 ? 640 : 512;
  std::int64_t per_thread = protocol == NcclProtocol::simple ? 64 : 8;
  if (algorithm == NcclAlgorithm::ring && protocol == NcclProtocol::ll) per_thread *= ranks;
  // The largest count that the buffer fills: bytes ≥ nc · threads · per_thread.
  const std::int64_t fill = bytes / (threads * per_thread);
  return static_cast<int>(std::clamp<std::int64_t>(fill, 1, channels));
}

int CollectiveModel::unpriced_channels(Bytes bytes, int ranks) const {
  return channels_for(NcclAlgorithm::ring, NcclProtocol::simple, bytes, ranks,
                      cluster_.nccl.channels);
}

double bus_bytes(OpKind kind, Bytes bytes, int ranks) {
  const double n = ranks;
  return static_cast<double>(bytes) * (n - 1) / n * (kind == OpKind::all_reduce ? 2.0 : 1.0);
}

CollectiveEstimate CollectiveModel::estimate(OpKind kind, Bytes bytes, int ranks, int nodes) const {
  CollectiveEstimate best;
  if (ranks <= 1 || bytes <= 0) return best;  // nothing crosses a link
  const double traffic = bus_bytes(kind, bytes, ranks);
  if (const Calibration* fitted = cluster_.calibration.get()) {
    if (const auto* c = fitted->collective(kind, ranks, nodes)) {
      const double seconds = c->latency.value + traffic / c->busbw.value;
      best.time = op_duration_ns(seconds, "a collective");
      best.latency = static_cast<TimeNs>(std::llround(c->latency.value * 1e9));
      best.busbw = traffic / seconds;
      best.channels = unpriced_channels(bytes, ranks);
      return best;
    }
  }
  const BytesPerSecond busbw = bus_bandwidth(kind, ranks, nodes);
  best.time = -1;
  const auto consider = [&](NcclAlgorithm algorithm, NcclProtocol protocol, double lat_us,
                            double seconds) {
    const auto t = op_duration_ns(seconds, "a collective");
    if (best.time < 0 || t < best.time) {
      best.time = t;
      best.latency = static_cast<TimeNs>(std::llround(lat_us * 1e3));
      best.algorithm = algorithm;
      best.protocol = protocol;
      best.busbw = traffic / seconds;
    }
  };
  for (auto protocol : {NcclProtocol::ll, NcclProtocol::ll128, NcclProtocol::simple}) {
    const auto p = static_cast<std::size_t>(protocol);
    const double lat_us = latency_us(kind, ranks, nodes, protocol);
    // all-reduce busbw is defined on 2(n−1)/n of the buffer, so `traffic / bw` holds for all three
    // kinds.
    consider(NcclAlgorithm::ring, protocol, lat_us,
             lat_us * 1e-6 + traffic / (busbw * params_.protocol_bandwidth[p]));
    // NCCL's tree runs all-reduces only, and on one node its model never beats the ring (nor
    // NVLink SHARP).
    if (kind != OpKind::all_reduce || nodes <= 1) continue;
    const double tree_us = tree_latency_us(ranks, nodes, protocol);
    const auto size_class =
        static_cast<int>(std::bit_width(static_cast<std::uint64_t>(bytes) >> 6)) - 1;
    const double correction =
        size_class >= 0 && size_class < static_cast<int>(params_.tree_size_correction[p].size())
            ? params_.tree_size_correction[p][static_cast<std::size_t>(size_class)]
            : 1.0;
    const double algbw = 0.5 * busbw * params_.tree_bandwidth[p] * correction;
    consider(NcclAlgorithm::tree, protocol, tree_us,
             tree_us * 1e-6 + static_cast<double>(bytes) / algbw);
  }
  best.channels = channels_for(best.algorithm, best.protocol, bytes, ranks, cluster_.nccl.channels);
  return best;
}

}  // namespace shardscope::sim
