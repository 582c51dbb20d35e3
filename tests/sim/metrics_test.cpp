// Properties of the summary that hold for every scenario: HFU counts what MFU counts plus
// recompute, so HFU ≥ MFU (equal without checkpointing); phase times are disjoint parts of the
// step; exposed communication is part of the total.
#include <gtest/gtest.h>

#include <filesystem>

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
        if (r.scenario.training.activation_checkpointing == ActivationCheckpointing::none)
          EXPECT_DOUBLE_EQ(*s.hfu, *s.mfu);
      }
      EXPECT_LE(s.forward_time + s.backward_time + s.optimizer_time, s.step_time);
      EXPECT_GE(s.forward_time, 0);
      EXPECT_LE(s.comm_exposed, s.comm_total);
    }
  }
}

}  // namespace
}  // namespace shardscope::sim
