#pragma once
// Two runs shown stacked (a simulation and a measured or imported run of its scenario, or a
// pinned baseline and the current settings): each op's counterpart in the other run for the
// hover text, and the metric deltas for the metrics table, both from analysis::compare.

#include <QString>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "shardscope/core/compare.hpp"

namespace shardscope::gui {

/// An op's matched op in the other run, seen from this op: deltas are other − this.
struct OpCounterpart {
  TimeNs start_delta = 0;
  TimeNs duration_delta = 0;
  TimeNs other_duration = 0;
};
using Counterparts = std::unordered_map<OpId, OpCounterpart>;

enum class Side { a, b };
/// The counterparts of the ops of run A or run B of the comparison, by op id.
Counterparts counterparts(const analysis::Comparison& comparison, Side side);

/// "measured: 1.230 ms (+0.100 ms, +8.8 %), starts 0.300 ms later" for a hover text.
std::string counterpart_text(const OpCounterpart& counterpart, std::string_view other_name);

/// Metrics table rows: each steady-state metric as "A → B (Δ, %)", then the op matching and
/// what one run did and the other did not. `a_name` and `b_name` say which run is which.
std::vector<std::pair<QString, QString>> comparison_rows(const analysis::Comparison& comparison,
                                                         std::string_view a_name,
                                                         std::string_view b_name);

}  // namespace shardscope::gui
