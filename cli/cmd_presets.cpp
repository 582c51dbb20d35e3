#include <fmt/format.h>

#include <string>

#include "commands.hpp"
#include "shardscope/core/cluster_spec.hpp"
#include "shardscope/core/model_presets.hpp"

namespace shardscope::cli {

int run_presets() {
  fmt::print("Model presets (parameters are exact)\n");
  fmt::print("  {:<20} {:>17}  {:>6} {:>6} {:>5} {:>4} {:>6} {:>7}  {}\n", "name", "parameters",
             "hidden", "layers", "heads", "kv", "ffn", "vocab", "description");
  for (const auto& p : model_presets()) {
    const auto spec = find_model_preset(p.name);
    const auto& c = p.config;
    fmt::print("  {:<20} {:>17}  {:>6} {:>6} {:>5} {:>4} {:>6} {:>7}  {}\n", p.name,
               format_count(spec->total_params()), c.hidden, c.layers, c.heads, c.kv_heads,
               c.ffn_hidden, c.vocab, p.description);
  }
  fmt::print("\nCluster presets (per GPU)\n");
  fmt::print("  {:<16} {:>10} {:>14} {:>14} {:>11} {:>11} {:>10} {:>11}\n", "name", "memory",
             "bf16 peak", "fp32 peak", "HBM", "NVLink", "NIC", "PCIe");
  for (const auto& p : cluster_presets()) {
    const auto& c = p.spec;
    fmt::print("  {:<16} {:>10} {:>14} {:>14} {:>11} {:>11} {:>10} {:>11}\n", p.name,
               format_bytes(c.gpu.memory), format_flops_rate(c.gpu.peak_flops.bf16),
               format_flops_rate(c.gpu.peak_flops.fp32), format_bandwidth(c.gpu.hbm_bandwidth),
               format_bandwidth(c.nvlink.bandwidth), format_bandwidth(c.network.bandwidth),
               format_bandwidth(c.pcie.pinned_bandwidth));
  }
  fmt::print("\nCluster presets: kernels (docs/simulator.md, \"Cost models\")\n");
  fmt::print("  {:<16} {:>4} {:>8} {:>8} {:>8} {:>8} {:>8}  {}\n", "name", "SMs", "GEMMs", "flash",
             "cuDNN", "Triton", "fp8 GEMMs", "where the numbers come from");
  for (const auto& p : cluster_presets()) {
    const auto& g = p.spec.gpu;
    // The fp8 GEMMs' share of the fp8 peak; a GPU without fp8 tensor cores has none.
    const std::string fp8 = g.peak_flops.fp8 > g.peak_flops.bf16
                                ? fmt::format("{:.1f} %", 100 * g.fp8_matmul_efficiency)
                                : "none";
    fmt::print("  {:<16} {:>4} {:>6.1f} % {:>6.1f} % {:>6.1f} % {:>6.1f} % {:>9}  {}\n", p.name,
               g.sm_count, 100 * g.matmul_efficiency, 100 * g.attention_efficiency,
               100 * g.cudnn_attention_efficiency, 100 * g.triton_attention_efficiency, fp8,
               p.datasheet);
    fmt::print("  {:<16} {:>4} {:>8} {:>8} {:>8} {:>8} {:>9}  efficiencies: {}\n", "", "", "", "",
               "", "", "", p.efficiencies);
  }
  return kExitOk;
}

}  // namespace shardscope::cli
