#pragma once
// What the charts' value axes share: round ticks, and a memory unit that fits the data.

#include <QString>

#include "shardscope/core/units.hpp"

class QValueAxis;

namespace shardscope::gui {

/// GiB, MiB or KiB: the largest that keeps `top` at 1 or more (KiB below 1 MiB).
struct MemoryUnit {
  QString name;
  double bytes = 1;
  double of(Bytes b) const { return static_cast<double>(b) / bytes; }
};
MemoryUnit memory_unit_for(Bytes top);

/// The range [0, max × 1.05] with ticks from 0 every 1, 2 or 5 × 10^k (about five), labelled
/// with as many decimals as the step needs: 0, 20, 40 rather than 0, 21.6, 43.2.
void set_round_ticks(QValueAxis* axis, double max);

}  // namespace shardscope::gui
