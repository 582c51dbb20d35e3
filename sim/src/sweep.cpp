#include "shardscope/sim/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "shardscope/core/config_reader.hpp"
#include "shardscope/core/json_field.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/scenario_keys.hpp"
#include "shardscope/sim/pipeline.hpp"
#include "shardscope/sim/worker_pool.hpp"

namespace shardscope::sim {

namespace {

// Splits "v1,v2,{a: 1, b: 2},[1, 2]" at the commas outside braces, brackets and quotes, so a value
// may be any YAML flow value. Returns false on unbalanced brackets or an open quote.
bool split_values(std::string_view text, std::vector<std::string>& out) {
  std::string cur;
  int depth = 0;
  char quote = 0;
  for (const char c : text) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth < 0) return false;
    } else if (c == ',' && depth == 0) {
      out.push_back(std::move(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  out.push_back(std::move(cur));
  return depth == 0 && quote == 0;
}

std::vector<std::string> settable_keys() {
  std::vector<std::string> keys;
  for (const auto& k : scenario_keys()) {
    if (k.path.find('[') == std::string_view::npos) keys.emplace_back(k.path);
  }
  return keys;
}

}  // namespace

std::optional<SweepAxis> parse_key_values(std::string_view text, std::string_view flag,
                                          std::vector<Problem>& problems) {
  const std::string where(flag);
  const auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size()) {
    problems.push_back({where, std::string(text), "must look like key=v1,v2,...",
                        fmt::format("e.g. {} fsdp.reshard_after_forward=true,false", flag)});
    return std::nullopt;
  }
  SweepAxis axis;
  axis.key = std::string(text.substr(0, eq));
  // The key must be one a scenario has: an unknown key would make every configuration invalid.
  const ScenarioKey* key = find_scenario_key(normalise_key_path(axis.key));
  if (!key) {
    const auto guess = closest_match(axis.key, settable_keys());
    problems.push_back({where, axis.key, "not a scenario key",
                        guess.empty() ? std::string("see shardscope keys")
                                      : fmt::format("did you mean '{}'?", guess)});
    return std::nullopt;
  }
  if (!split_values(text.substr(eq + 1), axis.values)) {
    problems.push_back({where, axis.key, "unbalanced braces, brackets or quotes in the values",
                        "v1,v2 or {a: 1},{a: 2}"});
    return std::nullopt;
  }
  if (std::any_of(axis.values.begin(), axis.values.end(),
                  [](const std::string& v) { return v.empty(); })) {
    problems.push_back(
        {where, axis.key, "empty value in the list", "v1,v2,... without empty entries"});
    return std::nullopt;
  }
  return axis;
}

std::optional<SweepAxis> parse_sweep_axis(std::string_view text, std::vector<Problem>& problems) {
  return parse_key_values(text, "--grid", problems);
}

void check_sweep_axes(const std::vector<SweepAxis>& axes, std::vector<Problem>& problems) {
  for (std::size_t i = 0; i < axes.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (normalise_key_path(axes[i].key) == normalise_key_path(axes[j].key)) {
        problems.push_back(
            {"--grid", axes[i].key, "is given twice", "one --grid per key, with all its values"});
      }
    }
  }
  std::size_t total = 1;
  for (const auto& a : axes) {
    if (a.values.size() > kMaxSweepPoints / total) {
      problems.push_back(
          {"--grid", a.key,
           fmt::format("the grid has more than {} configurations", format_count(kMaxSweepPoints)),
           "fewer values or axes"});
      return;
    }
    total *= a.values.size();
  }
}

std::size_t grid_size(const std::vector<SweepAxis>& axes) {
  std::size_t total = 1;
  for (const auto& a : axes) total *= a.values.size();
  return total;
}

