#pragma once
// What each op costs on its own: GPU time, the resource it occupies, and CPU issue time.
// Parameters come from the cluster preset; each is overridable and documented in docs/simulator.md.
//
// Compute (forward, backward, recompute, copies, optimizer): a roofline sum of kernels,
//   time = matmul / (peak · clock · eff(f, matmul_eff)) + attention / (peak · clock · eff(f,
//   attention_eff))
//          + hbm_bytes / (hbm_bw · hbm_efficiency) + floor
//   where the GEMMs and attentions of the op would take less than moving their operands once,
//   operand_bytes / (hbm_bw · hbm_efficiency), that replaces their two terms (a roofline over
//   the op: decode steps' thin GEMMs and KV-cache reads are bandwidth-bound)
//   eff(f, e) = e · f / (f + half_efficiency_flops)   (small kernels run far below peak)
//   An op whose kernels are known (every lowered transformer op) is priced kernel by kernel
//   instead: its GEMMs and attentions by their shapes (kernel_shape_model.hpp: tiles, waves over
//   the SMs, split-K, keys per query, head dimension) at matmul_eff and attention_eff, no size
//   curve; its memory-bound kernels by their bytes, an upcast's and a fused Adam step's at their
//   own share of the element-wise rate (ComputeModelParams).
//   matmul_eff, attention_eff: cluster.gpu.matmul_efficiency / attention_efficiency
//   clock = min(1, power_cap / tdp)^power_exponent                   (f ∝ P^(1/3) when V ∝ f)
// Collectives: CollectiveModel (NCCL ring, protocol choice). Copies: PCIe pinned or pageable.
// Fixed times from a custom model win over every formula. A calibration (cluster.calibration)
// replaces the parameters it fitted before anything is priced.

#include <memory>
#include <optional>
#include <string>

#include "shardscope/core/calibration.hpp"
#include "shardscope/core/device_profile.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule.hpp"
#include "shardscope/core/timeline.hpp"
#include "shardscope/sim/collective_model.hpp"
#include "shardscope/sim/kernel_shape_model.hpp"

namespace shardscope::sim {

/// What an op occupies while it runs. Activities on one resource share it.
enum class Resource { none, gpu, nvlink, network, pcie_h2d, pcie_d2h, host };
std::string_view to_string(Resource resource);

struct ComputeModelParams {
  double half_efficiency_flops = 2e9;  // an op of this many FLOPs reaches half of its efficiency
  double hbm_efficiency = 0.80;        // elementwise kernels, share of HBM bandwidth
  // An upcast's (bf16 → fp32, kernel.hpp) and the fused Adam(W) step's rate over the element-wise
  // kernels', on the bytes the lowering counts for them: PyTorch's kernels on an H200 at 64–256 Mi
  // elements (tests/data/measured/*/kernel_sweep*.csv), fitted by scripts/fit_kernel_shapes.py,
  // whose --check holds these to the fit. Taken to hold on every GPU (they are PyTorch's
  // kernels); measured on the H200 only.
  double upcast_rate_scale = 0.49;
  double fused_adam_rate_scale = 0.77;
  TimeNs kernel_floor = 4 * kNsPerUs;  // smallest GPU time of an op (launch latency, tails)
  double power_exponent = 1.0 / 3.0;
  KernelShapeParams shapes;  // what a GEMM's or attention's shape costs (kernel_shape_model.hpp)
};

// While a collective runs, its kernel holds one SM per channel (NCCL's thread blocks), and the
// GEMMs and attentions beside it run on the SMs left: a GEMM's waves over fewer SMs
// (kernel_shape_model.hpp), an attention at the SMs' share. Memory-bound kernels keep their rate
// (HBM, not SMs, bounds them). A calibration scales the throughput this model takes from an op
// (`contention_scale`, fitted to measured runs by shardscope calibrate).
struct InterferenceParams {
  // × the SM model's throughput loss; 1: the model as is. nullopt: the cluster's
  // (cluster.gpu.contention_scale). A calibration's fitted value replaces either.
  std::optional<double> contention_scale;
};

/// The SMs collectives hold (`held_sms`) over the `contended_sms` an op's contended time is priced
/// at (CostModel::contended_sms); 0 when none are priced.
double held_share(int held_sms, int contended_sms);

/// The share of its throughput a GPU op loses while collectives hold `held_share` × the SMs its
/// `contended` time (OpCost::contended) is priced at: its time stretches by 1 + (contended −
/// 1)·held_share, so it loses 1 − 1/that.
double contention_loss(double contended, double held_share);

/// A GPU op's rate while collectives hold `held_share` (as above), the loss scaled by
/// `contention_scale` and capped at 95 % so that no scale stalls an op.
double contended_rate(double contended, double held_share, double contention_scale);

/// What the roofline prices in one GPU op (compute_time): the parts a calibration fits.
struct ComputeTerms {
  TimeNs fixed = 0;     // the kernel floor, plus kernels a device profile measured
  Flops matmul = 0;     // GEMM FLOPs left on the roofline
  Flops attention = 0;  // attention FLOPs left on the roofline
  // HBM traffic of memory-bound kernels (read + write) at the element-wise rate: an upcast's and a
  // fused Adam step's bytes over their rate's scale (ComputeModelParams), the time they take.
  Bytes memory_bytes = 0;
  Bytes operand_bytes = 0;  // what the roofline's GEMMs and attentions read and write at least
  // matmul and attention are full-rate FLOPs of known kernel shapes (kernel_shape_model.hpp), not
  // an op's FLOPs, so the size curve e·f/(f+h) does not apply to them.
  bool by_shape = false;
  // The GPU's SMs over those collectives leave it: matmul's and attention's time × this (terms
  // not by_shape; shaped terms hold their GEMMs' waves over the SMs left and their attentions'
  // FLOPs × this).
  double sm_share = 1;
};

struct OpCost {
  TimeNs duration = 0;  // alone on an idle GPU
  Resource resource = Resource::none;
  TimeNs cpu = 0;      // CPU time to issue it
  TimeNs latency = 0;  // of `duration`, what no link's bandwidth sets (a collective's latency)
  // A GPU op: its time while collectives hold CostModel::contended_sms() SMs, over `duration`
  // (1: SMs do not bound it).
  double contended = 1.0;
  int sms = 0;  // a collective: the SMs its kernel holds (its channels)
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
  /// The roofline terms of a GPU op the compute model prices (compute, copies, resharding, the
  /// GPU optimizer step); nullopt for collectives, host copies, bookkeeping and fixed times.
  std::optional<ComputeTerms> compute_terms(const Schedule& schedule, const Op& op) const;
  /// compute_time of the terms: fixed + matmul/(peak·e_m·f/(f+h)) + attention/(…) + bytes/(…).
  TimeNs time_of(const ComputeTerms& terms) const;
  /// Whether moving the GEMMs' and attentions' operands takes longer than their FLOPs: their
  /// time is then HBM bandwidth's, not the efficiencies' (a calibration cannot fit those there).
  bool bandwidth_bound(const ComputeTerms& terms) const;
  /// A memory-bound kernel's HBM bytes as the element-wise bytes that take its time (its kind's
  /// rate scale); 0 for GEMMs and attention.
  Bytes elementwise_bytes(const Kernel& kernel) const;
  /// A memory-bound kernel's rate over the element-wise kernels' (ComputeModelParams: an upcast's,
  /// a fused Adam step's); 1 for the rest.
  double memory_rate_scale(const Kernel& kernel) const;
  FlopsPerSecond effective_peak() const { return peak_; }
  /// The facts a timeline of `schedule` carries for throughput and MFU (analysis::run_facts).
  RunFacts run_facts(const Schedule& schedule) const;

