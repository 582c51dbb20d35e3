#pragma once
// The Ranks tab: every rank replayed with the scenario's variation.* keys (the settings panel's
// "slow node" and "slow link" re-simulate it live). A summary (the job's step against the
// symmetric one, its percentiles, the straggler), one lane per rank class's GPU stream (identical
// ranks folded, the count in the lane's name; a collective's hover text names the rank the others
// waited for there) and a histogram of the job's step times over its iterations.

#include <QChartView>
#include <QLabel>
#include <QWidget>

#include "shardscope/core/timeline.hpp"
#include "shardscope/sim/rank_simulation.hpp"
#include "timeline_widget.hpp"

namespace shardscope::gui {

class RanksView : public QWidget {
  Q_OBJECT

 public:
  explicit RanksView(QWidget* parent = nullptr);
  /// Shows `ranks` (null: the scenario has no variation, and the tab says how to add one) against
  /// the symmetric step time.
  void show_ranks(std::shared_ptr<const sim::RankSimulation> ranks, TimeNs symmetric_step);
  QString summary_text() const { return summary_->text(); }
  TimelineWidget* lanes() const { return lanes_; }

 private:
  QLabel* summary_;
  TimelineWidget* lanes_;
  QChartView* histogram_;
  std::shared_ptr<const sim::RankSimulation> ranks_;
  Timeline lanes_timeline_;
};

}  // namespace shardscope::gui
