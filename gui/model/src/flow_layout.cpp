#include "shardscope/gui/flow_layout.hpp"

namespace shardscope::gui {

std::vector<FlowPlace> flow_layout(const std::vector<double>& widths, double available,
                                   double gap) {
  std::vector<FlowPlace> places;
  places.reserve(widths.size());
  FlowPlace next;
  for (double w : widths) {
    if (next.x > 0 && next.x + w > available) next = FlowPlace{next.row + 1, 0};
    places.push_back(next);
    next.x += w + gap;
  }
  return places;
}

int flow_rows(const std::vector<FlowPlace>& places) {
  return places.empty() ? 0 : places.back().row + 1;
}

}  // namespace shardscope::gui
