#pragma once
// Memory under the timeline, on the same time axis: allocated bytes stacked by category, reserved
// and GPU capacity as lines, the peak marked and explained, the timeline's cursor, and a second
// run's allocated and reserved bytes as lines when two runs are compared.
//
// The plot area is placed, not laid out by Qt Charts: it starts `left_margin` pixels from the
// left edge and ends at the right edge, exactly like the timeline's lanes, so a time has the same
// x in both. Time ticks use the timeline's step and unit; memory ticks are 1, 2 or 5 × 10^k GiB.
// The legend is painted below the axis and wraps instead of truncating labels.

#include <QChartView>
#include <vector>

#include "shardscope/core/timeline.hpp"
#include "shardscope/gui/flow_layout.hpp"
#include "shardscope/gui/time_axis.hpp"

QT_BEGIN_NAMESPACE
class QLineSeries;
class QScatterSeries;
class QValueAxis;
QT_END_NAMESPACE

namespace shardscope::gui {

class MemoryChart : public QChartView {
  Q_OBJECT

 public:
  struct LegendEntry {
    QString name;
    QColor color;
    Qt::PenStyle line = Qt::NoPen;  // NoPen: a filled swatch (an area or the peak marker)
  };

  explicit MemoryChart(QWidget* parent = nullptr);
  ~MemoryChart() override;

  /// `peak_label` explains the peak ("74.3 GiB at backward root, iteration 1").
  void set_timeline(const Timeline* timeline, const QString& peak_label = {});
  /// A second run drawn as lines (its allocated and reserved), named `name`; nullptr removes it.
  void set_reference(const Timeline* reference, const QString& name = {});
  void set_view(qint64 start_ns, qint64 end_ns);
  void set_cursor_time(qint64 time_ns);
  /// Where the peak marker is, in chart coordinates (time and memory in the axes' units); for
  /// tests.
  QPointF peak_point() const { return peak_; }
  /// Left edge of the plot area and room right of it, in widget pixels, to align with the
  /// timeline's lanes.
  void set_margins(int left_px, int right_px);
  /// The memory axis's unit: GiB, MiB or KiB, whichever keeps the run's peak at 1 or more.
  const QString& memory_unit() const { return memory_unit_; }
  /// The time axis as drawn: its unit, tick interval (in that unit) and range; for tests.
  const QValueAxis* time_axis() const { return x_; }
  const QValueAxis* memory_axis() const { return y_; }
  TimeUnit time_unit() const { return unit_; }
  const std::vector<LegendEntry>& legend_entries() const { return legend_; }
  /// The legend's rows as laid out at the current width.
  int legend_rows() const;

 protected:
  void resizeEvent(QResizeEvent* event) override;
  void drawForeground(QPainter* painter, const QRectF& rect) override;

 private:
  void build(TimeNs from, TimeNs to);
  void add_step_line(const std::vector<const MemorySample*>& samples, const QString& name,
                     Bytes (*value)(const MemorySample&), const QPen& pen);
  double in_unit(Bytes b) const { return static_cast<double>(b) / bytes_per_unit_; }
  void place_plot_area();
  /// Ticks every `step` (a whole number of the current unit) over [start, end].
  void set_time_ticks(TimeNs start, TimeNs end, TimeNs step);
  std::vector<double> legend_widths() const;  // swatch and label of each entry, in pixels
  std::vector<FlowPlace> legend_places(const std::vector<double>& widths) const;
  /// Removes and deletes every series and axis, and the line series the areas are bounded by:
  /// a QAreaSeries does not own those, and QChart::removeAxis hands an axis back to its caller.
  void clear_chart();

  const Timeline* timeline_ = nullptr;
  const Timeline* reference_ = nullptr;
  QString peak_label_;
  QString reference_name_;
  TimeNs built_from_ = 0, built_to_ = 0;  // the window the series cover
  TimeNs view_start_ = 0, view_end_ = 1;
  TimeUnit unit_{"ms", kNsPerMs};
  int left_margin_ = 98;
  int right_margin_ = 0;
  QString memory_unit_ = "GiB";
  double bytes_per_unit_ = static_cast<double>(kGiB);
  QValueAxis* x_ = nullptr;
  QValueAxis* y_ = nullptr;
  QLineSeries* cursor_ = nullptr;
  QScatterSeries* peak_marker_ = nullptr;
  QPointF peak_;
  double y_max_ = 1;
  std::vector<QLineSeries*> area_bounds_;  // upper lines of the stacked areas (owned)
  std::vector<LegendEntry> legend_;
};

}  // namespace shardscope::gui
