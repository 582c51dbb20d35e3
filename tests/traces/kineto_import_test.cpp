// Kineto trace import: a hand-written FSDP2 trace exercising every mapping rule (docs/traces.md),
// gzip and plain alike, bad input refused with the file named, and the real traces beside the
// reference (skipped where a clone does not have them).
#include "shardscope/traces/kineto_import.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "shardscope/core/error.hpp"

namespace shardscope::traces {
namespace {

const std::string kTiny = std::string(SHARDSCOPE_TEST_DATA_DIR) + "/traces/fsdp2_tiny.json";

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<const TimelineOp*> of_kind(const Timeline& t, OpKind kind) {
  std::vector<const TimelineOp*> out;
  for (const auto& op : t.ops) {
    if (op.kind == kind) out.push_back(&op);
  }
  return out;
}

std::string group_of(const Timeline& t, const TimelineOp& op) {
  return op.group == kNone ? "-" : t.groups[static_cast<std::size_t>(op.group)];
}

TEST(KinetoImport, MapsEveryKindOfWork) {
  const auto [t, report] = import_kineto(kTiny);
  EXPECT_EQ(t.source, "imported");
  EXPECT_EQ(t.provenance.backend, "kineto");
  EXPECT_EQ(t.provenance.device, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t.memory_capacity, 85'029'158'912);
  EXPECT_EQ(t.facts.world_size, 8);
  EXPECT_EQ(t.facts.iterations, 2);
  ASSERT_EQ(t.ops.size(), 11U);
  const std::map<std::string, std::int64_t> expected{
      {"h2d", 1},           {"other", 2},    {"copy_in", 1},        {"all_gather", 1},
      {"forward", 2},       {"backward", 1}, {"reduce_copy_in", 1}, {"reduce_scatter", 1},
      {"optimizer_step", 1}};
  EXPECT_EQ(report.ops_by_kind, expected);
  EXPECT_EQ(report.gpu_ops_without_launch, 2);  // the memset and the kernel with no correlation
  EXPECT_EQ(report.unrecognised.size(), 2U);
  EXPECT_EQ(report.iterations, 2);
  EXPECT_EQ(report.fsdp_ranges.size(), 5U);
  EXPECT_EQ(report.fsdp_ranges.at("FSDP::pre_forward"), 1);
  // The input copy in FSDP2's root_pre_forward is the root's: the root's ranges name no module.
  ASSERT_EQ(t.groups, (std::vector<std::string>{"root", "layers.0"}));
  EXPECT_TRUE(report.unmapped_fsdp_ranges.empty());
  EXPECT_FALSE(report.cpu_device);
}

TEST(KinetoImport, CollectivesCarryBytesCommunicatorsAndGroups) {
  const auto t = import_kineto(kTiny).timeline;
  const auto ag = of_kind(t, OpKind::all_gather), rs = of_kind(t, OpKind::reduce_scatter);
  ASSERT_EQ(ag.size(), 1U);
  ASSERT_EQ(rs.size(), 1U);
  // All-gather: the gathered output, 8,000 bf16 elements; reduce-scatter: its 8,000-element
  // input (the old ncclKernel_ name, no "Collective name" arg).
  EXPECT_EQ(ag[0]->bytes, 16'000);
  EXPECT_EQ(rs[0]->bytes, 16'000);
  EXPECT_EQ(group_of(t, *ag[0]), "layers.0");
  EXPECT_EQ(group_of(t, *rs[0]), "layers.0");
  EXPECT_EQ(rs[0]->phase, Phase::backward);
  ASSERT_EQ(t.communicators.size(), 2U);
  EXPECT_EQ(t.communicators[static_cast<std::size_t>(ag[0]->comm)].name, "0");
  EXPECT_EQ(t.communicators[static_cast<std::size_t>(ag[0]->comm)].size, 8);
  EXPECT_EQ(t.communicators[static_cast<std::size_t>(rs[0]->comm)].name, "group of 8");
  EXPECT_EQ(t.streams[static_cast<std::size_t>(ag[0]->stream)].kind, StreamKind::communication);
  // Microseconds to nanoseconds, relative to the first step.
  EXPECT_EQ(ag[0]->start, 30'000);
  EXPECT_EQ(ag[0]->end, 80'000);
}

TEST(KinetoImport, PhasesGroupsAndIterationsFollowTheLaunch) {
  const auto t = import_kineto(kTiny).timeline;
  const auto fwd = of_kind(t, OpKind::forward);
  ASSERT_EQ(fwd.size(), 2U);
  EXPECT_EQ(group_of(t, *fwd[0]), "layers.0");  // after layers.0's pre-forward hook
  EXPECT_EQ(fwd[0]->iteration, 0);
  EXPECT_EQ(fwd[1]->iteration, 1);       // launched inside ProfilerStep#6
  EXPECT_EQ(group_of(t, *fwd[1]), "-");  // no hook of its own step names it
  const auto bwd = of_kind(t, OpKind::backward);
  ASSERT_EQ(bwd.size(), 1U);
  EXPECT_EQ(bwd[0]->phase, Phase::backward);  // autograd's thread
  EXPECT_EQ(group_of(t, *bwd[0]), "layers.0");
  const auto copy_in = of_kind(t, OpKind::copy_in);
  ASSERT_EQ(copy_in.size(), 1U);
  EXPECT_EQ(group_of(t, *copy_in[0]), "layers.0");
  const auto step = of_kind(t, OpKind::optimizer_step);
  ASSERT_EQ(step.size(), 1U);
  EXPECT_EQ(step[0]->phase, Phase::optimizer);
  EXPECT_EQ(step[0]->group, kNone);
  EXPECT_EQ(of_kind(t, OpKind::h2d).at(0)->bytes, 4096);
  EXPECT_TRUE(std::is_sorted(t.ops.begin(), t.ops.end(),
                             [](const auto& a, const auto& b) { return a.start < b.start; }));
}

TEST(KinetoImport, MemoryEventsBecomeSamplesAndPeaks) {
  const auto t = import_kineto(kTiny).timeline;
  ASSERT_EQ(t.memory.size(), 2U);  // the host-memory event is not the GPU's
  EXPECT_EQ(t.memory[0].time, 15'000);
  EXPECT_EQ(t.peaks.allocated.bytes, 5000);
  EXPECT_EQ(t.peaks.reserved.bytes, 8 * kMiB);
}

TEST(KinetoImport, GzipAndPlainImportAlike) {
  const std::string text = read(kTiny);
  const auto gz = std::filesystem::temp_directory_path() / "shardscope_fsdp2_tiny.json.gz";
  gzFile f = gzopen(gz.string().c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  gzclose(f);
  EXPECT_TRUE(looks_like_kineto_trace(gz));
  EXPECT_TRUE(looks_like_kineto_trace(kTiny));
  const auto a = import_kineto(kTiny).timeline, b = import_kineto(gz).timeline;
  auto c = import_kineto_text(text, "memory").timeline;
  c.name = a.name;  // only the origin differs
  c.provenance.scenario = a.provenance.scenario;
  EXPECT_EQ(timeline_to_json(a), timeline_to_json(c));
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    EXPECT_EQ(a.ops[i].start, b.ops[i].start);
    EXPECT_EQ(a.ops[i].kind, b.ops[i].kind);
  }
  std::filesystem::remove(gz);
}

TEST(KinetoImport, HostOverheadsAreTheLaunchCallsAndTheHooksLessTheirLaunches) {
  const auto t = import_kineto(kTiny).timeline;
  // Eight cudaLaunchKernel calls of 1 us (cudaMemcpyAsync is not a launch).
  EXPECT_EQ(t.host.launch, std::vector<TimeNs>(8, 1'000));
  // FSDP::pre_forward (layers.0), 20 us with two launches in it; pre_backward, 5 us with none;
  // post_backward_reduce, 20 us with two. root_pre_forward and all_gather are not hooks.
  EXPECT_EQ(t.host.fsdp_hook, (std::vector<TimeNs>{18'000, 5'000, 18'000}));
}

TEST(KinetoImport, TheTimelineRoundTripsThroughItsJson) {
  const auto t = import_kineto(kTiny).timeline;
  const std::string text = timeline_to_json(t);
  EXPECT_EQ(timeline_to_json(timeline_from_json(text, "round trip")), text);
}

TEST(KinetoImport, BadInputIsRefusedWithTheFileNamed) {
  for (const char* bad : {"not json", "[1, 2]", R"({"schemaVersion": 1})", R"({"traceEvents": 3})",
                          R"({"traceEvents": [)", ""}) {
    try {
      (void)import_kineto_text(bad, "bad.json");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const ValidationError& e) {
      EXPECT_EQ(e.problems().at(0).file, "bad.json") << bad;
    }
  }
  EXPECT_THROW((void)import_kineto("/nonexistent/trace.json"), ValidationError);
  // Malformed events are counted, not fatal.
  const auto ok = import_kineto_text(
      R"({"traceEvents": [1, "x", {"ph": "X"}, {"ph": "X", "cat": "kernel", "ts": "soon"}]})",
      "ok");
  EXPECT_EQ(ok.report.events, 4);
  EXPECT_TRUE(ok.timeline.ops.empty());
}

// Every numeric field has a physical range. An event with a field out of it (a time of 1e300 µs,
// a negative duration, a size beyond 1 PiB, a group of no ranks) is skipped and counted under the
// field; a key fact out of range (the rank, the world size, the GPU's memory) refuses the trace,
// naming it; events further apart than any profiled window refuse it too. Each once overflowed
// TimeNs or was taken as given (fuzz_kineto_import, and hostile-input cases of issue 32).
TEST(KinetoImport, MalformedFieldsAreCountedAndSkippedKeyFactsRefused) {
  const auto kernel = [](const std::string& fields) {
    return R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, )" + fields + "}";
  };
  const auto nccl = [](const std::string& args) {
    return R"({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "ts": 5,
               "dur": 1, "args": {"dtype": "Float", )" +
           args + "}}";
  };
  const std::string events =
      kernel(R"("ts": 0, "dur": 2)") + ",\n" + kernel(R"("ts": 1e300, "dur": 2)") + ",\n" +
      kernel(R"("ts": 10, "dur": -3)") + ",\n" + kernel(R"("ts": 10, "dur": "long")") + ",\n" +
      kernel(R"("ts": NaN)") + ",\n" +
      nccl(R"("In msg nelems": 4, "Out msg nelems": 8, "Group size": 2)") + ",\n" +
      nccl(R"("In msg nelems": -4, "Out msg nelems": 8, "Group size": 2)") + ",\n" +
      nccl(R"("In msg nelems": 4, "Out msg nelems": 1e30, "Group size": 2)") + ",\n" +
      nccl(R"("In msg nelems": 4, "Out msg nelems": 8, "Group size": 0)") + ",\n" +
      R"({"ph": "i", "name": "[memory]", "ts": 3, "args": {"Total Allocated": -1}})" + ",\n" +
      R"({"ph": "i", "name": "[memory]", "ts": 4, "args": {"Total Allocated": 1024}})";
  // NaN is not JSON: the trace is refused as such, so it is left out of the counted set.
  std::string valid = events;
  valid.replace(valid.find(kernel(R"("ts": NaN)") + ",\n"), kernel(R"("ts": NaN)").size() + 2, "");
  const auto imported = import_kineto_text(R"({"traceEvents": [)" + valid + "]}", "t.json");
  EXPECT_EQ(imported.timeline.ops.size(), 2U);  // the good kernel and the good all-gather
  EXPECT_EQ(imported.timeline.memory.size(), 1U);
  const std::map<std::string, std::int64_t> expected{{"ts", 1},
                                                     {"dur", 2},
                                                     {"In msg nelems", 1},
                                                     {"Out msg nelems", 1},
                                                     {"Group size", 1},
                                                     {"Total Allocated", 1}};
  EXPECT_EQ(imported.report.malformed, expected);
  EXPECT_NE(import_report_text(imported.report).find("7 skipped (by field: "), std::string::npos)
      << import_report_text(imported.report);

  const auto problem_of = [](const std::string& text) {
    try {
      (void)import_kineto_text(text, "t.json");
    } catch (const ValidationError& e) {
      const auto& p = e.problems().at(0);
      return p.file + " " + p.key + " " + p.message + " (" + p.allowed + ")";
    }
    return std::string("accepted");
  };
  EXPECT_EQ(problem_of(R"({"traceEvents": [], "distributedInfo": {"rank": 8, "world_size": 8}})"),
            "t.json distributedInfo.rank is 8 (a whole number from 0 to 7)");
  EXPECT_EQ(problem_of(R"({"traceEvents": [], "distributedInfo": {"rank": 0, "world_size": -8}})"),
            "t.json distributedInfo.world_size is -8 (a whole number from 1 to 16777216)");
  EXPECT_EQ(problem_of(R"({"traceEvents": [], "distributedInfo": {"rank": 1099511627776}})"),
            "t.json distributedInfo.rank is 1099511627776 (a whole number from 0 to 16777215)");
  EXPECT_EQ(problem_of(R"({"traceEvents": [], "deviceProperties": [{"totalGlobalMem": -1}]})"),
            "t.json deviceProperties[0].totalGlobalMem is -1 (a whole number from 1 to "
            "1125899906842624)");
  // Two kernels 20 days apart: each time is fine, the window is not.
  const std::string far_apart = problem_of(
      R"({"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 0, "dur": 1},
                          {"ph": "X", "cat": "kernel", "ts": 1.728e12, "dur": 1}]})");
  EXPECT_TRUE(far_apart.starts_with("t.json traceEvents spans ")) << far_apart;
}

// Real (non-FSDP) traces of four Kineto vintages (tests/data/traces/hta/README.md): each imports,
// every event is counted, and GPU work is recognised.
TEST(KinetoImport, RealTracesOfSeveralVintagesImport) {
  const std::filesystem::path dir = std::string(SHARDSCOPE_TEST_DATA_DIR) + "/traces/hta";
  int imported = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".json") == std::string::npos) continue;
    SCOPED_TRACE(name);
    const auto [t, report] = import_kineto(entry.path());
    EXPECT_GT(report.events, 0);
    EXPECT_FALSE(t.ops.empty());
    std::int64_t kernels = 0;
    for (const auto& [kind, n] : report.ops_by_kind) kernels += n;
    EXPECT_EQ(kernels, static_cast<std::int64_t>(t.ops.size()));
    EXPECT_FALSE(import_report_text(report).empty());
    ++imported;
  }
  EXPECT_EQ(imported, 4);
}

}  // namespace
}  // namespace shardscope::traces
