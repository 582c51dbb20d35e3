// Renders the main window offscreen on simulated scenarios and checks pixels.
#include <gtest/gtest.h>

#include <QApplication>
#include <QChart>
#include <QImage>
#include <QStatusBar>
#include <QValueAxis>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "main_window.hpp"
#include "memory_chart.hpp"
#include "plan_view.hpp"
#include "ranks_view.hpp"
#include "settings_panel.hpp"
#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/schedule_io.hpp"
#include "sweep_view.hpp"
#include "timeline_widget.hpp"

namespace shardscope::gui {
namespace {

const QString kExamplesDir = SHARDSCOPE_EXAMPLES_DIR;

bool row_has_color(const QImage& img, int y, int x0, int x1, const QColor& c, int tolerance = 8) {
  for (int x = std::max(0, x0); x < std::min(img.width(), x1); ++x) {
    const QColor p = img.pixelColor(x, y);
    if (std::abs(p.red() - c.red()) <= tolerance && std::abs(p.green() - c.green()) <= tolerance &&
        std::abs(p.blue() - c.blue()) <= tolerance) {
      return true;
    }
  }
  return false;
}

struct Window {
  MainWindow w;
  explicit Window(const QString& scenario) {
    w.resize(1600, 1000);
    w.open_scenario(scenario);
    w.simulate_now();
    w.show();
    QApplication::processEvents();
  }
};

// x of time `t` in window pixels, in the timeline's lanes and in the memory chart's plot.
double timeline_x(MainWindow& w, TimelineWidget* tl, TimeNs t) {
  const double local = TimelineWidget::kLabelWidth + tl->axis().to_px(t);
  return tl->mapTo(&w, QPoint(0, 0)).x() + local;
}
double chart_x(MainWindow& w, MemoryChart* chart, TimeNs t) {
  const QPointF scene = chart->chart()->mapToPosition(QPointF(chart->time_unit().of(t), 0));
  return chart->mapTo(&w, QPoint(0, 0)).x() + chart->mapFromScene(scene).x();
}

TEST(TimelineWidget, DrawsEveryLaneWithItsOpColours) {
  Window win(kExamplesDir + "/fsdp2-overlap-oracle.yaml");
  TimelineWidget* tl = win.w.timeline();
  const QImage img = tl->grab().toImage();
  const auto& t = win.w.result()->timeline;
  // Find the lanes of the compute and all-gather streams.
  for (int lane = 0; lane < static_cast<int>(t.streams.size()); ++lane) {
    const int y = tl->lane_top(lane) + TimelineWidget::kLaneHeight / 2;
    const std::string& name =
        t.streams[static_cast<std::size_t>(LaneLayout(&t).lane_stream(lane))].name;
    if (name == "compute") {
      EXPECT_TRUE(row_has_color(img, y, TimelineWidget::kLabelWidth, img.width(),
                                color_of(OpKind::forward)));
      EXPECT_TRUE(row_has_color(img, y, TimelineWidget::kLabelWidth, img.width(),
                                color_of(OpKind::backward)));
    }
    if (name == "all_gather") {
      EXPECT_TRUE(row_has_color(img, y, TimelineWidget::kLabelWidth, img.width(),
                                color_of(OpKind::all_gather)));
    }
    if (name == "reduce_scatter") {
      EXPECT_TRUE(row_has_color(img, y, TimelineWidget::kLabelWidth, img.width(),
                                color_of(OpKind::reduce_scatter)));
    }
  }
}

TEST(TimelineWidget, ZoomingShowsOnlyTheVisibleRange) {
  Window win(kExamplesDir + "/fsdp2-overlap-oracle.yaml");
  TimelineWidget* tl = win.w.timeline();
  tl->set_view(0, 9 * kNsPerMs);  // before the first forward: only the first all-gather
  QApplication::processEvents();
  const QImage img = tl->grab().toImage();
  const auto& t = win.w.result()->timeline;
  LaneLayout layout(&t);
  for (int lane = 0; lane < layout.lane_count(); ++lane) {
    if (t.streams[static_cast<std::size_t>(layout.lane_stream(lane))].name != "compute") continue;
    const int y = tl->lane_top(lane) + TimelineWidget::kLaneHeight / 2;
    EXPECT_FALSE(row_has_color(img, y, TimelineWidget::kLabelWidth + 5, img.width() - 5,
                               color_of(OpKind::forward)));
  }
}

TEST(MemoryChart, DrawsTheCurveAndMarksThePeakWhereItIs) {
  Window win(kExamplesDir + "/llama3-8b-h100x8.yaml");
  MemoryChart* chart = win.w.memory_chart();
  const QImage img = chart->grab().toImage();
  const QRectF plot = chart->chart()->plotArea();
  // Stacked areas: non-white pixels across the plot's lower half.
  int coloured = 0;
  for (int x = static_cast<int>(plot.left()) + 2; x < static_cast<int>(plot.right()) - 2; x += 7) {
    const QColor p = img.pixelColor(x, static_cast<int>(plot.bottom()) - 4);
    coloured += p != QColor(Qt::white);
  }
  EXPECT_GT(coloured, 20);
  // The peak marker sits at the summary's peak: allocated bytes and the time of the op.
  const auto& s = win.w.result()->summary;
  EXPECT_NEAR(chart->peak_point().y(),
              static_cast<double>(s.peak_allocated.value()) / static_cast<double>(kGiB), 0.01);
  const QPointF pos = chart->chart()->mapToPosition(chart->peak_point());
  const QColor c = img.pixelColor(static_cast<int>(pos.x()), static_cast<int>(pos.y()));
  EXPECT_GT(c.red(), 200);
  EXPECT_LT(c.green(), 80);
}

// A run of a few MiB is drawn in MiB, over its own range: the 80 GB capacity line would flatten it
// to nothing, so the legend gives the capacity instead of the axis drawing it.
TEST(MemoryChart, AMiBScaleRunIsDrawnInMiBWithTheCapacityOffScale) {
  Window win(kExamplesDir + "/fsdp2-overlap-oracle.yaml");
  MemoryChart* chart = win.w.memory_chart();
  EXPECT_EQ(chart->memory_unit(), "MiB");
  EXPECT_EQ(chart->memory_axis()->titleText(), "memory (MiB)");
  const auto& s = win.w.result()->summary;
  EXPECT_LT(chart->memory_axis()->max(), 1.2 * static_cast<double>(*s.peak_reserved) / kMiB);
  EXPECT_NEAR(chart->peak_point().y(), static_cast<double>(*s.peak_allocated) / kMiB, 0.01);
  bool capacity_named = false;
  for (const auto& e : chart->legend_entries())
    capacity_named |= e.name.startsWith("GPU capacity") && e.name.contains("not drawn");
  EXPECT_TRUE(capacity_named);
}

// The view leaves room after the run, so its last ops end inside it, the memory chart alike.
TEST(TimelineWidget, TheRunEndsInsideTheViewWithRoomAfterIt) {
  Window win(kExamplesDir + "/fsdp2-overlap-oracle.yaml");
  TimelineWidget* tl = win.w.timeline();
  const TimeNs end = win.w.result()->timeline.end_time();
  const double end_x = TimelineWidget::kLabelWidth + tl->axis().to_px(end);
  EXPECT_NEAR(end_x, tl->width() - TimelineWidget::kRightMargin, 1.0);
  EXPECT_NEAR(chart_x(win.w, win.w.memory_chart(), end), timeline_x(win.w, tl, end), 1.0);
}

// A block of ops folded at this zoom says what it is when hovered.
TEST(TimelineWidget, AFoldedBlockSaysWhatItHolds) {
  Window win(kExamplesDir + "/llama3-8b-h100x8.yaml");
  TimelineWidget* tl = win.w.timeline();
  QString folded;
  for (int lane = 0; lane < 5 && folded.isEmpty(); ++lane) {
    const int y = tl->lane_top(lane) + TimelineWidget::kLaneHeight / 2;
    for (int x = TimelineWidget::kLabelWidth; x < tl->width() && folded.isEmpty(); x += 2) {
      const QString text = tl->tooltip_at(QPoint(x, y));
      if (text.contains("ops folded")) folded = text;
    }
  }
  ASSERT_FALSE(folded.isEmpty());
  EXPECT_TRUE(folded.contains("zoom in")) << folded.toStdString();
}

// Two stacked runs each say whether they fit: a baseline that does not is no baseline to beat.
TEST(MainWindow, EachStackedRunSaysWhetherItFits) {
  Window win(kExamplesDir + "/llama3-8b-h100x8.yaml");
  ASSERT_TRUE(win.w.settings()->set_value("training.activation_checkpointing", "none"));
  win.w.simulate_now();
  ASSERT_EQ(win.w.result()->summary.fit, analysis::Fit::does_not_fit);
  win.w.pin_baseline();
  ASSERT_TRUE(win.w.settings()->set_value("training.activation_checkpointing", "full"));
  win.w.simulate_now();
  QApplication::processEvents();
  EXPECT_TRUE(win.w.reference_caption().contains("DOES NOT FIT"))
      << win.w.reference_caption().toStdString();
  EXPECT_TRUE(win.w.current_caption().contains(": fits")) << win.w.current_caption().toStdString();
}

TEST(MainWindow, KnobChangesResimulate) {
  Window win(kExamplesDir + "/fsdp2-overlap-oracle.yaml");
  const TimeNs before = win.w.result()->summary.step_time;
  ASSERT_TRUE(win.w.settings()->set_value("fsdp.reshard_after_forward", "false"));
  win.w.simulate_now();
  EXPECT_LT(win.w.result()->summary.step_time, before);  // no backward all-gathers
  EXPECT_EQ(win.w.result()->summary.collectives.at("all_gather"), 3);
}

TEST(MainWindow, TheSlowNodeKnobReplaysEveryRankLive) {
  Window win(kExamplesDir + "/llama3-8b-h100x8.yaml");
  EXPECT_EQ(win.w.result()->ranks, nullptr);
  EXPECT_TRUE(win.w.ranks_view()->summary_text().contains("Every rank is alike"));
  ASSERT_TRUE(win.w.settings()->set_value("cluster.nodes", "2"));
  ASSERT_TRUE(win.w.settings()->set_value("variation.slow_nodes", "0:1.2"));
  win.w.simulate_now();
  QApplication::processEvents();
  ASSERT_NE(win.w.result()->ranks, nullptr);
  EXPECT_GT(win.w.result()->ranks->step_time, win.w.result()->summary.step_time);
  EXPECT_TRUE(win.w.ranks_view()->summary_text().contains("Straggler: ranks 0-7"))
      << win.w.ranks_view()->summary_text().toStdString();
  EXPECT_FALSE(win.w.ranks_view()->lanes()->isHidden());  // shown once its tab is
}

TEST(MainWindow, PinnedBaselineShowsASecondTimeline) {
  Window win(kExamplesDir + "/fsdp2-overlap-oracle.yaml");
  win.w.pin_baseline();
  ASSERT_TRUE(win.w.settings()->set_value("fsdp.reshard_after_forward", "false"));
  win.w.simulate_now();
  QApplication::processEvents();
  EXPECT_TRUE(win.w.reference_timeline()->isVisible());
  ASSERT_NE(win.w.comparison(), nullptr);
  // A: the baseline (resharding), B: the current run (no backward all-gathers).
  EXPECT_LT(win.w.comparison()->b.step_time, win.w.comparison()->a.step_time);
}

TEST(MemoryChart, ItsTimeAxisLinesUpWithTheLanesToThePixel) {
  Window win(kExamplesDir + "/llama3-8b-h100x8.yaml");
  TimelineWidget* tl = win.w.timeline();
  MemoryChart* chart = win.w.memory_chart();
  const TimeNs end = win.w.result()->timeline.end_time();
  for (auto [from, to] : {std::pair<TimeNs, TimeNs>{0, end}, {end / 3, end / 3 + 40 * kNsPerMs}}) {
    tl->set_view(from, to);
    QApplication::processEvents();
    for (int k = 0; k <= 4; ++k) {
      const TimeNs t = from + (to - from) * k / 4;
      EXPECT_NEAR(chart_x(win.w, chart, t), timeline_x(win.w, tl, t), 1.0) << "t = " << t;
    }
  }
}

TEST(MemoryChart, TicksAreRoundAndInTheTimelinesUnit) {
  Window win(kExamplesDir + "/llama3-8b-h100x8.yaml");
  TimelineWidget* tl = win.w.timeline();
  MemoryChart* chart = win.w.memory_chart();
  auto is_nice = [](double v) {
    const double mantissa = v / std::pow(10.0, std::floor(std::log10(v)));
    return std::fabs(mantissa - 1) < 1e-9 || std::fabs(mantissa - 2) < 1e-9 ||
           std::fabs(mantissa - 5) < 1e-9;
  };
  for (auto [from, to] :
       {std::pair<TimeNs, TimeNs>{0, win.w.result()->timeline.end_time()}, {0, 3 * kNsPerMs}}) {
    tl->set_view(from, to);
    QApplication::processEvents();
    const TimeNs step = tick_step(tl->axis(), kTickSpacingPx);
    const TimeUnit unit = tick_unit(step);
    EXPECT_STREQ(chart->time_unit().name, unit.name);
    EXPECT_EQ(chart->time_axis()->titleText(), QString("time (%1)").arg(unit.name));
    EXPECT_EQ(chart->time_axis()->tickType(), QValueAxis::TicksDynamic);
    EXPECT_DOUBLE_EQ(chart->time_axis()->tickAnchor(), 0.0);
    EXPECT_DOUBLE_EQ(chart->time_axis()->tickInterval() * static_cast<double>(unit.ns),
                     static_cast<double>(step));
  }
  const QValueAxis* memory = chart->memory_axis();
  EXPECT_EQ(memory->tickType(), QValueAxis::TicksDynamic);
  EXPECT_DOUBLE_EQ(memory->tickAnchor(), 0.0);
  EXPECT_TRUE(is_nice(memory->tickInterval())) << memory->tickInterval();
  EXPECT_EQ(memory->tickInterval(), 20.0);  // 80 GB of capacity: 0, 20, 40, 60, 80 GiB
}

TEST(MemoryChart, TheLegendShowsEveryLabelInFullAndWraps) {
  Window win(kExamplesDir + "/llama3-8b-h100x8.yaml");
  MemoryChart* chart = win.w.memory_chart();
  QStringList names;
  for (const auto& e : chart->legend_entries()) names << e.name;
  for (const char* expected : {"sharded_params", "activations", "reserved", "GPU capacity"})
    EXPECT_TRUE(names.contains(expected)) << expected << " in " << names.join(", ").toStdString();
  EXPECT_FALSE(chart->chart()->legend()->isVisible());  // Qt's legend would elide them
  const int wide_rows = chart->legend_rows();
  win.w.resize(700, 1000);
  QApplication::processEvents();
  EXPECT_GT(chart->legend_rows(), wide_rows);
  // The plot area shrinks to leave the rows their room.
  EXPECT_LT(chart->chart()->plotArea().bottom(), chart->height() - chart->legend_rows() * 18 - 30);
}

// A measured run of `scenario` made by simulating it with a slower layers.1, saved as a timeline
// file that names its scenario, as the executor writes them.
QString write_measured_run(const QString& scenario, const QString& path) {
  ConfigTree tree = load_config_file(scenario.toStdString());
  tree["model"]["groups"][1]["forward_time_ms"] = 40;
  auto run = run_scenario(tree, scenario.toStdString());
  Timeline measured = run->timeline;
  measured.source = "measured";
  measured.provenance.scenario = scenario.toStdString();
  write_text_file_atomic(path.toStdString(), timeline_to_json(measured));
  return path;
}

// A Kineto trace opens on its own, gzipped or not: it names no scenario, so none is opened.
TEST(MainWindow, AKinetoTraceOpensAlone) {
  MainWindow w;
  w.open_timeline(kExamplesDir + "/../traces/samples/fsdp2_rank0.json.gz");
  QApplication::processEvents();
  EXPECT_EQ(w.result(), nullptr);  // nothing simulated
  EXPECT_FALSE(w.settings()->has_scenario());
  EXPECT_TRUE(w.statusBar()->currentMessage().startsWith("imported timeline: "))
      << w.statusBar()->currentMessage().toStdString();
}

// A trace over the 16 MiB a scenario may have (real ones run to hundreds of MB) opens as a trace,
// the status bar saying how long it took.
TEST(MainWindow, ATraceLargerThanAnyScenarioOpens) {
  const auto path = std::filesystem::temp_directory_path() / "shardscope-gui-large-trace.json";
  {
    std::ofstream out(path);
    out << R"({"schemaVersion": 1, "traceEvents": [)";
    const std::string args(120, 'x');  // a long argument, as real kernels' shapes are
    for (int i = 0; i < 90000; ++i) {
      out << (i ? ",\n" : "\n")
          << R"({"ph": "X", "cat": "kernel", "name": "ampere_sgemm", "pid": 0, "tid": 7, "ts": )"
          << i * 10 << R"(, "dur": 8, "args": {"stream": 7, "device": 0, "shape": ")" << args
          << R"("}})";
    }
    out << "]}\n";
  }
  ASSERT_GT(std::filesystem::file_size(path), std::uintmax_t{17} << 20);
  MainWindow w;
  w.open_timeline(QString::fromStdString(path.string()));
  QApplication::processEvents();
  const QString status = w.statusBar()->currentMessage();
  EXPECT_TRUE(status.startsWith("imported timeline: 90000 ops, read in ")) << status.toStdString();
  EXPECT_TRUE(status.endsWith(" s")) << status.toStdString();
  std::filesystem::remove(path);
}

