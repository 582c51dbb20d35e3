// Aligning several ranks' traces of one run by their collectives.
#include "shardscope/traces/rank_alignment.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "shardscope/core/error.hpp"
#include "shardscope/traces/kineto_import.hpp"

namespace shardscope::traces {
namespace {

std::string tiny_trace() {
  std::ifstream in(std::string(SHARDSCOPE_TEST_DATA_DIR) + "/traces/fsdp2_tiny.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

// Rank 1's trace: the same run, but its first event is a memset 50 µs before rank 0's first
// event, so the importer starts its clock 50 µs earlier; and its all-gather kernel ends 2 µs
// later (a rank that waited for a slow peer shows that).
std::string rank_one() {
  std::string t = replaced(tiny_trace(), "\"rank\": 0", "\"rank\": 1");
  t = replaced(t, "\"traceEvents\": [",
               "\"traceEvents\": [\n    {\"ph\": \"X\", \"cat\": \"gpu_memset\", \"name\": "
               "\"Memset (Device)\", \"pid\": 0, \"tid\": 7, \"ts\": -50, \"dur\": 1, \"args\": "
               "{\"device\": 0, \"stream\": 7, \"bytes\": 64}},");
  return replaced(t, "\"ts\": 30, \"dur\": 50", "\"ts\": 30, \"dur\": 52");
}

TEST(RankAlignment, CollectivesEndTogetherAfterTheShift) {
  std::vector<Timeline> ranks{import_kineto_text(rank_one(), "rank1.json").timeline,
                              import_kineto_text(tiny_trace(), "rank0.json").timeline};
  const auto alignment = align_ranks(ranks, {"rank1.json", "rank0.json"});
  ASSERT_EQ(alignment.size(), 2U);
  EXPECT_EQ(alignment[0].rank, 0);  // by rank, the lowest the reference
  EXPECT_EQ(alignment[1].rank, 1);
  // Two collectives matched: the reduce-scatter says −50 µs, the all-gather −52 µs; the median of
  // two is the larger. Then all move by +50 µs so rank 1's memset starts at 0.
  EXPECT_EQ(alignment[1].matched, 2);
  EXPECT_EQ(alignment[1].offset, 0);
  EXPECT_EQ(alignment[0].offset, 50 * kNsPerUs);
  EXPECT_EQ(alignment[1].residual, 2 * kNsPerUs);  // |Δ| of {2 µs, 0}: the upper median
  const auto end_of = [](const Timeline& t, OpKind kind) {
    for (const auto& op : t.ops) {
      if (op.kind == kind) return op.end;
    }
    return TimeNs{-1};
  };
  EXPECT_EQ(end_of(ranks[0], OpKind::reduce_scatter), end_of(ranks[1], OpKind::reduce_scatter));
  TimeNs earliest = ranks[0].ops.front().start;
  for (const auto& t : ranks) earliest = std::min(earliest, t.ops.front().start);
  EXPECT_EQ(earliest, 0);
  EXPECT_NE(alignment_report(alignment).find("rank"), std::string::npos);
}

TEST(RankAlignment, RefusesTwoTracesOfOneRankAndRanksWithNothingInCommon) {
  std::vector<Timeline> twice{import_kineto_text(tiny_trace(), "a.json").timeline,
                              import_kineto_text(tiny_trace(), "b.json").timeline};
  EXPECT_THROW(align_ranks(twice, {"a.json", "b.json"}), ValidationError);
  Timeline empty = twice[0];
  empty.provenance.rank = 3;
  empty.ops.clear();
  std::vector<Timeline> apart{twice[0], empty};
  EXPECT_THROW(align_ranks(apart, {"a.json", "c.json"}), ValidationError);
}

// Rank 1 of a world of 4 beside rank 0 of 8: two runs, refused with both worlds named.
TEST(RankAlignment, RefusesTracesOfDifferentWorlds) {
  const std::string other_world = replaced(rank_one(), "\"world_size\": 8", "\"world_size\": 4");
  std::vector<Timeline> ranks{import_kineto_text(tiny_trace(), "r0.json").timeline,
                              import_kineto_text(other_world, "r1.json").timeline};
  try {
    (void)align_ranks(ranks, {"r0.json", "r1.json"});
    ADD_FAILURE() << "aligned ranks of two worlds";
  } catch (const ValidationError& e) {
    const auto& p = e.problems().at(0);
    EXPECT_EQ(p.file, "r1.json");
    EXPECT_EQ(p.key, "distributedInfo.world_size");
    EXPECT_EQ(p.message, "is 4 ranks, where r0.json says 8: traces of two different runs");
  }
}

TEST(RankAlignment, RefusesTracesOfDifferentGpus) {
  const std::string other_gpu =
      replaced(rank_one(), "\"name\": \"NVIDIA H100 80GB HBM3\"", "\"name\": \"NVIDIA A100\"");
  std::vector<Timeline> ranks{import_kineto_text(tiny_trace(), "r0.json").timeline,
                              import_kineto_text(other_gpu, "r1.json").timeline};
  try {
    (void)align_ranks(ranks, {"r0.json", "r1.json"});
    ADD_FAILURE() << "aligned ranks of two GPU kinds";
  } catch (const ValidationError& e) {
    const auto& p = e.problems().at(0);
    EXPECT_EQ(p.key, "deviceProperties[0].name");
    EXPECT_EQ(p.message,
              "is 'NVIDIA A100', where r0.json says 'NVIDIA H100 80GB HBM3': traces of two "
              "different runs");
  }
}

TEST(KinetoImport, AGpuRunsTraceWithNoGpuEventIsRefused) {
  // The profiler given only ProfilerActivity.CPU: the CPU ranges are no step time.
  std::string t = tiny_trace();
  for (const char* cat :
       {"\"cat\": \"kernel\"", "\"cat\": \"gpu_memcpy\"", "\"cat\": \"gpu_memset\""}) {
    for (auto at = t.find(cat); at != std::string::npos; at = t.find(cat))
      t.replace(at, std::string(cat).size(), "\"cat\": \"cpu_op\"");
  }
  try {
    (void)import_kineto_text(t, "cpu-only.json");
    ADD_FAILURE() << "imported a GPU run's trace without its GPU work";
  } catch (const ValidationError& e) {
    EXPECT_EQ(e.problems().at(0).key, "traceEvents");
    EXPECT_NE(e.problems().at(0).message.find("has no GPU event"), std::string::npos);
  }
  // A gloo run on the CPU of a GPU machine lists the GPUs too: it is the CPU run it is.
  std::string gloo = replaced(t, "\"backend\": \"nccl\"", "\"backend\": \"gloo\"");
  for (auto at = gloo.find("\"cuda_runtime\""); at != std::string::npos;
       at = gloo.find("\"cuda_runtime\""))
    gloo.replace(at, std::string("\"cuda_runtime\"").size(), "\"cpu_op\"");
  EXPECT_NO_THROW((void)import_kineto_text(gloo, "gloo.json"));
}

}  // namespace
}  // namespace shardscope::traces
