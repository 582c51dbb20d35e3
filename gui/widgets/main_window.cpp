#include "main_window.hpp"

#include <fmt/format.h>

#include <QAction>
#include <QApplication>
#include <QFileDialog>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPainter>
#include <QScrollArea>
#include <QSplitter>
#include <QStatusBar>
#include <QSvgGenerator>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <chrono>
#include <filesystem>
#include <new>

#include "memory_chart.hpp"
#include "plan_view.hpp"
#include "ranks_view.hpp"
#include "settings_panel.hpp"
#include "shardscope/core/analysis.hpp"
#include "shardscope/core/schedule_io.hpp"
#include "shardscope/traces/chrome_trace.hpp"
#include "shardscope/traces/kineto_import.hpp"
#include "sweep_view.hpp"
#include "timeline_widget.hpp"

namespace shardscope::gui {
namespace {

// `widget` under `label`, edge to edge so its plot lines up with the widgets around it.
QWidget* labelled(QLabel* label, QWidget* widget) {
  auto* box = new QWidget;
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  label->setMargin(4);
  layout->addWidget(label);
  layout->addWidget(widget);
  return box;
}

}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      settings_(new SettingsPanel),
      timeline_(new TimelineWidget),
      reference_view_(new TimelineWidget),
      reference_label_(new QLabel),
      current_label_(new QLabel),
      memory_(new MemoryChart),
      tabs_(new QTabWidget),
      metrics_view_(new QTableView),
      ops_view_(new QTableView),
      selection_(new QLabel("Shift-drag on the timeline to summarize a range.")),
      sweep_(new SweepView([this] {
        return std::pair{current_tree(), file_};
      })),
      plan_(new PlanView([this] {
        return std::pair{current_tree(), file_};
      })),
      ranks_(new RanksView) {
  setWindowTitle("shardscope");
  auto* scroll = new QScrollArea;
  scroll->setWidget(settings_);
  scroll->setWidgetResizable(true);
  scroll->setMinimumWidth(330);

  metrics_view_->setModel(&metrics_);
  ops_view_->setModel(&ops_);
  for (auto* v : {metrics_view_, ops_view_}) {
    v->horizontalHeader()->setStretchLastSection(true);
    v->verticalHeader()->setVisible(false);
  }
  metrics_view_->setColumnWidth(0, 220);
  selection_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  selection_->setMargin(8);
  tabs_->addTab(metrics_view_, "Metrics");
  tabs_->addTab(ops_view_, "Ops");
  tabs_->addTab(selection_, "Selection");
  tabs_->addTab(sweep_, "Sweep");
  tabs_->addTab(plan_, "Plan");
  tabs_->addTab(ranks_, "Ranks");
  connect(plan_, &PlanView::load_configuration, this,
          [this](const ConfigTree& tree, const QString& description) {
            open_or_explain("Cannot load the plan", [&] { load_configuration(tree, description); });
          });
  connect(sweep_, &SweepView::load_settings, this,
          [this](const std::vector<std::pair<std::string, std::string>>& settings) {
            QStringList unknown;
            for (const auto& [key, value] : settings) {
              if (!settings_->set_value(key, QString::fromStdString(value)))
                unknown << QString::fromStdString(key);
            }
            if (!unknown.isEmpty())
              statusBar()->showMessage("not a panel setting, left as it is: " + unknown.join(", "));
          });

  // Two stacked runs: the reference (hidden until there is one) above the current run, each
  // under a label naming it (the current run's shows only when stacked).
  auto* reference_box = labelled(reference_label_, reference_view_);
  reference_box->setVisible(false);
  current_label_->setVisible(false);

  auto* right = new QSplitter(Qt::Vertical);
  right_ = right;
  right->addWidget(reference_box);
  right->addWidget(labelled(current_label_, timeline_));
  right->addWidget(memory_);
  right->addWidget(tabs_);
  right->setSizes({0, 230, 420, 330});  // lanes are short; memory and details get the room
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(scroll);
  split->addWidget(right);
  split->setStretchFactor(1, 1);
  split->setSizes({400, 1200});  // the settings at their width, the rest to the plots
  setCentralWidget(split);
  // The plot area under the lanes.
  memory_->set_margins(TimelineWidget::kLabelWidth, TimelineWidget::kRightMargin);

  auto* file = menuBar()->addMenu("&File");
  file->addAction("Open scenario…", this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, "Open scenario", {}, "Scenarios (*.yaml *.yml *.json)");
    if (!path.isEmpty()) open_or_explain("Invalid scenario", [&] { open_scenario(path); });
  });
  file->addAction("Open timeline…", this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, "Open timeline or trace", {}, "Timelines and Kineto traces (*.json *.json.gz *.gz)");
    if (!path.isEmpty()) open_or_explain("Invalid timeline", [&] { open_timeline(path); });
  });
  file->addAction("Save scenario…", this, [this] { save_scenario(); });
  file->addAction("Export view as PNG…", this, [this] { export_png(); });
  file->addAction("Export view as SVG…", this, [this] { export_svg(); });
  file->addAction("Export Perfetto trace…", this, [this] { export_trace(); });
  file->addSeparator();
  file->addAction("Quit", QKeySequence::Quit, qApp, &QApplication::quit);
  auto* view = menuBar()->addMenu("&View");
  view->addAction("Show all", this, [this] { timeline_->set_view(0, timeline_->axis().limit()); });
  auto* critical = view->addAction("Highlight critical path");
  critical->setCheckable(true);
  connect(critical, &QAction::toggled, timeline_, &TimelineWidget::set_highlight_critical_path);
  auto* compare = menuBar()->addMenu("&Compare");
  compare->addAction("Pin current run as baseline", this, [this] { pin_baseline(); });
  compare->addAction("Open measured run beside the simulation…", this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, "Open measured run", {}, "Timelines and Kineto traces (*.json *.json.gz *.gz)");
    if (!path.isEmpty()) open_or_explain("Cannot compare", [&] { open_measured(path); });
  });

  connect(settings_, &SettingsPanel::changed, this, [this] { request_simulation(); });
  connect(&runner_, &SimulationRunner::finished, this, [this](std::shared_ptr<const RunResult> r) {
    settings_->show_problems({});
    show_result(std::move(r));
  });
  connect(&runner_, &SimulationRunner::failed, this, [this](quint64, const QStringList& problems) {
    settings_->show_problems(problems);
    statusBar()->showMessage(QString("%1 problem(s) in the settings").arg(problems.size()));
  });
  connect(timeline_, &TimelineWidget::view_changed, this, [this](qint64 a, qint64 b) {
    memory_->set_view(a, b);
    reference_view_->set_view(a, b);
  });
  connect(timeline_, &TimelineWidget::cursor_moved, memory_, &MemoryChart::set_cursor_time);
  connect(timeline_, &TimelineWidget::cursor_moved, this,
          [this](qint64 t) { timeline_->set_cursor_time(t); });
  connect(timeline_, &TimelineWidget::range_selected, this, [this](qint64 a, qint64 b) {
    const Timeline* t = result_ ? &result_->timeline : loaded_timeline_.get();
    if (!t) return;
    const auto r = analysis::summarize_range(*t, a, b);
    selection_->setText(QString::fromStdString(fmt::format(
        "range {} – {} ({})\n{} ops\ncompute {}\ncommunication {}, exposed {}, {:.1f} % "
        "overlapped\npeak allocated {}, peak reserved {}",
        format_duration(r.start), format_duration(r.end), format_duration(r.end - r.start), r.ops,
        format_duration(r.compute), format_duration(r.communication),
        format_duration(r.exposed_communication), 100 * r.overlap, format_bytes(r.peak_allocated),
        format_bytes(r.peak_reserved))));
    tabs_->setCurrentWidget(selection_);
  });
  connect(timeline_, &TimelineWidget::op_clicked, this, [this](int index) {
    tabs_->setCurrentWidget(ops_view_);
    ops_view_->selectRow(index);
    ops_view_->scrollTo(ops_.index(index, 0));
  });
  statusBar()->showMessage("Open a scenario (File → Open scenario…)");
}

