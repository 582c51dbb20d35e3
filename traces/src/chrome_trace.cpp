#include "shardscope/traces/chrome_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <vector>

namespace shardscope::traces {
namespace {

using Json = nlohmann::ordered_json;

// How far inside its slice a flow end sits: Perfetto turns microsecond timestamps into
// nanoseconds by rounding (older versions truncate), so an end 2 ns from either edge stays inside.
constexpr TimeNs kFlowMargin = 2;

// Trace timestamps are microseconds; keep nanosecond precision as a fraction.
double us(TimeNs ns) {
  return static_cast<double>(ns) / 1e3;
}

std::string event_name(const Timeline& t, const TimelineOp& op) {
  const std::string group =
      op.group == kNone ? std::string() : " " + t.groups[static_cast<std::size_t>(op.group)];
  return fmt::format("{}{}", to_string(op.kind), group);
}

/// A slice as a flow sees it: its track and its span.
struct Slice {
  int tid = 0;
  TimeNs start = 0;
  TimeNs end = 0;
  bool holds_flow() const { return end - start >= 2 * kFlowMargin; }
  TimeNs middle() const { return start + (end - start) / 2; }
};

/// The slices of one process by track, in time order, and where an op's slices are: what a
/// flow needs to find the slice it binds to.
class SliceIndex {
 public:
  /// Adds a slice; returns its handle.
  std::size_t add(const Slice& s) {
    slices_.push_back(s);
    by_track_[s.tid].push_back(slices_.size() - 1);
    return slices_.size() - 1;
  }

  /// Orders each track by start time (call once, after every add).
  void sort() {
    for (auto& [tid, list] : by_track_) {
      std::stable_sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
        return slices_[a].start < slices_[b].start;
      });
      for (std::size_t i = 0; i < list.size(); ++i) position_[list[i]] = i;
    }
  }

  /// The slice a flow ending at `handle` binds to: itself, or the next on its track that can
  /// hold a flow end (what a wait that did not block held).
  std::optional<Slice> flow_in(std::size_t handle) const { return walk(handle, +1); }

  /// The slice a flow leaving `handle` binds to: itself, or the previous on its track.
  std::optional<Slice> flow_out(std::size_t handle) const { return walk(handle, -1); }

 private:
  std::optional<Slice> walk(std::size_t handle, int step) const {
    const auto& list = by_track_.at(slices_[handle].tid);
    for (auto i = static_cast<std::ptrdiff_t>(position_.at(handle));
         i >= 0 && i < static_cast<std::ptrdiff_t>(list.size()); i += step) {
      const Slice& s = slices_[list[static_cast<std::size_t>(i)]];
      if (s.holds_flow()) return s;
    }
    return std::nullopt;
  }

  std::vector<Slice> slices_;
  std::map<int, std::vector<std::size_t>> by_track_;
  std::unordered_map<std::size_t, std::size_t> position_;
};

/// The trace file, one event per line, and the flows written so far.
class TraceWriter {
 public:
  TraceWriter() : out_("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n") {}

  void event(const Json& e) {
    out_ += first_ ? "" : ",\n";
    out_ += e.dump();
    first_ = false;
  }

  /// A flow arrow from `from` to `to` (both in process `pid`), or a count of one left out.
  void flow(int pid, const char* category, std::optional<Slice> from, std::optional<Slice> to) {
    if (!from || !to) {
      ++unbound_;
      return;
    }
    ++flows_;
    const auto end = [&](const char* ph, const Slice& s) {
      Json e{{"name", category}, {"cat", category},     {"ph", ph}, {"id", flows_}, {"pid", pid},
             {"tid", s.tid},     {"ts", us(s.middle())}};
      if (ph[0] == 'f') e["bp"] = "e";  // bind to the enclosing slice, not the next one
      event(e);
    };
    end("s", *from);
    end("f", *to);
  }

  std::string finish() {
    out_ += "\n],\"otherData\":";
    out_ += Json{{"producer", fmt::format("shardscope {}", shardscope_version())},
                 {"flows", flows_},
                 {"flows_without_a_slice", unbound_}}
                .dump();
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  std::string out_;
  bool first_ = true;
  std::int64_t flows_ = 0;
  std::int64_t unbound_ = 0;
};

Json op_args(const Timeline& t, const TimelineOp& op) {
  Json args{{"op", op.op},
            {"phase", to_string(op.phase)},
            {"iteration", op.iteration},
            {"microbatch", op.microbatch}};
  if (op.label != kNone) args["label"] = op_label(t, op);
  if (op.bytes > 0) args["bytes"] = op.bytes;
  if (!op.deps.empty()) args["waits_for_ops"] = std::vector<OpId>(op.deps.begin(), op.deps.end());
  if (op.comm != kNone) {
    const auto& c = t.communicators[static_cast<std::size_t>(op.comm)];
    args["communicator"] = fmt::format("{} ({} ranks, {} nodes)", c.name, c.size, c.nodes);
    if (op.duration() > 0)
      args["algbw_GBps"] = static_cast<double>(op.bytes) / static_cast<double>(op.duration());
  }
  return args;
}

void track_name(TraceWriter& w, int pid, int tid, const std::string& name) {
  w.event(Json{{"name", "thread_name"},
               {"ph", "M"},
               {"pid", pid},
               {"tid", tid},
               {"args", {{"name", name}}}});
  w.event(Json{{"name", "thread_sort_index"},
               {"ph", "M"},
               {"pid", pid},
               {"tid", tid},
               {"args", {{"sort_index", tid}}}});
}

/// The launch calls, on as few tracks as keep them from overlapping (one, unless several CPU
/// threads launched at once): the lane of each op's launch, -1 where none was seen.
std::vector<int> launch_lanes(const Timeline& t, int& lanes) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    if (t.ops[i].issue_known()) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return t.ops[a].issue_start < t.ops[b].issue_start;
  });
  std::vector<int> lane(t.ops.size(), -1);
  std::vector<TimeNs> lane_end;
  for (std::size_t i : order) {
    const TimelineOp& op = t.ops[i];
    std::size_t l = 0;
    while (l < lane_end.size() && lane_end[l] > op.issue_start) ++l;
    if (l == lane_end.size()) lane_end.push_back(0);
    lane_end[l] = op.issue_end;
    lane[i] = static_cast<int>(l);
  }
  lanes = static_cast<int>(lane_end.size());
  return lane;
}

