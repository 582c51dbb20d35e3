#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

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

int Timeline::last_iteration() const {
  int last = 0;
  for (const auto& op : ops) last = std::max(last, op.iteration);
  return last;
}

std::string_view shardscope_version() {
  return SHARDSCOPE_VERSION;
}

Timeline timeline_of(const Schedule& s) {
  Timeline t;
  t.name = s.name;
  t.facts.world_size = s.world_size;
  t.facts.iterations = s.iterations;
  t.facts.tokens_per_iteration = s.tokens_per_iteration;
  t.streams = s.streams;
  t.communicators = s.communicators;
  t.op_labels = s.op_labels;
  t.groups.reserve(s.groups.size());
  for (const auto& g : s.groups) t.groups.push_back(g.name);
  return t;
}

void sort_timeline_ops(std::vector<TimelineOp>& ops) {
  std::stable_sort(ops.begin(), ops.end(), [](const TimelineOp& a, const TimelineOp& b) {
    return std::tie(a.start, a.stream, a.op) < std::tie(b.start, b.stream, b.op);
  });
}

MemoryPeaks peaks_from_samples(const Timeline& t) {
  MemoryPeaks peaks;
  peaks.allocated_by_phase.assign(kPhaseCount, 0);
  std::unordered_map<OpId, Phase> phase_of;  // by schedule op id
  for (const auto& op : t.ops) {
    if (op.op >= 0) phase_of[op.op] = op.phase;
  }
  for (const auto& m : t.memory) {
    const auto note = [&](MemoryPeak& peak, Bytes bytes) {
      if (bytes <= peak.bytes) return;
      peak = {bytes, m.time, m.op, m.by_category};
    };
    note(peaks.allocated, m.allocated);
    note(peaks.reserved, m.reserved);
    const auto it = phase_of.find(m.op);
    const Phase phase = it == phase_of.end() ? Phase::forward : it->second;
    auto& by_phase = peaks.allocated_by_phase[static_cast<std::size_t>(phase)];
    by_phase = std::max(by_phase, m.allocated);
  }
  return peaks;
}

namespace {
using Json = nlohmann::ordered_json;

Json peak_json(const MemoryPeak& p) {
  return Json{
      {"bytes", p.bytes}, {"time_ns", p.time}, {"op", p.op}, {"by_category", p.by_category}};
}

}  // namespace

std::string timeline_to_json(const Timeline& t) {
  std::string out = "{\n";
  const auto field = [&](std::string_view key, const Json& value) {
    out += fmt::format("  \"{}\": {},\n", key, value.dump());
  };
  field("schema", kTimelineSchema);
  field("name", t.name);
  field("source", t.source);
  const auto& p = t.provenance;
  Json job = Json::object();
  for (const auto& [key, value] : p.job) job[key] = value;
  field("provenance", Json{{"scenario", p.scenario},
                           {"device", p.device},
                           {"backend", p.backend},
                           {"version", p.version},
                           {"rank", p.rank},
                           {"overrides", p.overrides},
                           {"job", job}});
  const auto& f = t.facts;
  field("facts", Json{{"world_size", f.world_size},
                      {"iterations", f.iterations},
                      {"tokens_per_iteration", f.tokens_per_iteration},
                      {"model_flops_per_token", f.model_flops_per_token},
                      {"peak_flops", f.peak_flops}});
  field("memory_capacity", t.memory_capacity);
  field("memory_tight_margin", t.memory_tight_margin);
  if (!t.host.launch.empty() || !t.host.fsdp_hook.empty())
    field("host_overheads", Json{{"launch_ns", t.host.launch}, {"fsdp_hook_ns", t.host.fsdp_hook}});
  // What only some producers know: written as null or left out where unknown.
  if (!t.cpu_busy_by_iteration.empty()) field("cpu_busy_by_iteration_ns", t.cpu_busy_by_iteration);
  if (!t.contention_by_iteration.empty())
    field("contention_by_iteration_ns", t.contention_by_iteration);
  field("allocator_retries", t.allocator_retries ? Json(*t.allocator_retries) : Json(nullptr));
  if (!t.allocator_retries_by_iteration.empty())
    field("allocator_retries_by_iteration", t.allocator_retries_by_iteration);
  if (const auto& oom = t.out_of_memory) {
    field("out_of_memory", Json{{"op", oom->op},
                                {"buffer", oom->buffer},
                                {"category", to_string(oom->category)},
                                {"size", oom->size},
                                {"reserved", oom->reserved}});
  }
  if (!t.critical_path.empty()) {
    Json path = Json::array();
    for (const auto& step : t.critical_path)
      path.push_back(Json::array({step.op, step.issue_bound, step.cpu_gap}));
    field("critical_path", path);  // last op first: [op, issue_bound, cpu_gap_ns]
  }
  field("peaks", Json{{"allocated", peak_json(t.peaks.allocated)},
                      {"reserved", peak_json(t.peaks.reserved)},
                      {"allocated_by_phase", t.peaks.allocated_by_phase}});
  Json categories = Json::array();
  for (auto c : all_buffer_categories()) categories.push_back(to_string(c));
  field("categories", categories);
  detail::emit_json_array(out, "streams", t.streams, detail::stream_json, false);
  const auto text = [](const std::string& g, std::size_t) { return Json(g); };
  detail::emit_json_array(out, "groups", t.groups, text, false);
  detail::emit_json_array(out, "communicators", t.communicators, detail::communicator_json, false);
  detail::emit_json_array(out, "op_labels", t.op_labels, text, false);
  detail::emit_json_array(
      out, "ops", t.ops,
      [](const TimelineOp& o, std::size_t) {
        Json j;
        j["op"] = o.op;
        detail::put_op_placement(j, o);
        j["label"] = o.label;
        j["flops"] = o.flops;
        j["deps"] = Json(std::vector<std::int32_t>(o.deps.begin(), o.deps.end()));
        j["start_ns"] = o.start;
        j["end_ns"] = o.end;
        if (o.issue_known()) j["issue_ns"] = Json::array({o.issue_start, o.issue_end});
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
        j["op"] = m.op;
        return j;
      },
      true);
  out += "}\n";
  return out;
}

