#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/json_field.hpp"

// The summary's two renderings: JSON for tools, a table for people.
namespace shardscope::analysis {

namespace {

nlohmann::ordered_json fit_json(Fit fit) {
  return fit == Fit::unknown ? nlohmann::ordered_json(nullptr)
                             : nlohmann::ordered_json(fit == Fit::fits);
}

// What the retries of the last iteration say: none, the caches settled in the first steps; some,
// the allocator still releases its cache in the steady state, which costs time the simulated
// step does not price (and a real run at that edge may do so every step).
std::string per_step_retries_text(const Summary& m) {
  if (!m.allocator_retries_per_step) return "";
  if (*m.allocator_retries_per_step == 0) return "; none in the last iteration";
  return fmt::format("; {} in the last iteration, not settled: a stall the step time leaves out",
                     *m.allocator_retries_per_step);
}

}  // namespace

std::string fit_text(const Summary& m) {
  switch (m.fit) {
    case Fit::fits:
      if (m.tight)
        return fmt::format("TIGHT: fits with {} free, under {:.1f} % of capacity",
                           bytes_text(m.headroom), 100 * m.tight_margin);
      return fmt::format("fits, {} free", bytes_text(m.headroom));
    case Fit::does_not_fit:
      if (!m.out_of_memory.empty()) return "DOES NOT FIT: " + m.out_of_memory;
      return fmt::format("DOES NOT FIT: {} over the capacity", format_bytes(-m.headroom.value()));
    case Fit::unknown:
      break;
  }
  return "fit unknown";
}

std::string throughput_text(const std::optional<double>& tokens_per_s_per_gpu) {
  return tokens_per_s_per_gpu ? fmt::format("{:.0f} tokens/s/GPU", *tokens_per_s_per_gpu)
                              : std::string("unknown");
}

std::string percent_text(const std::optional<double>& fraction) {
  return fraction ? fmt::format("{:.1f} %", 100 * *fraction) : std::string("unknown");
}

std::string bytes_text(const std::optional<Bytes>& bytes) {
  return bytes ? format_bytes(*bytes) : std::string("unknown");
}

std::string summary_to_json(const Summary& m) {
  nlohmann::ordered_json j;
  j["schema"] = "shardscope.summary/1";
  j["name"] = m.name;
  j["source"] = m.source;
  j["world_size"] = m.world_size;
  j["step_time_s"] = ns_to_s(m.step_time);
  j["tokens_per_s_per_gpu"] = json_or_null(m.tokens_per_s_per_gpu);
  j["model_flops_per_token"] = m.model_flops_per_token > 0
                                   ? nlohmann::ordered_json(m.model_flops_per_token)
                                   : nlohmann::ordered_json(nullptr);
  j["mfu"] = json_or_null(m.mfu);
  j["hfu"] = json_or_null(m.hfu);
  j["phase_time_s"] = {{"forward", ns_to_s(m.forward_time)},
                       {"backward", ns_to_s(m.backward_time)},
                       {"optimizer", ns_to_s(m.optimizer_time)},
                       {"generation", ns_to_s(m.generation_time)}};
  nlohmann::ordered_json cats = nlohmann::ordered_json::object();
  for (auto c : all_buffer_categories())
    cats[std::string(to_string(c))] = m.peak_by_category[static_cast<std::size_t>(c)];
  j["peak_memory"] = {{"allocated_bytes", json_or_null(m.peak_allocated)},
                      {"reserved_bytes", json_or_null(m.peak_reserved)},
                      {"capacity_bytes", json_or_null(m.capacity)},
                      {"fits", fit_json(m.fit)},
                      {"headroom_bytes", json_or_null(m.headroom)},
                      {"tight", m.tight},
                      {"at", m.peak_op},
                      {"by_category", cats}};
  j["peak_allocated_by_phase_bytes"] = {
      {"forward", m.peak_allocated_by_phase[0]},
      {"backward", m.peak_allocated_by_phase[1]},
      {"optimizer", m.peak_allocated_by_phase[2]},
      {"generation", m.peak_allocated_by_phase[static_cast<std::size_t>(Phase::generation)]}};
  j["comm"] = {{"total_s", ns_to_s(m.comm_total)},
               {"exposed_s", ns_to_s(m.comm_exposed)},
               {"overlap_fraction", json_or_null(m.overlap_fraction)},
               {"contention_s", m.contention ? nlohmann::ordered_json(ns_to_s(*m.contention))
                                             : nlohmann::ordered_json(nullptr)}};
  nlohmann::ordered_json coll = nlohmann::ordered_json::object();
  for (const auto& [k, v] : m.collectives) coll[k] = v;
  j["collectives"] = coll;
  nlohmann::ordered_json busy = nlohmann::ordered_json::object();
  for (const auto& [k, v] : m.stream_busy)  // null: unknown
    busy[k] = v ? nlohmann::ordered_json(ns_to_s(*v)) : nlohmann::ordered_json(nullptr);
  j["stream_busy_s"] = busy;
  nlohmann::ordered_json path = nlohmann::ordered_json::object();
  for (const auto& [k, v] : m.critical_path.by_kind) path[k] = ns_to_s(v);
  j["critical_path_s"] = path;
  j["allocator_retries"] = m.allocator_retries ? nlohmann::ordered_json(*m.allocator_retries)
                                               : nlohmann::ordered_json(nullptr);  // unknown
  j["allocator_retries_per_step"] = m.allocator_retries_per_step
                                        ? nlohmann::ordered_json(*m.allocator_retries_per_step)
                                        : nlohmann::ordered_json(nullptr);  // unknown
  j["out_of_memory"] = m.out_of_memory.empty() ? nlohmann::ordered_json(nullptr)
                                               : nlohmann::ordered_json(m.out_of_memory);
  return j.dump(2) + "\n";
}

std::string summary_table(const Summary& m) {
  std::string out;
  auto row = [&](std::string_view k, const std::string& v) {
    out += fmt::format("  {:<28}{}\n", k, v);
  };
  out += fmt::format("{} ({} GPUs), {}, steady state = last iteration\n", m.name, m.world_size,
                     m.source);
  row("step time", format_duration(m.step_time));
  row("throughput", m.tokens_per_s_per_gpu
                        ? fmt::format("{:.0f} tokens/s per GPU", *m.tokens_per_s_per_gpu)
                        : std::string("unknown (the run does not say how many tokens a step has)"));
  row("MFU / HFU",
      m.mfu ? fmt::format("{:.1f} % / {:.1f} %", 100 * *m.mfu, 100 * m.hfu.value_or(*m.mfu))
            : std::string("unknown (needs the model's FLOPs per token and the GPU's peak)"));
  row("forward / backward / optim",
      fmt::format("{} / {} / {}", format_duration(m.forward_time), format_duration(m.backward_time),
                  format_duration(m.optimizer_time)));
  if (m.generation_time > 0) {
    row("generation", fmt::format("{} (registered-method calls before the step)",
                                  format_duration(m.generation_time)));
  }
  row("communication",
      m.overlap_fraction
          ? fmt::format("{} total, {} exposed, {:.1f} % overlapped", format_duration(m.comm_total),
                        format_duration(m.comm_exposed), 100 * *m.overlap_fraction)
          : std::string("none"));
  if (m.overlap_fraction) {
    row("compute beside it", m.contention ? fmt::format("{} of GPU work lost while collectives ran",
                                                        format_duration(*m.contention))
                                          : std::string("unknown (the run did not record it)"));
  }
  row("collectives per iteration",
      fmt::format("{} all-gather, {} reduce-scatter, {} all-reduce", m.collectives.at("all_gather"),
                  m.collectives.at("reduce_scatter"), m.collectives.at("all_reduce")));
  row("peak allocated", m.peak_allocated
                            ? fmt::format("{} at {}", format_bytes(*m.peak_allocated), m.peak_op)
                            : std::string("unknown (no memory recorded)"));
  std::vector<std::pair<Bytes, std::string>> cats;
  for (auto c : all_buffer_categories()) {
    const Bytes b = m.peak_by_category[static_cast<std::size_t>(c)];
    if (b > 0) cats.emplace_back(b, std::string(to_string(c)));
  }
  std::sort(cats.rbegin(), cats.rend());
  for (const auto& [b, name] : cats) row(fmt::format("  {}", name), format_bytes(b));
  row("peak reserved", fmt::format("{} of {} ({})", bytes_text(m.peak_reserved),
                                   bytes_text(m.capacity), fit_text(m)));
  if (m.allocator_retries.value_or(0) > 0) {
    row("allocator retries", fmt::format("{} (cached blocks released to make room: each is a "
                                         "cudaFree stall){}",
                                         *m.allocator_retries, per_step_retries_text(m)));
  }
  const Bytes generation_peak =
      m.peak_allocated_by_phase[static_cast<std::size_t>(Phase::generation)];
  row("peak allocated by phase",
      fmt::format(
          "forward {}, backward {}, optimizer {}{}", format_bytes(m.peak_allocated_by_phase[0]),
          format_bytes(m.peak_allocated_by_phase[1]), format_bytes(m.peak_allocated_by_phase[2]),
          generation_peak > 0 ? ", generation " + format_bytes(generation_peak) : ""));
  std::string busy;
  for (const auto& [name, t] : m.stream_busy)
    busy += fmt::format("{}{} {}", busy.empty() ? "" : ", ", name,
                        t ? format_duration(*t) : std::string("unknown"));
  row("stream busy", busy);
  std::vector<std::pair<TimeNs, std::string>> path;
  for (const auto& [k, v] : m.critical_path.by_kind) path.emplace_back(v, k);
  std::sort(path.rbegin(), path.rend());
  std::string cp;
  for (std::size_t i = 0; i < std::min<std::size_t>(4, path.size()); ++i) {
    cp += fmt::format("{}{} {}", cp.empty() ? "" : ", ", path[i].second,
                      format_duration(path[i].first));
  }
  row("critical path", cp.empty() ? std::string("unknown (the run records no dependencies)") : cp);
  if (!m.out_of_memory.empty()) row("OUT OF MEMORY", m.out_of_memory);
  return out;
}

}  // namespace shardscope::analysis
