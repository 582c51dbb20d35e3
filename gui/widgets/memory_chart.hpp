#pragma once
// Memory under the timeline, on the same time axis: allocated bytes stacked by category, reserved
// and GPU capacity as lines, the peak marked and explained, and the timeline's cursor.

#include <QChartView>
#include <vector>

#include "shardscope/core/timeline.hpp"

QT_BEGIN_NAMESPACE
class QLineSeries;
class QScatterSeries;
class QValueAxis;
QT_END_NAMESPACE

namespace shardscope::gui {

class MemoryChart : public QChartView {
  Q_OBJECT

 public:
  explicit MemoryChart(QWidget* parent = nullptr);
  ~MemoryChart() override;

  /// `peak_label` explains the peak ("74.3 GiB at backward root, iteration 1").
  void set_timeline(const Timeline* timeline, const QString& peak_label = {});
  void set_view(qint64 start_ns, qint64 end_ns);
  void set_cursor_time(qint64 time_ns);
  /// Where the peak marker is, in chart coordinates (ms, GiB); for tests.
  QPointF peak_point() const { return peak_; }
  /// Left edge of the plot area in widget pixels, to align with the timeline's lanes.
  void set_left_margin(int px);

 private:
  void build(TimeNs from, TimeNs to);
  /// Removes and deletes every series and axis, and the line series the areas are bounded by:
  /// a QAreaSeries does not own those, and QChart::removeAxis hands an axis back to its caller.
  void clear_chart();

  const Timeline* timeline_ = nullptr;
  QString peak_label_;
  TimeNs built_from_ = 0, built_to_ = 0;  // the window the series cover
  QValueAxis* x_ = nullptr;
  QValueAxis* y_ = nullptr;
  QLineSeries* cursor_ = nullptr;
  QScatterSeries* peak_marker_ = nullptr;
  QPointF peak_;
  double y_max_ = 1;
  std::vector<QLineSeries*> area_bounds_;  // upper lines of the stacked areas (owned)
};

}  // namespace shardscope::gui
