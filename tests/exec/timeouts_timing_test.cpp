// How soon a missing peer is given up on: wall-clock bounds, so label `timing` (run on their own,
// serially, after the unit tests: a loaded machine stretches them). What the error says is checked
// in host_run_test.cpp and host_world_test.cpp, with no clock.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/exec/executor.hpp"
#include "shardscope/exec/host_backend.hpp"
#include "shardscope/exec/host_world.hpp"

namespace shardscope::exec {
namespace {

using Clock = HostWorld::Clock;

// A timeout this long is given up on within this bound (generous: a wait has to notice its
// deadline, not to be punctual to the millisecond).
constexpr auto kTimeout = std::chrono::milliseconds(300);
constexpr auto kBound = std::chrono::seconds(5);

TEST(Timeouts, ACollectiveWithoutItsPeerReturnsSoonAfterItsDeadline) {
  LocalHostWorld local({2, {{"shard", 2, 1}}, 1024});
  std::vector<std::byte> in(16), out(32);
  const auto start = Clock::now();
  EXPECT_THROW(local.world().run(0, {3, OpKind::all_gather, 0, DType::fp32, 4, in, out},
                                 Clock::now() + kTimeout),
               CollectiveError);
  EXPECT_LT(Clock::now() - start, kBound);
}

TEST(Timeouts, ARunWithoutItsPeerFailsSoonAfterItsTimeout) {
  const Schedule schedule =
      lower(load_scenario(std::string(SHARDSCOPE_EXAMPLES_DIR) + "/fsdp2-overlap-oracle.yaml",
                          {"cluster.gpus_per_node=2"}));
  LocalHostWorld local({2, schedule.communicators, 4096});
  HostBackendOptions b;
  b.world = &local.world();
  b.cost = [](OpId, const Op&) { return HostCost{}; };
  b.timeout = kTimeout;
  HostBackend rank0(b);  // rank 1 never comes
  const auto start = Clock::now();
  EXPECT_THROW((void)run(schedule, rank0), ExecError);
  EXPECT_LT(Clock::now() - start, kBound);
}

}  // namespace
}  // namespace shardscope::exec
