// What the loss recipe does to a whole simulated step of Llama 3.1 8B on 8 H100s (the default
// example, local batch 2 × 8,192, selective checkpointing): the loss is the memory peak under
// upcast_fp32, the fused loss drops the fp32 copies, the chunked loss the full logits; only the
// chunked loss costs time (its backward runs the head's projection again).
#include <gtest/gtest.h>

#include "shardscope/sim/pipeline.hpp"

namespace shardscope {
namespace {

sim::PipelineResult simulate_with_loss(const std::string& loss) {
  return sim::simulate_scenario(
      load_scenario(std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml",
                    {"training.loss=" + loss, "training.iterations=1", "training.seq_len=8192",
                     "training.micro_batch=2", "training.activation_checkpointing=selective_op"}));
}

TEST(LossRecipeStep, MemoryFallsAndTimeMovesAsTheRecipesSay) {
  const auto upcast = simulate_with_loss("upcast_fp32");
  const auto fused = simulate_with_loss("fused");
  const auto chunked = simulate_with_loss("chunked");
  const auto peak = [](const sim::PipelineResult& r) { return r.timeline().peaks.allocated.bytes; };
  const auto peak_group = [](const sim::PipelineResult& r) {
    const Schedule& s = r.schedule;
    const Op& op = s.ops[static_cast<std::size_t>(r.timeline().peaks.allocated.op)];
    return s.groups[static_cast<std::size_t>(op.group)].name;
  };
  // t·V = 16,384 × 128,256 logits. upcast_fp32 peaks in the root's backward with the fp32
  // log_softmax output saved and the fp32 gradients live; fused keeps only the bf16 logits.
  const Bytes logits = Bytes{16384} * 128256;
  EXPECT_EQ(peak_group(upcast), "root");
  EXPECT_GT(peak(upcast) - peak(fused), logits * 4);
  // chunked keeps no logits: its peak moves to the last block's backward.
  EXPECT_GT(peak(fused), peak(chunked));
  EXPECT_NE(peak_group(chunked), "root");
  EXPECT_LT(fused.summary.step_time, upcast.summary.step_time);    // less loss traffic
  EXPECT_GT(chunked.summary.step_time, upcast.summary.step_time);  // the projection again
}

}  // namespace
}  // namespace shardscope