void MainWindow::open_scenario(const QString& path, const std::vector<std::string>& overrides) {
  ConfigTree tree = load_scenario_tree(path.toStdString(), overrides);
  const Scenario scenario = read_scenario(tree, path.toStdString(),
                                          std::filesystem::path(path.toStdString()).parent_path());
  base_ = std::move(tree);
  file_ = path.toStdString();
  loaded_timeline_.reset();
  settings_->load(scenario);
  setWindowTitle(QString("shardscope — %1").arg(path));
  request_simulation();
}

namespace {

// The scenario file a measured or imported run names in its provenance, as recorded or relative
// to the timeline's folder; "" when it names none or it is not there.
std::string scenario_of(const Timeline& t, const std::filesystem::path& timeline_path) {
  if (t.source == "simulated" || t.provenance.scenario.empty()) return {};
  const std::filesystem::path named(t.provenance.scenario);
  for (const auto& candidate : {named, timeline_path.parent_path() / named}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate.string();
  }
  return {};
}

}  // namespace

std::shared_ptr<const Timeline> MainWindow::read_run(const QString& path) {
  // A trace of hundreds of MB takes seconds: say so, and keep the wait cursor up meanwhile.
  std::error_code ec;
  const auto size = std::filesystem::file_size(path.toStdString(), ec);
  statusBar()->showMessage(QString::fromStdString(
      fmt::format("reading {} ({})…", path.toStdString(),
                  ec ? std::string("size unknown") : format_bytes(static_cast<Bytes>(size)))));
  QApplication::setOverrideCursor(Qt::WaitCursor);
  QApplication::processEvents();
  const auto started = std::chrono::steady_clock::now();
  std::shared_ptr<const Timeline> run;
  try {
    run = std::make_shared<const Timeline>(traces::read_timeline_or_trace(path.toStdString()));
  } catch (...) {
    QApplication::restoreOverrideCursor();
    statusBar()->clearMessage();
    throw;
  }
  QApplication::restoreOverrideCursor();
  read_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return run;
}