namespace {

// Reads one timeline document, a problem per malformed field.
class TimelineReader {
 public:
  TimelineReader(const nlohmann::json& root, std::string origin)
      : root_(root), origin_(std::move(origin)) {}

  Timeline read() {
    guarded("name", [&] { t_.name = root_.at("name").get<std::string>(); });
    guarded("source", [&] { t_.source = root_.at("source").get<std::string>(); });
    if (t_.source != "simulated" && t_.source != "measured" && t_.source != "imported")
      problem("source", fmt::format("'{}' is not a source", t_.source),
              "simulated, measured, imported");
    read_provenance_and_facts();
    guarded("memory_capacity",
            [&] { t_.memory_capacity = json_integer<Bytes>(root_.at("memory_capacity")); });
    if (root_.contains("memory_tight_margin")) {  // optional: files before it have 2 %
      guarded("memory_tight_margin", [&] {
        t_.memory_tight_margin = root_.at("memory_tight_margin").get<double>();
        if (!(t_.memory_tight_margin >= 0 && t_.memory_tight_margin <= 0.5))
          problem("memory_tight_margin", "is not a fraction in 0..0.5", "0.02");
      });
    }
    if (root_.contains("host_overheads")) {
      guarded("host_overheads", [&] {
        const auto& h = root_.at("host_overheads");
        for (const auto v : json_integers<TimeNs>(h.at("launch_ns"))) t_.host.launch.push_back(v);
        for (const auto v : json_integers<TimeNs>(h.at("fsdp_hook_ns")))
          t_.host.fsdp_hook.push_back(v);
      });
    }
    read_tables();
    read_peaks();
    read_ops();
    read_memory();
    read_producer_facts();
    throw_if_any(std::move(problems_));
    return std::move(t_);
  }

 private:
  void problem(std::string key, std::string message, std::string allowed = {}) {
    problems_.push_back({origin_, std::move(key), std::move(message), std::move(allowed)});
  }

  // Typed access with a problem per bad field; nlohmann's exceptions name the field for us.
  template <typename F>
  void guarded(const std::string& key, F&& read) {
    try {
      read();
    } catch (const nlohmann::json::exception& e) {
      problem(key, fmt::format("malformed: {}", e.what()));
    }
  }

  double non_negative(const nlohmann::json& j, const std::string& key) {
    const double v = j.get<double>();
    if (!std::isfinite(v) || v < 0) problem(key, fmt::format("{} is not ≥ 0", j.dump()), "≥ 0");
    return v;
  }

