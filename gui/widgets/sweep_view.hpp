#pragma once
// Step time against peak reserved memory for every configuration of a sweep: fitting points,
// points over the budget, the Pareto front, and the budget as a line. Run a sweep here (in the
// background, with progress) or load `shardscope sweep --json`; click a point to load it.

#include <QWidget>
#include <atomic>
#include <functional>
#include <thread>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/gui/sweep_table.hpp"

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
class QComboBox;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QLabel;
QT_END_NAMESPACE

namespace shardscope::gui {

class SweepView : public QWidget {
  Q_OBJECT

 public:
  /// `base` returns the scenario tree (with the current settings) and its file.
  using BaseProvider = std::function<std::pair<ConfigTree, std::string>()>;
  explicit SweepView(BaseProvider base, QWidget* parent = nullptr);
  ~SweepView() override;

  void set_rows(std::vector<SweepRow> rows, std::optional<Bytes> budget);
  const std::vector<SweepRow>& rows() const { return rows_; }
  /// The scatter chart as drawn (its axes and series); for tests.
  QChart* scatter() const;
  /// Runs the grid in the text box now, on this thread (tests, screenshots).
  void run_now();
  void set_grid(const QString& lines, const QString& budget);

 signals:
  void load_settings(std::vector<std::pair<std::string, std::string>> settings);

 private:
  void start_sweep();
  void load_json();
  std::optional<std::pair<std::vector<sim::SweepAxis>, std::optional<Bytes>>> parse_inputs();

  BaseProvider base_;
  QPlainTextEdit* grid_;
  QLineEdit* budget_;
  QPushButton* run_;
  QProgressBar* progress_;
  QLabel* status_;
  QChartView* chart_;
  QComboBox* y_axis_;
  std::optional<Bytes> budget_value_;
  std::vector<SweepRow> rows_;
  std::thread worker_;
  std::atomic<bool> cancel_{false};
};

}  // namespace shardscope::gui
