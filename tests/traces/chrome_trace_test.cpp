// The Perfetto export read back as Perfetto's JSON importer reads it (json_trace_parser.cc and
// FlowTracker in perfetto's trace processor; the Trace Event Format document): timestamps are
// microseconds, turned into nanoseconds by rounding; a flow's "s" binds to the slice enclosing it
// on its (pid, tid) track, and so does an "f" with "bp": "e". An end on a slice's edge is
// ambiguous (which slice encloses it depends on the importer's event order), so every end must
// lie strictly inside exactly one slice, and that slice must be the right one.
#include "shardscope/traces/chrome_trace.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/timeline_test_util.hpp"
#include "shardscope/traces/kineto_import.hpp"
#include "sim/sim_test_util.hpp"

namespace shardscope::traces {
namespace {

using nlohmann::json;

std::int64_t ns(const json& us) {
  return std::llround(us.get<double>() * 1000.0);
}

struct Slice {
  int pid = 0;
  int tid = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::string cat;
  json args;
};

/// The export's slices by track and its flows by id, as the importer sees them.
struct ReadBack {
  std::map<std::pair<int, int>, std::vector<Slice>> tracks;
  std::map<std::int64_t, std::pair<json, json>> flows;  // id -> ("s" event, "f" event)
  json other;

  explicit ReadBack(const std::string& text) {
    const json doc = json::parse(text);
    other = doc.at("otherData");
    for (const json& e : doc.at("traceEvents")) {
      const std::string ph = e.at("ph");
      if (ph == "X") {
        const std::int64_t start = ns(e.at("ts"));
        tracks[{e.at("pid"), e.at("tid")}].push_back(
            {e.at("pid"), e.at("tid"), start, start + ns(e.at("dur")), e.at("cat"), e.at("args")});
      } else if (ph == "s") {
        flows[e.at("id")].first = e;
      } else if (ph == "f") {
        EXPECT_EQ(e.value("bp", ""), "e") << e;  // else Perfetto binds it to the next slice
        flows[e.at("id")].second = e;
      }
    }
  }

  /// The one slice strictly enclosing a flow event, or null.
  const Slice* enclosing(const json& e) const {
    const auto it = tracks.find({e.at("pid"), e.at("tid")});
    if (it == tracks.end()) return nullptr;
    const std::int64_t t = ns(e.at("ts"));
    const Slice* found = nullptr;
    for (const Slice& s : it->second) {
      if (s.start < t && t < s.end) {
        if (found) return nullptr;  // nested or overlapping: ambiguous
        found = &s;
      }
    }
    return found;
  }

