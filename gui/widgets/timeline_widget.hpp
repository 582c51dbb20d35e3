#pragma once
// Paints a timeline: a lane per stream plus the CPU, ops coloured by kind and labelled by group
// when wide enough, narrow ops folded into counted blocks, a time axis with units. Wheel zooms at
// the cursor, dragging pans, Shift-drag selects a range, keys: + − ← → Home. With a second run
// stacked beside it, hovering an op also gives its counterpart's delta. Painting only: layout,
// mapping and folding live in gui/model.

#include <QWidget>
#include <optional>
#include <set>

#include "shardscope/core/timeline.hpp"
#include "shardscope/gui/lane_layout.hpp"
#include "shardscope/gui/run_comparison.hpp"
#include "shardscope/gui/time_axis.hpp"

namespace shardscope::gui {

QColor color_of(OpKind kind);

class TimelineWidget : public QWidget {
  Q_OBJECT

 public:
  explicit TimelineWidget(QWidget* parent = nullptr);

  void set_timeline(const Timeline* timeline);
  void set_critical_path(std::set<OpId> ops);
  void set_highlight_critical_path(bool on);
  void set_cursor_time(TimeNs t);
  void set_view(TimeNs start, TimeNs end);
  /// The end of the time axis (its start is 0). set_timeline sets it to the timeline's end; two
  /// stacked runs share the later end so that one view maps both alike.
  void set_time_limit(TimeNs limit);
  /// Each op's counterpart in another run, for the hover text ("measured: 1.2 ms (+0.1 ms…)").
  void set_counterparts(Counterparts counterparts, std::string other_name);
  /// The hover text of the op under `pos`, or "" (also what tests read).
  QString tooltip_at(QPoint pos) const;
  const TimeAxis& axis() const { return axis_; }
  int lane_top(int lane) const;
  static constexpr int kLabelWidth = 170;
  // Room right of the run's end, so that its last ops end inside the view, not at its border
  // (the memory chart keeps the same, to stay aligned).
  static constexpr int kRightMargin = 28;
  static constexpr int kHeader = 26;
  static constexpr int kLaneHeight = 24;

  QSize sizeHint() const override;

 signals:
  void view_changed(qint64 start_ns, qint64 end_ns);
  void cursor_moved(qint64 time_ns);
  void range_selected(qint64 start_ns, qint64 end_ns);
  void op_clicked(int index);

 protected:
  void paintEvent(QPaintEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void keyPressEvent(QKeyEvent*) override;
  bool event(QEvent*) override;

 private:
  int lane_at(int y) const;
  /// The folded block (several ops too narrow to draw apart) under `pos`, if any.
  std::optional<DrawItem> folded_at(QPoint pos) const;
  int plot_width() const { return std::max(1, width() - kLabelWidth - kRightMargin); }
  double plot_x(double x) const { return x - kLabelWidth; }
  void view_moved();

  const Timeline* timeline_ = nullptr;
  LaneLayout layout_;
  TimeAxis axis_;
  std::set<OpId> critical_;
  Counterparts counterparts_;
  std::string other_name_;
  bool highlight_critical_ = false;
  TimeNs cursor_ = -1;
  bool dragging_ = false;
  bool selecting_ = false;
  QPoint press_;
  double last_x_ = 0;
  TimeNs select_start_ = 0;
  TimeNs select_end_ = 0;
};

}  // namespace shardscope::gui
