// GUI responsiveness (issue #5 goals: ≤ 16 ms to paint a 1M-op timeline, ≤ 50 ms from a knob change
// to an updated view of the default scenario). Runs offscreen.
#include <benchmark/benchmark.h>

#include <QApplication>
#include <QImage>
#include <QPainter>
#include <random>

#include "main_window.hpp"
#include "settings_panel.hpp"
#include "shardscope/core/config_tree.hpp"
#include "timeline_widget.hpp"

namespace {

using namespace shardscope;

Timeline million_ops() {
  Timeline t;
  t.name = "1M ops";
  t.streams = {{"cpu", StreamKind::cpu},
               {"compute", StreamKind::compute},
               {"all_gather", StreamKind::communication},
               {"reduce_scatter", StreamKind::communication}};
  t.groups = {"layers.0", "layers.1"};
  std::mt19937 rng(1);
  std::uniform_int_distribution<TimeNs> len(1000, 50'000);
  for (StreamId s = 1; s <= 3; ++s) {
    TimeNs now = 0;
    const OpKind kind = s == 1   ? OpKind::forward
                        : s == 2 ? OpKind::all_gather
                                 : OpKind::reduce_scatter;
    for (int i = 0; i < 333'334; ++i) {
      const TimeNs d = len(rng);
      TimelineOp op;
      op.op = static_cast<OpId>(t.ops.size());
      op.kind = kind;
      op.stream = s;
      op.group = i % 2;
      op.start = now;
      op.end = now + d;
      t.ops.push_back(op);
      now += d + len(rng) / 4;
    }
  }
  return t;
}

// Painting the whole 1M-op timeline (zoomed out: everything folds) and a zoomed-in window.
void BM_PaintMillionOpTimeline(benchmark::State& state) {
  static const Timeline kTimeline = million_ops();
  gui::TimelineWidget w;
  w.resize(1400, 160);
  w.set_timeline(&kTimeline);
  if (state.range(0) == 1)
    w.set_view(kTimeline.end_time() / 2, kTimeline.end_time() / 2 + 2'000'000);
  QImage image(w.size(), QImage::Format_ARGB32_Premultiplied);
  for (auto _ : state) {
    QPainter p(&image);
    w.render(&p);
  }
  state.SetLabel(state.range(0) == 0 ? "zoomed out" : "2 ms window");
}
BENCHMARK(BM_PaintMillionOpTimeline)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// A knob change on the default scenario: re-lower, re-simulate, update every view.
void BM_KnobChangeToUpdatedView(benchmark::State& state) {
  gui::MainWindow w;
  w.resize(1600, 1000);
  w.open_scenario(QString(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml");
  w.simulate_now();
  bool reshard = false;
  for (auto _ : state) {
    w.settings()->set_value("fsdp.reshard_after_forward", reshard ? "true" : "false");
    reshard = !reshard;
    w.simulate_now();
    QApplication::processEvents();
  }
}
BENCHMARK(BM_KnobChangeToUpdatedView)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
