#pragma once
// The ops of a timeline as a table: kind, group, stream, phase, start, duration, bytes and
// achieved bandwidth, every number with its unit (Qt::DisplayRole) and raw (Qt::UserRole).

#include <QAbstractTableModel>

#include "shardscope/core/timeline.hpp"

namespace shardscope::gui {

class OpTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    kId,
    kKind,
    kGroup,
    kStream,
    kPhase,
    kStart,
    kDuration,
    kBytes,
    kBandwidth,
    kColumnCount
  };

  explicit OpTableModel(QObject* parent = nullptr);
  void set_timeline(const Timeline* timeline);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  const Timeline* timeline_ = nullptr;
};

/// "name | value with unit" rows for a simulation summary.
class MetricsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  explicit MetricsModel(QObject* parent = nullptr);
  void set_rows(std::vector<std::pair<QString, QString>> rows);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  std::vector<std::pair<QString, QString>> rows_;
};

}  // namespace shardscope::gui
