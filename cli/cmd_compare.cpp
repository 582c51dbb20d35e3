#include <fmt/format.h>

#include "commands.hpp"
#include "shardscope/core/compare.hpp"
#include "shardscope/core/output_file.hpp"
#include "shardscope/core/time_breakdown.hpp"
#include "shardscope/traces/chrome_trace.hpp"
#include "shardscope/traces/kineto_import.hpp"
#include "shardscope/traces/rank_alignment.hpp"

namespace shardscope::cli {

int run_import(const ImportArgs& args) {
  const std::vector<std::filesystem::path> inputs(args.traces.begin(), args.traces.end());
  const std::vector<std::pair<std::string, std::string>> outputs{{"--timeline", args.timeline_path},
                                                                 {"--trace", args.trace_path}};
  check_output_paths(outputs, inputs);
  std::vector<traces::ImportedTrace> imported;
  for (const auto& path : args.traces) {
    if (args.traces.size() > 1) fmt::print(stderr, "reading {}\n", path);
    imported.push_back(traces::import_kineto(path));
  }
  if (args.report || (args.timeline_path.empty() && args.trace_path.empty())) {
    for (const auto& i : imported) fmt::print("{}", traces::import_report_text(i.report));
  }
  std::vector<Timeline> ranks;
  ranks.reserve(imported.size());
  for (auto& i : imported) ranks.push_back(std::move(i.timeline));
  if (ranks.size() > 1) {
    const auto alignment = traces::align_ranks(ranks, args.traces);
    fmt::print("aligned {} ranks by their collectives\n{}", ranks.size(),
               traces::alignment_report(alignment));
  }
  const Timeline* chosen = &ranks.front();
  for (const auto& t : ranks) {
    if (args.rank < 0 ? t.provenance.rank < chosen->provenance.rank
                      : t.provenance.rank == args.rank)
      chosen = &t;
  }
  if (args.rank >= 0 && chosen->provenance.rank != args.rank) {
    std::string have;
    for (const auto& t : ranks)
      have += (have.empty() ? "" : ", ") + std::to_string(t.provenance.rank);
    throw ValidationError({Problem{"--rank", "", fmt::format("no trace of rank {}", args.rank),
                                   "the traces' ranks: " + have}});
  }
  if (!args.timeline_path.empty()) write_output(args.timeline_path, timeline_to_json(*chosen));
  if (!args.trace_path.empty()) {
    std::sort(ranks.begin(), ranks.end(), [](const Timeline& a, const Timeline& b) {
      return a.provenance.rank < b.provenance.rank;
    });
    write_output(args.trace_path, traces::chrome_trace_json(ranks),
                 " (open it in ui.perfetto.dev)");
  }
  return kExitOk;
}

int run_summarize(const SummarizeArgs& args) {
  const std::filesystem::path inputs[] = {args.timeline};
  const std::vector<std::pair<std::string, std::string>> outputs{{"--json", args.json_path}};
  check_output_paths(outputs, inputs);
  const auto summary = analysis::summarize(traces::read_timeline_or_trace(args.timeline));
  fmt::print("{}", analysis::summary_table(summary));
  if (!args.json_path.empty()) write_output(args.json_path, analysis::summary_to_json(summary));
  return kExitOk;
}

int run_breakdown(const BreakdownArgs& args) {
  const std::vector<std::filesystem::path> inputs(args.runs.begin(), args.runs.end());
  const std::vector<std::pair<std::string, std::string>> outputs{{"--json", args.json_path}};
  check_output_paths(outputs, inputs);
  std::vector<analysis::TimeBreakdown> runs;
  for (const auto& path : args.runs)
    runs.push_back(analysis::time_breakdown(traces::read_timeline_or_trace(path)));
  fmt::print("{}", analysis::time_breakdown_table(runs));
  if (!args.json_path.empty()) write_output(args.json_path, analysis::time_breakdown_json(runs));
  return kExitOk;
}

int run_compare(const CompareArgs& args) {
  const std::filesystem::path inputs[] = {args.a, args.b};
  const std::vector<std::pair<std::string, std::string>> outputs{{"--json", args.json_path}};
  check_output_paths(outputs, inputs);
  const Timeline a = traces::read_timeline_or_trace(args.a);
  const Timeline b = traces::read_timeline_or_trace(args.b);
  check_same_job(a, args.a, b, args.b, args.allow_mismatch);
  const auto comparison = analysis::compare(a, b);
  fmt::print("{}", analysis::comparison_table(comparison, args.per_op, args.top));
  if (!args.json_path.empty())
    write_output(args.json_path, analysis::comparison_json(comparison, args.per_op));
  return kExitOk;
}

}  // namespace shardscope::cli
