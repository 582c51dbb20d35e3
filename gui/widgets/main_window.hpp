#pragma once
// The shardscope-gui window: settings on the left; on the right the timeline, the memory chart on
// the same time axis, and tabs with metrics (and deltas against a pinned baseline), the op table
// and the summary of a selected range. Every change re-simulates in the background.

#include <QMainWindow>
#include <functional>
#include <memory>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/gui/op_table_model.hpp"
#include "shardscope/gui/simulation_runner.hpp"

QT_BEGIN_NAMESPACE
class QLabel;
class QSplitter;
class QTableView;
class QTabWidget;
QT_END_NAMESPACE

namespace shardscope::gui {

class MemoryChart;
class SettingsPanel;
class SweepView;
class TimelineWidget;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);

  /// Loads a scenario file with overrides; throws ValidationError when it is invalid.
  void open_scenario(const QString& path, const std::vector<std::string>& overrides = {});
  /// Shows a timeline file (simulated or measured) without a scenario.
  /// Shows a saved timeline. Throws ValidationError (every problem of the file) when it is invalid;
  /// the menu shows that in a dialog, the command line prints it and exits 2.
  void open_timeline(const QString& path);
  /// Simulates now, on this thread (screenshots, tests).
  void simulate_now();
  void show_result(std::shared_ptr<const RunResult> result);
  void pin_baseline();

  TimelineWidget* timeline() const { return timeline_; }
  TimelineWidget* baseline_timeline() const { return baseline_view_; }
  MemoryChart* memory_chart() const { return memory_; }
  SettingsPanel* settings() const { return settings_; }
  SweepView* sweep_view() const { return sweep_; }
  void show_sweep_tab();
  const RunResult* result() const { return result_.get(); }

 private:
  /// Runs `open` (a file the user picked in a menu); its problems go to a dialog titled `title`.
  void open_or_explain(const QString& title, const std::function<void()>& open);
  ConfigTree current_tree() const;
  void request_simulation();
  void export_png();
  void export_svg();
  void export_trace();
  void save_scenario();
  void update_metrics();

  SettingsPanel* settings_;
  TimelineWidget* timeline_;
  TimelineWidget* baseline_view_;
  QLabel* baseline_label_;
  MemoryChart* memory_;
  QTabWidget* tabs_;
  QSplitter* right_ = nullptr;
  QTableView* metrics_view_;
  QTableView* ops_view_;
  QLabel* selection_;
  SweepView* sweep_;
  MetricsModel metrics_;
  OpTableModel ops_;
  SimulationRunner runner_;
  ConfigTree base_;
  std::string file_;
  std::shared_ptr<const RunResult> result_;
  std::shared_ptr<const RunResult> baseline_;
  std::shared_ptr<const Timeline> loaded_timeline_;
};

}  // namespace shardscope::gui
