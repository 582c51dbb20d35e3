#include "shardscope/core/calibration.hpp"

#include <fmt/format.h>

#include "file_cache.hpp"
#include "json_fields.hpp"
#include "json_lines.hpp"
#include "shardscope/core/output_file.hpp"

namespace shardscope {
namespace {

using Json = nlohmann::ordered_json;

Json fitted_json(const FittedValue& v) {
  return {{"value", v.value}, {"low", v.low}, {"high", v.high}, {"samples", v.samples}};
}

// Each field's allowed range; a value outside it would make the cost model divide by zero or
// predict negative time.
struct Range {
  double min = 0;
  double max = 0;
  bool min_open = false;  // min itself is not allowed
};

class Reader {
 public:
  Reader(const std::string& origin, std::vector<Problem>& problems) : fields_(origin, problems) {}

  std::optional<FittedValue> optional(const nlohmann::json& obj, const std::string& path,
                                      const char* key, Range range) {
    if (!obj.is_object() || !obj.contains(key)) return std::nullopt;
    return value(obj, path, key, range);
  }

  FittedValue value(const nlohmann::json& obj, const std::string& path, const char* key,
                    Range range) {
    FittedValue v;
    const auto* j = fields_.get(obj, path, key);
    if (!j) return v;
    const std::string at = path.empty() ? key : path + "." + key;
    v.value = fields_.number(*j, at, "value");
    v.low = fields_.number(*j, at, "low");
    v.high = fields_.number(*j, at, "high");
    v.samples = static_cast<int>(fields_.integer(*j, at, "samples", 0, 1 << 30));
    const bool below = range.min_open ? v.value <= range.min : v.value < range.min;
    if (below || v.value > range.max) {
      fields_.problem(at + ".value", fmt::format("{} is out of range", v.value),
                      fmt::format("{}{} .. {}", range.min_open ? "> " : "", range.min, range.max));
    }
    return v;
  }

  detail::Fields& fields() { return fields_; }

