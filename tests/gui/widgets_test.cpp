// Renders the main window offscreen on simulated scenarios and checks pixels.
#include <gtest/gtest.h>

#include <QApplication>
#include <QChart>
#include <QImage>

#include "main_window.hpp"
#include "memory_chart.hpp"
#include "settings_panel.hpp"
#include "sweep_view.hpp"
#include "timeline_widget.hpp"

namespace shardscope::gui {
namespace {

const QString kExamples = SHARDSCOPE_EXAMPLES_DIR;

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

TEST(TimelineWidget, DrawsEveryLaneWithItsOpColours) {
  Window win(kExamples + "/fsdp2-overlap-oracle.yaml");
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
  Window win(kExamples + "/fsdp2-overlap-oracle.yaml");
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
  Window win(kExamples + "/llama3-8b-h100x8.yaml");
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
              static_cast<double>(s.peak_allocated) / static_cast<double>(kGiB), 0.01);
  const QPointF pos = chart->chart()->mapToPosition(chart->peak_point());
  const QColor c = img.pixelColor(static_cast<int>(pos.x()), static_cast<int>(pos.y()));
  EXPECT_GT(c.red(), 200);
  EXPECT_LT(c.green(), 80);
}

TEST(MainWindow, KnobChangesResimulate) {
  Window win(kExamples + "/fsdp2-overlap-oracle.yaml");
  const TimeNs before = win.w.result()->summary.step_time;
  ASSERT_TRUE(win.w.settings()->set_value("fsdp.reshard_after_forward", "false"));
  win.w.simulate_now();
  EXPECT_LT(win.w.result()->summary.step_time, before);  // no backward all-gathers
  EXPECT_EQ(win.w.result()->summary.collectives.at("all_gather"), 3);
}

TEST(MainWindow, PinnedBaselineShowsASecondTimeline) {
  Window win(kExamples + "/fsdp2-overlap-oracle.yaml");
  win.w.pin_baseline();
  ASSERT_TRUE(win.w.settings()->set_value("fsdp.reshard_after_forward", "false"));
  win.w.simulate_now();
  QApplication::processEvents();
  EXPECT_TRUE(win.w.baseline_timeline()->isVisible());
  EXPECT_NE(win.w.result()->summary.step_time, 0);
}

TEST(SweepView, RunsTheGridMarksThePointsAndLoadsAClickedConfiguration) {
  Window win(kExamples + "/fsdp2-overlap-oracle.yaml");
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
  // Loading the best configuration puts its settings into the panel and re-simulates to its step
  // time.
  const auto& best = view->rows().front();
  emit view->load_settings(best.settings);
  win.w.simulate_now();
  EXPECT_NEAR(ns_to_s(win.w.result()->summary.step_time), best.step_time_s, 1e-6);
}

}  // namespace
}  // namespace shardscope::gui
