#pragma once
// Places items of given widths left to right, wrapping onto a new row when the next one would
// overflow: the memory chart's legend, which shows every label in full instead of truncating.
// Pure arithmetic, no Qt: tested without a display.

#include <vector>

namespace shardscope::gui {

struct FlowPlace {
  int row = 0;
  double x = 0;
};

/// One place per width, in order. An item wider than `available` gets a row of its own.
std::vector<FlowPlace> flow_layout(const std::vector<double>& widths, double available, double gap);
/// Rows the places use (0 for none).
int flow_rows(const std::vector<FlowPlace>& places);

}  // namespace shardscope::gui