// A run made with --set overrides re-simulates with them: the scenario it names and the
// overrides it records are its job, not the scenario file alone.
TEST(MainWindow, AMeasuredRunReSimulatesWithTheOverridesItWasMadeWith) {
  const QString scenario = kExamplesDir + "/fsdp2-overlap-oracle.yaml";
  const QString path = write_measured_run(
      scenario, QString::fromStdString(testing::TempDir()) + "/measured_overrides.json");
  Timeline measured = timeline_from_json(read_text_file(path.toStdString()));
  measured.provenance.overrides = {"training.grad_accum=2"};
  write_text_file_atomic(path.toStdString(), timeline_to_json(measured));
  MainWindow w;
  w.open_timeline(path);
  QApplication::processEvents();
  ASSERT_NE(w.result(), nullptr);
  EXPECT_EQ(w.result()->scenario.training.grad_accum, 2);
}

TEST(MainWindow, AMeasuredRunOpensStackedAboveTheSimulationOfItsScenario) {
  const QString scenario = kExamplesDir + "/fsdp2-overlap-oracle.yaml";
  const QString path = write_measured_run(
      scenario, QString::fromStdString(testing::TempDir()) + "/measured_overlap.json");
  MainWindow w;
  w.resize(1600, 1000);
  w.open_timeline(path);
  w.show();
  QApplication::processEvents();
  ASSERT_NE(w.result(), nullptr);  // its scenario was simulated
  EXPECT_TRUE(w.settings()->has_scenario());
  EXPECT_TRUE(w.reference_timeline()->isVisible());
  const auto* c = w.comparison();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->a.source, "simulated");
  EXPECT_EQ(c->b.source, "measured");
  EXPECT_GT(c->b.step_time, c->a.step_time);  // a slower layer
  // One time axis: both views show the same range, up to the later run's end.
  const TimeAxis& own = w.timeline()->axis();
  const TimeAxis& other = w.reference_timeline()->axis();
  EXPECT_EQ(own.start(), other.start());
  EXPECT_EQ(own.end(), other.end());
  const Timeline measured = timeline_from_json(read_text_file(path.toStdString()));
  EXPECT_EQ(own.limit(), std::max(w.result()->timeline.end_time(), measured.end_time()));
  EXPECT_EQ(own.end(), own.limit());
  EXPECT_EQ(timeline_x(w, w.timeline(), own.end() / 2),
            timeline_x(w, w.reference_timeline(), own.end() / 2));
  // Hovering a forward op of the simulation gives its measured counterpart's delta.
  const Timeline& sim = w.result()->timeline;
  const LaneLayout layout(&sim);
  QString hover;
  for (int lane = 0; lane < layout.lane_count() && hover.isEmpty(); ++lane) {
    for (int index : layout.lane_ops(lane)) {
      const auto& op = sim.ops[static_cast<std::size_t>(index)];
      if (op.kind != OpKind::forward) continue;
      const double x = TimelineWidget::kLabelWidth + own.to_px(op.start + op.duration() / 2);
      hover = w.timeline()->tooltip_at(QPoint(
          static_cast<int>(x), w.timeline()->lane_top(lane) + TimelineWidget::kLaneHeight / 2));
      break;
    }
  }
  EXPECT_TRUE(hover.contains("measured: ")) << hover.toStdString();
  EXPECT_TRUE(hover.contains("%")) << hover.toStdString();
  // Both memory curves, and the deltas in the metrics table.
  QStringList names;
  for (const auto& e : w.memory_chart()->legend_entries()) names << e.name;
  EXPECT_TRUE(names.contains("measured allocated"));
  EXPECT_TRUE(names.contains("measured reserved"));
}

