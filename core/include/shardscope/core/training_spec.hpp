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

/// How torch.optim runs the step (docs/semantics.md, "The optimizer step").
enum class OptimizerImpl {
  foreach,  // one multi-tensor kernel per operation of the update: PyTorch's default on CUDA
  fused,    // one kernel for the whole update (fused=True; torchtitan's default)
};

/// How the loss is computed from the output head (docs/semantics.md, "Loss recipes").
enum class LossRecipe {
  upcast_fp32,  // logits in the compute dtype, an fp32 copy, log_softmax in fp32 (torchtitan, HF)
  fused,        // an in-place fused cross-entropy: saves the logits, writes the gradient into them
  chunked,  // head and loss per chunk of tokens, no full logits; the head recomputed in backward
};

/// Which linear layers run their GEMMs in fp8, and through what (docs/semantics.md, "fp8
/// linears").
enum class Fp8Recipe {
  none,
  // The blocks' projections as TransformerEngine Linear modules under te.fp8_autocast with
  // delayed scaling (llm-foundry's `precision: amp_fp8` with `fc_type: te`): each casts its
  // input, its weight and, in backward, its output gradient to fp8 with their transposes, runs
  // its three GEMMs in fp8 and keeps the fp8 transposes of its input and weight for backward.
  // The output head, the attention and everything else stay in the compute dtype.
  transformer_engine,
};

/// Where the training loop makes the CPU wait for the GPU (torch.cuda.synchronize(), loss.item()).
enum class Synchronize { none, after_forward, after_step };

/// How a generation's KV cache holds keys and values: Hugging Face's DynamicCache concatenates
/// each step's onto a new tensor (torch.cat), StaticCache preallocates prompt + new tokens.
enum class KvCache { dynamic, preallocated };

/// Calls of a method registered with register_fsdp_forward_method ("generate") that each
/// training step makes before its first micro-batch, under torch.no_grad (RL rollouts): per call a
/// prefill of the prompts, then one forward per further new token, attending to a KV cache
/// (docs/semantics.md, "Generation").
struct GenerationSpec {
  std::int64_t calls = 0;  // 0: no generation
  std::int64_t batch = 1;  // sequences per call per GPU
  std::int64_t prompt_tokens = 512;
  std::int64_t new_tokens = 128;
  // true: set_reshard_after_forward(False) for the call and reshard() after it, so every group
  // is all-gathered once per call instead of once per forward.
  bool keep_unsharded = false;
  KvCache kv_cache = KvCache::dynamic;

  std::int64_t forwards_per_call() const { return new_tokens; }  // prefill + new_tokens - 1
};

struct TrainingSpec {
  std::int64_t seq_len = 4096;
  std::int64_t micro_batch = 1;  // sequences per micro-batch per GPU
  std::int64_t grad_accum = 1;   // micro-batches per optimizer step
  ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::none;
  std::int64_t checkpoint_every = 1;  // n of every_n
  Optimizer optimizer = Optimizer::adamw;
  OptimizerImpl optimizer_impl = OptimizerImpl::foreach;
  std::int64_t iterations = 2;  // optimizer steps simulated; the last is the steady state
  Synchronize synchronize = Synchronize::none;
  LossRecipe loss = LossRecipe::upcast_fp32;
  std::int64_t loss_chunk_tokens = 0;  // chunked: tokens per chunk; 0: Liger's default
  // torch.autocast over the forward and the loss (docs/semantics.md, "Autocast"): matmuls run in
  // this dtype, casting weights kept in another dtype per use. Unset: no autocast.
  std::optional<DType> autocast;
  Fp8Recipe fp8 = Fp8Recipe::none;
  GenerationSpec generation;

  std::int64_t tokens_per_microbatch() const { return seq_len * micro_batch; }
};

std::string to_string(ActivationCheckpointing ac, std::int64_t every);
std::string_view to_string(Optimizer optimizer);
std::optional<Optimizer> parse_optimizer(std::string_view text);
std::string_view to_string(OptimizerImpl impl);
std::optional<OptimizerImpl> parse_optimizer_impl(std::string_view text);
std::string_view to_string(Synchronize synchronize);
std::string_view to_string(LossRecipe loss);
std::optional<LossRecipe> parse_loss_recipe(std::string_view text);
std::string_view to_string(KvCache cache);
std::string_view to_string(Fp8Recipe recipe);
/// Optimizer states per parameter, each in the parameter's dtype: Adam(W) 2 (exp_avg,
/// exp_avg_sq), SGD 0 (torch.optim.SGD's default momentum of 0 keeps no momentum buffer).
int optimizer_states_per_param(Optimizer optimizer);

}  // namespace shardscope