  void read_provenance_and_facts() {
    guarded("provenance", [&] {
      const auto& p = root_.at("provenance");
      t_.provenance = {p.at("scenario").get<std::string>(),
                       p.at("device").get<std::string>(),
                       p.at("backend").get<std::string>(),
                       p.at("version").get<std::string>(),
                       json_integer<int>(p.at("rank")),
                       {},
                       {}};
      // Optional: files written before them know neither.
      if (p.contains("overrides"))
        t_.provenance.overrides = p.at("overrides").get<std::vector<std::string>>();
      if (p.contains("job")) {
        for (const auto& [key, value] : p.at("job").items())
          t_.provenance.job.emplace_back(key, value.get<std::string>());
      }
    });
    guarded("facts", [&] {
      const auto& f = root_.at("facts");
      auto& out = t_.facts;
      out.world_size = json_integer<int>(f.at("world_size"));
      out.iterations = json_integer<int>(f.at("iterations"));
      out.tokens_per_iteration = json_integer<std::int64_t>(f.at("tokens_per_iteration"));
      out.model_flops_per_token =
          non_negative(f.at("model_flops_per_token"), "facts.model_flops_per_token");
      out.peak_flops = non_negative(f.at("peak_flops"), "facts.peak_flops");
      if (out.world_size < 1 || out.iterations < 1 || out.tokens_per_iteration < 0)
        problem("facts", "world_size and iterations must be ≥ 1, tokens ≥ 0");
      if (t_.provenance.rank < 0 || t_.provenance.rank >= out.world_size)
        problem("provenance.rank", fmt::format("rank {} is not in the world", t_.provenance.rank),
                fmt::format("0..{}", out.world_size - 1));
    });
  }

  void read_tables() {
    guarded("streams", [&] {
      for (const auto& s : root_.at("streams")) {
        auto kind = parse_stream_kind(s.at("kind").get<std::string>());
        if (!kind) problem("streams", "unknown stream kind", "cpu, compute, communication, copy");
        t_.streams.push_back({s.at("name").get<std::string>(), kind.value_or(StreamKind::compute)});
      }
    });
    guarded("groups", [&] {
      for (const auto& g : root_.at("groups")) t_.groups.push_back(g.get<std::string>());
    });
    guarded("communicators", [&] {
      for (const auto& c : root_.at("communicators")) {
        t_.communicators.push_back({c.at("name").get<std::string>(),
                                    json_integer<int>(c.at("size")),
                                    json_integer<int>(c.at("nodes"))});
      }
    });
    guarded("op_labels", [&] {
      for (const auto& l : root_.at("op_labels")) t_.op_labels.push_back(l.get<std::string>());
    });
  }

  void check_categories(const std::vector<Bytes>& by_category, const std::string& key) {
    if (by_category.size() > all_buffer_categories().size()) {
      problem(key, fmt::format("{} entries", by_category.size()),
              fmt::format("at most {}, one per buffer category", all_buffer_categories().size()));
    }
  }

  void read_peaks() {
    guarded("peaks", [&] {
      const auto& p = root_.at("peaks");
      const auto peak = [&](const char* name) {
        const auto& j = p.at(name);
        MemoryPeak out{json_integer<Bytes>(j.at("bytes")), json_integer<TimeNs>(j.at("time_ns")),
                       json_integer<OpId>(j.at("op")), json_integers<Bytes>(j.at("by_category"))};
        check_categories(out.by_category, fmt::format("peaks.{}.by_category", name));
        return out;
      };
      t_.peaks.allocated = peak("allocated");
      t_.peaks.reserved = peak("reserved");
      t_.peaks.allocated_by_phase = json_integers<Bytes>(p.at("allocated_by_phase"));
      // Timelines written before the generation phase have four entries: it was 0 there.
      if (t_.peaks.allocated_by_phase.size() == kPhaseCount - 1)
        t_.peaks.allocated_by_phase.push_back(0);
      if (t_.peaks.allocated_by_phase.size() != kPhaseCount)
        problem("peaks.allocated_by_phase", "needs one entry per phase",
                "forward, backward, optimizer, checkpoint, generation");
    });
  }

  // Ids index the tables above; kNone (-1) means "none". Anything else would be drawn from
  // outside a table.
  void check_id(const std::string& key, std::int64_t id, std::size_t count) {
    if (id != kNone && (id < 0 || static_cast<std::size_t>(id) >= count)) {
      problem(key, fmt::format("{} does not exist", id),
              count == 0 ? std::string("-1 (none)") : fmt::format("-1 (none) or 0..{}", count - 1));
    }
  }

