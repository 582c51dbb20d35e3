#include "shardscope/gui/op_table_model.hpp"

namespace shardscope::gui {

OpTableModel::OpTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void OpTableModel::set_timeline(const Timeline* timeline) {
  beginResetModel();
  timeline_ = timeline;
  endResetModel();
}

int OpTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !timeline_ ? 0 : static_cast<int>(timeline_->ops.size());
}

int OpTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant OpTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || !timeline_ || index.row() >= rowCount()) return {};
  const auto& op = timeline_->ops[static_cast<std::size_t>(index.row())];
  const double gbps =
      op.duration() > 0 ? static_cast<double>(op.bytes) / static_cast<double>(op.duration()) : 0.0;
  if (role == Qt::UserRole) {
    switch (index.column()) {
      case kId:
        return op.op;
      case kStart:
        return static_cast<qlonglong>(op.start);
      case kDuration:
        return static_cast<qlonglong>(op.duration());
      case kBytes:
        return static_cast<qlonglong>(op.bytes);
      case kBandwidth:
        return gbps;
      default:
        return data(index, Qt::DisplayRole);
    }
  }
  if (role == Qt::TextAlignmentRole) {
    return index.column() >= kStart ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
                                    : QVariant(Qt::AlignLeft | Qt::AlignVCenter);
  }
  if (role != Qt::DisplayRole && role != Qt::ToolTipRole) return {};
  switch (index.column()) {
    case kId:
      return op.op;
    case kKind:
      return QString::fromUtf8(to_string(op.kind).data());
    case kGroup:
      return op.group >= 0
                 ? QString::fromStdString(timeline_->groups[static_cast<std::size_t>(op.group)])
                 : QString("-");
    case kStream:
      return QString::fromStdString(timeline_->streams[static_cast<std::size_t>(op.stream)].name);
    case kPhase:
      return QString::fromUtf8(to_string(op.phase).data());
    case kStart:
      return QString::fromStdString(format_duration(op.start));
    case kDuration:
      return QString::fromStdString(format_duration(op.duration()));
    case kBytes:
      return op.bytes > 0 ? QString::fromStdString(format_bytes(op.bytes)) : QString();
    case kBandwidth:
      return op.bytes > 0 && op.duration() > 0
                 ? QString::fromStdString(format_bandwidth(gbps * 1e9))
                 : QString();
    default:
      return {};
  }
}

QVariant OpTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const kNames[] = {"#",     "kind",     "group", "stream",   "phase",
                                       "start", "duration", "bytes", "bandwidth"};
  return section >= 0 && section < kColumnCount ? QVariant(kNames[section]) : QVariant();
}

MetricsModel::MetricsModel(QObject* parent) : QAbstractTableModel(parent) {}

void MetricsModel::set_rows(std::vector<std::pair<QString, QString>> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}

int MetricsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int MetricsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : 2;
}

QVariant MetricsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() ||
      (role != Qt::DisplayRole && role != Qt::ToolTipRole))
    return {};
  const auto& row = rows_[static_cast<std::size_t>(index.row())];
  return index.column() == 0 ? row.first : row.second;
}

QVariant MetricsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  return section == 0 ? QVariant("metric") : QVariant("value");
}

}  // namespace shardscope::gui
