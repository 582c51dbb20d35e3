#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "json_lines.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/json_field.hpp"
#include "shardscope/core/timeline.hpp"

namespace shardscope {

TimeNs Timeline::end_time() const {
  TimeNs end = 0;
  for (const auto& op : ops) end = std::max(end, op.end);
  if (!memory.empty()) end = std::max(end, memory.back().time);
  return end;
}

namespace {
using Json = nlohmann::ordered_json;

}  // namespace

std::string timeline_to_json(const Timeline& t) {
  std::string out = "{\n";
  out += fmt::format("  \"schema\": {},\n", Json(kTimelineSchema).dump());
  out += fmt::format("  \"name\": {},\n", Json(t.name).dump());
  out += fmt::format("  \"source\": {},\n", Json(t.source).dump());
  out += fmt::format("  \"memory_capacity\": {},\n", t.memory_capacity);
  Json metrics = Json::object();
  for (const auto& [k, v] : t.metrics) metrics[k] = v;
  out += fmt::format("  \"metrics\": {},\n", metrics.dump());
  Json categories = Json::array();
  for (auto c : all_buffer_categories()) categories.push_back(to_string(c));
  out += fmt::format("  \"categories\": {},\n", categories.dump());
  detail::emit_json_array(out, "streams", t.streams, detail::stream_json, false);
  detail::emit_json_array(
      out, "groups", t.groups, [](const std::string& g, std::size_t) { return Json(g); }, false);
  detail::emit_json_array(out, "communicators", t.communicators, detail::communicator_json, false);
  detail::emit_json_array(
      out, "ops", t.ops,
      [](const TimelineOp& o, std::size_t) {
        Json j;
        j["op"] = o.op;
        detail::put_op_placement(j, o);
        j["start_ns"] = o.start;
        j["end_ns"] = o.end;
        return j;
      },
      false);
  detail::emit_json_array(
      out, "memory", t.memory,
      [](const MemorySample& m, std::size_t) {
        Json j;
        j["time_ns"] = m.time;
        j["allocated"] = m.allocated;
        j["reserved"] = m.reserved;
        j["by_category"] = m.by_category;
        return j;
      },
      true);
  out += "}\n";
  return out;
}

Timeline timeline_from_json(std::string_view text, const std::string& origin) {
  const nlohmann::json root = detail::parse_json(text, origin);
  std::vector<Problem> problems;
  auto problem = [&](std::string key, std::string message, std::string allowed = {}) {
    problems.push_back({origin, std::move(key), std::move(message), std::move(allowed)});
  };
  if (json_schema(root) != kTimelineSchema) {
    throw ValidationError(
        {Problem{origin, "schema", "not a shardscope timeline", std::string(kTimelineSchema)}});
  }
  Timeline t;
  // Typed access with a problem per bad field; nlohmann's exceptions name the field for us.
  auto guarded = [&](const std::string& key, auto&& read) {
    try {
      read();
    } catch (const nlohmann::json::exception& e) {
      problem(key, fmt::format("malformed: {}", e.what()));
    }
  };
  guarded("name", [&] { t.name = root.at("name").get<std::string>(); });
  guarded("source", [&] { t.source = root.at("source").get<std::string>(); });
  guarded("memory_capacity",
          [&] { t.memory_capacity = json_integer<Bytes>(root.at("memory_capacity")); });
  guarded("metrics", [&] {
    for (const auto& [k, v] : root.at("metrics").items()) t.metrics[k] = v.get<double>();
  });
  guarded("streams", [&] {
    for (const auto& s : root.at("streams")) {
      auto kind = parse_stream_kind(s.at("kind").get<std::string>());
      if (!kind) problem("streams", "unknown stream kind", "cpu, compute, communication, copy");
      t.streams.push_back({s.at("name").get<std::string>(), kind.value_or(StreamKind::compute)});
    }
  });
  guarded("groups", [&] {
    for (const auto& g : root.at("groups")) t.groups.push_back(g.get<std::string>());
  });
  guarded("communicators", [&] {
    for (const auto& c : root.at("communicators")) {
      t.communicators.push_back({c.at("name").get<std::string>(), json_integer<int>(c.at("size")),
                                 json_integer<int>(c.at("nodes"))});
    }
  });
  const auto& ops = root.contains("ops") ? root["ops"] : nlohmann::json::array();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    guarded(fmt::format("ops[{}]", i), [&] {
      const auto& j = ops[i];
      TimelineOp o;
      o.op = json_integer<OpId>(j.at("op"));
      auto kind = parse_op_kind(j.at("kind").get<std::string>());
      auto phase = parse_phase(j.at("phase").get<std::string>());
      if (!kind || !phase) problem(fmt::format("ops[{}]", i), "unknown kind or phase");
      o.kind = kind.value_or(OpKind::forward);
      o.phase = phase.value_or(Phase::forward);
      o.stream = json_integer<StreamId>(j.at("stream"));
      o.group = json_integer<GroupId>(j.at("group"));
      o.iteration = json_integer<int>(j.at("iteration"));
      o.microbatch = json_integer<int>(j.at("microbatch"));
      o.comm = json_integer<CommId>(j.at("comm"));
      o.bytes = json_integer<Bytes>(j.at("bytes"));
      o.start = json_integer<TimeNs>(j.at("start_ns"));
      o.end = json_integer<TimeNs>(j.at("end_ns"));
      if (o.end < o.start) problem(fmt::format("ops[{}]", i), "ends before it starts");
      if (o.stream < 0 || static_cast<std::size_t>(o.stream) >= t.streams.size()) {
        problem(fmt::format("ops[{}].stream", i),
                fmt::format("stream {} does not exist", o.stream));
      }
      // Ids index the tables above; kNone (-1) means "none". Anything else would be drawn from
      // outside a table.
      const auto check_id = [&](std::string_view field, std::int64_t id, std::size_t count) {
        if (id != kNone && (id < 0 || static_cast<std::size_t>(id) >= count)) {
          problem(
              fmt::format("ops[{}].{}", i, field), fmt::format("{} does not exist", id),
              count == 0 ? std::string("-1 (none)") : fmt::format("-1 (none) or 0..{}", count - 1));
        }
      };
      check_id("group", o.group, t.groups.size());
      check_id("comm", o.comm, t.communicators.size());
      if (o.op < 0 && o.op != kNone)
        problem(fmt::format("ops[{}].op", i), fmt::format("{} is negative", o.op),
                "an op index ≥ 0");
      if (o.start < 0)
        problem(fmt::format("ops[{}].start_ns", i),
                fmt::format("{} ns is before the run started", o.start), "≥ 0");
      if (o.bytes < 0)
        problem(fmt::format("ops[{}].bytes", i), fmt::format("{} B is negative", o.bytes), "≥ 0");
      if (o.iteration < 0 || o.microbatch < 0)
        problem(fmt::format("ops[{}]", i), "negative iteration or micro-batch", "≥ 0");
      t.ops.push_back(o);
    });
  }
  const auto& memory = root.contains("memory") ? root["memory"] : nlohmann::json::array();
  for (std::size_t i = 0; i < memory.size(); ++i) {
    guarded(fmt::format("memory[{}]", i), [&] {
      const auto& j = memory[i];
      MemorySample m{json_integer<TimeNs>(j.at("time_ns")), json_integer<Bytes>(j.at("allocated")),
                     json_integer<Bytes>(j.at("reserved")),
                     json_integers<Bytes>(j.at("by_category"))};
      if (m.time < 0 || m.allocated < 0 || m.reserved < 0) {
        problem(fmt::format("memory[{}]", i), "negative time or bytes", "≥ 0");
      }
      if (m.by_category.size() > all_buffer_categories().size()) {
        problem(fmt::format("memory[{}].by_category", i),
                fmt::format("{} entries", m.by_category.size()),
                fmt::format("at most {}, one per buffer category", all_buffer_categories().size()));
      }
      if (m.allocated > m.reserved) {
        problem(fmt::format("memory[{}].allocated", i),
                fmt::format("{} B is more than the {} B reserved", m.allocated, m.reserved),
                "allocated ≤ reserved");
      }
      if (!t.memory.empty() && m.time < t.memory.back().time)
        problem(fmt::format("memory[{}].time_ns", i), "samples out of time order",
                "ascending times");
      t.memory.push_back(std::move(m));
    });
  }
  throw_if_any(std::move(problems));
  return t;
}

}  // namespace shardscope
