#include "shardscope/core/units.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <span>
#include <utility>

namespace shardscope {

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::fp32:
      return "fp32";
    case DType::bf16:
      return "bf16";
    case DType::fp16:
      return "fp16";
    case DType::fp8:
      return "fp8";
  }
  return "fp32";
}

std::optional<DType> parse_dtype(std::string_view text) {
  if (text == "fp32" || text == "float32") return DType::fp32;
  if (text == "bf16" || text == "bfloat16") return DType::bf16;
  if (text == "fp16" || text == "float16") return DType::fp16;
  if (text == "fp8" || text == "float8") return DType::fp8;
  return std::nullopt;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits "12.5 GiB" into 12.5 and "GiB". Fails on a missing or malformed number.
std::optional<std::pair<double, std::string_view>> split_number(std::string_view text) {
  text = trim(text);
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || !std::isfinite(value)) return std::nullopt;
  std::string_view unit = trim(text.substr(static_cast<std::size_t>(ptr - text.data())));
  return std::pair{value, unit};
}

struct UnitScale {
  std::string_view name;
  double scale;
};

std::optional<double> scaled(std::string_view text, std::span<const UnitScale> units) {
  auto parsed = split_number(text);
  if (!parsed) return std::nullopt;
  for (const auto& u : units) {
    if (parsed->second == u.name) return parsed->first * u.scale;
  }
  return std::nullopt;
}

constexpr std::array kByteUnits{
    UnitScale{"", 1},         UnitScale{"B", 1},        UnitScale{"KiB", 0x1p10},
    UnitScale{"MiB", 0x1p20}, UnitScale{"GiB", 0x1p30}, UnitScale{"TiB", 0x1p40},
    UnitScale{"kB", 1e3},     UnitScale{"KB", 1e3},     UnitScale{"MB", 1e6},
    UnitScale{"GB", 1e9},     UnitScale{"TB", 1e12},
};
constexpr std::array kTimeUnits{
    UnitScale{"ns", 1},   UnitScale{"us", 1e3}, UnitScale{"µs", 1e3},
    UnitScale{"ms", 1e6}, UnitScale{"s", 1e9},
};
constexpr std::array kBandwidthUnits{
    UnitScale{"B/s", 1},        UnitScale{"KB/s", 1e3},     UnitScale{"MB/s", 1e6},
    UnitScale{"GB/s", 1e9},     UnitScale{"TB/s", 1e12},    UnitScale{"KiB/s", 0x1p10},
    UnitScale{"MiB/s", 0x1p20}, UnitScale{"GiB/s", 0x1p30}, UnitScale{"Gb/s", 1e9 / 8},
    UnitScale{"Gbps", 1e9 / 8}, UnitScale{"Mb/s", 1e6 / 8},
};
constexpr std::array kFlopUnits{
    UnitScale{"", 1},           UnitScale{"FLOP/s", 1},     UnitScale{"GFLOP/s", 1e9},
    UnitScale{"TFLOP/s", 1e12}, UnitScale{"PFLOP/s", 1e15},
};

}  // namespace

std::optional<Bytes> parse_bytes(std::string_view text) {
  auto v = scaled(text, kByteUnits);
  if (!v || *v < 0 || *v > 9.2e18) return std::nullopt;
  return static_cast<Bytes>(std::llround(*v));
}

std::optional<TimeNs> parse_duration(std::string_view text) {
  auto v = scaled(text, kTimeUnits);
  if (!v || *v < 0 || *v > 9.2e18) return std::nullopt;
  return static_cast<TimeNs>(std::llround(*v));
}

std::optional<BytesPerSecond> parse_bandwidth(std::string_view text) {
  auto v = scaled(text, kBandwidthUnits);
  if (!v || *v <= 0) return std::nullopt;
  return *v;
}

std::optional<FlopsPerSecond> parse_flops_rate(std::string_view text) {
  auto v = scaled(text, kFlopUnits);
  if (!v || *v <= 0) return std::nullopt;
  return *v;
}

std::string format_bytes(Bytes bytes) {
  const double b = static_cast<double>(bytes);
  const double mag = std::fabs(b);
  if (mag >= 0x1p40) return fmt::format("{:.2f} TiB", b / 0x1p40);
  if (mag >= 0x1p30) return fmt::format("{:.2f} GiB", b / 0x1p30);
  if (mag >= 0x1p20) return fmt::format("{:.2f} MiB", b / 0x1p20);
  if (mag >= 0x1p10) return fmt::format("{:.2f} KiB", b / 0x1p10);
  return fmt::format("{} B", bytes);
}

std::string format_duration(TimeNs ns) {
  const double v = static_cast<double>(ns);
  const double mag = std::fabs(v);
  if (mag >= 1e9) return fmt::format("{:.3f} s", v / 1e9);
  if (mag >= 1e6) return fmt::format("{:.3f} ms", v / 1e6);
  if (mag >= 1e3) return fmt::format("{:.3f} us", v / 1e3);
  return fmt::format("{} ns", ns);
}

std::string format_bandwidth(BytesPerSecond bps) {
  if (bps >= 1e12) return fmt::format("{:.2f} TB/s", bps / 1e12);
  if (bps >= 1e9) return fmt::format("{:.1f} GB/s", bps / 1e9);
  if (bps >= 1e6) return fmt::format("{:.1f} MB/s", bps / 1e6);
  if (bps >= 1e3) return fmt::format("{:.1f} KB/s", bps / 1e3);
  return fmt::format("{:g} B/s", bps);
}

std::string format_flops_rate(FlopsPerSecond fps) {
  if (fps >= 1e15) return fmt::format("{:.2f} PFLOP/s", fps / 1e15);
  if (fps >= 1e12) return fmt::format("{:.1f} TFLOP/s", fps / 1e12);
  return fmt::format("{:.1f} GFLOP/s", fps / 1e9);
}

std::string format_count(std::int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  const std::size_t n = digits.size();
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[i];
    if ((n - i - 1) % 3 == 0 && i + 1 < n) out += ',';
  }
  return value < 0 ? "-" + out : out;
}

}  // namespace shardscope