void memory_counters(TraceWriter& w, const Timeline& t, int pid) {
  const auto categories = all_buffer_categories();
  for (const auto& m : t.memory) {
    w.event(Json{{"name", "memory"},
                 {"ph", "C"},
                 {"pid", pid},
                 {"ts", us(m.time)},
                 {"args",
                  {{"allocated_GiB", static_cast<double>(m.allocated) / kGiB},
                   {"reserved_GiB", static_cast<double>(m.reserved) / kGiB}}}});
    Json cats = Json::object();
    for (std::size_t c = 0; c < categories.size() && c < m.by_category.size(); ++c) {
      if (m.by_category[c] != 0)
        cats[std::string(to_string(categories[c])) + "_GiB"] =
            static_cast<double>(m.by_category[c]) / kGiB;
    }
    w.event(Json{{"name", "allocated by category"},
                 {"ph", "C"},
                 {"pid", pid},
                 {"ts", us(m.time)},
                 {"args", cats}});
  }
}

void write_rank(TraceWriter& w, const Timeline& t, int pid) {
  w.event(Json{
      {"name", "process_name"},
      {"ph", "M"},
      {"pid", pid},
      {"args", {{"name", fmt::format("rank {}: {} ({})", t.provenance.rank, t.name, t.source)}}}});
  w.event(Json{
      {"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
  const int streams = static_cast<int>(t.streams.size());
  for (int i = 0; i < streams; ++i) {
    const auto& st = t.streams[static_cast<std::size_t>(i)];
    track_name(w, pid, i, fmt::format("{} ({})", st.name, to_string(st.kind)));
  }
  int lanes = 0;
  const std::vector<int> lane = launch_lanes(t, lanes);
  for (int l = 0; l < lanes; ++l)
    track_name(
        w, pid, streams + l,
        l == 0 ? std::string("CPU: launch calls") : fmt::format("CPU: launch calls ({})", l + 1));

  SliceIndex slices;
  std::vector<std::size_t> op_slice(t.ops.size()), launch_slice(t.ops.size());
  // Schedule op id -> index in t.ops, ordered: flows are written in schedule order.
  std::map<OpId, std::size_t> by_id;
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const TimelineOp& op = t.ops[i];
    if (op.op >= 0) by_id[op.op] = i;
    const std::string name = event_name(t, op);
    w.event(Json{{"name", name},
                 {"cat", to_string(op.kind)},
                 {"ph", "X"},
                 {"pid", pid},
                 {"tid", op.stream},
                 {"ts", us(op.start)},
                 {"dur", us(op.duration())},
                 {"args", op_args(t, op)}});
    op_slice[i] = slices.add({op.stream, op.start, op.end});
    if (lane[i] < 0) continue;
    w.event(Json{{"name", "launch " + name},
                 {"cat", "launch"},
                 {"ph", "X"},
                 {"pid", pid},
                 {"tid", streams + lane[i]},
                 {"ts", us(op.issue_start)},
                 {"dur", us(op.issue_end - op.issue_start)},
                 {"args", {{"op", op.op}}}});
    launch_slice[i] = slices.add({streams + lane[i], op.issue_start, op.issue_end});
  }
  slices.sort();

  // Cross-stream dependencies in schedule order, then each launch to the op it issued.
  for (const auto& [id, to] : by_id) {
    for (OpId d : t.ops[to].deps) {
      const auto from = by_id.find(d);
      if (from == by_id.end() || t.ops[from->second].stream == t.ops[to].stream) continue;
      w.flow(pid, "dependency", slices.flow_out(op_slice[from->second]),
             slices.flow_in(op_slice[to]));
    }
  }
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    if (lane[i] >= 0)
      w.flow(pid, "launch", slices.flow_out(launch_slice[i]), slices.flow_in(op_slice[i]));
  }
  memory_counters(w, t, pid);
}

}  // namespace

std::string chrome_trace_json(std::span<const Timeline> ranks) {
  TraceWriter w;
  for (std::size_t r = 0; r < ranks.size(); ++r) write_rank(w, ranks[r], static_cast<int>(r) + 1);
  return w.finish();
}

std::string chrome_trace_json(const Timeline& timeline) {
  return chrome_trace_json(std::span<const Timeline>(&timeline, 1));
}

}  // namespace shardscope::traces
