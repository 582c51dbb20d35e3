#include "shardscope/gui/simulation_runner.hpp"

#include <fmt/format.h>

#include "shardscope/sim/pipeline.hpp"

namespace shardscope::gui {

std::shared_ptr<const RunResult> run_scenario(const ConfigTree& tree, const std::string& file,
                                              bool expandable_segments) {
  sim::PipelineOptions options;
  options.origin = file;
  Scenario scenario = read_scenario(tree, file, std::filesystem::path(file).parent_path());
  if (expandable_segments) scenario.allocator.expandable_segments = true;
  auto p = sim::simulate_scenario(std::move(scenario), options);
  auto r = std::make_shared<RunResult>();
  r->scenario = std::move(p.scenario);
  r->schedule = std::move(p.schedule);
  r->summary = std::move(p.summary);
  r->timeline = std::move(p.simulation.timeline);
  if (r->scenario.variation.any()) {
    r->ranks = std::make_shared<const sim::RankSimulation>(
        sim::simulate_ranks(r->scenario, r->schedule,
                            sim::rank_variation(r->scenario.variation, r->schedule.world_size,
                                                r->scenario.cluster.gpus_per_node)));
  }
  return r;
}

std::vector<std::pair<QString, QString>> metric_rows(const analysis::Summary& m) {
  auto q = [](const std::string& s) { return QString::fromStdString(s); };
  std::vector<std::pair<QString, QString>> rows{
      {"step time", q(format_duration(m.step_time))},
      {"throughput", q(analysis::throughput_text(m.tokens_per_s_per_gpu))},
      {"MFU / HFU",
       q(fmt::format("{} / {}", analysis::percent_text(m.mfu), analysis::percent_text(m.hfu)))},
      {"forward", q(format_duration(m.forward_time))},
      {"backward", q(format_duration(m.backward_time))},
      {"optimizer", q(format_duration(m.optimizer_time))},
      {"communication", q(format_duration(m.comm_total))},
      {"exposed communication", q(format_duration(m.comm_exposed))},
      {"overlap", m.overlap_fraction ? q(analysis::percent_text(m.overlap_fraction))
                                     : QString("no communication")},
      {"peak allocated", q(analysis::bytes_text(m.peak_allocated))},
      {"peak reserved", q(fmt::format("{} of {}", analysis::bytes_text(m.peak_reserved),
                                      analysis::bytes_text(m.capacity)))},
      {"fits", m.fit == analysis::Fit::fits && m.tight
                   ? q(fmt::format("yes, tightly: {} free", analysis::bytes_text(m.headroom)))
               : m.fit == analysis::Fit::fits
                   ? q(fmt::format("yes, {} free", analysis::bytes_text(m.headroom)))
               : m.fit == analysis::Fit::does_not_fit ? QString("NO")
                                                      : QString("unknown")},
  };
  if (m.generation_time > 0) {  // training.generation's calls, after the optimizer's row
    rows.insert(rows.begin() + 6, {"generation", q(format_duration(m.generation_time))});
  }
  if (!m.out_of_memory.empty()) rows.emplace_back("out of memory", q(m.out_of_memory));
  return rows;
}

SimulationRunner::SimulationRunner(QObject* parent) : QObject(parent) {
  qRegisterMetaType<std::shared_ptr<const RunResult>>();
  pool_.setMaxThreadCount(1);
}

SimulationRunner::~SimulationRunner() {
  {
    std::lock_guard lock(mutex_);
    pending_.reset();
  }
  pool_.waitForDone();
}

void SimulationRunner::cancel() {
  std::lock_guard lock(mutex_);
  ++generation_;
  pending_.reset();
}

bool SimulationRunner::busy() const {
  std::lock_guard lock(mutex_);
  return running_ || pending_.has_value();
}

quint64 SimulationRunner::request(ConfigTree tree, std::string file) {
  std::lock_guard lock(mutex_);
  const quint64 generation = ++generation_;
  Pending job{generation, std::move(tree), std::move(file)};
  if (running_) {
    pending_ = std::move(job);  // replaces an older queued request: it would be stale anyway
  } else {
    running_ = true;
    start(std::move(job));
  }
  return generation;
}

void SimulationRunner::start(Pending job) {
  pool_.start([this, job = std::move(job)]() {
    std::shared_ptr<const RunResult> result;
    QStringList problems;
    try {
      auto r = std::const_pointer_cast<RunResult>(run_scenario(job.tree, job.file));
      r->generation = job.generation;
      result = r;
    } catch (const ValidationError& e) {
      for (const auto& p : e.problems()) problems << QString::fromStdString(p.to_string());
    } catch (const std::exception& e) {
      problems << QString::fromUtf8(e.what());
    }
    const quint64 generation = job.generation;
    QMetaObject::invokeMethod(
        this,
        [this, generation, result, problems]() {
          if (generation == generation_) {  // drop superseded results
            if (result)
              emit finished(result);
            else
              emit failed(generation, problems);
          }
          done(generation);
        },
        Qt::QueuedConnection);
  });
}

void SimulationRunner::done(quint64) {
  std::lock_guard lock(mutex_);
  if (pending_) {
    Pending next = std::move(*pending_);
    pending_.reset();
    start(std::move(next));
  } else {
    running_ = false;
  }
}

}  // namespace shardscope::gui
