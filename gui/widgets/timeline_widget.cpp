#include "timeline_widget.hpp"

#include <fmt/format.h>

#include <QHelpEvent>
#include <QKeyEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

namespace shardscope::gui {

QColor color_of(OpKind kind) {
  switch (kind) {
    case OpKind::forward:
      return QColor(66, 133, 244);
    case OpKind::backward:
      return QColor(26, 86, 180);
    case OpKind::recompute:
      return QColor(140, 180, 250);
    case OpKind::all_gather:
      return QColor(52, 168, 83);
    case OpKind::reduce_scatter:
      return QColor(251, 140, 0);
    case OpKind::all_reduce:
      return QColor(219, 68, 55);
    case OpKind::copy_in:
    case OpKind::copy_out:
    case OpKind::reduce_copy_in:
    case OpKind::grad_div:
    case OpKind::reshard:
      return QColor(150, 150, 150);
    case OpKind::h2d:
    case OpKind::d2h:
      return QColor(142, 68, 173);
    case OpKind::optimizer_step:
      return QColor(121, 85, 72);
    default:
      return QColor(200, 200, 200);
  }
}

TimelineWidget::TimelineWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setMinimumHeight(kHeader + 4 * kLaneHeight);
}

QSize TimelineWidget::sizeHint() const {
  return {1200, kHeader + std::max(6, layout_.lane_count()) * kLaneHeight + 6};
}

void TimelineWidget::set_timeline(const Timeline* timeline) {
  timeline_ = timeline;
  layout_ = timeline ? LaneLayout(timeline) : LaneLayout();
  axis_.set_width(plot_width());
  axis_.set_limit(timeline ? std::max<TimeNs>(1, timeline->end_time()) : 1);
  axis_.show_all();
  critical_.clear();
  counterparts_.clear();
  updateGeometry();
  update();
  view_moved();
}

void TimelineWidget::set_time_limit(TimeNs limit) {
  axis_.set_limit(limit);
  update();
  view_moved();
}

void TimelineWidget::set_counterparts(Counterparts counterparts, std::string other_name) {
  counterparts_ = std::move(counterparts);
  other_name_ = std::move(other_name);
}

void TimelineWidget::set_critical_path(std::set<OpId> ops) {
  critical_ = std::move(ops);
  update();
}

void TimelineWidget::set_highlight_critical_path(bool on) {
  highlight_critical_ = on;
  update();
}

void TimelineWidget::set_cursor_time(TimeNs t) {
  cursor_ = t;
  update();
}

void TimelineWidget::set_view(TimeNs start, TimeNs end) {
  axis_.set_range(start, end);
  update();
  view_moved();
}

int TimelineWidget::lane_top(int lane) const {
  return kHeader + lane * kLaneHeight;
}

int TimelineWidget::lane_at(int y) const {
  if (y < kHeader) return -1;
  const int lane = (y - kHeader) / kLaneHeight;
  return lane < layout_.lane_count() ? lane : -1;
}

void TimelineWidget::view_moved() {
  emit view_changed(axis_.start(), axis_.end());
}

void TimelineWidget::resizeEvent(QResizeEvent*) {
  axis_.set_width(plot_width());
  view_moved();
}

void TimelineWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  if (!timeline_) {
    p.drawText(rect(), Qt::AlignCenter, "no timeline: open a scenario or a timeline");
    return;
  }
  // Time axis with unit-bearing ticks.
  p.setPen(QColor(90, 90, 90));
  const TimeNs step = tick_step(axis_, kTickSpacingPx);
  const TimeUnit unit = tick_unit(step);  // the memory chart's axis uses the same
  for (TimeNs t = (axis_.start() / step) * step; t <= axis_.end(); t += step) {
    const double x = kLabelWidth + axis_.to_px(t);
    if (x < kLabelWidth) continue;
    p.drawLine(QPointF(x, kHeader - 6), QPointF(x, height()));
    p.drawText(QPointF(x + 3, kHeader - 9), QString::fromStdString(tick_label(t, unit)));
  }
  p.setPen(QColor(220, 220, 220));
  p.drawLine(0, kHeader - 1, width(), kHeader - 1);
  const QFontMetrics fm(font());
  bool folded = false;
  for (int lane = 0; lane < layout_.lane_count(); ++lane) {
    const int top = lane_top(lane);
    if (lane % 2 == 1) p.fillRect(QRect(0, top, width(), kLaneHeight), QColor(248, 248, 250));
    const auto& stream = timeline_->streams[static_cast<std::size_t>(layout_.lane_stream(lane))];
    p.setPen(Qt::black);
    p.drawText(QRect(6, top, kLabelWidth - 10, kLaneHeight), Qt::AlignVCenter | Qt::AlignLeft,
               QString::fromStdString(stream.name));
    for (const auto& item : layout_.visible(lane, axis_)) {
      const QRectF r(kLabelWidth + item.x0, top + 3, std::max(1.0, item.x1 - item.x0),
                     kLaneHeight - 6);
      if (item.op < 0) {
        // A folded block: its ops' colour when they share a kind, striped to show it is folded.
        const QColor base = item.mixed ? QColor(160, 160, 160) : color_of(item.kind).lighter(115);
        p.fillRect(r, base);
        p.fillRect(r, QBrush(base.darker(125), Qt::BDiagPattern));
        // Its op count: "1090 ops" where that fits, else the number (the header says what
        // striped blocks are, the hover text more).
        const QString ops = QString("%1 ops").arg(item.count);
        const QString count =
            r.width() > fm.horizontalAdvance(ops) + 4 ? ops : QString::number(item.count);
        if (r.width() > fm.horizontalAdvance(count) + 4) {
          p.setPen(Qt::white);
          p.drawText(r, Qt::AlignCenter, count);
        }
        folded = true;
        continue;
      }
      const auto& op = timeline_->ops[static_cast<std::size_t>(item.op)];
      p.fillRect(r, color_of(op.kind));
      if (highlight_critical_ && critical_.count(op.op)) {
        p.setPen(QPen(QColor(220, 0, 0), 2));
        p.drawRect(r.adjusted(1, 1, -1, -1));
      }
      if (r.width() > 60 && op.group >= 0) {
        p.setPen(Qt::white);
        const QString label =
            QString::fromStdString(timeline_->groups[static_cast<std::size_t>(op.group)]);
        p.drawText(r.adjusted(3, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft,
                   fm.elidedText(label, Qt::ElideRight, static_cast<int>(r.width()) - 5));
      }
    }
  }
  // Where the run ends (the view leaves room after it).
  if (const double end = kLabelWidth + axis_.to_px(axis_.limit());
      end >= kLabelWidth && end <= width()) {
    p.setPen(QPen(QColor(120, 120, 120), 1, Qt::DotLine));
    p.drawLine(QPointF(end, kHeader), QPointF(end, height()));
  }
  if (folded) {
    p.setPen(QColor(110, 110, 110));
    p.drawText(QRect(6, 0, kLabelWidth - 8, kHeader - 2), Qt::AlignVCenter | Qt::AlignLeft,
               fm.elidedText("striped: folded ops", Qt::ElideRight, kLabelWidth - 10));
  }
  if (selecting_ || select_end_ != select_start_) {
    const double a = kLabelWidth + axis_.to_px(std::min(select_start_, select_end_));
    const double b = kLabelWidth + axis_.to_px(std::max(select_start_, select_end_));
    p.fillRect(QRectF(a, kHeader, b - a, height() - kHeader), QColor(255, 200, 0, 60));
  }
  if (cursor_ >= axis_.start() && cursor_ <= axis_.end()) {
    p.setPen(QPen(QColor(200, 0, 0), 1, Qt::DashLine));
    const double x = kLabelWidth + axis_.to_px(cursor_);
    p.drawLine(QPointF(x, kHeader), QPointF(x, height()));
  }
}

void TimelineWidget::wheelEvent(QWheelEvent* e) {
  const double steps = e->angleDelta().y() / 120.0;
  axis_.zoom(std::pow(1.25, steps), plot_x(e->position().x()));
  update();
  view_moved();
}

