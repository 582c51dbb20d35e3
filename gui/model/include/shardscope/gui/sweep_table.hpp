#pragma once
// Sweep results for the sweep view: from a sweep run in the GUI or a `shardscope sweep --json`
// file (shardscope.sweep/1).

#include <map>
#include <string>
#include <vector>

#include "shardscope/core/units.hpp"
#include "shardscope/sim/sweep.hpp"

namespace shardscope::gui {

struct SweepRow {
  std::vector<std::pair<std::string, std::string>> settings;  // key, value in axis order
  double step_time_s = 0;
  double tokens_per_s_per_gpu = 0;
  Bytes peak_reserved = 0;
  bool fits = false;
  bool pareto = false;
  std::string error;

  /// "fsdp.reshard_after_forward=false, training.micro_batch=2"
  std::string label() const;
};

std::vector<SweepRow> sweep_rows(const std::vector<sim::SweepAxis>& axes,
                                 const std::vector<sim::SweepPoint>& points);
/// Parses shardscope.sweep/1 JSON; throws ValidationError naming `origin` when malformed.
std::vector<SweepRow> sweep_rows_from_json(std::string_view text, const std::string& origin);
/// Parses the CSV `shardscope sweep --csv` writes (axis columns first, then the metrics).
std::vector<SweepRow> sweep_rows_from_csv(std::string_view text, const std::string& origin);

}  // namespace shardscope::gui