  void read_op(const nlohmann::json& j, const std::string& key) {
    TimelineOp o;
    o.op = json_integer<OpId>(j.at("op"));
    auto kind = parse_op_kind(j.at("kind").get<std::string>());
    auto phase = parse_phase(j.at("phase").get<std::string>());
    if (!kind || !phase) problem(key, "unknown kind or phase");
    o.kind = kind.value_or(OpKind::forward);
    o.phase = phase.value_or(Phase::forward);
    o.stream = json_integer<StreamId>(j.at("stream"));
    o.group = json_integer<GroupId>(j.at("group"));
    o.iteration = json_integer<int>(j.at("iteration"));
    o.microbatch = json_integer<int>(j.at("microbatch"));
    o.comm = json_integer<CommId>(j.at("comm"));
    o.label = json_integer<std::int32_t>(j.at("label"));
    o.bytes = json_integer<Bytes>(j.at("bytes"));
    o.flops = non_negative(j.at("flops"), key + ".flops");
    for (const auto d : json_integers<OpId>(j.at("deps"))) {
      if (d < 0) problem(key + ".deps", fmt::format("{} is not an op index", d), "≥ 0");
      o.deps.push_back(d);
    }
    o.start = json_integer<TimeNs>(j.at("start_ns"));
    o.end = json_integer<TimeNs>(j.at("end_ns"));
    if (o.end < o.start) problem(key, "ends before it starts");
    if (const auto it = j.find("issue_ns"); it != j.end()) {
      const auto issue = json_integers<TimeNs>(*it);
      if (issue.size() != 2 || issue[0] < 0 || issue[1] < issue[0]) {
        problem(key + ".issue_ns", "is not a launch call's span",
                "[start_ns, end_ns] with 0 ≤ start_ns ≤ end_ns");
      } else {
        o.issue_start = issue[0];
        o.issue_end = issue[1];
      }
    }
    if (o.stream < 0 || static_cast<std::size_t>(o.stream) >= t_.streams.size())
      problem(key + ".stream", fmt::format("stream {} does not exist", o.stream));
    check_id(key + ".group", o.group, t_.groups.size());
    check_id(key + ".comm", o.comm, t_.communicators.size());
    check_id(key + ".label", o.label, t_.op_labels.size());
    if (o.op < 0 && o.op != kNone)
      problem(key + ".op", fmt::format("{} is negative", o.op), "an op index ≥ 0");
    if (o.start < 0)
      problem(key + ".start_ns", fmt::format("{} ns is before the run started", o.start), "≥ 0");
    if (o.bytes < 0) problem(key + ".bytes", fmt::format("{} B is negative", o.bytes), "≥ 0");
    if (o.iteration < 0 || o.microbatch < 0)
      problem(key, "negative iteration or micro-batch", "≥ 0");
    t_.ops.push_back(std::move(o));
  }

  void read_ops() {
    const auto& ops = root_.contains("ops") ? root_["ops"] : nlohmann::json::array();
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const auto key = fmt::format("ops[{}]", i);
      guarded(key, [&] { read_op(ops[i], key); });
    }
  }

  void read_memory() {
    const auto& memory = root_.contains("memory") ? root_["memory"] : nlohmann::json::array();
    for (std::size_t i = 0; i < memory.size(); ++i) {
      guarded(fmt::format("memory[{}]", i), [&] {
        const auto& j = memory[i];
        MemorySample m{json_integer<TimeNs>(j.at("time_ns")),
                       json_integer<Bytes>(j.at("allocated")),
                       json_integer<Bytes>(j.at("reserved")),
                       json_integers<Bytes>(j.at("by_category")), json_integer<OpId>(j.at("op"))};
        if (m.time < 0 || m.allocated < 0 || m.reserved < 0)
          problem(fmt::format("memory[{}]", i), "negative time or bytes", "≥ 0");
        check_categories(m.by_category, fmt::format("memory[{}].by_category", i));
        if (m.allocated > m.reserved) {
          problem(fmt::format("memory[{}].allocated", i),
                  fmt::format("{} B is more than the {} B reserved", m.allocated, m.reserved),
                  "allocated ≤ reserved");
        }
        if (!t_.memory.empty() && m.time < t_.memory.back().time)
          problem(fmt::format("memory[{}].time_ns", i), "samples out of time order",
                  "ascending times");
        t_.memory.push_back(std::move(m));
      });
    }
  }

