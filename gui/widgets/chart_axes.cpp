#include "chart_axes.hpp"

#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "shardscope/gui/time_axis.hpp"

namespace shardscope::gui {

MemoryUnit memory_unit_for(Bytes top) {
  if (top >= kGiB) return {"GiB", static_cast<double>(kGiB)};
  if (top >= kMiB) return {"MiB", static_cast<double>(kMiB)};
  return {"KiB", static_cast<double>(kKiB)};
}

void set_round_ticks(QValueAxis* axis, double max) {
  const double top = std::max(max, 1e-9) * 1.05;
  const double step = nice_step(top / 5);
  axis->setTickType(QValueAxis::TicksDynamic);
  axis->setTickAnchor(0);
  axis->setTickInterval(step);
  axis->setLabelFormat(
      QString("%.%1f").arg(std::max(0, -static_cast<int>(std::floor(std::log10(step))))));
  axis->setRange(0, top);
}

}  // namespace shardscope::gui
