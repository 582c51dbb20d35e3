#include "report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "shardscope/core/device_memory.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/param_groups.hpp"

namespace shardscope::cli {
namespace {

std::string model_line(const ModelSpec& m) {
  if (m.family == ModelFamily::custom) {
    return fmt::format("{} (custom): {} groups", m.name, m.groups.size());
  }
  const auto& c = m.transformer;
  return fmt::format(
      "{} (transformer): hidden {}, {} layers, {} heads ({} kv), ffn {} {}, vocab {}, {}, {}{}",
      m.name, c.hidden, c.layers, c.heads, c.kv_heads, c.ffn_hidden, to_string(c.mlp), c.vocab,
      to_string(c.norm), to_string(c.pos_emb), c.tie_embeddings ? ", tied embeddings" : "");
}

/// What the CUDA context and NCCL hold, and what is left for the caching allocator.
std::string outside_allocator_line(const Scenario& s) {
  const Schedule schedule = lower(s);
  const auto outside = memory_outside_allocator(s.cluster, schedule);
  const Bytes capacity = allocator_capacity(s.cluster.gpu.memory, s.allocator, outside.total());
  std::string nccl = "no NCCL communicator";
  if (outside.nccl_communicators > 0) {
    nccl = fmt::format("NCCL {} ({} communicator{} × {} channels × {})",
                       format_bytes(outside.nccl_buffers), outside.nccl_communicators,
                       outside.nccl_communicators == 1 ? "" : "s", s.cluster.nccl.channels,
                       format_bytes(nccl_connection_bytes(s.cluster.nccl)));
  }
  return fmt::format("outside PyTorch: CUDA context {}, {}; the allocator may reserve {}",
                     format_bytes(outside.cuda_context), nccl, format_bytes(capacity));
}

std::string reshard_text(const FsdpPolicy& f) {
  switch (f.reshard_after_forward.mode) {
    case ReshardAfterForward::Mode::on:
      return "true";
    case ReshardAfterForward::Mode::off:
      return "false";
    case ReshardAfterForward::Mode::to_size:
      return fmt::format("{} (reshard to {} ranks)", f.reshard_after_forward.size,
                         f.reshard_after_forward.size);
  }
  return "true";
}

std::string fsdp_line(const FsdpPolicy& f) {
  std::string out = fmt::format("{}: mesh {} × {} (replicate × shard)", to_string(f.api),
                                f.mesh_replicate, f.mesh_shard);
  if (f.api == FsdpApi::fsdp2) {
    out += fmt::format(", reshard_after_forward {}", reshard_text(f));
    out += f.backward_prefetch_modules > 0
               ? fmt::format(", backward prefetch {} groups", f.backward_prefetch_modules)
               : ", implicit backward prefetch";
    if (f.forward_prefetch_modules > 0)
      out += fmt::format(", forward prefetch {} groups", f.forward_prefetch_modules);
  } else {
    out += fmt::format(", {}, backward_prefetch {}, forward_prefetch {}, limit_all_gathers {}",
                       to_string(f.sharding_strategy), to_string(f.backward_prefetch),
                       f.forward_prefetch, f.limit_all_gathers);
  }
  return out;
}

std::string dtype_or(std::optional<DType> d, std::string_view fallback) {
  return d ? std::string(to_string(*d)) : std::string(fallback);
}

}  // namespace

std::string scenario_report(const Scenario& s) {
  std::string out;
  auto row = [&](std::string_view label, const std::string& text) {
    out += fmt::format("{:<10}{}\n", label, text);
  };
  const auto groups = param_groups(s);
  const std::int64_t total = s.model.total_params();
  const auto param_dtype = DType::fp32;  // sharded parameters keep the original dtype
  const auto gather_dtype = s.fsdp.mixed_precision.param_dtype.value_or(param_dtype);
  const auto reduce_dtype = s.fsdp.mixed_precision.reduce_dtype.value_or(gather_dtype);

  if (!s.source.empty()) row("scenario", s.source);
  row("model", model_line(s.model));
  if (s.model.family == ModelFamily::transformer) {
    const auto p = count_params(s.model.transformer);
    row("",
        fmt::format("parameters {} ({} blocks × {} + root {})", format_count(total),
                    s.model.transformer.layers, format_count(p.block()), format_count(p.root())));
  } else {
    row("", fmt::format("parameters {}", format_count(total)));
  }
  const auto& c = s.cluster;
  row("cluster", fmt::format("{}: {} node{} × {} GPUs = {} ranks", c.name, c.nodes,
                             c.nodes == 1 ? "" : "s", c.gpus_per_node, c.world_size()));
  row("", fmt::format(
              "{} {} ({}), {} bf16, HBM {}{}", c.gpu.name, format_bytes(c.gpu.memory),
              format_count(c.gpu.memory) + " B", format_flops_rate(c.gpu.peak_flops.bf16),
              format_bandwidth(c.gpu.hbm_bandwidth),
              c.gpu.power_cap_w ? fmt::format(", capped at {:.0f} W", *c.gpu.power_cap_w) : ""));
  row("", outside_allocator_line(s));
  const std::string nics =
      c.nics_per_node > 0 ? fmt::format("{} NICs of {} a node ({} per GPU)", c.nics_per_node,
                                        format_bandwidth(c.network.bandwidth),
                                        format_bandwidth(c.network_bandwidth_per_gpu()))
                          : fmt::format("NIC {} per GPU", format_bandwidth(c.network.bandwidth));
  row("", fmt::format("NVLink {} per GPU, {}, PCIe {} pinned", format_bandwidth(c.nvlink.bandwidth),
                      nics, format_bandwidth(c.pcie.pinned_bandwidth)));
  const auto& t = s.training;
  row("training",
      fmt::format(
          "seq_len {} × micro_batch {} = {} tokens per micro-batch, grad_accum {}, {} iterations",
          t.seq_len, t.micro_batch, format_count(t.tokens_per_microbatch()), t.grad_accum,
          t.iterations));
  row("", fmt::format("activation checkpointing {}, optimizer {}, loss {}{}",
                      to_string(t.activation_checkpointing, t.checkpoint_every),
                      to_string(t.optimizer), to_string(t.loss),
                      t.autocast ? fmt::format(", autocast {}", to_string(*t.autocast)) : ""));
  row("fsdp", fsdp_line(s.fsdp));
  row("", fmt::format("mixed precision: param {}, reduce {}, sharded parameters {}; cpu offload {}",
                      dtype_or(s.fsdp.mixed_precision.param_dtype, "fp32 (none)"),
                      to_string(reduce_dtype), to_string(param_dtype),
                      s.fsdp.cpu_offload.params ? "on" : "off"));

  std::int64_t sharded = 0;
  const GroupLayout* largest = nullptr;
  for (const auto& g : groups) {
    sharded += g.sharded_numel;
    if (!largest || g.numel > largest->numel) largest = &g;
  }
  const Bytes elem = bytes_per_element(param_dtype);
  const Bytes param_bytes = sharded * elem;
  const Bytes state_bytes = param_bytes * optimizer_states_per_param(t.optimizer);
  row("groups",
      fmt::format("{} FSDP groups (root + {} × {} block{})", groups.size(), groups.size() - 1,
                  s.fsdp.blocks_per_group, s.fsdp.blocks_per_group == 1 ? "" : "s"));
  row("per GPU", fmt::format("sharded parameters {} = {} ({})", format_count(sharded),
                             format_bytes(param_bytes), to_string(param_dtype)));
  row("", fmt::format("sharded gradients {}, optimizer states {} ({} × {}), total {}{}",
                      format_bytes(param_bytes), format_bytes(state_bytes),
                      optimizer_states_per_param(t.optimizer), to_string(param_dtype),
                      format_bytes(2 * param_bytes + state_bytes),
                      s.fsdp.cpu_offload.params ? " on the host" : ""));
  if (largest) {
    row("", fmt::format("largest group {}: {} parameters, {} unsharded in {}", largest->name,
                        format_count(largest->numel),
                        format_bytes(largest->numel * bytes_per_element(gather_dtype)),
                        to_string(gather_dtype)));
  }
  return out;
}

}  // namespace shardscope::cli