void MainWindow::open_timeline(const QString& path) {
  // Throws before anything is replaced: a bad file leaves the window as it was.
  auto timeline = read_run(path);
  const std::string scenario = scenario_of(*timeline, path.toStdString());
  if (!scenario.empty()) {
    // The run's own job: the scenario with the overrides it was read with.
    open_scenario(QString::fromStdString(scenario), timeline->provenance.overrides);
    simulate_now();
    baseline_.reset();
    measured_ = std::move(timeline);
    show_reference();
    return;
  }
  runner_.cancel();
  file_.clear();
  loaded_timeline_ = std::move(timeline);
  // The views let go of the old run before it is freed.
  memory_->set_reference(nullptr);
  memory_->set_timeline(loaded_timeline_.get());  // before the timeline widget, as in show_result
  timeline_->set_timeline(loaded_timeline_.get());
  ops_.set_timeline(loaded_timeline_.get());
  result_.reset();
  baseline_.reset();
  measured_.reset();
  show_reference();  // hides the stacked run
  metrics_.set_rows(metric_rows(analysis::summarize(*loaded_timeline_)));
  settings_->clear_scenario(QString::fromStdString(fmt::format(
      "Showing {}, {} timeline: the settings of that run are not known here{}. To see it beside "
      "a simulation, open its scenario (File → Open scenario…), then Compare → Open measured run "
      "beside the simulation….",
      path.toStdString(),
      (loaded_timeline_->source == "imported" ? "an " : "a ") + loaded_timeline_->source,
      loaded_timeline_->provenance.scenario.empty()
          ? ""
          : fmt::format(" (it names {}, which is not there)",
                        loaded_timeline_->provenance.scenario))));
  setWindowTitle(QString("shardscope — %1").arg(path));
  statusBar()->showMessage(QString("%1 timeline: %2 ops, read in %3 s")
                               .arg(QString::fromStdString(loaded_timeline_->source))
                               .arg(loaded_timeline_->ops.size())
                               .arg(read_seconds_, 0, 'f', 2));
}

void MainWindow::open_measured(const QString& path) {
  if (file_.empty()) {
    throw Error(
        "open the scenario of this run first (File → Open scenario…): a measured run is "
        "compared with the simulation of its scenario");
  }
  measured_ = read_run(path);
  baseline_.reset();
  if (!result_) simulate_now();
  show_reference();
}

