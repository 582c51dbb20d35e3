#include "memory_chart.hpp"

#include <QAreaSeries>
#include <QChart>
#include <QLegendMarker>
#include <QLineSeries>
#include <QScatterSeries>
#include <QValueAxis>
#include <algorithm>

#include "shardscope/core/schedule.hpp"

namespace shardscope::gui {
namespace {

QColor category_color(std::size_t c) {
  static const QColor kColors[] = {
      QColor(120, 144, 156), QColor(174, 213, 129), QColor(52, 168, 83),   QColor(27, 94, 32),
      QColor(255, 183, 77),  QColor(251, 140, 0),   QColor(230, 81, 0),    QColor(191, 54, 12),
      QColor(121, 85, 72),   QColor(66, 133, 244),  QColor(144, 202, 249), QColor(171, 71, 188),
      QColor(189, 189, 189)};
  return kColors[c % std::size(kColors)];
}

double gib(Bytes b) {
  return static_cast<double>(b) / static_cast<double>(kGiB);
}

// At most `buckets` samples, keeping in each time bucket the one with the most allocated bytes
// (so the peak survives); Qt Charts slows sharply with many points per series.
std::vector<const MemorySample*> decimate(const std::vector<MemorySample>& samples,
                                          std::size_t buckets) {
  std::vector<const MemorySample*> out;
  if (samples.size() <= buckets) {
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
double ms(TimeNs t) {
  return static_cast<double>(t) / 1e6;
}

}  // namespace

MemoryChart::MemoryChart(QWidget* parent) : QChartView(new QChart(), parent) {
  setRenderHint(QPainter::Antialiasing, false);
  chart()->legend()->setAlignment(Qt::AlignBottom);
  chart()->setMargins(QMargins(4, 4, 4, 4));
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
}

void MemoryChart::set_left_margin(int px) {
  QMargins m = chart()->margins();
  m.setLeft(px);
  chart()->setMargins(m);
}

void MemoryChart::set_timeline(const Timeline* t, const QString& peak_label) {
  timeline_ = t;
  peak_label_ = peak_label;
  build(0, t ? t->end_time() : 0);
  if (x_ && t) x_->setRange(0, ms(t->end_time()));
}

// Series for samples in [from, to] (plus the one in force at `from`), decimated to 400 buckets.
void MemoryChart::build(TimeNs from, TimeNs to) {
  built_from_ = from;
  built_to_ = to;
  const Timeline* t = timeline_;
  const QString peak_label = peak_label_;
  QChart* c = chart();
  clear_chart();
  x_ = new QValueAxis;
  y_ = new QValueAxis;
  x_->setTitleText("time (ms)");
  y_->setTitleText("memory (GiB)");
  x_->setLabelFormat("%.1f");
  y_->setLabelFormat("%.1f");
  c->addAxis(x_, Qt::AlignBottom);
  c->addAxis(y_, Qt::AlignLeft);
  cursor_ = nullptr;
  peak_marker_ = nullptr;
  if (!t || t->memory.empty()) return;
  const auto categories = all_buffer_categories();
  std::vector<MemorySample> window;
  {
    auto first = std::upper_bound(t->memory.begin(), t->memory.end(), from,
                                  [](TimeNs v, const MemorySample& m) { return v < m.time; });
    if (first != t->memory.begin()) --first;
    for (auto it = first; it != t->memory.end() && it->time <= to; ++it) window.push_back(*it);
  }
  const auto samples = decimate(window, 400);
  // Stacked step areas: cumulative allocated bytes by category.
  std::vector<QLineSeries*> uppers;
  QLineSeries* lower = nullptr;
  std::size_t peak_index = 0;  // over the whole timeline, not the window
  for (std::size_t i = 0; i < t->memory.size(); ++i) {
    if (t->memory[i].allocated > t->memory[peak_index].allocated) peak_index = i;
  }
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
      points.append({ms(m->time), prev});
      prev = gib(cumulative);
      points.append({ms(m->time), prev});
    }
    upper->replace(points);
    auto* area = new QAreaSeries(upper, lower);
    area->setName(QString::fromUtf8(to_string(categories[cat]).data()));
    area->setColor(category_color(cat));
    area->setBorderColor(category_color(cat).darker(120));
    c->addSeries(area);
    area->attachAxis(x_);
    area->attachAxis(y_);
    lower = upper;
    uppers.push_back(upper);
  }
  auto step_line = [&](const QString& name, auto value, QColor color, Qt::PenStyle style) {
    auto* s = new QLineSeries;
    s->setName(name);
    double prev = 0;
    QList<QPointF> points;
    for (const auto* m : samples) {
      points.append({ms(m->time), prev});
      prev = value(*m);
      points.append({ms(m->time), prev});
    }
    s->replace(points);
    s->setPen(QPen(color, 2, style));
    c->addSeries(s);
    s->attachAxis(x_);
    s->attachAxis(y_);
    return s;
  };
  step_line(
      "reserved", [](const MemorySample& m) { return gib(m.reserved); }, QColor(0, 0, 0),
      Qt::SolidLine);
  const double end_ms = ms(std::max(to, t->end_time()));
  auto* capacity = new QLineSeries;
  capacity->setName("GPU capacity");
  capacity->append(0, gib(t->memory_capacity));
  capacity->append(end_ms, gib(t->memory_capacity));
  capacity->setPen(QPen(QColor(200, 0, 0), 2, Qt::DashLine));
  c->addSeries(capacity);
  capacity->attachAxis(x_);
  capacity->attachAxis(y_);
  const auto& peak = t->memory[peak_index];
  peak_ = QPointF(ms(peak.time), gib(peak.allocated));
  peak_marker_ = new QScatterSeries;
  peak_marker_->setName(peak_label.isEmpty() ? QString("peak %1 GiB").arg(peak_.y(), 0, 'f', 2)
                                             : peak_label);
  peak_marker_->setMarkerSize(12);
  peak_marker_->setColor(QColor(255, 0, 0));
  peak_marker_->append(peak_);
  c->addSeries(peak_marker_);
  peak_marker_->attachAxis(x_);
  peak_marker_->attachAxis(y_);
  cursor_ = new QLineSeries;
  cursor_->setName("cursor");
  cursor_->setPen(QPen(QColor(200, 0, 0), 1, Qt::DashLine));
  c->addSeries(cursor_);
  cursor_->attachAxis(x_);
  cursor_->attachAxis(y_);
  for (auto* marker : c->legend()->markers(cursor_)) marker->setVisible(false);
  y_max_ = std::max(gib(t->memory_capacity), peak_.y()) * 1.05;
  y_->setRange(0, y_max_);
  x_->setRange(ms(from), ms(std::max(to, from + 1)));
}

void MemoryChart::set_view(qint64 start_ns, qint64 end_ns) {
  if (!x_ || !timeline_) return;
  // Rebuild for a view much narrower than what the series cover, or outside it; panning inside a
  // padded window stays a range change.
  const TimeNs span = std::max<TimeNs>(1, end_ns - start_ns);
  const bool outside = start_ns < built_from_ || end_ns > built_to_;
  const bool finer = (built_to_ - built_from_) > 6 * span;
  if (outside || finer) build(std::max<TimeNs>(0, start_ns - span), end_ns + span);
  x_->setRange(ms(start_ns), ms(end_ns));
}

void MemoryChart::set_cursor_time(qint64 time_ns) {
  if (!cursor_) return;
  cursor_->clear();
  cursor_->append(ms(time_ns), 0);
  cursor_->append(ms(time_ns), y_max_);
}

}  // namespace shardscope::gui
