#pragma once
// What each op costs on its own: GPU time, the resource it occupies, and CPU issue time.
// Parameters come from the cluster preset; each is overridable and documented in docs/simulator.md.
//
// Compute (forward, backward, recompute, copies, optimizer): a roofline sum of kernels,
//   time = matmul / (peak · clock · eff(f, matmul_eff)) + attention / (peak · clock · eff(f,
//   attention_eff))
//          + hbm_bytes / (hbm_bw · hbm_efficiency) + floor
//   eff(f, e) = e · f / (f + half_efficiency_flops)   (small kernels run far below peak)
//   matmul_eff, attention_eff: cluster.gpu.matmul_efficiency / attention_efficiency
//   clock = min(1, power_cap / tdp)^power_exponent                   (f ∝ P^(1/3) when V ∝ f)
// Collectives: CollectiveModel (NCCL ring, protocol choice). Copies: PCIe pinned or pageable.
// Fixed times from a custom model win over every formula.

#include <memory>
#include <string>

#include "shardscope/core/device_profile.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule.hpp"
#include "shardscope/core/timeline.hpp"
#include "shardscope/sim/collective_model.hpp"

namespace shardscope::sim {

/// What an op occupies while it runs. Activities on one resource share it.
enum class Resource { none, gpu, nvlink, network, pcie_h2d, pcie_d2h, host };
std::string_view to_string(Resource resource);

struct ComputeModelParams {
  double half_efficiency_flops = 2e9;  // an op of this many FLOPs reaches half of its efficiency
  double hbm_efficiency = 0.80;        // elementwise kernels, share of HBM bandwidth
  TimeNs kernel_floor = 4 * kNsPerUs;  // smallest GPU time of an op (launch latency, tails)
  double power_exponent = 1.0 / 3.0;
};

struct InterferenceParams {
  // Compute runs this much slower while communication kernels hold SMs (NCCL uses 8–32 of 132).
  double compute_slowdown = 0.08;
};

struct OpCost {
  TimeNs duration = 0;  // alone on an idle GPU
  Resource resource = Resource::none;
  TimeNs cpu = 0;  // CPU time to issue it
};

class CostModel {
 public:
  explicit CostModel(const Scenario& scenario, ComputeModelParams compute = {},
                     InterferenceParams interference = {}, CollectiveModelParams collectives = {});

  OpCost cost(const Schedule& schedule, const Op& op) const;
  /// The scenario's device profile (cluster.gpu.device_profile), if any: every kernel it measured
  /// is priced at its measured time (and host copies at its measured bandwidths); the rest stays
  /// on the roofline.
  const DeviceProfile* device_profile() const { return profile_.get(); }
  /// Compute-only time of `flops` and `hbm_bytes` (exposed for tests).
  TimeNs compute_time(Flops flops, Bytes hbm_bytes, Flops attention_flops = 0) const;
  FlopsPerSecond effective_peak() const { return peak_; }
  /// The facts a timeline of `schedule` carries for throughput and MFU (analysis::run_facts).
  RunFacts run_facts(const Schedule& schedule) const;

  const ClusterSpec& cluster() const { return cluster_; }
  const CollectiveModel& collectives() const { return collectives_; }
  const ComputeModelParams& compute_params() const { return compute_; }
  const InterferenceParams& interference() const { return interference_; }

 private:
  ClusterSpec cluster_;
  ComputeModelParams compute_;
  InterferenceParams interference_;
  CollectiveModel collectives_;
  FlopsPerSecond peak_ = 0;
  double model_flops_per_token_ = 0;
  FlopsPerSecond mfu_peak_ = 0;  // dense peak of the parameter dtype, MFU's denominator
  bool pinned_ = true;
  std::shared_ptr<const DeviceProfile> profile_;

  TimeNs profiled_compute_time(const Schedule& schedule, const Op& op) const;
};

}  // namespace shardscope::sim
