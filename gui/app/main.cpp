// shardscope-gui [SCENARIO | TIMELINE.json | TRACE.json[.gz]] [--set key=value]...
//   [--measured TIMELINE_OR_TRACE] [--baseline-set key=value]... [--zoom START_MS:END_MS]
//   [--sweep GRID [--budget SIZE]] [--plan API] [--ranks] [--screenshot out.png]
#include <QApplication>
#include <QCommandLineParser>
#include <QFile>
#include <QScreen>
#include <QTimer>
#include <cstdio>
#include <new>

#include "main_window.hpp"
#include "plan_view.hpp"
#include "settings_panel.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/traces/kineto_import.hpp"
#include "sweep_view.hpp"
#include "timeline_widget.hpp"

namespace {

// A timeline file names its schema near the top, a Kineto trace has its own keys; anything else
// is read as a scenario.
bool is_timeline_file(const QString& path) {
  if (shardscope::traces::looks_like_kineto_trace(path.toStdString())) return true;
  QFile file(path);
  if (!path.endsWith(".json") || !file.open(QIODevice::ReadOnly)) return false;
  return file.read(4096).contains("shardscope.timeline/");
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("shardscope-gui");
  QCommandLineParser parser;
  parser.setApplicationDescription("shardscope: FSDP timelines, memory and what-ifs");
  parser.addHelpOption();
  parser.addPositionalArgument("input",
                               "a scenario (.yaml, .yml, .json), a timeline (shardscope.timeline/3 "
                               ".json) or a Kineto trace");
  QCommandLineOption set({"s", "set"}, "override a scenario key", "key=value");
  QCommandLineOption screenshot("screenshot", "render the window at 1600×1000 to a PNG and exit",
                                "file");
  QCommandLineOption baseline(
      "baseline-set", "pin a baseline run with these overrides, then show the input (compare)",
      "key=value");
  QCommandLineOption measured(
      "measured", "stack this measured run (timeline or Kineto trace) above the simulation",
      "file");
  QCommandLineOption zoom("zoom", "show only this time range", "start_ms:end_ms");
  QCommandLineOption sweep("sweep", "run a sweep in the Sweep tab: axes separated by ';'",
                           "key=v1,v2;...");
  QCommandLineOption budget("budget", "memory budget of --sweep", "size", "80GiB");
  QCommandLineOption plan("plan",
                          "plan in the Plan tab (either, fsdp2, fsdp1 or torchtitan); with "
                          "--screenshot, the best plan is loaded into the settings",
                          "api");
  QCommandLineOption ranks(
      "ranks",
      "show the Ranks tab: every rank replayed with the scenario's variation.* "
      "keys (set them with --set)");
  parser.addOptions({set, screenshot, baseline, measured, zoom, sweep, budget, plan, ranks});
  parser.process(app);

  shardscope::gui::MainWindow window;
  window.resize(1600, 1000);
  const QStringList inputs = parser.positionalArguments();
  std::vector<std::string> overrides;
  for (const auto& o : parser.values(set)) overrides.push_back(o.toStdString());
  const bool shot = parser.isSet(screenshot);
  try {
    if (!inputs.isEmpty()) {
      const QString& input = inputs.front();
      if (!is_timeline_file(input)) {
        if (parser.isSet(baseline)) {
          std::vector<std::string> base = overrides;
          for (const auto& o : parser.values(baseline)) base.push_back(o.toStdString());
          window.open_scenario(input, base);
          window.simulate_now();
          window.pin_baseline();
        }
        window.open_scenario(input, overrides);
        if (shot || parser.isSet(measured)) window.simulate_now();
        if (parser.isSet(measured)) window.open_measured(parser.value(measured));
      } else {
        window.open_timeline(input);
      }
    }
  } catch (const shardscope::ValidationError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const shardscope::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "error: out of host memory: the input describes more than this machine "
                 "can hold\n");
    return 3;  // as the CLI: the meaning is "does not fit"
  }
  if (parser.isSet(zoom)) {
    const auto parts = parser.value(zoom).split(':');
    if (parts.size() == 2) {
      window.timeline()->set_view(static_cast<qint64>(parts[0].toDouble() * 1e6),
                                  static_cast<qint64>(parts[1].toDouble() * 1e6));
    }
  }
  if (parser.isSet(sweep)) {
    window.sweep_view()->set_grid(parser.value(sweep).split(';').join('\n'), parser.value(budget));
    window.show_sweep_tab();
    if (shot) window.sweep_view()->run_now();
  }
  if (parser.isSet(plan)) {
    window.plan_view()->set_inputs(parser.value(plan), "", "5%", 5);
    window.show_plan_tab();
    if (shot) {
      window.plan_view()->run_now();
      window.plan_view()->load(0);
      window.simulate_now();
    }
  }
  if (parser.isSet(ranks)) window.show_ranks_tab();
  if (shot) {
    window.show();
    QApplication::processEvents();
    const QString path = parser.value(screenshot);
    if (!window.grab().save(path)) {
      std::fprintf(stderr, "error: cannot write %s\n", path.toUtf8().constData());
      return 2;
    }
    std::printf("wrote %s (1600×1000)\n", path.toUtf8().constData());
    return 0;
  }
  window.show();
  return app.exec();
}