namespace {

// Axis values parsed once for the whole grid: [axis][value].
using ParsedAxes = std::vector<std::vector<ConfigTree>>;

// One axis's key path is another's or lies inside it ("model" and "model.layers"): then a point's
// overrides do not simply replace the last point's, as one may have replaced what the other set.
bool axes_overlap(const std::vector<SweepAxis>& axes) {
  std::vector<std::vector<std::string>> paths;
  paths.reserve(axes.size());
  for (const auto& a : axes) paths.push_back(split_key_path(a.key));
  for (std::size_t i = 0; i < paths.size(); ++i) {
    for (std::size_t j = 0; j < paths.size(); ++j) {
      if (i != j && paths[i].size() <= paths[j].size() &&
          std::equal(paths[i].begin(), paths[i].end(), paths[j].begin()))
        return true;
    }
  }
  return false;
}

// `tree` is the worker's own copy of the base configuration. Every point sets the same keys, so
// (axes not overlapping) each point's overrides replace the last point's and the copy is made
// once per worker, not once per point.
SweepPoint evaluate(ConfigTree& tree, const std::string& file, const std::vector<SweepAxis>& axes,
                    const ParsedAxes& parsed, std::size_t index, const SweepOptions& options) {
  SweepPoint p;
  p.index = index;
  std::size_t rest = index;
  p.values.resize(axes.size());
  std::vector<std::size_t> pick(axes.size());
  for (std::size_t a = axes.size(); a-- > 0;) {
    pick[a] = rest % axes[a].values.size();
    p.values[a] = axes[a].values[pick[a]];
    rest /= axes[a].values.size();
  }
  std::vector<Problem> problems;
  for (std::size_t a = 0; a < axes.size(); ++a)
    set_override(tree, axes[a].key, parsed[a][pick[a]], problems);
  try {
    throw_if_any(std::move(problems));
    PipelineOptions pipeline;
    pipeline.origin = file;
    pipeline.sim.record_memory_samples = false;
    pipeline.sim.record_critical_path = false;  // a sweep reports headline numbers only
    p.summary = simulate_scenario(
                    read_scenario(tree, file, std::filesystem::path(file).parent_path()), pipeline)
                    .summary;
    // A simulation records its memory and capacity: both are known.
    const Bytes budget = options.memory_budget.value_or(p.summary.capacity.value());
    const Bytes reserved = p.summary.peak_reserved.value();
    p.fits = p.summary.out_of_memory.empty() && reserved <= budget;
    if (!p.summary.out_of_memory.empty()) {
      p.fit_note = p.summary.out_of_memory;
    } else if (!p.fits) {
      p.fit_note = fmt::format("{} over the {} budget at {}", format_bytes(reserved - budget),
                               format_bytes(budget), p.summary.peak_op);
    } else if (static_cast<double>(budget - reserved) <
               p.summary.tight_margin * static_cast<double>(budget)) {
      p.fit_note = fmt::format("tight: {} free", format_bytes(budget - reserved));
    }
  } catch (const ValidationError& e) {
    for (const auto& problem : e.problems()) {
      if (!p.error.empty()) p.error += "; ";
      if (!problem.key.empty()) p.error += problem.key + ": ";
      p.error += problem.message;
    }
  }
  return p;
}

void mark_pareto(std::vector<SweepPoint>& points) {
  for (auto& p : points) {
    if (!p.fits) continue;
    p.pareto = std::none_of(points.begin(), points.end(), [&](const SweepPoint& q) {
      if (!q.fits || &q == &p) return false;
      const bool no_worse = q.summary.tokens_per_s_per_gpu >= p.summary.tokens_per_s_per_gpu &&
                            q.summary.peak_reserved <= p.summary.peak_reserved;
      const bool better = q.summary.tokens_per_s_per_gpu > p.summary.tokens_per_s_per_gpu ||
                          q.summary.peak_reserved < p.summary.peak_reserved;
      return no_worse && better;
    });
  }
}

int rank(const SweepPoint& p) {
  return !p.error.empty() ? 2 : p.fits ? 0 : 1;
}

}  // namespace