  std::size_t slices(const std::string& cat_or_all = "") const {
    std::size_t n = 0;
    for (const auto& [key, list] : tracks) {
      for (const Slice& s : list) n += cat_or_all.empty() || s.cat == cat_or_all;
    }
    return n;
  }
};

/// A slice a flow end can sit in (2 ns from both edges survives the microsecond rounding).
bool holds_flow(const TimelineOp& op) {
  return op.duration() >= 4;
}

/// Where a flow to `to` lands: `to`, or past short slices to the next long one on its stream
/// (what a wait that did not block held). Null where nothing follows.
const TimelineOp* landing(const Timeline& t, const TimelineOp& to) {
  std::vector<const TimelineOp*> stream;
  for (const TimelineOp& op : t.ops) {
    if (op.stream == to.stream) stream.push_back(&op);
  }
  auto it = std::find(stream.begin(), stream.end(), &to);
  for (; it != stream.end(); ++it) {
    if (holds_flow(**it)) return *it;
  }
  return nullptr;
}

void expect_flows_bind_to_their_ops(const Timeline& t, const std::string& text) {
  const ReadBack back(text);
  std::map<OpId, const TimelineOp*> by_id;
  for (const TimelineOp& op : t.ops) by_id[op.op] = &op;

  // Every op is a slice, waits that did not block included, and every seen launch is one.
  const auto launches = static_cast<std::size_t>(
      std::count_if(t.ops.begin(), t.ops.end(), [](const auto& op) { return op.issue_known(); }));
  EXPECT_EQ(back.slices(), t.ops.size() + launches);
  EXPECT_EQ(back.slices("launch"), launches);

  // The flows expected: one per cross-stream dependency and one per launch, each whose target
  // lands somewhere; the others are counted.
  std::multiset<std::pair<OpId, OpId>> expected_deps;
  std::int64_t without_slice = 0;
  for (const TimelineOp& to : t.ops) {
    for (OpId d : to.deps) {
      if (!by_id.count(d) || by_id[d]->stream == to.stream) continue;
      if (const TimelineOp* land = landing(t, to)) {
        expected_deps.insert({d, land->op});
      } else {
        ++without_slice;
      }
    }
  }
  std::size_t expected_launches = 0;
  for (const TimelineOp& op : t.ops) {
    if (!op.issue_known()) continue;
    if (landing(t, op)) {
      ++expected_launches;
    } else {
      ++without_slice;
    }
  }
  EXPECT_EQ(back.other.at("flows_without_a_slice").get<std::int64_t>(), without_slice);

  std::multiset<std::pair<OpId, OpId>> found_deps;
  std::size_t launch_flows = 0;
  for (const auto& [id, ends] : back.flows) {
    const Slice* from = back.enclosing(ends.first);
    const Slice* to = back.enclosing(ends.second);
    ASSERT_NE(from, nullptr) << "flow " << id << " starts in no single slice: " << ends.first;
    ASSERT_NE(to, nullptr) << "flow " << id << " ends in no single slice: " << ends.second;
    EXPECT_EQ(from->pid, to->pid) << "flow " << id << " crosses ranks";
    const OpId from_op = from->args.at("op"), to_op = to->args.at("op");
    if (ends.first.at("cat") == "launch") {
      ++launch_flows;
      EXPECT_EQ(from->cat, "launch");
      EXPECT_EQ(to_op, landing(t, *by_id.at(from_op))->op) << "launch flow " << id;
    } else {
      found_deps.insert({from_op, to_op});
    }
  }
  EXPECT_EQ(found_deps, expected_deps);
  EXPECT_EQ(launch_flows, expected_launches);
}

TEST(ChromeTrace, EveryFlowLiesInsideTheSlicesOfTheOpsItJoins) {
  const auto run =
      testing::run_file(std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml");
  const Timeline& t = run.result.timeline;
  // The simulator sees every launch; the CPU stream alone holds two ops per iteration.
  EXPECT_TRUE(std::all_of(t.ops.begin(), t.ops.end(), [&](const TimelineOp& op) {
    return op.issue_known() !=
           (t.streams[static_cast<std::size_t>(op.stream)].kind == StreamKind::cpu);
  }));
  const std::string text = chrome_trace_json(t);
  expect_flows_bind_to_their_ops(t, text);
  EXPECT_GT(ReadBack(text).flows.size(), t.ops.size());  // every launch, and the waits
}

// An imported GPU trace: each kernel's launch call (its correlation id) becomes a launch slice
// with a flow to the kernel.
TEST(ChromeTrace, AnImportedTracesLaunchesFlowToTheirKernels) {
  const Timeline t =
      import_kineto(std::string(SHARDSCOPE_TEST_DATA_DIR) + "/traces/fsdp2_tiny.json").timeline;
  const std::string text = chrome_trace_json(t);
  expect_flows_bind_to_their_ops(t, text);
  EXPECT_EQ(ReadBack(text).slices("launch"), 9U);
}

// A hand-made rank: a wait that did not block hands its flow to the op it held; a wait with
// nothing after it has no slice to land on and is counted.
TEST(ChromeTrace, AFlowIntoAWaitThatDidNotBlockLandsOnWhatItHeld) {
  Timeline t;
  t.name = "hand";
  t.streams = {{"compute", StreamKind::compute}, {"comm", StreamKind::copy}};
  const auto op = [&](OpId id, OpKind kind, StreamId stream, TimeNs start, TimeNs end,
                      IdList deps) {
    TimelineOp o = testing::timeline_op(id, kind, stream, start, end);
    o.deps = std::move(deps);
    o.issue_start = TimeNs{id} * 10;
    o.issue_end = TimeNs{id} * 10 + 5;
    t.ops.push_back(o);
  };
  op(0, OpKind::all_gather, 1, 0, 1000, {});
  op(1, OpKind::stream_wait, 0, 1000, 1000, {0});  // did not block
  op(2, OpKind::forward, 0, 1000, 3000, {});
  op(3, OpKind::stream_wait, 1, 3000, 3000, {2});  // the comm stream's last op
  const std::string text = chrome_trace_json(t);
  expect_flows_bind_to_their_ops(t, text);
  const ReadBack back(text);
  // 0 -> 2, and the launches of 0, 1 (landing on 2) and 2; 2 -> 3 and 3's launch land nowhere.
  EXPECT_EQ(back.other.at("flows").get<std::int64_t>(), 4);
  EXPECT_EQ(back.other.at("flows_without_a_slice").get<std::int64_t>(), 2);
}

TEST(ChromeTrace, EveryRankIsAProcess) {
  const auto run =
      testing::run_file(std::string(SHARDSCOPE_EXAMPLES_DIR) + "/fsdp2-overlap-oracle.yaml");
  std::vector<Timeline> ranks(3, run.result.timeline);
  for (int r = 0; r < 3; ++r) ranks[static_cast<std::size_t>(r)].provenance.rank = r;
  const std::string text = chrome_trace_json(ranks);
  std::map<int, std::string> names;
  const json doc = json::parse(text);
  for (const json& e : doc.at("traceEvents")) {
    if (e.at("name") == "process_name") names[e.at("pid")] = e.at("args").at("name");
  }
  ASSERT_EQ(names.size(), 3U);
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(names[r + 1].starts_with(fmt::format("rank {}: ", r)));
  const ReadBack back(text);
  EXPECT_EQ(back.slices(), 3 * ReadBack(chrome_trace_json(ranks[0])).slices());
  for (const auto& [id, ends] : back.flows) EXPECT_EQ(ends.first.at("pid"), ends.second.at("pid"));
}

}  // namespace
}  // namespace shardscope::traces
