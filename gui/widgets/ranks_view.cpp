#include "ranks_view.hpp"

#include <fmt/format.h>

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QHBoxLayout>
#include <QScrollArea>
#include <QVBoxLayout>
#include <QValueAxis>

#include "shardscope/gui/rank_view.hpp"

namespace shardscope::gui {
namespace {

constexpr int kBins = 10;
constexpr std::size_t kLaneClasses = 6;  // the straggler and those last to be ready most often

std::string summary_of(const sim::RankSimulation& r, TimeNs symmetric) {
  std::string out = fmt::format(
      "{} ranks in {} classes. Job step time {} ({:+.1f} % against every rank alike, {}).",
      r.world_size, r.classes.size(), format_duration(r.step_time),
      100.0 * (static_cast<double>(r.step_time) / static_cast<double>(symmetric) - 1.0),
      format_duration(symmetric));
  if (!r.iteration_times.empty()) {
    out += fmt::format(" Over {} iterations after the first: p50 {}, p99 {}, max {}.",
                       r.iteration_times.size(),
                       format_duration(sim::percentile(r.iteration_times, 50)),
                       format_duration(sim::percentile(r.iteration_times, 99)),
                       format_duration(sim::percentile(r.iteration_times, 100)));
  }
  const auto& s = r.classes[r.straggler];
  if (r.classes.size() > 1 && s.arrived_last > 0) {
    out += fmt::format(" Straggler: ranks {}, the last to be ready at {} of {} collectives.",
                       sim::rank_ranges(s.ranks), s.arrived_last, s.collectives);
  }
  return out;
}

}  // namespace

RanksView::RanksView(QWidget* parent)
    : QWidget(parent),
      summary_(new QLabel(this)),
      lanes_(new TimelineWidget(this)),
      histogram_(new QChartView(new QChart(), this)) {
  auto* layout = new QVBoxLayout(this);
  summary_->setWordWrap(true);
  summary_->setMargin(6);
  layout->addWidget(summary_);
  // The lanes (many classes make many: they scroll) beside the histogram, both the tab's height.
  auto* row = new QHBoxLayout;
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(lanes_);
  scroll->setWidgetResizable(true);
  row->addWidget(scroll, 3);
  histogram_->setMinimumWidth(360);
  histogram_->chart()->legend()->hide();
  row->addWidget(histogram_, 2);
  layout->addLayout(row, 1);
  show_ranks(nullptr, 0);
}

void RanksView::show_ranks(std::shared_ptr<const sim::RankSimulation> ranks, TimeNs symmetric) {
  ranks_ = std::move(ranks);
  QChart* chart = histogram_->chart();
  chart->removeAllSeries();
  for (auto* axis : chart->axes()) chart->removeAxis(axis);
  if (!ranks_ || ranks_->classes.empty()) {
    summary_->setText(
        "Every rank is alike: set a slow node or slow link in the settings (or variation.* keys "
        "in the scenario) to replay every rank.");
    lanes_timeline_ = {};
    lanes_->set_timeline(nullptr);
    lanes_->setVisible(false);
    histogram_->setVisible(false);
    return;
  }
  summary_->setText(QString::fromStdString(summary_of(*ranks_, symmetric)));
  lanes_timeline_ = rank_lanes(*ranks_, kLaneClasses);
  lanes_->setVisible(true);
  lanes_->set_timeline(&lanes_timeline_);
  // The step times as a histogram: how often the job took how long.
  const auto bins = histogram(ranks_->iteration_times, kBins);
  auto* set = new QBarSet("iterations");
  QStringList labels;
  int most = 0;
  for (const HistogramBin& b : bins) {
    *set << b.count;
    most = std::max(most, b.count);
    labels << QString::number(static_cast<double>(b.from) / kNsPerMs, 'f', 0);
  }
  auto* series = new QBarSeries();
  series->append(set);
  chart->addSeries(series);
  auto* x = new QBarCategoryAxis();
  x->append(labels);
  x->setTitleText("step time, ms (bin start)");
  x->setLabelsAngle(-90);  // ten labels side by side do not fit the width
  auto* y = new QValueAxis();
  y->setRange(0, std::max(1, most));
  y->setLabelFormat("%d");
  if (most <= 10)
    y->setTickCount(std::max(1, most) + 1);  // a tick per count: whole labels
  else
    y->applyNiceNumbers();
  y->setTitleText("iterations");
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(x);
  series->attachAxis(y);
  chart->setTitle("step times after the first iteration");
  histogram_->setVisible(true);
}

}  // namespace shardscope::gui