void MainWindow::open_or_explain(const QString& title, const std::function<void()>& open) {
  try {
    open();
  } catch (const Error& e) {
    QMessageBox::warning(this, title, QString::fromStdString(e.what()));
  } catch (const std::bad_alloc&) {
    // Readers bound their inputs; a run this machine cannot hold still leaves the window usable.
    QMessageBox::warning(this, title,
                         "Out of host memory: the file describes more than this machine can hold. "
                         "The window is as it was.");
  }
}

ConfigTree MainWindow::current_tree() const {
  ConfigTree tree = base_;
  std::vector<Problem> ignored;
  for (const auto& o : settings_->overrides()) {
    if (o.rfind("model.preset=", 0) == 0) {
      tree["model"] = ConfigTree{{"preset", o.substr(13)}};  // a preset replaces the whole model
      continue;
    }
    apply_override(tree, o, ignored);
  }
  return tree;
}

void MainWindow::request_simulation() {
  if (file_.empty()) return;
  runner_.request(current_tree(), file_);
  statusBar()->showMessage("simulating…");
}

void MainWindow::simulate_now() {
  if (file_.empty()) return;
  runner_.cancel();  // this result supersedes any background run
  try {
    show_result(run_scenario(current_tree(), file_));
    settings_->show_problems({});
  } catch (const ValidationError& e) {
    QStringList problems;
    for (const auto& p : e.problems()) problems << QString::fromStdString(p.to_string());
    settings_->show_problems(problems);
  }
}

void MainWindow::show_result(std::shared_ptr<const RunResult> result) {
  result_ = std::move(result);
  loaded_timeline_.reset();
  const auto& s = result_->summary;
  // The chart first: the timeline widget's view change makes the chart rebuild from its timeline.
  memory_->set_timeline(&result_->timeline,
                        QString::fromStdString(fmt::format(
                            "peak {} at {}", analysis::bytes_text(s.peak_allocated), s.peak_op)));
  timeline_->set_timeline(&result_->timeline);
  std::set<OpId> path;
  for (OpId op : s.critical_path.ops) path.insert(op);
  timeline_->set_critical_path(std::move(path));
  ops_.set_timeline(&result_->timeline);
  ranks_->show_ranks(result_->ranks, s.step_time);
  show_reference();
  statusBar()->showMessage(QString::fromStdString(
      fmt::format("{}: step {}, {}, peak reserved {} ({})", result_->scenario.model.name,
                  format_duration(s.step_time), analysis::throughput_text(s.tokens_per_s_per_gpu),
                  analysis::bytes_text(s.peak_reserved), analysis::fit_text(s))));
}

void MainWindow::update_metrics() {
  // With two runs stacked, their deltas come first: they are what the view is for.
  std::vector<std::pair<QString, QString>> rows;
  if (comparison_) {
    const auto [a, b] = compared_names();
    rows = comparison_rows(*comparison_, a, b);
  }
  for (auto& row : metric_rows(result_->summary)) rows.push_back(std::move(row));
  metrics_.set_rows(std::move(rows));
}

std::pair<std::string, std::string> MainWindow::compared_names() const {
  if (measured_) return {"simulated", "measured"};
  return {"baseline", "current"};
}

const Timeline* MainWindow::reference_run() const {
  if (measured_) return measured_.get();
  return baseline_ ? &baseline_->timeline : nullptr;
}

