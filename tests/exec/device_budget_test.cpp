// The CUDA backend's memory budget, host-side: the allocator never gets memory NCCL will still
// need, never more than the plan, and the report says when the device is short of the plan.
#include "shardscope/exec/device_budget.hpp"

#include <gtest/gtest.h>

namespace shardscope::exec {
namespace {

constexpr Bytes kGiB = Bytes{1} << 30;

TEST(DeviceBudget, ThePlansCapacityWhereTheDeviceHasRoomForItAndNcclsBuffers) {
  const auto b = DeviceBudget{70 * kGiB, 78 * kGiB, 2 * kGiB};
  EXPECT_EQ(b.available(), 76 * kGiB);
  EXPECT_EQ(b.capacity(), 70 * kGiB);
  EXPECT_FALSE(b.short_of_plan());
  EXPECT_EQ(describe(b),
            "the allocator may reserve 70.00 GiB of 78.00 GiB free after setup less 2.00 GiB NCCL "
            "will allocate (the plan's 70.00 GiB)");
}

TEST(DeviceBudget, WhatIsLeftOnceNcclIsPaidForWhereTheDeviceIsShortOfThePlan) {
  const auto b = DeviceBudget{74 * kGiB, 40 * kGiB, 1 * kGiB};
  EXPECT_EQ(b.capacity(), 39 * kGiB);
  EXPECT_TRUE(b.short_of_plan());
  EXPECT_NE(describe(b).find("an out-of-memory above 39.00 GiB is this device's"),
            std::string::npos)
      << describe(b);
}

TEST(DeviceBudget, NoPlannedCapacityTakesWhatIsFreeAndNothingIsNegative) {
  const auto unplanned = DeviceBudget{0, 10 * kGiB, 0};
  EXPECT_EQ(unplanned.capacity(), 10 * kGiB);
  EXPECT_FALSE(unplanned.short_of_plan());
  const auto none = DeviceBudget{8 * kGiB, 1 * kGiB, 2 * kGiB};
  EXPECT_EQ(none.available(), 0);
  EXPECT_EQ(none.capacity(), 0);
  EXPECT_TRUE(none.short_of_plan());
}

}  // namespace
}  // namespace shardscope::exec