void TimelineWidget::mousePressEvent(QMouseEvent* e) {
  press_ = e->pos();
  last_x_ = e->position().x();
  if (e->button() != Qt::LeftButton) return;
  if (e->modifiers() & Qt::ShiftModifier) {
    selecting_ = true;
    select_start_ = select_end_ = axis_.to_time(plot_x(e->position().x()));
  } else {
    dragging_ = true;
  }
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* e) {
  const TimeNs t = axis_.to_time(plot_x(e->position().x()));
  if (selecting_) {
    select_end_ = t;
    update();
  } else if (dragging_) {
    axis_.pan(e->position().x() - last_x_);
    last_x_ = e->position().x();
    update();
    view_moved();
  }
  if (e->position().x() >= kLabelWidth) emit cursor_moved(t);
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent* e) {
  if (selecting_) {
    selecting_ = false;
    emit range_selected(std::min(select_start_, select_end_), std::max(select_start_, select_end_));
  } else if (dragging_ && (e->pos() - press_).manhattanLength() < 3) {
    const int lane = lane_at(e->pos().y());
    if (lane >= 0) {
      const int op = layout_.op_at(lane, axis_.to_time(plot_x(e->position().x())));
      if (op >= 0) emit op_clicked(op);
    }
  }
  dragging_ = false;
}

void TimelineWidget::keyPressEvent(QKeyEvent* e) {
  const double mid = axis_.width() / 2;
  switch (e->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
      axis_.zoom(1.5, mid);
      break;
    case Qt::Key_Minus:
      axis_.zoom(1 / 1.5, mid);
      break;
    case Qt::Key_Left:
      axis_.pan(axis_.width() / 8);
      break;
    case Qt::Key_Right:
      axis_.pan(-axis_.width() / 8);
      break;
    case Qt::Key_Home:
    case Qt::Key_0:
      axis_.show_all();
      break;
    default:
      QWidget::keyPressEvent(e);
      return;
  }
  update();
  view_moved();
}

std::optional<DrawItem> TimelineWidget::folded_at(QPoint pos) const {
  const int lane = lane_at(pos.y());
  if (lane < 0) return std::nullopt;
  const double x = plot_x(pos.x());
  for (const DrawItem& item : layout_.visible(lane, axis_)) {
    if (item.op < 0 && item.x0 <= x && x <= std::max(item.x1, item.x0 + 1)) return item;
  }
  return std::nullopt;
}

QString TimelineWidget::tooltip_at(QPoint pos) const {
  if (!timeline_) return {};
  if (const auto block = folded_at(pos)) {
    return QString::fromStdString(
        fmt::format("{} ops folded into one block: at this zoom each is under 3 px wide\n{}\n"
                    "zoom in (mouse wheel, +) to see them one by one",
                    block->count,
                    block->mixed ? std::string("of several kinds")
                                 : fmt::format("all {}", to_string(block->kind))));
  }
  const int lane = lane_at(pos.y());
  const int index = lane >= 0 ? layout_.op_at(lane, axis_.to_time(plot_x(pos.x()))) : -1;
  if (index < 0) return {};
  const auto& op = timeline_->ops[static_cast<std::size_t>(index)];
  std::string text = fmt::format(
      "{} {}\nstream {}\n{} iteration {}, micro-batch {}\nstart {}, duration {}",
      to_string(op.kind), group_name(*timeline_, op),
      timeline_->streams[static_cast<std::size_t>(op.stream)].name, to_string(op.phase),
      op.iteration, op.microbatch, format_duration(op.start), format_duration(op.duration()));
  if (op.comm >= 0) {
    const auto& c = timeline_->communicators[static_cast<std::size_t>(op.comm)];
    text += fmt::format("\ncommunicator {} ({} ranks, {} nodes)", c.name, c.size, c.nodes);
  }
  if (op.label >= 0 && static_cast<std::size_t>(op.label) < timeline_->op_labels.size())
    text += "\n" + timeline_->op_labels[static_cast<std::size_t>(op.label)];
  if (op.bytes > 0) {
    text += fmt::format("\n{}", format_bytes(op.bytes));
    if (op.duration() > 0) {
      text += fmt::format(", {} achieved",
                          format_bandwidth(static_cast<double>(op.bytes) / ns_to_s(op.duration())));
    }
  }
  if (!other_name_.empty()) {
    const auto it = counterparts_.find(op.op);
    text += "\n" + (it != counterparts_.end() ? counterpart_text(it->second, other_name_)
                                              : fmt::format("no counterpart in {}", other_name_));
  }
  return QString::fromStdString(text);
}

bool TimelineWidget::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip && timeline_) {
    auto* help = static_cast<QHelpEvent*>(e);
    const QString text = tooltip_at(help->pos());
    if (text.isEmpty()) {
      QToolTip::hideText();
    } else {
      QToolTip::showText(help->globalPos(), text, this);
    }
    return true;
  }
  return QWidget::event(e);
}

}  // namespace shardscope::gui
