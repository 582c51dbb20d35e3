#include "shardscope/core/units.hpp"

#include <gtest/gtest.h>

namespace shardscope {
namespace {

TEST(Units, ParsesSizesWithBinaryAndDecimalUnits) {
  EXPECT_EQ(parse_bytes("80GiB"), 80 * kGiB);
  EXPECT_EQ(parse_bytes("96GB"), Bytes{96'000'000'000});
  EXPECT_EQ(parse_bytes("512 MiB"), 512 * kMiB);
  EXPECT_EQ(parse_bytes("1024"), Bytes{1024});
  EXPECT_FALSE(parse_bytes("12 parsecs"));
  EXPECT_FALSE(parse_bytes("GiB"));
  EXPECT_FALSE(parse_bytes("-5GB"));
}

TEST(Units, ParsesDurationsToIntegerNanoseconds) {
  EXPECT_EQ(parse_duration("3.4us"), TimeNs{3400});
  EXPECT_EQ(parse_duration("25ms"), TimeNs{25'000'000});
  EXPECT_EQ(parse_duration("1.5s"), TimeNs{1'500'000'000});
  EXPECT_EQ(parse_duration("800ns"), TimeNs{800});
  EXPECT_FALSE(parse_duration("5"));  // a duration needs a unit
}

TEST(Units, ParsesBandwidthsIncludingBitsPerSecond) {
  EXPECT_DOUBLE_EQ(*parse_bandwidth("450GB/s"), 450e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("400Gb/s"), 50e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("1GiB/s"), 1073741824.0);
  EXPECT_DOUBLE_EQ(*parse_flops_rate("989.4TFLOP/s"), 989.4e12);
}

TEST(Units, FormatsEveryNumberWithAUnit) {
  EXPECT_EQ(format_bytes(80 * kGiB), "80.00 GiB");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_duration(85 * kNsPerMs), "85.000 ms");
  EXPECT_EQ(format_duration(1500), "1.500 us");
  EXPECT_EQ(format_bandwidth(450e9), "450.0 GB/s");
  EXPECT_EQ(format_count(8030261248), "8,030,261,248");
  EXPECT_EQ(format_count(-1234), "-1,234");
  EXPECT_EQ(format_count(999), "999");
}

TEST(Units, DTypesRoundTripByName) {
  for (DType d : {DType::fp32, DType::bf16, DType::fp16, DType::fp8})
    EXPECT_EQ(parse_dtype(to_string(d)), d);
  EXPECT_EQ(bytes_per_element(DType::bf16), 2);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_FALSE(parse_dtype("int4"));
}

}  // namespace
}  // namespace shardscope