void MainWindow::show_reference() {
  const Timeline* other = result_ ? reference_run() : nullptr;
  auto* box = reference_view_->parentWidget();
  if (!other) {
    comparison_.reset();
    box->setVisible(false);
    current_label_->setVisible(false);
    memory_->set_reference(nullptr);
    timeline_->set_counterparts({}, {});
    if (result_) update_metrics();
    return;
  }
  const bool measured = measured_ != nullptr;
  // A is the plan (the baseline, or the simulation); B is what is compared with it.
  const Timeline& a = measured ? result_->timeline : *other;
  const Timeline& b = measured ? *other : result_->timeline;
  comparison_ = analysis::compare(a, b);
  const auto [a_name, b_name] = compared_names();
  const std::string& own_name = measured ? a_name : b_name;
  const std::string& other_name = measured ? b_name : a_name;
  reference_view_->set_timeline(other);
  const TimeNs limit = std::max(result_->timeline.end_time(), other->end_time());
  timeline_->set_time_limit(limit);
  reference_view_->set_time_limit(limit);
  timeline_->set_view(0, limit);  // both runs whole; the reference view follows
  timeline_->set_counterparts(counterparts(*comparison_, measured ? Side::a : Side::b), other_name);
  reference_view_->set_counterparts(counterparts(*comparison_, measured ? Side::b : Side::a),
                                    own_name);
  memory_->set_reference(other, QString::fromStdString(other_name));
  const auto& s = measured ? comparison_->b : comparison_->a;
  const auto& own = measured ? comparison_->a : comparison_->b;
  // Each run's fit beside its step time: a baseline that does not fit is no baseline to beat.
  reference_label_->setText(QString::fromStdString(
      fmt::format("{}: {} ({}), step {} ({} against {}), peak reserved {}: {}", other_name,
                  other->name, other->source, format_duration(s.step_time),
                  analysis::format_metric_delta(ns_to_s(s.step_time - own.step_time), "s"),
                  own_name, analysis::bytes_text(s.peak_reserved), analysis::fit_text(s))));
  current_label_->setText(QString::fromStdString(
      fmt::format("{}: {} ({}), step {}, peak reserved {}: {}", own_name, own.name, own.source,
                  format_duration(own.step_time), analysis::bytes_text(own.peak_reserved),
                  analysis::fit_text(own))));
  current_label_->setVisible(true);
  if (!box->isVisible()) {
    box->setVisible(true);
    right_->setSizes({230, 230, 330, 190});
  }
  update_metrics();
}

void MainWindow::show_plan_tab() {
  tabs_->setCurrentWidget(plan_);
}

void MainWindow::show_ranks_tab() {
  tabs_->setCurrentWidget(ranks_);
}

void MainWindow::load_configuration(ConfigTree tree, const QString& description) {
  const Scenario scenario =
      read_scenario(tree, file_, std::filesystem::path(file_).parent_path());  // throws first
  base_ = std::move(tree);
  settings_->load(scenario);
  request_simulation();
  statusBar()->showMessage("loaded " + description);
}

void MainWindow::show_sweep_tab() {
  tabs_->setCurrentWidget(sweep_);
  right_->setSizes({0, 150, 250, 600});
}

QString MainWindow::reference_caption() const {
  return reference_label_->text();
}

QString MainWindow::current_caption() const {
  return current_label_->text();
}

void MainWindow::pin_baseline() {
  if (!result_) return;
  baseline_ = result_;
  measured_.reset();
  show_reference();
}

void MainWindow::export_png() {
  const QString path =
      QFileDialog::getSaveFileName(this, "Export view", "shardscope.png", "PNG (*.png)");
  if (!path.isEmpty() && !grab().save(path))
    QMessageBox::warning(this, "Export", "Could not write " + path);
}

void MainWindow::export_svg() {
  const QString path =
      QFileDialog::getSaveFileName(this, "Export view", "shardscope.svg", "SVG (*.svg)");
  if (path.isEmpty()) return;
  QSvgGenerator svg;
  svg.setFileName(path);
  svg.setSize(size());
  svg.setViewBox(rect());
  svg.setTitle(windowTitle());
  QPainter painter(&svg);
  render(&painter);
}

void MainWindow::export_trace() {
  if (!result_) return;
  const QString path =
      QFileDialog::getSaveFileName(this, "Export Perfetto trace", "trace.json", "JSON (*.json)");
  if (path.isEmpty()) return;
  try {
    write_text_file_atomic(path.toStdString(), traces::chrome_trace_json(result_->timeline));
  } catch (const Error& e) {
    QMessageBox::warning(this, "Export", QString::fromStdString(e.what()));
  }
}

void MainWindow::save_scenario() {
  const QString path = QFileDialog::getSaveFileName(this, "Save scenario", "scenario.json",
                                                    "Scenarios (*.json *.yaml)");
  if (path.isEmpty()) return;
  try {
    write_text_file_atomic(path.toStdString(),
                           current_tree().dump(2) + "\n");  // JSON is valid YAML too
  } catch (const Error& e) {
    QMessageBox::warning(this, "Save", QString::fromStdString(e.what()));
  }
}

}  // namespace shardscope::gui
