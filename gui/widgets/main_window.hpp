#pragma once
// The shardscope-gui window: settings on the left; on the right the timeline, the memory chart on
// the same time axis, and tabs with metrics, the op table and the summary of a selected range.
// Every change re-simulates in the background. A second run can be stacked above the simulation
// on the same time axis: a pinned baseline, or a measured or imported run of the scenario; then
// hovering an op gives its counterpart's delta, the memory chart draws both runs and the metrics
// table gives the deltas (analysis::compare).

#include <QMainWindow>
#include <functional>
#include <memory>
#include <optional>

#include "shardscope/core/compare.hpp"
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
class PlanView;
class RanksView;
class SettingsPanel;
class SweepView;
class TimelineWidget;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);

  /// Loads a scenario file with overrides; throws ValidationError when it is invalid.
  void open_scenario(const QString& path, const std::vector<std::string>& overrides = {});
  /// Shows a timeline file or a Kineto trace. A measured or imported run whose scenario file is
  /// found (its provenance) opens beside that scenario's simulation; anything else is shown
  /// alone, and the settings panel says its settings are not known. Throws ValidationError
  /// (every problem of the file) when it is invalid; the menu shows that in a dialog, the command
  /// line prints it and exits 2.
  void open_timeline(const QString& path);
  /// Stacks a measured or imported run (timeline file or Kineto trace) above the simulation of
  /// the open scenario. Throws Error when no scenario is open.
  void open_measured(const QString& path);
  /// Simulates now, on this thread (screenshots, tests).
  void simulate_now();
  void show_result(std::shared_ptr<const RunResult> result);
  void pin_baseline();

  TimelineWidget* timeline() const { return timeline_; }
  /// The run stacked above the current one (a baseline or a measured run), hidden when none.
  TimelineWidget* reference_timeline() const { return reference_view_; }
  /// The comparison of the stacked runs (A: baseline or simulation; B: current or measured).
  const analysis::Comparison* comparison() const { return comparison_ ? &*comparison_ : nullptr; }
  /// The captions over two stacked runs: the reference's (upper) and the current run's.
  QString reference_caption() const;
  QString current_caption() const;
  MemoryChart* memory_chart() const { return memory_; }
  SettingsPanel* settings() const { return settings_; }
  SweepView* sweep_view() const { return sweep_; }
  PlanView* plan_view() const { return plan_; }
  RanksView* ranks_view() const { return ranks_; }
  void show_plan_tab();
  void show_ranks_tab();
  /// Replaces the scenario's tree with `tree` (a plan's configuration, complete), shows its
  /// values in the settings and simulates it.
  void load_configuration(ConfigTree tree, const QString& description);
  void show_sweep_tab();
  const RunResult* result() const { return result_.get(); }

 private:
  /// Reads a timeline or a Kineto trace, the status bar saying what while it does; throws
  /// Error for a bad file with the window as it was.
  std::shared_ptr<const Timeline> read_run(const QString& path);
  /// Runs `open` (a file the user picked in a menu); its problems go to a dialog titled `title`.
  void open_or_explain(const QString& title, const std::function<void()>& open);
  ConfigTree current_tree() const;
  void request_simulation();
  void export_png();
  void export_svg();
  void export_trace();
  void save_scenario();
  void update_metrics();
  /// Compares and draws the stacked run against the current result, or hides it.
  void show_reference();
  const Timeline* reference_run() const;
  /// What the metrics table and the labels call comparison A and B: "simulated" and
  /// "measured", or "baseline" and "current".
  std::pair<std::string, std::string> compared_names() const;

  SettingsPanel* settings_;
  TimelineWidget* timeline_;
  TimelineWidget* reference_view_;
  QLabel* reference_label_;
  double read_seconds_ = 0;  // how long the last read_run took
  QLabel* current_label_;    // names the lower run when two are stacked
  MemoryChart* memory_;
  QTabWidget* tabs_;
  QSplitter* right_ = nullptr;
  QTableView* metrics_view_;
  QTableView* ops_view_;
  QLabel* selection_;
  SweepView* sweep_;
  PlanView* plan_;
  RanksView* ranks_;
  MetricsModel metrics_;
  OpTableModel ops_;
  SimulationRunner runner_;
  ConfigTree base_;
  std::string file_;
  std::shared_ptr<const RunResult> result_;
  std::shared_ptr<const RunResult> baseline_;  // a pinned run of other settings, or
  std::shared_ptr<const Timeline> measured_;   // a measured run of the scenario (one at a time)
  std::optional<analysis::Comparison> comparison_;
  std::shared_ptr<const Timeline> loaded_timeline_;  // a timeline shown alone
};

}  // namespace shardscope::gui
