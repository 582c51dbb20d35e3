#include "shardscope/traces/chrome_trace.hpp"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

namespace shardscope::traces {
namespace {

using Json = nlohmann::ordered_json;

// Trace timestamps are microseconds; keep nanosecond precision as a fraction.
double us(TimeNs ns) {
  return static_cast<double>(ns) / 1e3;
}

std::string event_name(const Timeline& t, const TimelineOp& op) {
  const std::string group =
      op.group == kNone ? std::string() : " " + t.groups[static_cast<std::size_t>(op.group)];
  return fmt::format("{}{}", to_string(op.kind), group);
}

}  // namespace

std::string chrome_trace_json(const Timeline& t) {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const Json& e) {
    out += first ? "" : ",\n";
    out += e.dump();
    first = false;
  };
  constexpr int kPid = 1;
  emit(Json{{"name", "process_name"},
            {"ph", "M"},
            {"pid", kPid},
            {"args", {{"name", fmt::format("{} ({})", t.name, t.source)}}}});
  for (std::size_t i = 0; i < t.streams.size(); ++i) {
    const auto& st = t.streams[i];
    emit(Json{{"name", "thread_name"},
              {"ph", "M"},
              {"pid", kPid},
              {"tid", i},
              {"args", {{"name", fmt::format("{} ({})", st.name, to_string(st.kind))}}}});
    emit(Json{{"name", "thread_sort_index"},
              {"ph", "M"},
              {"pid", kPid},
              {"tid", i},
              {"args", {{"sort_index", i}}}});
  }
  std::map<OpId, const TimelineOp*> by_id;  // ordered: flows are written in schedule order
  for (const auto& op : t.ops) {
    if (op.op >= 0) by_id[op.op] = &op;
    if (op.kind == OpKind::stream_wait && op.duration() == 0) continue;
    Json args{{"op", op.op},
              {"phase", to_string(op.phase)},
              {"iteration", op.iteration},
              {"microbatch", op.microbatch}};
    if (op.label != kNone) args["label"] = op_label(t, op);
    if (op.bytes > 0) args["bytes"] = op.bytes;
    if (op.comm != kNone) {
      const auto& c = t.communicators[static_cast<std::size_t>(op.comm)];
      args["communicator"] = fmt::format("{} ({} ranks, {} nodes)", c.name, c.size, c.nodes);
      if (op.duration() > 0)
        args["algbw_GBps"] = static_cast<double>(op.bytes) / static_cast<double>(op.duration());
    }
    emit(Json{{"name", event_name(t, op)},
              {"cat", to_string(op.kind)},
              {"ph", "X"},
              {"pid", kPid},
              {"tid", op.stream},
              {"ts", us(op.start)},
              {"dur", us(op.duration())},
              {"args", args}});
  }
  // Flow arrows: from the op waited on to the op that waited, across streams.
  {
    int flow = 0;
    for (const auto& [id, to] : by_id) {
      for (OpId d : to->deps) {
        const auto from_it = by_id.find(d);
        if (from_it == by_id.end()) continue;
        const TimelineOp* from = from_it->second;
        if (from->stream == to->stream) continue;
        ++flow;
        emit(Json{{"name", "wait"},
                  {"cat", "dependency"},
                  {"ph", "s"},
                  {"id", flow},
                  {"pid", kPid},
                  {"tid", from->stream},
                  {"ts", us(from->end)}});
        emit(Json{{"name", "wait"},
                  {"cat", "dependency"},
                  {"ph", "f"},
                  {"bp", "e"},
                  {"id", flow},
                  {"pid", kPid},
                  {"tid", to->stream},
                  {"ts", us(to->start)}});
      }
    }
  }
  const auto categories = all_buffer_categories();
  for (const auto& m : t.memory) {
    emit(Json{{"name", "memory"},
              {"ph", "C"},
              {"pid", kPid},
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
    emit(Json{{"name", "allocated by category"},
              {"ph", "C"},
              {"pid", kPid},
              {"ts", us(m.time)},
              {"args", cats}});
  }
  out += "\n]}\n";
  return out;
}

}  // namespace shardscope::traces
