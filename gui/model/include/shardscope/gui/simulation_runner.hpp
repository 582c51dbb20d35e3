#pragma once
// Lowers and simulates scenarios off the GUI thread. Requests coalesce: while one run is in
// flight only the newest pending request is kept, and results of superseded requests are dropped,
// so turning a knob quickly never queues stale work and the window never waits.

#include <QObject>
#include <QStringList>
#include <QThreadPool>
#include <memory>
#include <mutex>
#include <optional>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule.hpp"
#include "shardscope/core/timeline.hpp"
#include "shardscope/sim/rank_simulation.hpp"

namespace shardscope::gui {

struct RunResult {
  quint64 generation = 0;
  Scenario scenario;
  Schedule schedule;
  Timeline timeline;
  analysis::Summary summary;
  // With the scenario's variation.* keys: every rank replayed (the Ranks tab); null without.
  std::shared_ptr<const sim::RankSimulation> ranks;
};

/// Validates, lowers, simulates and summarizes (and, where the scenario has variation.* keys,
/// replays every rank); throws ValidationError on a bad scenario.
/// `expandable_segments` turns them on over the scenario's allocator section (the GUI's toggle).
std::shared_ptr<const RunResult> run_scenario(const ConfigTree& tree, const std::string& file,
                                              bool expandable_segments = false);

/// Metric rows with units for a summary (the metrics panel).
std::vector<std::pair<QString, QString>> metric_rows(const analysis::Summary& summary);

class SimulationRunner : public QObject {
  Q_OBJECT

 public:
  explicit SimulationRunner(QObject* parent = nullptr);
  ~SimulationRunner() override;

  /// Starts (or queues, replacing any queued request) a run; returns its generation.
  quint64 request(ConfigTree tree, std::string file);
  quint64 latest() const { return generation_; }
  /// Drops the queued request and the result of the one in flight.
  void cancel();
  bool busy() const;

 signals:
  void finished(std::shared_ptr<const shardscope::gui::RunResult> result);
  void failed(quint64 generation, QStringList problems);

 private:
  struct Pending {
    quint64 generation;
    ConfigTree tree;
    std::string file;
  };
  void start(Pending job);
  void done(quint64 generation);

  QThreadPool pool_;
  mutable std::mutex mutex_;
  bool running_ = false;
  std::optional<Pending> pending_;
  quint64 generation_ = 0;
};

}  // namespace shardscope::gui

Q_DECLARE_METATYPE(std::shared_ptr<const shardscope::gui::RunResult>)