TEST(MainWindow, AMeasuredRunNeedsTheScenarioOpenFirst) {
  MainWindow w;
  EXPECT_THROW(w.open_measured(QString(SHARDSCOPE_TEST_DATA_DIR) + "/traces/fsdp2_tiny.json"),
               Error);
  EXPECT_FALSE(w.settings()->has_scenario());  // and the panel shows no unrelated defaults
}

TEST(MainWindow, AKinetoTraceStacksAboveTheSimulation) {
  Window win(kExamplesDir + "/fsdp2-overlap-oracle.yaml");
  win.w.open_measured(QString(SHARDSCOPE_TEST_DATA_DIR) + "/traces/fsdp2_tiny.json");
  QApplication::processEvents();
  ASSERT_NE(win.w.comparison(), nullptr);
  EXPECT_EQ(win.w.comparison()->b.source, "imported");
  EXPECT_TRUE(win.w.reference_timeline()->isVisible());
}

TEST(MainWindow, ARunWithNoDeviceWorkIsRefusedAndATraceIsNotReadAsAScenario) {
  Window win(kExamplesDir + "/fsdp2-overlap-oracle.yaml");
  const auto empty = std::filesystem::temp_directory_path() / "shardscope-gui-no-work.json";
  std::ofstream(empty) << R"({"traceEvents": []})";
  try {
    win.w.open_measured(QString::fromStdString(empty.string()));
    ADD_FAILURE() << "a run with no device work was stacked";
  } catch (const ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("no device work was recorded"), std::string::npos);
  }
  EXPECT_EQ(win.w.comparison(), nullptr);  // the window is as it was
  std::filesystem::remove(empty);
  // A trace handed to File → Open scenario says what it is.
  try {
    win.w.open_scenario(QString(SHARDSCOPE_TEST_DATA_DIR) + "/traces/fsdp2_tiny.json");
    ADD_FAILURE() << "a trace was read as a scenario";
  } catch (const ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("is a PyTorch profiler trace, not a scenario"),
              std::string::npos);
  }
}