  // A per-iteration list of durations under `key`, none negative; left empty (unknown) when the
  // file has no such key.
  void read_durations_by_iteration(const char* key, std::vector<TimeNs>& into) {
    if (!root_.contains(key)) return;
    guarded(key, [&] {
      into = json_integers<TimeNs>(root_.at(key));
      for (const TimeNs d : into)
        if (d < 0) problem(key, fmt::format("{} ns is negative", d), "≥ 0");
    });
  }

  // The fields only some producers write (timeline/3); absent: unknown.
  void read_producer_facts() {
    read_durations_by_iteration("cpu_busy_by_iteration_ns", t_.cpu_busy_by_iteration);
    read_durations_by_iteration("contention_by_iteration_ns", t_.contention_by_iteration);
    if (root_.contains("allocator_retries") && !root_.at("allocator_retries").is_null()) {
      guarded("allocator_retries", [&] {
        t_.allocator_retries = json_integer<int>(root_.at("allocator_retries"));
        if (*t_.allocator_retries < 0)
          problem("allocator_retries", "negative", "≥ 0, or null for unknown");
      });
    }
    if (root_.contains("allocator_retries_by_iteration")) {
      guarded("allocator_retries_by_iteration", [&] {
        t_.allocator_retries_by_iteration =
            json_integers<int>(root_.at("allocator_retries_by_iteration"));
        int sum = 0;
        for (const int r : t_.allocator_retries_by_iteration) {
          if (r < 0)
            problem("allocator_retries_by_iteration", fmt::format("{} is negative", r), "≥ 0");
          sum += r;
        }
        if (!t_.allocator_retries || sum != *t_.allocator_retries)
          problem("allocator_retries_by_iteration",
                  fmt::format("they add up to {}, not allocator_retries", sum),
                  "retries by iteration that add up to allocator_retries");
      });
    }
    std::set<OpId> ids;  // filled on first use: most timelines name no op here
    const auto check_op = [&](const std::string& key, OpId id) {
      if (ids.empty())
        for (const auto& op : t_.ops) ids.insert(op.op);
      if (id != kNone && !ids.contains(id))
        problem(key, fmt::format("op {} is not among the ops", id), "an op of this timeline");
    };
    if (root_.contains("out_of_memory") && !root_.at("out_of_memory").is_null()) {
      guarded("out_of_memory", [&] {
        const auto& j = root_.at("out_of_memory");
        const auto category = parse_buffer_category(j.at("category").get<std::string>());
        if (!category) problem("out_of_memory.category", "not a buffer category");
        OutOfMemoryEvent oom{json_integer<OpId>(j.at("op")), j.at("buffer").get<std::string>(),
                             category.value_or(BufferCategory::activations),
                             json_integer<Bytes>(j.at("size")),
                             json_integer<Bytes>(j.at("reserved"))};
        if (oom.size < 0 || oom.reserved < 0)
          problem("out_of_memory", "negative size or reserved", "≥ 0");
        check_op("out_of_memory.op", oom.op);
        t_.out_of_memory = std::move(oom);
      });
    }
    if (root_.contains("critical_path")) {
      guarded("critical_path", [&] {
        for (const auto& j : root_.at("critical_path")) {
          if (!j.is_array() || j.size() != 3) {
            problem("critical_path", "a step is not [op, issue_bound, cpu_gap_ns]");
            continue;
          }
          CriticalStep step{json_integer<OpId>(j[0]), j[1].get<bool>(), json_integer<TimeNs>(j[2])};
          check_op("critical_path", step.op);
          if (step.op == kNone) problem("critical_path", "a step names no op", "an op index");
          t_.critical_path.push_back(step);
        }
      });
    }
  }

  const nlohmann::json& root_;
  std::string origin_;
  std::vector<Problem> problems_;
  Timeline t_;
};

}  // namespace

Timeline timeline_from_json(std::string_view text, const std::string& origin) {
  const nlohmann::json root = detail::parse_json(text, origin);
  const std::string schema = json_schema(root);
  if (schema == "shardscope.timeline/1") {
    throw ValidationError({Problem{
        origin, "schema",
        "shardscope.timeline/1 is an older timeline format (no dependencies, facts or peaks): "
        "write it again with this shardscope (simulate --timeline, run --timeline)",
        std::string(kTimelineSchema)}});
  }
  // timeline/2 has all of /3 but the facts only some producers know: read as unknown.
  if (schema != kTimelineSchema && schema != "shardscope.timeline/2") {
    throw ValidationError(
        {Problem{origin, "schema", "not a shardscope timeline", std::string(kTimelineSchema)}});
  }
  return TimelineReader(root, origin).read();
}

}  // namespace shardscope