 private:
  detail::Fields fields_;
};

constexpr Range kEfficiency{0, 1, true};
constexpr Range kContentionScale{0, 4};  // × the SM model's throughput loss
// Physical ranges: what a measurement of a GPU, a link or a host can be. A bandwidth of 1e-300 B/s
// or a latency of 1e30 s is no fit of a real run and would price a step in centuries.
constexpr Range kBandwidth{1e6, 1e14};  // B/s: 1 MB/s to 100 TB/s
constexpr Range kLatency{0, 10};        // s
constexpr Range kOverhead{0, 1};        // s per launch or hook
constexpr Range kFlops{0, 1e18};        // FLOPs of a GEMM

}  // namespace

const CollectiveCalibration* Calibration::collective(OpKind kind, int ranks, int nodes) const {
  for (const auto& c : collectives) {
    if (c.kind == kind && c.ranks == ranks && c.nodes == nodes) return &c;
  }
  return nullptr;
}

std::string calibration_to_json(const Calibration& c) {
  Json root;
  root["schema"] = kCalibrationSchema;
  root["scenario"] = c.scenario;
  root["measured"] = c.measured;
  root["version"] = c.version;
  Json compute = Json::object();
  const auto put = [](Json& obj, const char* key, const std::optional<FittedValue>& v) {
    if (v) obj[key] = fitted_json(*v);
  };
  put(compute, "matmul_efficiency", c.matmul_efficiency);
  put(compute, "attention_efficiency", c.attention_efficiency);
  put(compute, "half_efficiency_flops", c.half_efficiency_flops);
  put(compute, "hbm_efficiency", c.hbm_efficiency);
  put(compute, "contention_scale", c.contention_scale);
  root["compute"] = compute;
  Json pcie = Json::object();
  put(pcie, "bandwidth_bytes_per_s", c.pcie_bandwidth);
  put(pcie, "latency_s", c.pcie_latency);
  root["pcie"] = pcie;
  Json host = Json::object();
  put(host, "launch_overhead_s", c.launch_overhead);
  put(host, "fsdp_hook_overhead_s", c.fsdp_hook_overhead);
  if (!host.empty()) root["host"] = host;
  Json collectives = Json::array();
  for (const auto& x : c.collectives) {
    collectives.push_back({{"kind", to_string(x.kind)},
                           {"ranks", x.ranks},
                           {"nodes", x.nodes},
                           {"latency_s", fitted_json(x.latency)},
                           {"busbw_bytes_per_s", fitted_json(x.busbw)}});
  }
  root["collectives"] = collectives;
  return root.dump(2) + "\n";
}

Calibration calibration_from_json(std::string_view text, const std::string& origin) {
  const nlohmann::json root = detail::parse_json(text, origin);
  const std::string schema = json_schema(root);
  if (schema == "shardscope.calibration/1") {
    throw ValidationError({Problem{origin, "schema",
                                   "a calibration of an older shardscope: its compute_slowdown "
                                   "predates the SM model; fit it again with shardscope calibrate",
                                   std::string(kCalibrationSchema)}});
  }
  if (schema != kCalibrationSchema) {
    throw ValidationError({Problem{origin, "schema", "not a shardscope calibration",
                                   std::string(kCalibrationSchema)}});
  }
  std::vector<Problem> problems;
  Reader r(origin, problems);
  auto& f = r.fields();
  Calibration c;
  c.scenario = f.text(root, "", "scenario");
  c.version = f.text(root, "", "version");
  for (const auto& m : f.array(root, "measured")) {
    if (m.is_string()) {
      c.measured.push_back(m.get<std::string>());
    } else {
      f.problem("measured", fmt::format("expected file names, got {}", m.dump()));
    }
  }
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const auto* compute = f.get(root, "", "compute", false);
  const auto& cj = compute ? *compute : kEmpty;
  c.matmul_efficiency = r.optional(cj, "compute", "matmul_efficiency", kEfficiency);
  c.attention_efficiency = r.optional(cj, "compute", "attention_efficiency", kEfficiency);
  c.half_efficiency_flops = r.optional(cj, "compute", "half_efficiency_flops", kFlops);
  c.hbm_efficiency = r.optional(cj, "compute", "hbm_efficiency", kEfficiency);
  c.contention_scale = r.optional(cj, "compute", "contention_scale", kContentionScale);
  const auto* pcie = f.get(root, "", "pcie", false);
  const auto& pj = pcie ? *pcie : kEmpty;
  c.pcie_bandwidth = r.optional(pj, "pcie", "bandwidth_bytes_per_s", kBandwidth);
  c.pcie_latency = r.optional(pj, "pcie", "latency_s", kLatency);
  const auto* host = f.get(root, "", "host", false);
  const auto& hj = host ? *host : kEmpty;
  c.launch_overhead = r.optional(hj, "host", "launch_overhead_s", kOverhead);
  c.fsdp_hook_overhead = r.optional(hj, "host", "fsdp_hook_overhead_s", kOverhead);
  const auto& collectives = f.array(root, "collectives");
  for (std::size_t i = 0; i < collectives.size(); ++i) {
    const std::string key = fmt::format("collectives[{}]", i);
    const auto& j = collectives[i];
    CollectiveCalibration x;
    x.kind = f.enumeration(j, key, "kind", parse_op_kind, OpKind::all_gather,
                           "all_gather, reduce_scatter, all_reduce");
    if (x.kind != OpKind::all_gather && x.kind != OpKind::reduce_scatter &&
        x.kind != OpKind::all_reduce) {
      f.problem(key + ".kind", fmt::format("'{}' is not a collective", to_string(x.kind)),
                "all_gather, reduce_scatter, all_reduce");
    }
    x.ranks = static_cast<int>(f.integer(j, key, "ranks", 2, 1 << 24));
    x.nodes = static_cast<int>(f.integer(j, key, "nodes", 1, x.ranks));
    x.latency = r.value(j, key, "latency_s", kLatency);
    x.busbw = r.value(j, key, "busbw_bytes_per_s", kBandwidth);
    if (c.collective(x.kind, x.ranks, x.nodes)) {
      f.problem(key, fmt::format("a second {} on {} ranks over {} nodes", to_string(x.kind),
                                 x.ranks, x.nodes));
    }
    c.collectives.push_back(x);
  }
  throw_if_any(std::move(problems));
  return c;
}

Calibration load_calibration(const std::string& path) {
  return calibration_from_json(read_text_file(path), path);
}

std::shared_ptr<const Calibration> shared_calibration(const std::string& path) {
  return detail::cached_file<Calibration>(path, load_calibration);
}

}  // namespace shardscope