TEST(MainWindow, ATimelineWithoutItsScenarioHidesTheSettings) {
  auto run =
      run_scenario(load_config_file((kExamplesDir + "/fsdp2-overlap-oracle.yaml").toStdString()),
                   (kExamplesDir + "/fsdp2-overlap-oracle.yaml").toStdString());
  const std::string path = testing::TempDir() + "/simulated_overlap.json";
  write_text_file_atomic(path, timeline_to_json(run->timeline));
  Window win(kExamplesDir + "/fsdp2-overlap-oracle.yaml");
  EXPECT_TRUE(win.w.settings()->has_scenario());
  win.w.open_timeline(QString::fromStdString(path));
  EXPECT_FALSE(win.w.settings()->has_scenario());
  EXPECT_EQ(win.w.result(), nullptr);
  EXPECT_FALSE(win.w.reference_timeline()->isVisible());
}

TEST(SweepView, RunsTheGridMarksThePointsAndLoadsAClickedConfiguration) {
  Window win(kExamplesDir + "/fsdp2-overlap-oracle.yaml");
  SweepView* view = win.w.sweep_view();
  view->set_grid("fsdp.reshard_after_forward=true,false\ntraining.optimizer=adamw,sgd", "1GiB");
  view->run_now();
  ASSERT_EQ(view->rows().size(), 4u);
  int pareto = 0;
  for (const auto& r : view->rows()) {
    EXPECT_TRUE(r.fits);
    pareto += r.pareto;
  }
  EXPECT_GE(pareto, 1);
  // Round ticks on both axes, and each series' count in its name.
  for (const auto* axis : view->scatter()->axes()) {
    const double step = static_cast<const QValueAxis*>(axis)->tickInterval();
    const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
    EXPECT_TRUE(std::abs(mantissa - 1) < 1e-9 || std::abs(mantissa - 2) < 1e-9 ||
                std::abs(mantissa - 5) < 1e-9)
        << step;
  }
  QStringList names;
  for (const auto* series : view->scatter()->series()) names << series->name();
  EXPECT_TRUE(names.contains("fits (4)")) << names.join(", ").toStdString();
  EXPECT_TRUE(names.contains("does not fit (0)")) << names.join(", ").toStdString();
  // Loading the best configuration puts its settings into the panel and re-simulates to its step
  // time.
  const auto& best = view->rows().front();
  emit view->load_settings(best.settings);
  win.w.simulate_now();
  EXPECT_NEAR(ns_to_s(win.w.result()->summary.step_time), best.step_time_s, 1e-6);
}

