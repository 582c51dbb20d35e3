#include "shardscope/exec/host_world.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "exec/src/dtype_codec.hpp"
#include "shardscope/exec/host_backend.hpp"

namespace shardscope::exec {
namespace {

using Clock = HostWorld::Clock;

std::vector<std::byte> filled(std::size_t elements, DType dtype, float (*value)(int, std::size_t),
                              int rank) {
  std::vector<std::byte> out(elements * static_cast<std::size_t>(bytes_per_element(dtype)));
  for (std::size_t e = 0; e < elements; ++e)
    detail::store(out.data(), static_cast<std::int64_t>(e), dtype, value(rank, e));
  return out;
}

float value_of(int rank, std::size_t e) {
  return static_cast<float>(rank * 10) + static_cast<float>(e % 5);
}

// Runs one collective on `ranks` threads; returns each rank's output as floats.
std::vector<std::vector<float>> collective(int ranks, OpKind kind, DType dtype,
                                           std::int64_t chunk) {
  LocalHostWorld local({ranks, {{"shard", ranks, 1}}, 4096});
  const auto n = static_cast<std::size_t>(ranks);
  const auto c = static_cast<std::size_t>(chunk);
  const std::size_t in = kind == OpKind::all_gather ? c : n * c;
  const std::size_t out = kind == OpKind::reduce_scatter ? c : n * c;
  std::vector<std::vector<float>> results(n);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto input = filled(in, dtype, value_of, r);
      std::vector<std::byte> output(out * static_cast<std::size_t>(bytes_per_element(dtype)));
      local.world().run(r, {7, kind, 0, dtype, chunk, input, output},
                        Clock::now() + std::chrono::seconds(10));
      for (std::size_t e = 0; e < out; ++e)
        results[static_cast<std::size_t>(r)].push_back(
            detail::load(output.data(), static_cast<std::int64_t>(e), dtype));
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllGatherConcatenatesInRankOrder) {
  const int n = GetParam();
  const auto out = collective(n, OpKind::all_gather, DType::bf16, 6);
  for (int r = 0; r < n; ++r) {
    for (int p = 0; p < n; ++p) {
      for (std::size_t e = 0; e < 6; ++e)
        EXPECT_EQ(out[static_cast<std::size_t>(r)][static_cast<std::size_t>(p) * 6 + e],
                  value_of(p, e));
    }
  }
}

TEST_P(Collectives, ReduceScatterSumsEachRanksShare) {
  const int n = GetParam();
  const auto out = collective(n, OpKind::reduce_scatter, DType::fp32, 5);
  for (int r = 0; r < n; ++r) {
    for (std::size_t e = 0; e < 5; ++e) {
      float expected = 0;
      for (int p = 0; p < n; ++p) expected += value_of(p, static_cast<std::size_t>(r) * 5 + e);
      EXPECT_EQ(out[static_cast<std::size_t>(r)][e], expected) << "rank " << r << " element " << e;
    }
  }
}

TEST_P(Collectives, AllReduceGivesEveryRankTheSum) {
  const int n = GetParam();
  const auto out = collective(n, OpKind::all_reduce, DType::fp16, 3);
  for (int r = 0; r < n; ++r) {
    for (std::size_t e = 0; e < 3 * static_cast<std::size_t>(n); ++e) {
      float expected = 0;
      for (int p = 0; p < n; ++p) expected += value_of(p, e);
      EXPECT_EQ(out[static_cast<std::size_t>(r)][e], expected);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(2, 4, 8));

TEST(HostWorld, DifferentCollectivesOnPeersAreAnErrorNamingBoth) {
  LocalHostWorld local({2, {{"shard", 2, 1}}, 1024});
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  threads.reserve(2);
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<std::byte> in(64), out(128);
      const OpKind kind = r == 0 ? OpKind::all_gather : OpKind::reduce_scatter;
      try {
        local.world().run(r, {r == 0 ? 5 : 9, kind, 0, DType::fp32, 4, in, out},
                          Clock::now() + std::chrono::seconds(10));
      } catch (const CollectiveError& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::string& e = errors[0].find("different") != std::string::npos ? errors[0] : errors[1];
  EXPECT_NE(e.find("ranks issued different collectives"), std::string::npos) << e;
  EXPECT_NE(e.find("op 5"), std::string::npos) << e;
  EXPECT_NE(e.find("op 9"), std::string::npos) << e;
}

TEST(HostWorld, AMissingPeerTimesOutNamingTheOp) {
  LocalHostWorld local({2, {{"shard", 2, 1}}, 1024});
  std::vector<std::byte> in(16), out(32);
  try {
    local.world().run(0, {3, OpKind::all_gather, 0, DType::fp32, 4, in, out},
                      Clock::now() + std::chrono::milliseconds(200));
    FAIL() << "returned without its peer";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("op 3 (all_gather on communicator 'shard'"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("1 of 2 ranks arrived"), std::string::npos) << e.what();
  }
  // How soon it gives up is a wall-clock property: exec/timeouts_timing_test.cpp (label timing).
}

TEST(HostWorld, ReplicateGroupsAreStridedShardGroupsContiguous) {
  // HSDP on 8 ranks: shard groups of 4 ({0..3}, {4..7}), replicate pairs (r, r + 4).
  const Communicator shard{"shard", 4, 1}, replicate{"replicate", 2, 2};
  EXPECT_EQ(membership(shard, 8, 5).instance, 1);
  EXPECT_EQ(membership(shard, 8, 5).position, 1);
  EXPECT_EQ(membership(replicate, 8, 5).instance, 1);
  EXPECT_EQ(membership(replicate, 8, 5).position, 1);
  EXPECT_EQ(membership(replicate, 8, 1).instance, 1);
  EXPECT_EQ(membership(replicate, 8, 1).position, 0);
}

TEST(DTypeCodec, RoundsToNearestEvenAndSaturates) {
  std::array<std::byte, 4> b{};
  const auto round_trip = [&](DType d, float v) {
    detail::store(b.data(), 0, d, v);
    return detail::load(b.data(), 0, d);
  };
  EXPECT_EQ(round_trip(DType::bf16, 1.0f + 1.0f / 256), 1.0f);  // a tie: to even
  EXPECT_EQ(round_trip(DType::bf16, 257.0f), 256.0f);
  EXPECT_EQ(round_trip(DType::fp16, 2049.0f), 2048.0f);
  EXPECT_EQ(round_trip(DType::fp16, 1e6f), 65504.0f);  // saturates
  EXPECT_EQ(round_trip(DType::fp8, 17.0f), 16.0f);     // e4m3: 3 mantissa bits
  EXPECT_EQ(round_trip(DType::fp8, 1000.0f), 448.0f);
  EXPECT_EQ(round_trip(DType::fp16, -0.5f), -0.5f);
  EXPECT_EQ(round_trip(DType::fp16, 1e-7f), 1.1920929e-7f);  // subnormal: 2 × 2^-24
}

}  // namespace
}  // namespace shardscope::exec