std::vector<SweepPoint> sweep(const ConfigTree& base, const std::string& file,
                              const std::vector<SweepAxis>& axes, const SweepOptions& options) {
  std::size_t total = 1;
  for (const auto& a : axes) total *= a.values.size();
  std::vector<SweepPoint> points(total);
  ParsedAxes parsed;
  for (const auto& a : axes) {
    auto& values = parsed.emplace_back();
    for (const auto& v : a.values) values.push_back(parse_override_value(v));
  }
  std::atomic<std::size_t> next{0}, done{0};
  const unsigned threads = std::max(
      1u,
      std::min<unsigned>(options.threads ? options.threads : std::thread::hardware_concurrency(),
                         static_cast<unsigned>(total)));
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const bool fresh_tree_per_point = axes_overlap(axes);
  const auto work = [&] {
    ConfigTree tree = base;
    while (!(options.cancel && options.cancel->load())) {
      const std::size_t i = next.fetch_add(1);
      if (i >= total) break;
      if (fresh_tree_per_point) tree = base;
      try {
        points[i] = evaluate(tree, file, axes, parsed, i, options);
      } catch (...) {
        std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
      const std::size_t d = done.fetch_add(1) + 1;
      if (options.progress) options.progress(d, total);
    }
  };
  WorkerPool::shared().run(threads - 1, work);  // the calling thread is one of the workers
  if (failure) std::rethrow_exception(failure);
  if (options.cancel && options.cancel->load()) {
    points.erase(std::remove_if(points.begin(), points.end(),
                                [](const SweepPoint& p) { return p.values.empty(); }),
                 points.end());
  }
  mark_pareto(points);
  std::stable_sort(points.begin(), points.end(), [](const SweepPoint& a, const SweepPoint& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    if (rank(a) == 2) return a.index < b.index;
    return a.summary.tokens_per_s_per_gpu > b.summary.tokens_per_s_per_gpu;
  });
  return points;
}

std::string sweep_csv(const std::vector<SweepAxis>& axes, const std::vector<SweepPoint>& points) {
  auto quote = [](const std::string& s) {
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
  };
  std::string out;
  for (const auto& a : axes) out += quote(a.key) + ",";
  out +=
      "step_time_s,tokens_per_s_per_gpu,mfu,peak_allocated_bytes,peak_reserved_bytes,capacity_"
      "bytes,fits,pareto,"
      "comm_exposed_s,error\n";
  for (const auto& p : points) {
    for (const auto& v : p.values) out += quote(v) + ",";
    const auto& s = p.summary;
    // An unknown number is an empty field.
    const auto field = [](const auto& v, const char* format) {
      return v ? fmt::format(fmt::runtime(format), *v) : std::string();
    };
    out += fmt::format("{:.9g},{},{},{},{},{},{},{},{:.9g},{}\n", ns_to_s(s.step_time),
                       field(s.tokens_per_s_per_gpu, "{:.6g}"), field(s.mfu, "{:.6g}"),
                       field(s.peak_allocated, "{}"), field(s.peak_reserved, "{}"),
                       field(s.capacity, "{}"), p.fits, p.pareto, ns_to_s(s.comm_exposed),
                       quote(p.error));
  }
  return out;
}

std::string sweep_json(const std::vector<SweepAxis>& axes, const std::vector<SweepPoint>& points,
                       std::optional<std::size_t> grid) {
  nlohmann::ordered_json j;
  j["schema"] = "shardscope.sweep/1";
  // An interrupted sweep says so: readers must not take its rows for the whole grid.
  const std::size_t configurations = grid.value_or(points.size());
  j["complete"] = points.size() == configurations;
  j["configurations"] = configurations;
  nlohmann::ordered_json ax = nlohmann::ordered_json::array();
  for (const auto& a : axes) ax.push_back({{"key", a.key}, {"values", a.values}});
  j["axes"] = ax;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& p : points) {
    nlohmann::ordered_json settings = nlohmann::ordered_json::object();
    for (std::size_t a = 0; a < axes.size(); ++a) settings[axes[a].key] = p.values[a];
    const auto& s = p.summary;
    rows.push_back({{"settings", settings},
                    {"step_time_s", ns_to_s(s.step_time)},
                    {"tokens_per_s_per_gpu", json_or_null(s.tokens_per_s_per_gpu)},
                    {"mfu", json_or_null(s.mfu)},
                    {"peak_allocated_bytes", json_or_null(s.peak_allocated)},
                    {"peak_reserved_bytes", json_or_null(s.peak_reserved)},
                    {"capacity_bytes", json_or_null(s.capacity)},
                    {"fits", p.fits},
                    {"fit_note", p.fit_note},
                    {"pareto", p.pareto},
                    {"comm_exposed_s", ns_to_s(s.comm_exposed)},
                    {"error", p.error.empty() ? nlohmann::ordered_json(nullptr)
                                              : nlohmann::ordered_json(p.error)}});
  }
  j["points"] = rows;
  return j.dump(2) + "\n";
}

}  // namespace shardscope::sim
