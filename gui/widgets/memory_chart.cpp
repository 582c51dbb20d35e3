#include "memory_chart.hpp"

#include <QAreaSeries>
#include <QChart>
#include <QLineSeries>
#include <QPainter>
#include <QScatterSeries>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "chart_axes.hpp"
#include "shardscope/core/schedule.hpp"

namespace shardscope::gui {
namespace {

constexpr double kTop = 10;           // above the plot: room for the top tick label
constexpr double kTimeAxisBand = 44;  // below the plot: tick labels and the axis title
constexpr double kLegendRow = 18;
constexpr double kLegendGap = 14;
constexpr double kSwatch = 14;
const QColor kReferenceColor(0, 137, 123);

QColor category_color(std::size_t c) {
  static const QColor kColors[] = {
      QColor(120, 144, 156), QColor(174, 213, 129), QColor(52, 168, 83),   QColor(27, 94, 32),
      QColor(255, 183, 77),  QColor(251, 140, 0),   QColor(230, 81, 0),    QColor(191, 54, 12),
      QColor(121, 85, 72),   QColor(66, 133, 244),  QColor(144, 202, 249), QColor(171, 71, 188),
      QColor(189, 189, 189)};
  return kColors[c % std::size(kColors)];
}

Bytes allocated_of(const MemorySample& m) {
  return m.allocated;
}
Bytes reserved_of(const MemorySample& m) {
  return m.reserved;
}

// A capacity line far above the run (a run of MiB on an 80 GiB GPU) would flatten the run to
// nothing: the axis then follows the run alone and the legend gives the capacity.
constexpr double kCapacityOnScale = 0.25;  // of the capacity: the run's top from which it is drawn

// The samples in [from, to], plus the one in force at `from`.
std::vector<MemorySample> window_of(const Timeline& t, TimeNs from, TimeNs to) {
  auto first = std::upper_bound(t.memory.begin(), t.memory.end(), from,
                                [](TimeNs v, const MemorySample& m) { return v < m.time; });
  if (first != t.memory.begin()) --first;
  std::vector<MemorySample> window;
  for (auto it = first; it != t.memory.end() && it->time <= to; ++it) window.push_back(*it);
  return window;
}

// At most `buckets` samples, keeping in each time bucket the one with the most allocated bytes
// (so the peak survives); Qt Charts slows sharply with many points per series.
std::vector<const MemorySample*> decimate(const std::vector<MemorySample>& samples,
                                          std::size_t buckets) {
  std::vector<const MemorySample*> out;
  if (samples.size() <= buckets) {
    out.reserve(samples.size());
    for (const auto& s : samples) out.push_back(&s);
    return out;
  }
  const TimeNs t0 = samples.front().time, t1 = std::max(samples.back().time, t0 + 1);
  std::size_t current = 0;
  for (const auto& s : samples) {
    const auto bucket =
        static_cast<std::size_t>(static_cast<double>(s.time - t0) / static_cast<double>(t1 - t0) *
                                 static_cast<double>(buckets - 1));
    if (out.empty() || bucket != current) {
      out.push_back(&s);
      current = bucket;
    } else if (s.allocated > out.back()->allocated) {
      out.back() = &s;
    }
  }
  return out;
}

Bytes peak_allocated(const Timeline& t) {
  Bytes peak = 0;
  for (const auto& m : t.memory) peak = std::max(peak, m.allocated);
  return peak;
}

// The highest memory a run shows: its peak allocated and every reserved sample.
Bytes highest(const Timeline& t) {
  Bytes top = peak_allocated(t);
  for (const auto& m : t.memory) top = std::max(top, m.reserved);
  return top;
}

}  // namespace

MemoryChart::MemoryChart(QWidget* parent) : QChartView(new QChart(), parent) {
  setRenderHint(QPainter::Antialiasing, false);
  setFrameShape(QFrame::NoFrame);  // the viewport spans the widget, as the timeline's lanes do
  chart()->legend()->setVisible(false);  // painted in drawForeground, wrapped, never truncated
  chart()->setMargins(QMargins(0, 0, 0, 0));
  chart()->setBackgroundRoundness(0);
  setMinimumHeight(220);
}

MemoryChart::~MemoryChart() {
  clear_chart();
}

void MemoryChart::clear_chart() {
  QChart* c = chart();
  c->removeAllSeries();
  for (auto* line : area_bounds_) delete line;
  area_bounds_.clear();
  for (auto* axis : c->axes()) {
    c->removeAxis(axis);
    delete axis;
  }
  x_ = y_ = nullptr;
  cursor_ = nullptr;
  peak_marker_ = nullptr;
  legend_.clear();
}

void MemoryChart::set_margins(int left_px, int right_px) {
  left_margin_ = left_px;
  right_margin_ = right_px;
  place_plot_area();
}

std::vector<double> MemoryChart::legend_widths() const {
  const QFontMetrics fm(font());
  std::vector<double> widths;
  widths.reserve(legend_.size());
  for (const auto& e : legend_) widths.push_back(kSwatch + 4 + fm.horizontalAdvance(e.name));
  return widths;
}

std::vector<FlowPlace> MemoryChart::legend_places(const std::vector<double>& widths) const {
  return flow_layout(widths, viewport()->width() - 16.0, kLegendGap);
}

int MemoryChart::legend_rows() const {
  return flow_rows(legend_places(legend_widths()));
}

void MemoryChart::place_plot_area() {
  const double w = viewport()->width(), h = viewport()->height();
  const double bottom = kTimeAxisBand + legend_rows() * kLegendRow + 4;
  chart()->setPlotArea(QRectF(left_margin_, kTop, std::max(1.0, w - left_margin_ - right_margin_),
                              std::max(1.0, h - kTop - bottom)));
}

void MemoryChart::resizeEvent(QResizeEvent* event) {
  QChartView::resizeEvent(event);
  place_plot_area();
  set_view(view_start_, view_end_);  // the tick step follows the plot's width
}

void MemoryChart::set_timeline(const Timeline* t, const QString& peak_label) {
  timeline_ = t;
  peak_label_ = peak_label;
  view_start_ = 0;
  view_end_ = t ? std::max<TimeNs>(1, t->end_time()) : 1;
  build(view_start_, view_end_);
  set_view(view_start_, view_end_);
}

void MemoryChart::set_reference(const Timeline* reference, const QString& name) {
  if (reference == reference_ && name == reference_name_) return;
  reference_ = reference;
  reference_name_ = name;
  build(built_from_, built_to_);
  set_view(view_start_, view_end_);
}

void MemoryChart::add_step_line(const std::vector<const MemorySample*>& samples,
                                const QString& name, Bytes (*value)(const MemorySample&),
                                const QPen& pen) {
  auto* s = new QLineSeries;
  s->setName(name);
  double prev = 0;
  QList<QPointF> points;
  points.reserve(2 * static_cast<qsizetype>(samples.size()));
  for (const auto* m : samples) {
    points.append({unit_.of(m->time), prev});
    prev = in_unit(value(*m));
    points.append({unit_.of(m->time), prev});
  }
  s->replace(points);
  s->setPen(pen);
  chart()->addSeries(s);
  s->attachAxis(x_);
  s->attachAxis(y_);
  legend_.push_back({name, pen.color(), pen.style()});
}

// Series for samples in [from, to] (plus the one in force at `from`), decimated to 400 buckets,
// in the current time unit.
void MemoryChart::build(TimeNs from, TimeNs to) {
  built_from_ = from;
  built_to_ = to;
  const Timeline* t = timeline_;
  QChart* c = chart();
  clear_chart();
  x_ = new QValueAxis;
  y_ = new QValueAxis;
  c->addAxis(x_, Qt::AlignBottom);
  c->addAxis(y_, Qt::AlignLeft);
  if (!t || t->memory.empty()) {
    place_plot_area();
    return;
  }
  // The memory unit and range follow the run (and the reference), the capacity where it is near.
  Bytes top = highest(*t);
  if (reference_ && !reference_->memory.empty()) top = std::max(top, highest(*reference_));
  const bool capacity_on_scale =
      t->memory_capacity > 0 &&
      static_cast<double>(top) >= kCapacityOnScale * static_cast<double>(t->memory_capacity);
  if (capacity_on_scale) top = std::max(top, t->memory_capacity);
  const MemoryUnit unit = memory_unit_for(top);
  memory_unit_ = unit.name;
  bytes_per_unit_ = unit.bytes;
  y_->setTitleText(QString("memory (%1)").arg(memory_unit_));
  const auto categories = all_buffer_categories();
  const auto window = window_of(*t, from, to);
  const auto samples = decimate(window, 400);
  // Stacked step areas: cumulative allocated bytes by category.
  QLineSeries* lower = nullptr;
  for (std::size_t cat = 0; cat < categories.size(); ++cat) {
    bool any = false;
    for (const auto* m : samples) any |= cat < m->by_category.size() && m->by_category[cat] > 0;
    if (!any) continue;
    auto* upper = new QLineSeries;
    area_bounds_.push_back(upper);
    double prev = 0;
    QList<QPointF> points;
    points.reserve(2 * static_cast<qsizetype>(samples.size()));
    for (const auto* m : samples) {
      Bytes cumulative = 0;
      for (std::size_t k = 0; k <= cat && k < m->by_category.size(); ++k)
        cumulative += m->by_category[k];
      points.append({unit_.of(m->time), prev});
      prev = in_unit(cumulative);
      points.append({unit_.of(m->time), prev});
    }
    upper->replace(points);
    auto* area = new QAreaSeries(upper, lower);
    const QString name = QString::fromUtf8(to_string(categories[cat]).data());
    area->setName(name);
    area->setColor(category_color(cat));
    area->setBorderColor(category_color(cat).darker(120));
    c->addSeries(area);
    area->attachAxis(x_);
    area->attachAxis(y_);
    legend_.push_back({name, category_color(cat), Qt::NoPen});
    lower = upper;
  }
  add_step_line(samples, "reserved", &reserved_of, QPen(Qt::black, 2));
  if (reference_ && !reference_->memory.empty()) {
    const auto other_window = window_of(*reference_, from, to);
    const auto other = decimate(other_window, 400);
    add_step_line(other, reference_name_ + " allocated", &allocated_of,
                  QPen(kReferenceColor, 2, Qt::DashLine));
    add_step_line(other, reference_name_ + " reserved", &reserved_of,
                  QPen(kReferenceColor.darker(140), 2, Qt::DotLine));
  }
  const double end = unit_.of(std::max(to, t->end_time()));
  if (capacity_on_scale) {
    auto* capacity = new QLineSeries;
    capacity->setName("GPU capacity");
    capacity->append(0, in_unit(t->memory_capacity));
    capacity->append(end, in_unit(t->memory_capacity));
    capacity->setPen(QPen(QColor(200, 0, 0), 2, Qt::DashLine));
    c->addSeries(capacity);
    capacity->attachAxis(x_);
    capacity->attachAxis(y_);
    legend_.push_back({"GPU capacity", QColor(200, 0, 0), Qt::DashLine});
  } else if (t->memory_capacity > 0) {
    legend_.push_back({QString("GPU capacity %1, far above (not drawn)")
                           .arg(QString::fromStdString(format_bytes(t->memory_capacity))),
                       QColor(200, 0, 0), Qt::DashLine});
  }
  // The peak over the whole timeline, not the window.
  const auto peak = std::max_element(
      t->memory.begin(), t->memory.end(),
      [](const MemorySample& a, const MemorySample& b) { return a.allocated < b.allocated; });
  peak_ = QPointF(unit_.of(peak->time), in_unit(peak->allocated));
  peak_marker_ = new QScatterSeries;
  const QString peak_name = peak_label_.isEmpty()
                                ? QString("peak %1 %2").arg(peak_.y(), 0, 'f', 2).arg(memory_unit_)
                                : peak_label_;
  peak_marker_->setName(peak_name);
  peak_marker_->setMarkerSize(12);
  peak_marker_->setColor(QColor(255, 0, 0));
  peak_marker_->append(peak_);
  c->addSeries(peak_marker_);
  peak_marker_->attachAxis(x_);
  peak_marker_->attachAxis(y_);
  legend_.push_back({peak_name, QColor(255, 0, 0), Qt::NoPen});
  cursor_ = new QLineSeries;
  cursor_->setPen(QPen(QColor(200, 0, 0), 1, Qt::DashLine));
  c->addSeries(cursor_);
  cursor_->attachAxis(x_);
  cursor_->attachAxis(y_);
  set_round_ticks(y_, in_unit(top));
  y_max_ = y_->max();
  place_plot_area();  // the legend's rows may have changed
}

void MemoryChart::set_time_ticks(TimeNs start, TimeNs end, TimeNs step) {
  x_->setTickType(QValueAxis::TicksDynamic);
  x_->setTickAnchor(0);
  x_->setTickInterval(unit_.of(step));
  x_->setLabelFormat("%.0f");  // a multiple of a step of at least one unit
  x_->setTitleText(QString("time (%1)").arg(unit_.name));
  x_->setRange(unit_.of(start), unit_.of(std::max(end, start + 1)));
}

void MemoryChart::set_view(qint64 start_ns, qint64 end_ns) {
  view_start_ = start_ns;
  view_end_ = std::max<TimeNs>(end_ns, start_ns + 1);
  if (!x_) return;
  // The step and unit the timeline uses at this width (a rebuild changes only the plot's
  // height); a new unit means new series.
  const TimeNs step =
      tick_step(TimeAxis(view_start_, view_end_, chart()->plotArea().width()), kTickSpacingPx);
  const TimeUnit unit = tick_unit(step);
  const bool new_unit = unit.ns != unit_.ns;
  unit_ = unit;
  if (timeline_) {
    // Rebuild for a view much narrower than what the series cover, or outside it; panning
    // inside a padded window stays a range change.
    const TimeNs span = view_end_ - view_start_;
    const bool outside = view_start_ < built_from_ || view_end_ > built_to_;
    const bool finer = (built_to_ - built_from_) > 6 * span;
    if (new_unit || outside || finer)
      build(std::max<TimeNs>(0, view_start_ - span), view_end_ + span);
  }
  set_time_ticks(view_start_, view_end_, step);
}

void MemoryChart::set_cursor_time(qint64 time_ns) {
  if (!cursor_) return;
  cursor_->clear();
  cursor_->append(unit_.of(time_ns), 0);
  cursor_->append(unit_.of(time_ns), y_max_);
}

void MemoryChart::drawForeground(QPainter* painter, const QRectF& rect) {
  QChartView::drawForeground(painter, rect);
  const auto widths = legend_widths();
  const auto places = legend_places(widths);
  const double top = viewport()->height() - flow_rows(places) * kLegendRow - 2;
  painter->save();
  painter->setFont(font());
  for (std::size_t i = 0; i < legend_.size(); ++i) {
    const auto& e = legend_[i];
    const double x = 8 + places[i].x, y = top + places[i].row * kLegendRow;
    const QRectF swatch(x, y + (kLegendRow - kSwatch) / 2, kSwatch, kSwatch);
    if (e.line == Qt::NoPen) {
      painter->fillRect(swatch, e.color);
    } else {
      painter->setPen(QPen(e.color, 2, e.line));
      painter->drawLine(QPointF(x, swatch.center().y()), QPointF(x + kSwatch, swatch.center().y()));
    }
    painter->setPen(Qt::black);
    painter->drawText(QRectF(x + kSwatch + 4, y, widths[i], kLegendRow),
                      Qt::AlignVCenter | Qt::AlignLeft, e.name);
  }
  painter->restore();
}

}  // namespace shardscope::gui