TEST(PlanView, PlansLoadsAChosenConfigurationExactlyAndRefusesBadInput) {
  Window win(kExamplesDir + "/plan-llama3-8b-2-nodes.yaml");
  PlanView* view = win.w.plan_view();
  view->set_inputs("fsdp2",
                   "training.loss=fused\ntraining.activation_checkpointing=none,selective_op\n"
                   "fsdp.forward_prefetch_modules=0\nfsdp.wrap.blocks_per_group=1\n"
                   "allocator.expandable_segments=false",
                   "5%", 3);
  view->run_now();
  ASSERT_NE(view->result(), nullptr);
  const auto& ranked = view->result()->ranked;
  ASSERT_EQ(ranked.size(), 3u);
  // The whole configuration of the selected row shows under the table.
  EXPECT_TRUE(view->detail_text().startsWith("#1: micro-batch"))
      << view->detail_text().toStdString();
  // The second-ranked configuration, loaded into the window, simulates to the plan's prediction:
  // the settings take the exact scenario the planner simulated, not an approximation of it.
  view->load(1);
  win.w.simulate_now();
  ASSERT_NE(win.w.result(), nullptr);
  EXPECT_EQ(win.w.result()->summary.step_time, ranked[1].summary.step_time);
  EXPECT_EQ(win.w.result()->summary.peak_reserved, ranked[1].summary.peak_reserved);
  EXPECT_TRUE(win.w.settings()->has_scenario());
  // A margin that is not one leaves the last plan as it was.
  view->set_inputs("fsdp2", "", "120%", 3);
  view->run_now();
  ASSERT_NE(view->result(), nullptr);
  EXPECT_EQ(view->result()->ranked.size(), 3u);
}

}  // namespace
}  // namespace shardscope::gui
