#include "shardscope/sim/cost_model.hpp"

#include <algorithm>
#include <cmath>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/group_compute.hpp"
#include "shardscope/core/run_facts.hpp"
#include "shardscope/sim/op_duration.hpp"

namespace shardscope::sim {

std::string_view to_string(Resource resource) {
  switch (resource) {
    case Resource::none:
      return "none";
    case Resource::gpu:
      return "gpu";
    case Resource::nvlink:
      return "nvlink";
    case Resource::network:
      return "network";
    case Resource::pcie_h2d:
      return "pcie_h2d";
    case Resource::pcie_d2h:
      return "pcie_d2h";
    case Resource::host:
      return "host";
  }
  return "none";
}

CostModel::CostModel(const Scenario& scenario, ComputeModelParams compute,
                     InterferenceParams interference, CollectiveModelParams collectives)
    : cluster_(scenario.cluster),
      compute_(compute),
      collectives_(scenario.cluster, collectives),
      pinned_(scenario.fsdp.cpu_offload.pin_memory),
      profile_(scenario.cluster.gpu.device_profile) {
  // The attention efficiency is the scenario's kernel's (a calibration, applied below, fits it).
  if (scenario.model.family == ModelFamily::transformer) {
    if (scenario.model.transformer.attention == AttentionKind::cudnn)
      cluster_.gpu.attention_efficiency = cluster_.gpu.cudnn_attention_efficiency;
    if (scenario.model.transformer.attention == AttentionKind::triton) {
      cluster_.gpu.attention_efficiency = cluster_.gpu.triton_attention_efficiency;
      compute_.shapes.attention_forward_half_length *= cluster_.gpu.triton_attention_overhead;
      compute_.shapes.attention_backward_half_length *= cluster_.gpu.triton_attention_overhead;
      compute_.shapes.attention_head_dim_overhead *=
          cluster_.gpu.triton_attention_head_dim_overhead;
    }
  }
  double clock = 1.0;
  if (cluster_.gpu.power_cap_w && cluster_.gpu.tdp_w > 0) {
    clock = std::pow(std::min(1.0, *cluster_.gpu.power_cap_w / cluster_.gpu.tdp_w),
                     compute_.power_exponent);
  }
  if (cluster_.calibration) apply(*cluster_.calibration);
  contention_scale_ = interference.contention_scale.value_or(cluster_.gpu.contention_scale);
  contended_sms_ = cluster_.collective_sms();
  peak_ = cluster_.gpu.peak_flops.for_dtype(compute_dtype(scenario)) * clock;
  if (cluster_.gpu.peak_flops.fp8 > 0 && cluster_.gpu.fp8_matmul_efficiency > 0) {
    fp8_gemm_time_scale_ =
        peak_ * cluster_.gpu.matmul_efficiency /
        (cluster_.gpu.peak_flops.fp8 * clock * cluster_.gpu.fp8_matmul_efficiency);
  }
  const RunFacts facts = analysis::run_facts(scenario, Schedule{});
  model_flops_per_token_ = facts.model_flops_per_token;
  mfu_peak_ = facts.peak_flops;
}

RunFacts CostModel::run_facts(const Schedule& schedule) const {
  return {schedule.world_size, schedule.iterations, schedule.tokens_per_iteration,
          model_flops_per_token_, mfu_peak_};
}

void CostModel::apply(const Calibration& c) {
  if (c.matmul_efficiency) cluster_.gpu.matmul_efficiency = c.matmul_efficiency->value;
  if (c.attention_efficiency) cluster_.gpu.attention_efficiency = c.attention_efficiency->value;
  if (c.half_efficiency_flops) compute_.half_efficiency_flops = c.half_efficiency_flops->value;
  if (c.hbm_efficiency) compute_.hbm_efficiency = c.hbm_efficiency->value;
  if (c.contention_scale) cluster_.gpu.contention_scale = c.contention_scale->value;
  const auto ns = [](const FittedValue& v) {
    return static_cast<TimeNs>(std::llround(v.value * 1e9));
  };
  if (c.launch_overhead) cluster_.cpu.launch_overhead = ns(*c.launch_overhead);
  if (c.fsdp_hook_overhead) cluster_.cpu.fsdp_hook_overhead = ns(*c.fsdp_hook_overhead);
  if (c.pcie_latency) {
    cluster_.pcie.latency = ns(*c.pcie_latency);
  }
}

double held_share(int held_sms, int contended_sms) {
  return contended_sms > 0 ? static_cast<double>(held_sms) / contended_sms : 0.0;
}

double contention_loss(double contended, double held_share) {
  return 1.0 - 1.0 / (1.0 + (contended - 1.0) * held_share);
}

double contended_rate(double contended, double held_share, double contention_scale) {
  constexpr double kMaxLoss = 0.95;
  return 1.0 - std::min(kMaxLoss, contention_scale * contention_loss(contended, held_share));
}

double CostModel::flop_seconds(const ComputeTerms& t) const {
  double seconds = 0;
  const double size = t.by_shape ? 0.0 : compute_.half_efficiency_flops;
  if (t.matmul > 0) {
    seconds += t.matmul / (peak_ * cluster_.gpu.matmul_efficiency * t.matmul / (t.matmul + size));
  }
  if (t.attention > 0) {
    seconds += t.attention /
               (peak_ * cluster_.gpu.attention_efficiency * t.attention / (t.attention + size));
  }
  return seconds * t.sm_share;
}

double CostModel::operand_seconds(const ComputeTerms& t) const {
  return static_cast<double>(t.operand_bytes) /
         (cluster_.gpu.hbm_bandwidth * compute_.hbm_efficiency);
}

bool CostModel::bandwidth_bound(const ComputeTerms& t) const {
  return operand_seconds(t) > flop_seconds(t);
}

TimeNs CostModel::time_of(const ComputeTerms& t) const {
  double seconds = std::max(flop_seconds(t), operand_seconds(t));
  if (t.memory_bytes > 0) {
    seconds += static_cast<double>(t.memory_bytes) /
               (cluster_.gpu.hbm_bandwidth * compute_.hbm_efficiency);
  }
  return t.fixed + op_duration_ns(seconds, "a compute kernel");
}

TimeNs CostModel::compute_time(Flops flops, Bytes hbm_bytes, Flops attention_flops) const {
  return time_of(
      {compute_.kernel_floor, std::max(0.0, flops - attention_flops), attention_flops, hbm_bytes});
}

// Kernel by kernel: measured kernels at their measured times, GEMMs and attentions by shape,
// the memory-bound kinds by their bytes.
ComputeTerms CostModel::shaped_terms(const Schedule& s, const Op& op, int sms) const {
  ComputeTerms t;
  t.by_shape = true;
  bool priced = false;
  // Each SM runs at its own rate whatever the others do: a GEMM's waves over the SMs left each
  // take what a wave over all of them takes (gemm_cost), an attention (and a measured GEMM or
  // attention) stretches by the SMs' share.
  const double share = sm_share(cluster_.gpu.sm_count, sms);
  for (const Kernel& k : op_kernels(s, op)) {
    if (profile_) {
      if (const auto measured = measured_time(*profile_, k)) {
        t.fixed += measured_kernel_time(k, *measured, sms, share);
        continue;
      }
    }
    priced = true;
    switch (k.kind()) {
      case KernelKind::gemm: {
        const Gemm& gemm = std::get<Gemm>(k.shape);
        const GemmCost g = gemm_cost(gemm, k.repeat, cluster_.gpu.sm_count, compute_.shapes, sms);
        t.matmul +=
            gemm.input == DType::fp8 ? g.full_rate_flops * fp8_gemm_time_scale_ : g.full_rate_flops;
        t.memory_bytes += g.split_k_bytes;
        t.operand_bytes += kernel_operand_bytes(k);
        break;
      }
      case KernelKind::attention:
        t.attention += share * attention_full_rate_flops(std::get<Attention>(k.shape), k.repeat,
                                                         compute_.shapes);
        t.operand_bytes += kernel_operand_bytes(k);
        break;
      default:
        t.memory_bytes += elementwise_bytes(k);
        break;
    }
  }
  if (priced) t.fixed += compute_.kernel_floor;
  return t;
}

double CostModel::memory_rate_scale(const Kernel& k) const {
  if (const auto* m = std::get_if<MemoryBound>(&k.shape); m && m->kind == MemoryKind::upcast)
    return compute_.upcast_rate_scale;
  if (const auto* o = std::get_if<OptimizerUpdate>(&k.shape);
      o && o->impl == OptimizerImpl::fused && optimizer_states_per_param(o->optimizer) == 2)
    return compute_.fused_adam_rate_scale;  // the sweep's fused AdamW; Adam's kernel is the same
  return 1;
}

Bytes CostModel::elementwise_bytes(const Kernel& k) const {
  const Bytes bytes = kernel_memory_bytes(k);
  const double scale = memory_rate_scale(k);
  if (scale == 1) return bytes;
  return static_cast<Bytes>(std::llround(static_cast<double>(bytes) / scale));
}

TimeNs CostModel::measured_kernel_time(const Kernel& k, TimeNs alone, int sms, double share) const {
  const bool sm_bound = k.kind() == KernelKind::gemm || k.kind() == KernelKind::attention;
  if (!sm_bound) {  // the profile's bandwidth is the element-wise rate
    return static_cast<TimeNs>(
        std::llround(static_cast<double>(alone * k.repeat) / memory_rate_scale(k)));
  }
  if (sms >= cluster_.gpu.sm_count) return alone * k.repeat;
  // Measured beside as many held SMs: that time (a run below the time alone is noise, not a
  // speed-up a collective gives).
  if (const auto contended = measured_contended_time(*profile_, k, cluster_.gpu.sm_count - sms))
    return std::max(alone, *contended) * k.repeat;
  return static_cast<TimeNs>(std::llround(static_cast<double>(alone * k.repeat) * share));
}

std::optional<ComputeTerms> CostModel::compute_terms(const Schedule& s, const Op& op) const {
  return terms_on(s, op, cluster_.gpu.sm_count);
}

std::optional<ComputeTerms> CostModel::terms_on(const Schedule& s, const Op& op, int sms) const {
  if (op.fixed_time) return std::nullopt;
  const auto memory_bound = [&](Bytes traffic) {
    return ComputeTerms{compute_.kernel_floor, 0, 0, traffic};
  };
  switch (op.kind) {
    case OpKind::forward:
    case OpKind::backward:
    case OpKind::recompute:
      if (op.kernels != kNone) return shaped_terms(s, op, sms);
      {
        ComputeTerms t{compute_.kernel_floor, std::max(0.0, op.flops - op.attention_flops),
                       op.attention_flops, op.bytes};
        t.sm_share = sm_share(cluster_.gpu.sm_count, sms);
        return t;
      }
    case OpKind::copy_in:
    case OpKind::copy_out:
    case OpKind::reduce_copy_in:
    case OpKind::grad_div:
      return memory_bound(2 * op.bytes);  // read and write
    case OpKind::reshard:
      if (op.bytes > 0) return memory_bound(2 * op.bytes);
      return std::nullopt;
    case OpKind::optimizer_step:
      if (s.streams[static_cast<std::size_t>(op.stream)].kind == StreamKind::cpu)
        return std::nullopt;
      // Its kernel (the fused step or the foreach passes) priced as any op's: at its kind's rate,
      // or at a device profile's measured bandwidth.
      if (op.kernels != kNone) return shaped_terms(s, op, sms);
      return memory_bound(op.bytes);
    default:
      return std::nullopt;
  }
}

OpCost CostModel::cost(const Schedule& s, const Op& op) const {
  OpCost c;
  c.cpu = cluster_.cpu.launch_overhead;
  if (op.kind == OpKind::all_gather || op.kind == OpKind::reshard ||
      op.kind == OpKind::reduce_scatter) {
    c.cpu += cluster_.cpu.fsdp_hook_overhead;  // one FSDP hook per unshard, reshard and reduction
  }
  const StreamKind stream = s.streams[static_cast<std::size_t>(op.stream)].kind;
  switch (op.kind) {
    case OpKind::forward:
    case OpKind::backward:
    case OpKind::recompute:
      c.resource = Resource::gpu;
      if (op.fixed_time) {
        c.duration = *op.fixed_time;
        return c;
      }
      c.duration = time_of(*compute_terms(s, op));
      if (contended_sms_ > 0 && c.duration > 0) {
        const TimeNs contended = time_of(*terms_on(s, op, cluster_.gpu.sm_count - contended_sms_));
        c.contended = static_cast<double>(contended) / static_cast<double>(c.duration);
      }
      return c;
    case OpKind::copy_in:
    case OpKind::copy_out:
    case OpKind::reduce_copy_in:
    case OpKind::grad_div:
      c.resource = Resource::gpu;
      c.duration = op.fixed_time ? *op.fixed_time : time_of(*compute_terms(s, op));
      return c;
    case OpKind::reshard:
      if (const auto terms = compute_terms(s, op)) {
        c.resource = Resource::gpu;
        c.duration = time_of(*terms);
      }
      return c;
    case OpKind::optimizer_step:
      if (stream == StreamKind::cpu) {
        c.resource = Resource::host;
        c.duration = op_duration_ns(static_cast<double>(op.bytes) / cluster_.cpu.adam_bytes_per_s,
                                    "the CPU optimizer step");
      } else {
        c.resource = Resource::gpu;
        c.duration = op.fixed_time ? *op.fixed_time : time_of(*compute_terms(s, op));
      }
      return c;
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_reduce: {
      const auto& comm = s.communicators[static_cast<std::size_t>(op.comm)];
      c.resource = comm.nodes > 1 ? Resource::network : Resource::nvlink;
      if (op.fixed_time) {
        c.duration = *op.fixed_time;
        c.sms = collectives_.unpriced_channels(op.bytes, comm.size);
        return c;
      }
      const CollectiveEstimate e = collectives_.estimate(op.kind, op.bytes, comm.size, comm.nodes);
      c.duration = e.time;
      c.latency = e.latency;
      c.sms = e.channels;
      return c;
    }
    case OpKind::h2d:
    case OpKind::d2h: {
      c.resource = op.kind == OpKind::h2d ? Resource::pcie_h2d : Resource::pcie_d2h;
      double bw = pinned_ ? cluster_.pcie.pinned_bandwidth : cluster_.pcie.pageable_bandwidth;
      if (profile_) {  // measured rates win where the profile has them
        const bool h2d = op.kind == OpKind::h2d;
        const double measured = pinned_ ? (h2d ? profile_->h2d_pinned : profile_->d2h_pinned)
                                        : (h2d ? profile_->h2d_pageable : profile_->d2h_pageable);
        if (measured > 0) bw = measured;
      }
      // A rate fitted to this scenario's own runs wins over both.
      if (cluster_.calibration && cluster_.calibration->pcie_bandwidth)
        bw = cluster_.calibration->pcie_bandwidth->value;
      c.duration = cluster_.pcie.latency +
                   op_duration_ns(static_cast<double>(op.bytes) / bw, "a host-device copy");
      return c;
    }
    case OpKind::stream_wait:
    case OpKind::cpu_wait:
    case OpKind::zero_grad:
    case OpKind::state_dict:
    case OpKind::other:
      c.cpu = kNsPerUs;  // bookkeeping on the CPU, no GPU work (other: only with a fixed time)
      return c;
  }
  return c;
}

}  // namespace shardscope::sim
