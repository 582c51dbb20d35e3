#pragma once
// How it is trained: tokens per micro-batch, accumulation, activation checkpointing, optimizer.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "shardscope/core/units.hpp"

namespace shardscope {

enum class ActivationCheckpointing {
  none,          // every block saves all its activations
  full,          // every block saves only its input and recomputes in backward
  selective_op,  // torchtitan's op-level policy: save op outputs except every second matmul
  every_n,       // full checkpointing of every n-th block (torchtitan "selective layer")
};

enum class Optimizer { adamw, adam, sgd };

/// How the loss is computed from the output head (docs/semantics.md, "Loss recipes").
enum class LossRecipe {
  upcast_fp32,  // logits in the compute dtype, an fp32 copy, log_softmax in fp32 (torchtitan, HF)
  fused,        // an in-place fused cross-entropy: saves the logits, writes the gradient into them
  chunked,  // head and loss per chunk of tokens, no full logits; the head recomputed in backward
};

/// Where the training loop makes the CPU wait for the GPU (torch.cuda.synchronize(), loss.item()).
enum class Synchronize { none, after_forward, after_step };

struct TrainingSpec {
  std::int64_t seq_len = 4096;
  std::int64_t micro_batch = 1;  // sequences per micro-batch per GPU
  std::int64_t grad_accum = 1;   // micro-batches per optimizer step
  ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::none;
  std::int64_t checkpoint_every = 1;  // n of every_n
  Optimizer optimizer = Optimizer::adamw;
  std::int64_t iterations = 2;  // optimizer steps simulated; the last is the steady state
  Synchronize synchronize = Synchronize::none;
  LossRecipe loss = LossRecipe::upcast_fp32;
  std::int64_t loss_chunk_tokens = 0;  // chunked: tokens per chunk; 0: Liger's default
  // torch.autocast over the forward and the loss (docs/semantics.md, "Autocast"): matmuls run in
  // this dtype, casting weights kept in another dtype per use. Unset: no autocast.
  std::optional<DType> autocast;

  std::int64_t tokens_per_microbatch() const { return seq_len * micro_batch; }
};

std::string to_string(ActivationCheckpointing ac, std::int64_t every);
std::string_view to_string(Optimizer optimizer);
std::optional<Optimizer> parse_optimizer(std::string_view text);
std::string_view to_string(Synchronize synchronize);
std::string_view to_string(LossRecipe loss);
std::optional<LossRecipe> parse_loss_recipe(std::string_view text);
/// Optimizer states per parameter, each in the parameter's dtype: Adam(W) 2, SGD with momentum 1.
int optimizer_states_per_param(Optimizer optimizer);

}  // namespace shardscope
