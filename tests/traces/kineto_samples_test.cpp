// The real traces under traces/samples/ (make_samples.py: FSDP2 and FSDP1 training a tiny Llama
// on the CPU over gloo, two ranks, profiled by torch.profiler; FSDP2 again generating before each
// step): every FSDP range is attributed to a group, the collectives those PyTorch runs issued are
// the ones shardscope lowers for the same scenario, in the same phases (a generate's forwards
// imported as the generation phase), the two ranks align by them, and compare meets each of the
// simulation's.
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

ImportedTrace rank_trace(const std::string& sample, int rank) {
  return import_kineto(kSamples / (sample + "_rank" + std::to_string(rank) + ".json.gz"));
}

bool generates(const std::string& sample) {
  return sample == "fsdp2_generate";
}

// The collectives of one step: a training step's 5 forward and 4 backward all-gathers (the root
// stays gathered) and 5 reduce-scatters; generating, 13 more all-gathers: the root's once, each
// block's in each of the 3 forwards (prefill and two decode steps).
std::size_t all_gathers_per_step(const std::string& sample) {
  return generates(sample) ? 22 : 9;
}
std::size_t collectives_per_step(const std::string& sample) {
  return all_gathers_per_step(sample) + 5;
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
    // Only the generating run has root forwards that no backward follows.
    EXPECT_EQ(report.no_grad_forwards > 0, generates(GetParam())) << report.no_grad_forwards;
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
    EXPECT_EQ(collectives(t, t.last_iteration(), OpKind::all_gather).size(),
              all_gathers_per_step(GetParam()));
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
    EXPECT_EQ(a.matched, 2 * static_cast<int>(collectives_per_step(GetParam())))
        << "rank " << a.rank;  // each of the 2 steps' collectives
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
  // The collectives of each of the two steps, each met once.
  EXPECT_EQ(matched, 2 * static_cast<int>(collectives_per_step(GetParam())));
}

INSTANTIATE_TEST_SUITE_P(CpuGloo, TraceSamples,
                         ::testing::Values("fsdp2", "fsdp1", "fsdp2_generate"));

}  // namespace
}  // namespace shardscope::traces
