// HTA's time views on a hand-made timeline, in closed form (time_breakdown.hpp).
#include "shardscope/core/time_breakdown.hpp"

#include <gtest/gtest.h>

namespace shardscope::analysis {
namespace {

// One op of `kind` from `start` to `end` (µs), labelled `label`.
void add(Timeline& t, OpKind kind, TimeNs start, TimeNs end, const std::string& label = "") {
  TimelineOp op;
  op.kind = kind;
  op.start = start * 1000;
  op.end = end * 1000;
  if (!label.empty()) {
    op.label = static_cast<std::int32_t>(t.op_labels.size());
    t.op_labels.push_back(label);
  }
  t.ops.push_back(op);
}

TEST(TimeBreakdown, FollowsHtasDefinitions) {
  Timeline t;
  add(t, OpKind::forward, 0, 10, "void gemm_kernel<float>");
  add(t, OpKind::all_gather, 5, 15);
  add(t, OpKind::h2d, 20, 25);
  add(t, OpKind::other, 30, 32, "ncclDevKernel_SendRecv");  // communication by its name
  add(t, OpKind::other, 31, 34, "Memset (Device)");         // memory by its name
  add(t, OpKind::other, 40, 41, "cudaStreamSyncKernel");    // neither: only in the union
  const TimeBreakdown b = time_breakdown(t);
  EXPECT_EQ(b.span, 41'000);
  EXPECT_EQ(b.idle, 41'000 - (15 + 5 + 4 + 1) * 1000);  // the gaps between the unions
  EXPECT_EQ(b.compute, 10'000);
  EXPECT_EQ(b.non_compute, b.span - b.idle - b.compute);
  ASSERT_TRUE(b.comm_comp_overlap.has_value());
  EXPECT_DOUBLE_EQ(*b.comm_comp_overlap, 5.0 / 12.0);  // 5 of [5, 15) and [30, 32) covered
  const std::vector<std::pair<std::string, TimeNs>> expected{
      {"computation", 5'000},
      {"communication", 6'000},                          // [10, 15) and [30, 31)
      {"computation overlapping communication", 5'000},  // [5, 10)
      {"memory", 7'000},                                 // [20, 25) and [32, 34)
      {"communication overlapping memory", 1'000}};      // [31, 32)
  EXPECT_EQ(b.by_type, expected);
}

TEST(TimeBreakdown, NoCommunicationHasNoOverlapAndNoOpsNothing) {
  Timeline t;
  add(t, OpKind::backward, 2, 4);
  EXPECT_FALSE(time_breakdown(t).comm_comp_overlap.has_value());
  EXPECT_EQ(time_breakdown(t).span, 2'000);
  EXPECT_EQ(time_breakdown(Timeline{}).span, 0);
  EXPECT_NE(time_breakdown_table({time_breakdown(t)}).find("no communication"), std::string::npos);
}

}  // namespace
}  // namespace shardscope::analysis
