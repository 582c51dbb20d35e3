// The trace samples' jobs recorded on a GPU (tests/data/measured/2026-11-27-h200/traces: the GPU
// campaign ran make_samples.py --device cuda on an H200, one rank over NCCL, CPU and CUDA
// activity): every GPU kernel and copy is paired with its CPU launch, every FSDP range with a
// group, and the caching allocator's samples give the peak. The CPU samples' tests
// (kineto_samples_test.cpp) check the collectives; a world of one issues none to NCCL.
#include <gtest/gtest.h>

#include <filesystem>

#include "shardscope/traces/kineto_import.hpp"

namespace shardscope::traces {
namespace {

const std::filesystem::path kCudaTraces = SHARDSCOPE_CUDA_TRACES_DIR;

class CudaTraceSamples : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaTraceSamples, EveryGpuOpHasItsLaunchAndEveryFsdpRangeItsGroup) {
  const auto [t, report] = import_kineto(kCudaTraces / (GetParam() + "_rank0.json.gz"));
  EXPECT_FALSE(report.cpu_device);
  EXPECT_EQ(report.iterations, 2);
  EXPECT_EQ(report.gpu_ops_without_launch, 0) << import_report_text(report);
  EXPECT_FALSE(report.fsdp_ranges.empty());
  EXPECT_TRUE(report.unmapped_fsdp_ranges.empty()) << import_report_text(report);
  EXPECT_EQ(report.fsdp1_units, GetParam() == "fsdp1" ? 5 : 0);
  EXPECT_EQ(report.no_grad_forwards > 0, GetParam() == "fsdp2_generate");
  EXPECT_GT(report.ops_by_kind.count("forward"), 0U);
  EXPECT_GT(report.ops_by_kind.count("backward"), 0U);
  EXPECT_GT(report.memory_samples, 0);
  EXPECT_GT(t.peaks.allocated.bytes, 0);  // the CUDA caching allocator's samples
  EXPECT_EQ(t.facts.world_size, 1);
}

INSTANTIATE_TEST_SUITE_P(H200, CudaTraceSamples,
                         ::testing::Values("fsdp2", "fsdp1", "fsdp2_generate"));

}  // namespace
}  // namespace shardscope::traces