  const ClusterSpec& cluster() const { return cluster_; }
  const CollectiveModel& collectives() const { return collectives_; }
  const ComputeModelParams& compute_params() const { return compute_; }
  /// × the throughput the SM model takes from a GPU op beside collectives (InterferenceParams).
  double contention_scale() const { return contention_scale_; }
  /// The SMs one collective on every channel of a communicator holds (cluster.nccl.channels,
  /// fewer than the GPU's SMs), at which OpCost::contended is priced; 0: none.
  int contended_sms() const { return contended_sms_; }

 private:
  ClusterSpec cluster_;
  ComputeModelParams compute_;
  double contention_scale_ = 1;
  CollectiveModel collectives_;
  int contended_sms_ = 0;
  FlopsPerSecond peak_ = 0;
  // An fp8 GEMM's seconds per FLOP over a compute-dtype GEMM's: the compute dtype's peak and
  // GEMM efficiency over the fp8 ones. Its FLOPs count at the compute dtype's rate × this.
  double fp8_gemm_time_scale_ = 1;
  double model_flops_per_token_ = 0;
  FlopsPerSecond mfu_peak_ = 0;  // dense peak of the parameter dtype, MFU's denominator
  bool pinned_ = true;
  std::shared_ptr<const DeviceProfile> profile_;

  /// An op's terms on `sms` SMs from its kernels' shapes; a kernel the device profile measured
  /// at its time (its GEMMs' and attentions' stretched by the SMs' share).
  ComputeTerms shaped_terms(const Schedule& schedule, const Op& op, int sms) const;
  /// A kernel the device profile measured (`alone`, one run), `k.repeat` runs on `sms` SMs: a
  /// GEMM or attention beside held SMs at its contended time where the profile held as many,
  /// else stretched by the SMs' `share`; memory-bound kernels at their time over their kind's
  /// memory_rate_scale (the profile measures the element-wise rate).
  TimeNs measured_kernel_time(const Kernel& k, TimeNs alone, int sms, double share) const;
  /// compute_terms on `sms` of the GPU's SMs (the rest held by collectives).
  std::optional<ComputeTerms> terms_on(const Schedule& schedule, const Op& op, int sms) const;
  /// Seconds of the terms' GEMMs and attentions at their FLOPs (the efficiencies), and of
  /// moving their operands once.
  double flop_seconds(const ComputeTerms& terms) const;
  double operand_seconds(const ComputeTerms& terms) const;
  void apply(const Calibration& calibration);
};

}  // namespace shardscope::sim
