#pragma once
// Element values in the IR's dtypes, so host collectives sum as the hardware would: each element
// is stored in its dtype's width (fp32 4 bytes, bf16 and fp16 2, fp8 1), decoded to float, summed,
// and rounded back to the nearest representable value (ties to even). Out-of-range sums saturate at
// the largest finite value (no infinities: fp8 e4m3 has none, and a saturated test value is
// easier to diagnose than an inf). Private to exec.

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "shardscope/core/units.hpp"

namespace shardscope::exec::detail {

// A binary floating-point format with `exponent_bits` and `mantissa_bits` (IEEE-style bias).
struct MiniFloat {
  int exponent_bits;
  int mantissa_bits;
};

constexpr MiniFloat format_of(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return {8, 7};
    case DType::fp16:
      return {5, 10};
    case DType::fp8:
      return {4, 3};  // e4m3
    case DType::fp32:
      break;
  }
  return {8, 23};
}

inline float decode(std::uint32_t bits, MiniFloat f) {
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const std::uint32_t mantissa = bits & ((1u << f.mantissa_bits) - 1);
  const auto exponent = static_cast<int>((bits >> f.mantissa_bits) & ((1u << f.exponent_bits) - 1));
  const bool negative = ((bits >> (f.mantissa_bits + f.exponent_bits)) & 1u) != 0;
  const double fraction =
      static_cast<double>(mantissa) / static_cast<double>(1u << f.mantissa_bits);
  const double magnitude =
      exponent == 0 ? std::ldexp(fraction, 1 - bias) : std::ldexp(1.0 + fraction, exponent - bias);
  return static_cast<float>(negative ? -magnitude : magnitude);
}

inline std::uint32_t encode(float value, MiniFloat f) {
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const std::uint32_t sign = std::signbit(value) ? 1u << (f.mantissa_bits + f.exponent_bits) : 0u;
  double magnitude = std::fabs(static_cast<double>(value));
  // Largest finite: all-ones exponent is reserved except in e4m3, which keeps it (minus NaN).
  const int max_exponent =
      f.exponent_bits == 4 ? (1 << f.exponent_bits) - 1 - bias : (1 << f.exponent_bits) - 2 - bias;
  const double max_mantissa = f.exponent_bits == 4
                                  ? 2.0 - 2.0 / static_cast<double>(1 << f.mantissa_bits)
                                  : 2.0 - 1.0 / static_cast<double>(1 << f.mantissa_bits);
  const double largest = std::ldexp(max_mantissa, max_exponent);
  if (!(magnitude < largest)) magnitude = largest;  // saturate (NaN included)
  // The spacing of representable values around `magnitude`, then round to a multiple of it.
  int exponent = magnitude > 0 ? std::ilogb(magnitude) : 1 - bias;
  exponent = std::max(exponent, 1 - bias);  // subnormals share the smallest normal's spacing
  const double ulp = std::ldexp(1.0, exponent - f.mantissa_bits);
  double steps = std::nearbyint(magnitude / ulp);  // ties to even (default rounding mode)
  double rounded = steps * ulp;
  if (rounded > largest) rounded = largest;
  if (rounded == 0) return sign;
  exponent = std::max(std::ilogb(rounded), 1 - bias);
  const bool subnormal = std::ilogb(rounded) < 1 - bias;
  steps = std::ldexp(rounded, f.mantissa_bits - exponent);  // mantissa with the leading bit
  const auto mantissa =
      static_cast<std::uint32_t>(subnormal ? steps : steps - std::ldexp(1.0, f.mantissa_bits));
  const auto biased = static_cast<std::uint32_t>(subnormal ? 0 : exponent + bias);
  return sign | biased << f.mantissa_bits | mantissa;
}

/// Reads element `i` of a buffer of `dtype` as float.
inline float load(const std::byte* data, std::int64_t i, DType dtype) {
  const auto size = static_cast<std::size_t>(bytes_per_element(dtype));
  std::uint32_t bits = 0;
  std::memcpy(&bits, data + static_cast<std::size_t>(i) * size, size);  // little-endian hosts
  if (dtype == DType::fp32) return std::bit_cast<float>(bits);
  return decode(bits, format_of(dtype));
}

/// Writes `value`, rounded to `dtype`, as element `i`.
inline void store(std::byte* data, std::int64_t i, DType dtype, float value) {
  const auto size = static_cast<std::size_t>(bytes_per_element(dtype));
  const std::uint32_t bits =
      dtype == DType::fp32 ? std::bit_cast<std::uint32_t>(value) : encode(value, format_of(dtype));
  std::memcpy(data + static_cast<std::size_t>(i) * size, &bits, size);
}

}  // namespace shardscope::exec::detail
