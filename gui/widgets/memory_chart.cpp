#include "memory_chart.hpp"

#include <QAreaSeries>
#include <QChart>
#include <QLegendMarker>
#include <QLineSeries>
#include <QScatterSeries>
#include <QValueAxis>

#include "shardscope/core/schedule.hpp"

namespace shardscope::gui {
namespace {

QColor category_color(std::size_t c) {
  static const QColor kColors[] = {QColor(120, 144, 156), QColor(174, 213, 129), QColor(52, 168, 83),  QColor(27, 94, 32),
                                   QColor(255, 183, 77),  QColor(251, 140, 0),   QColor(230, 81, 0),   QColor(191, 54, 12),
                                   QColor(121, 85, 72),   QColor(66, 133, 244),  QColor(144, 202, 249), QColor(171, 71, 188),
                                   QColor(189, 189, 189)};
  return kColors[c % std::size(kColors)];
}

double gib(Bytes b) { return static_cast<double>(b) / static_cast<double>(kGiB); }
double ms(TimeNs t) { return static_cast<double>(t) / 1e6; }

}  // namespace

MemoryChart::MemoryChart(QWidget* parent) : QChartView(new QChart(), parent) {
  setRenderHint(QPainter::Antialiasing, false);
  chart()->legend()->setAlignment(Qt::AlignBottom);
  chart()->setMargins(QMargins(4, 4, 4, 4));
  setMinimumHeight(220);
}

void MemoryChart::set_left_margin(int px) {
  QMargins m = chart()->margins();
  m.setLeft(px);
  chart()->setMargins(m);
}

void MemoryChart::set_timeline(const Timeline* t, const QString& peak_label) {
  QChart* c = chart();
  c->removeAllSeries();
  for (auto* axis : c->axes()) c->removeAxis(axis);
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
  // Stacked step areas: cumulative allocated bytes by category.
  std::vector<QLineSeries*> uppers;
  QLineSeries* lower = nullptr;
  std::size_t peak_index = 0;
  for (std::size_t i = 0; i < t->memory.size(); ++i) {
    if (t->memory[i].allocated > t->memory[peak_index].allocated) peak_index = i;
  }
  for (std::size_t cat = 0; cat < categories.size(); ++cat) {
    bool any = false;
    for (const auto& m : t->memory) any |= cat < m.by_category.size() && m.by_category[cat] > 0;
    if (!any) continue;
    auto* upper = new QLineSeries;
    double prev = 0;
    for (const auto& m : t->memory) {
      Bytes cumulative = 0;
      for (std::size_t k = 0; k <= cat && k < m.by_category.size(); ++k) cumulative += m.by_category[k];
      upper->append(ms(m.time), prev);
      prev = gib(cumulative);
      upper->append(ms(m.time), prev);
    }
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
    for (const auto& m : t->memory) {
      s->append(ms(m.time), prev);
      prev = value(m);
      s->append(ms(m.time), prev);
    }
    s->setPen(QPen(color, 2, style));
    c->addSeries(s);
    s->attachAxis(x_);
    s->attachAxis(y_);
    return s;
  };
  step_line("reserved", [](const MemorySample& m) { return gib(m.reserved); }, QColor(0, 0, 0), Qt::SolidLine);
  const double end_ms = ms(t->end_time());
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
  peak_marker_->setName(peak_label.isEmpty() ? QString("peak %1 GiB").arg(peak_.y(), 0, 'f', 2) : peak_label);
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
  x_->setRange(0, end_ms);
}

void MemoryChart::set_view(qint64 start_ns, qint64 end_ns) {
  if (x_) x_->setRange(ms(start_ns), ms(end_ns));
}

void MemoryChart::set_cursor_time(qint64 time_ns) {
  if (!cursor_) return;
  cursor_->clear();
  cursor_->append(ms(time_ns), 0);
  cursor_->append(ms(time_ns), y_max_);
}

}  // namespace shardscope::gui
