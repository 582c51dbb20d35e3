// The real traces under traces/samples/ (make_samples.py: FSDP2 and FSDP1 training a tiny Llama
// on the CPU over gloo, two ranks, profiled by torch.profiler): every FSDP range is attributed to
// a group, the collectives those PyTorch runs issued are the ones shardscope lowers for the same
// scenario, the two ranks align by them, and compare meets each of the simulation's.
#include <gtest/gtest.h>

#include <filesystem>
#include <tuple>

#include "shardscope/core/compare.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/sim/cost_model.hpp"
#include "shardscope/sim/engine.hpp"
#include "shardscope/traces/kineto_import.hpp"
#include "shardscope/traces/rank_alignment.hpp"

namespace shardscope::traces {
namespace {

const std::filesystem::path kSamples = SHARDSCOPE_TRACE_SAMPLES_DIR;
constexpr int kRanks = 2;

bool collective_kind(OpKind k) {
  return k == OpKind::all_gather || k == OpKind::reduce_scatter || k == OpKind::all_reduce;
}

// (phase, group, bytes) of each collective of one kind, in the order they ran or were issued.
using Collectives = std::vector<std::tuple<Phase, std::string, Bytes>>;

Collectives collectives(const Timeline& t, int iteration, OpKind kind) {
  std::vector<const TimelineOp*> ops;
  for (const TimelineOp& op : t.ops) {
    if (op.kind == kind && op.iteration == iteration) ops.push_back(&op);
  }
  std::stable_sort(ops.begin(), ops.end(),
                   [](const TimelineOp* a, const TimelineOp* b) { return a->start < b->start; });
  Collectives out;
  for (const TimelineOp* op : ops)
    out.emplace_back(op->phase, std::string(group_name(t, *op)), op->bytes);
  return out;
}

Collectives collectives(const Schedule& s, int iteration, OpKind kind) {
  Collectives out;
  for (const Op& op : s.ops) {
    if (op.kind != kind || op.iteration != iteration) continue;
    out.emplace_back(op.phase, s.groups[static_cast<std::size_t>(op.group)].name, op.bytes);
  }
  return out;
}

ImportedTrace rank_trace(const std::string& api, int rank) {
  return import_kineto(kSamples / (api + "_rank" + std::to_string(rank) + ".json.gz"));
}

class TraceSamples : public ::testing::TestWithParam<std::string> {};

TEST_P(TraceSamples, EveryFsdpRangeIsAttributedToAGroup) {
  for (int rank = 0; rank < kRanks; ++rank) {
    const auto [t, report] = rank_trace(GetParam(), rank);
    EXPECT_TRUE(report.cpu_device);
    EXPECT_FALSE(report.fsdp_ranges.empty());
    EXPECT_TRUE(report.unmapped_fsdp_ranges.empty()) << import_report_text(report);
    EXPECT_EQ(report.unpaired_host_collectives, 0);
    EXPECT_EQ(report.unpaired_collective_issues, 0);
    EXPECT_EQ(report.iterations, 2);
    EXPECT_EQ(report.fsdp1_units, GetParam() == "fsdp1" ? 5 : 0);
    EXPECT_EQ(t.provenance.rank, rank);
    EXPECT_EQ(t.facts.world_size, kRanks);
    EXPECT_GT(t.peaks.allocated.bytes, 0);  // the CPU allocator's samples
  }
}

TEST_P(TraceSamples, IssueTheCollectivesShardscopeLowers) {
  const Schedule ir = lower(load_scenario(kSamples / (GetParam() + ".yaml")));
  const int last = ir.ops.back().iteration;
  for (int rank = 0; rank < kRanks; ++rank) {
    const Timeline t = rank_trace(GetParam(), rank).timeline;
    for (OpKind kind : {OpKind::all_gather, OpKind::reduce_scatter, OpKind::all_reduce}) {
      EXPECT_EQ(collectives(t, t.last_iteration(), kind), collectives(ir, last, kind))
          << GetParam() << " rank " << rank << " " << to_string(kind);
    }
    EXPECT_EQ(collectives(t, t.last_iteration(), OpKind::all_gather).size(), 9U);  // 5 + 4
  }
}

TEST_P(TraceSamples, RanksAlignByTheirCollectives) {
  std::vector<Timeline> ranks;
  std::vector<std::string> names;
  for (int rank = kRanks; rank-- > 0;) {  // in any order
    ranks.push_back(rank_trace(GetParam(), rank).timeline);
    names.push_back("rank " + std::to_string(rank));
  }
  const auto alignment = align_ranks(ranks, names);
  ASSERT_EQ(alignment.size(), 2U);
  for (const RankAlignment& a : alignment) {
    EXPECT_EQ(a.matched, 28) << "rank " << a.rank;  // 14 collectives in each of 2 steps
    // gloo's ring ends together: well under 1 % of a step apart once shifted.
    EXPECT_LT(a.residual * 100, a.step_time) << "rank " << a.rank;
  }
}

TEST_P(TraceSamples, CompareMeetsEachCollectiveOfTheSimulation) {
  const Scenario scenario = load_scenario(kSamples / (GetParam() + ".yaml"));
  const Schedule ir = lower(scenario);
  const Timeline predicted = sim::simulate(ir, sim::CostModel(scenario)).timeline;
  const Timeline measured = rank_trace(GetParam(), 0).timeline;
  const auto c = analysis::compare(predicted, measured);
  for (const auto* extra : {&c.extra_in_a, &c.extra_in_b}) {
    for (const auto& e : *extra)
      EXPECT_FALSE(collective_kind(e.kind)) << to_string(e.kind) << " " << e.count;
  }
  int matched = 0;
  for (const auto& op : c.ops) matched += collective_kind(op.kind) ? 1 : 0;
  EXPECT_EQ(matched, 28);  // the 14 collectives of each of the two steps, each met once
}

INSTANTIATE_TEST_SUITE_P(CpuGloo, TraceSamples, ::testing::Values("fsdp2", "fsdp1"));

}  // namespace
}  // namespace shardscope::traces
