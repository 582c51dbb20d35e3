#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QRegularExpression>
#include <QSignalSpy>

#include "shardscope/core/schedule_io.hpp"
#include "shardscope/gui/op_table_model.hpp"
#include "shardscope/gui/simulation_runner.hpp"

namespace shardscope::gui {
namespace {

const std::string kExamples = SHARDSCOPE_EXAMPLES_DIR;

TEST(OpTableModel, PassesQtModelTesterAndShowsUnits) {
  const auto run = run_scenario(load_config_file(kExamples + "/fsdp2-overlap-oracle.yaml"),
                                kExamples + "/fsdp2-overlap-oracle.yaml");
  OpTableModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  model.set_timeline(&run->timeline);
  ASSERT_EQ(model.rowCount(), static_cast<int>(run->timeline.ops.size()));
  bool found = false;
  for (int row = 0; row < model.rowCount(); ++row) {
    if (model.data(model.index(row, OpTableModel::kKind)).toString() != "all_gather") continue;
    found = true;
    EXPECT_EQ(model.data(model.index(row, OpTableModel::kDuration)).toString(), "10.000 ms");
    EXPECT_EQ(model.data(model.index(row, OpTableModel::kDuration), Qt::UserRole).toLongLong(),
              10'000'000);
    EXPECT_TRUE(model.data(model.index(row, OpTableModel::kBytes)).toString().endsWith("MiB"));
    break;
  }
  EXPECT_TRUE(found);
  model.set_timeline(nullptr);
  EXPECT_EQ(model.rowCount(), 0);
}

// training.generation: its ops are in the timeline (the op table's phase column) and its time
// is a metric row after the optimizer's; a run without generation has neither.
TEST(MetricsModel, GenerationHasItsRowAndItsOps) {
  ConfigTree tree = load_config_file(kExamples + "/llama3-8b-h100x8.yaml");
  tree["training"]["generation"] = ConfigTree::object();
  tree["training"]["generation"]["calls"] = 1;
  tree["training"]["generation"]["new_tokens"] = 2;
  tree["training"]["generation"]["prompt_tokens"] = 64;
  const auto run = run_scenario(tree, kExamples + "/llama3-8b-h100x8.yaml");
  const auto rows = metric_rows(run->summary);
  ASSERT_GT(rows.size(), 6u);
  EXPECT_EQ(rows[5].first, "optimizer");
  EXPECT_EQ(rows[6].first, "generation");
  EXPECT_TRUE(rows[6].second.endsWith("ms")) << rows[6].second.toStdString();
  OpTableModel ops;
  ops.set_timeline(&run->timeline);
  int generation = 0;
  for (int row = 0; row < ops.rowCount(); ++row)
    generation += ops.data(ops.index(row, OpTableModel::kPhase)).toString() == "generation";
  EXPECT_GT(generation, 0);
  ops.set_timeline(nullptr);
  const auto plain = run_scenario(load_config_file(kExamples + "/llama3-8b-h100x8.yaml"),
                                  kExamples + "/llama3-8b-h100x8.yaml");
  for (const auto& [name, value] : metric_rows(plain->summary)) EXPECT_NE(name, "generation");
}

TEST(MetricsModel, PassesQtModelTesterWithUnitsOnEveryValue) {
  const auto run = run_scenario(load_config_file(kExamples + "/fsdp2-overlap-oracle.yaml"),
                                kExamples + "/fsdp2-overlap-oracle.yaml");
  MetricsModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  model.set_rows(metric_rows(run->summary));
  ASSERT_GT(model.rowCount(), 8);
  for (int row = 0; row < model.rowCount(); ++row) {
    const QString value = model.data(model.index(row, 1)).toString();
    const QString name = model.data(model.index(row, 0)).toString();
    if (name == "fits") continue;
    // A number has its unit; what the run cannot know (this custom model's FLOPs) says unknown.
    EXPECT_TRUE(value.contains(QRegularExpression("(ns|us|ms|s|%|B|GPU)( |$|\\))")) ||
                value.contains(QRegularExpression("^unknown( / unknown)?$")))
        << name.toStdString() << ": " << value.toStdString();
    if (name == "MFU / HFU") {
      EXPECT_EQ(value, "unknown / unknown");  // not 0.0 %
    }
  }
}

TEST(SimulationRunner, DropsSupersededRequestsAndDeliversTheNewest) {
  const std::string file = kExamples + "/fsdp2-overlap-oracle.yaml";
  const auto tree = load_config_file(file);
  SimulationRunner runner;
  QSignalSpy finished(&runner, &SimulationRunner::finished);
  runner.request(tree, file);
  ConfigTree second = tree;
  std::vector<Problem> ignored;
  apply_override(second, "training.iterations=2", ignored);
  runner.request(second, file);
  ConfigTree third = tree;
  apply_override(third, "training.iterations=3", ignored);
  const quint64 last = runner.request(third, file);
  for (int i = 0; i < 200 && (finished.isEmpty() || runner.busy()); ++i) finished.wait(50);
  ASSERT_EQ(finished.count(), 1);  // the first two were superseded
  const auto result = finished.takeFirst().at(0).value<std::shared_ptr<const RunResult>>();
  EXPECT_EQ(result->generation, last);
  EXPECT_EQ(result->schedule.iterations, 3);
}

TEST(SimulationRunner, CancelDropsTheRunInFlight) {
  const std::string file = kExamples + "/fsdp2-overlap-oracle.yaml";
  SimulationRunner runner;
  QSignalSpy finished(&runner, &SimulationRunner::finished);
  runner.request(load_config_file(file), file);
  runner.cancel();
  for (int i = 0; i < 40 && runner.busy(); ++i) finished.wait(50);
  finished.wait(100);
  EXPECT_EQ(finished.count(), 0);
}

TEST(SimulationRunner, ReportsValidationProblems) {
  const std::string file = kExamples + "/fsdp2-overlap-oracle.yaml";
  ConfigTree tree = load_config_file(file);
  std::vector<Problem> ignored;
  apply_override(tree, "fsdp.reshard_after_forward=3", ignored);
  SimulationRunner runner;
  QSignalSpy failed(&runner, &SimulationRunner::failed);
  runner.request(tree, file);
  for (int i = 0; i < 100 && failed.isEmpty(); ++i) failed.wait(50);
  ASSERT_EQ(failed.count(), 1);
  EXPECT_TRUE(
      failed.takeFirst().at(1).toStringList().join(" ").contains("fsdp.reshard_after_forward"));
}

}  // namespace
}  // namespace shardscope::gui
