#include "shardscope/core/device_profile.hpp"

#include <algorithm>
#include <cmath>

#include "file_cache.hpp"
#include "json_fields.hpp"
#include "json_lines.hpp"
#include "shardscope/core/output_file.hpp"

namespace shardscope {
namespace {

using Json = nlohmann::ordered_json;

Json shape_json(const KernelShape& shape, TimeNs time, std::optional<TimeNs> contended_time) {
  Json j;
  std::visit(detail::KernelShapeJson{j}, shape);
  j["time_ns"] = time;
  if (contended_time) j["contended_time_ns"] = *contended_time;
  return j;
}

// The profile's entry of a GEMM or attention kernel's shape, or nullptr.
template <typename Entry, typename Shape>
const Entry* find_entry(const std::vector<Entry>& entries, const Kernel& kernel) {
  const auto* shape = std::get_if<Shape>(&kernel.shape);
  if (!shape) return nullptr;
  for (const auto& e : entries) {
    if (e.shape == *shape) return &e;
  }
  return nullptr;
}

// The profile's entry of `kernel`: its time alone and its contended time.
struct EntryTimes {
  TimeNs time = 0;
  std::optional<TimeNs> contended_time;
};
std::optional<EntryTimes> entry_times(const DeviceProfile& p, const Kernel& kernel) {
  if (const auto* g = find_entry<MeasuredGemm, Gemm>(p.gemms, kernel))
    return EntryTimes{g->time, g->contended_time};
  if (const auto* a = find_entry<MeasuredAttention, Attention>(p.attention, kernel))
    return EntryTimes{a->time, a->contended_time};
  return std::nullopt;
}

}  // namespace

std::optional<TimeNs> measured_time(const DeviceProfile& p, const Kernel& kernel) {
  if (kernel.kind() == KernelKind::gemm || kernel.kind() == KernelKind::attention) {
    const auto e = entry_times(p, kernel);
    return e ? std::optional<TimeNs>(e->time) : std::nullopt;
  }
  if (p.memory_bandwidth <= 0) return std::nullopt;
  const Bytes bytes = kernel_memory_bytes({kernel.label, 1, kernel.shape});
  return static_cast<TimeNs>(std::llround(static_cast<double>(bytes) / p.memory_bandwidth * 1e9));
}

std::optional<TimeNs> measured_contended_time(const DeviceProfile& p, const Kernel& kernel,
                                              int held_sms) {
  if (held_sms <= 0 || p.contended_sms != held_sms) return std::nullopt;
  const auto e = entry_times(p, kernel);
  return e ? e->contended_time : std::nullopt;
}

std::vector<Kernel> distinct_shapes(const Schedule& s) {
  std::vector<Kernel> out;
  for (const KernelSet& set : s.kernel_sets) {
    for (const Kernel& k : set) {
      if (k.kind() != KernelKind::gemm && k.kind() != KernelKind::attention) continue;
      const bool seen =
          std::any_of(out.begin(), out.end(), [&](const Kernel& o) { return o.shape == k.shape; });
      if (!seen) out.push_back({k.label, 1, k.shape});
    }
  }
  return out;
}

ProfileCoverage profile_coverage(const Schedule& s, const DeviceProfile& p) {
  ProfileCoverage c;
  for (const Op& op : s.ops) {
    if (op.kernels == kNone) continue;
    ++c.compute_ops;
    const auto kernels = op_kernels(s, op);
    c.covered_ops += std::all_of(kernels.begin(), kernels.end(),
                                 [&](const Kernel& k) { return measured_time(p, k).has_value(); });
  }
  for (const Kernel& k : distinct_shapes(s)) c.missing_shapes += !measured_time(p, k).has_value();
  return c;
}

std::string device_profile_to_json(const DeviceProfile& p) {
  std::string out = "{\n";
  const auto field = [&out](std::string_view key, const Json& value) {
    out += fmt::format("  \"{}\": {},\n", key, value.dump());
  };
  field("schema", kDeviceProfileSchema);
  field("device", p.device);
  field("version", p.version);
  field("memory_bandwidth_bytes_per_s", p.memory_bandwidth);
  field("h2d_pinned_bytes_per_s", p.h2d_pinned);
  field("d2h_pinned_bytes_per_s", p.d2h_pinned);
  field("h2d_pageable_bytes_per_s", p.h2d_pageable);
  field("d2h_pageable_bytes_per_s", p.d2h_pageable);
  field("launch_overhead_ns", p.launch_overhead);
  field("event_overhead_ns", p.event_overhead);
  field("contended_sms", p.contended_sms);
  detail::emit_json_array(
      out, "gemms", p.gemms,
      [](const MeasuredGemm& m, std::size_t) {
        return shape_json(m.shape, m.time, m.contended_time);
      },
      false);
  detail::emit_json_array(
      out, "attention", p.attention,
      [](const MeasuredAttention& m, std::size_t) {
        return shape_json(m.shape, m.time, m.contended_time);
      },
      true);
  out += "}\n";
  return out;
}

DeviceProfile device_profile_from_json(std::string_view text, const std::string& origin) {
  const nlohmann::json root = detail::parse_json(text, origin);
  std::vector<Problem> problems;
  detail::Fields f(origin, problems);
  // /1 is /2 without contended times.
  constexpr std::string_view kFirstSchema = "shardscope.device_profile/1";
  if (!root.is_object() || !root.contains("schema") ||
      (root["schema"] != kDeviceProfileSchema && root["schema"] != kFirstSchema)) {
    throw ValidationError({Problem{origin, "schema", "not a shardscope device profile",
                                   fmt::format("{} or {}", kDeviceProfileSchema, kFirstSchema)}});
  }
  // Physical ranges: a kernel takes 1 ns to 100 s, an overhead up to 1 s, a bandwidth 1 MB/s to
  // 100 TB/s (HBM3e is about 5 TB/s); a value outside is no measurement of a GPU.
  constexpr std::int64_t kMaxKernelNs = 100'000'000'000;
  constexpr std::int64_t kMaxOverheadNs = 1'000'000'000;
  constexpr double kMinBandwidth = 1e6, kMaxBandwidth = 1e14;
  DeviceProfile p;
  p.device = f.text(root, "", "device");
  p.version = f.text(root, "", "version");
  const auto bandwidth = [&](const char* key) {
    return f.rate(root, "", key, kMinBandwidth, kMaxBandwidth);
  };
  p.memory_bandwidth = bandwidth("memory_bandwidth_bytes_per_s");
  p.h2d_pinned = bandwidth("h2d_pinned_bytes_per_s");
  p.d2h_pinned = bandwidth("d2h_pinned_bytes_per_s");
  p.h2d_pageable = bandwidth("h2d_pageable_bytes_per_s");
  p.d2h_pageable = bandwidth("d2h_pageable_bytes_per_s");
  p.launch_overhead = f.integer(root, "", "launch_overhead_ns", 0, kMaxOverheadNs);
  p.event_overhead = f.integer(root, "", "event_overhead_ns", 0, kMaxOverheadNs);
  // No GPU has 4,096 SMs (a B200 has 148).
  constexpr std::int64_t kMaxSms = 4096;
  const std::size_t problems_before = problems.size();
  if (root.contains("contended_sms"))
    p.contended_sms = static_cast<int>(f.integer(root, "", "contended_sms", 0, kMaxSms));
  const bool held_read = problems.size() == problems_before;
  // A contended time is a measurement beside held SMs: without them it is no measurement (a bad
  // contended_sms is its own problem).
  const auto contended = [&](const nlohmann::json& entry,
                             const std::string& key) -> std::optional<TimeNs> {
    if (!entry.is_object() || !entry.contains("contended_time_ns") || !held_read)
      return std::nullopt;
    if (p.contended_sms == 0) {
      f.problem(key + ".contended_time_ns", "a contended time with no SMs held",
                "contended_sms ≥ 1, or no contended_time_ns");
      return std::nullopt;
    }
    return f.integer(entry, key, "contended_time_ns", 1, kMaxKernelNs);
  };
  const auto& gemms = f.array(root, "gemms");
  for (std::size_t i = 0; i < gemms.size(); ++i) {
    const std::string key = fmt::format("gemms[{}]", i);
    const KernelShape shape = detail::read_kernel_shape(f, gemms[i], key, KernelKind::gemm);
    p.gemms.push_back({std::get<Gemm>(shape), f.integer(gemms[i], key, "time_ns", 1, kMaxKernelNs),
                       contended(gemms[i], key)});
  }
  const auto& attention = f.array(root, "attention");
  for (std::size_t i = 0; i < attention.size(); ++i) {
    const std::string key = fmt::format("attention[{}]", i);
    const KernelShape shape =
        detail::read_kernel_shape(f, attention[i], key, KernelKind::attention);
    p.attention.push_back({std::get<Attention>(shape),
                           f.integer(attention[i], key, "time_ns", 1, kMaxKernelNs),
                           contended(attention[i], key)});
  }
  throw_if_any(std::move(problems));
  return p;
}

DeviceProfile load_device_profile(const std::string& path) {
  return device_profile_from_json(read_text_file(path), path);
}

std::shared_ptr<const DeviceProfile> shared_device_profile(const std::string& path) {
  return detail::cached_file<DeviceProfile>(path, load_device_profile);
}

}  // namespace shardscope
