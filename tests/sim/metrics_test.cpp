// Properties of the summary that hold for every scenario: HFU counts what MFU counts plus
// recompute, so HFU ≥ MFU (equal without checkpointing); phase times are disjoint parts of the
// step; exposed communication is part of the total.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "sim_test_util.hpp"

namespace shardscope::sim {
namespace {

using testing::run_file;

std::vector<std::string> examples() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(SHARDSCOPE_EXAMPLES_DIR)) {
    if (e.path().extension() == ".yaml") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Metrics, SummaryPropertiesHoldForEveryExampleAndSetting) {
  const std::vector<std::vector<std::string>> settings{{},
                                                       {"training.activation_checkpointing=none"},
                                                       {"training.activation_checkpointing=full"},
                                                       {"training.grad_accum=2"}};
  for (const auto& path : examples()) {
    for (const auto& overrides : settings) {
      if (path.find("oracle") != std::string::npos && !overrides.empty())
        continue;  // custom model: fixed times
      SCOPED_TRACE(path + (overrides.empty() ? "" : " --set " + overrides[0]));
      const auto r = run_file(path, overrides);
      const auto& s = r.summary;
      ASSERT_EQ(s.mfu.has_value(), s.hfu.has_value());
      if (s.mfu) {
        EXPECT_GE(*s.hfu, *s.mfu);
        EXPECT_LE(*s.mfu, 1.0);
        if (r.scenario.training.activation_checkpointing == ActivationCheckpointing::none) {
          EXPECT_DOUBLE_EQ(*s.hfu, *s.mfu);
        }
      }
      EXPECT_LE(s.forward_time + s.backward_time + s.optimizer_time, s.step_time);
      EXPECT_GE(s.forward_time, 0);
      EXPECT_LE(s.comm_exposed, s.comm_total);
    }
  }
}

}  // namespace
}  // namespace shardscope::sim

namespace shardscope::testing {
namespace {

// A memory sample belongs to the time it describes. zero_grad runs on the CPU, often a whole
// iteration ahead of the GPU, right after the optimizer step it follows in issue order; its sample
// carries the allocator's state after everything issued before it, so it belongs where that
// optimizer step is on the device, not at the CPU's time (which drew a spike to the
// end-of-iteration reserved memory 12 ms into the first forward).
TEST(MemoryCurve, SamplesOfCpuOpsSitWhereTheirStateIsOnTheDevice) {
  for (const char* example : {"llama3-8b-h100x8.yaml", "llama2-13b-fsdp1-hybrid.yaml"}) {
    SCOPED_TRACE(example);
    const auto run = run_file(std::string(SHARDSCOPE_EXAMPLES_DIR) + "/" + example);
    const Timeline& t = run.result.timeline;
    std::map<int, TimeNs> optimizer_start;  // by iteration, on the device
    std::map<OpId, const TimelineOp*> by_id;
    for (const auto& op : t.ops) {
      by_id[op.op] = &op;
      const bool device = t.streams[static_cast<std::size_t>(op.stream)].kind != StreamKind::cpu;
      if (device && op.phase == Phase::optimizer && !optimizer_start.contains(op.iteration))
        optimizer_start[op.iteration] = op.start;
    }
    int zero_grads = 0;
    for (const auto& sample : t.memory) {
      if (sample.op == kNone || by_id.at(sample.op)->kind != OpKind::zero_grad) continue;
      ++zero_grads;
      const int iteration = by_id.at(sample.op)->iteration;
      ASSERT_TRUE(optimizer_start.contains(iteration));
      EXPECT_GE(sample.time, optimizer_start[iteration])
          << "zero_grad of iteration " << iteration << " at " << ns_to_ms(sample.time) << " ms";
    }
    EXPECT_GT(zero_grads, 0);
  }
}

}  // namespace
}  // namespace shardscope::testing
