#pragma once
// Quantities that carry their meaning: bytes, integer nanoseconds, FLOPs and element types.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace shardscope {

using Bytes = std::int64_t;   // a size in bytes
using TimeNs = std::int64_t;  // a duration or instant in integer nanoseconds
using Flops = double;         // floating-point operations (counts reach 1e20, beyond int64 comfort)
using FlopsPerSecond = double;
using BytesPerSecond = double;

inline constexpr Bytes kKiB = 1024;
inline constexpr Bytes kMiB = 1024 * kKiB;
inline constexpr Bytes kGiB = 1024 * kMiB;
inline constexpr TimeNs kNsPerUs = 1'000;
inline constexpr TimeNs kNsPerMs = 1'000'000;
inline constexpr TimeNs kNsPerS = 1'000'000'000;

enum class DType { fp32, bf16, fp16, fp8 };

constexpr Bytes bytes_per_element(DType dtype) {
  switch (dtype) {
    case DType::fp32:
      return 4;
    case DType::bf16:
    case DType::fp16:
      return 2;
    case DType::fp8:
      return 1;
  }
  return 4;
}

std::string_view to_string(DType dtype);
std::optional<DType> parse_dtype(std::string_view text);
/// Allowed spellings of a dtype, for error messages.
inline constexpr std::string_view kDTypeNames = "fp32, bf16, fp16, fp8";

/// "80GiB", "96GB", "512MiB", "1024" (bytes). Binary (KiB, MiB, GiB, TiB) and decimal (kB, MB, GB,
/// TB).
std::optional<Bytes> parse_bytes(std::string_view text);
/// "3.4us", "25ms", "1.5s", "800ns" → nanoseconds (rounded to the nearest nanosecond).
std::optional<TimeNs> parse_duration(std::string_view text);
/// "450GB/s", "400Gb/s", "25GiB/s" → bytes per second.
std::optional<BytesPerSecond> parse_bandwidth(std::string_view text);
/// "989TFLOP/s", "67e12" → FLOP/s.
std::optional<FlopsPerSecond> parse_flops_rate(std::string_view text);

/// Human-readable forms, always with a unit: "15.0 GiB", "85.000 ms", "1.23 TB/s".
std::string format_bytes(Bytes bytes);
std::string format_duration(TimeNs ns);
std::string format_bandwidth(BytesPerSecond bytes_per_second);
std::string format_flops_rate(FlopsPerSecond flops_per_second);
/// An exact integer with thousands separators: 8,030,261,248.
std::string format_count(std::int64_t value);

constexpr TimeNs ms_to_ns(double ms) {
  return static_cast<TimeNs>(ms * 1e6 + (ms >= 0 ? 0.5 : -0.5));
}
constexpr double ns_to_ms(TimeNs ns) {
  return static_cast<double>(ns) / 1e6;
}
constexpr double ns_to_s(TimeNs ns) {
  return static_cast<double>(ns) / 1e9;
}

}  // namespace shardscope
