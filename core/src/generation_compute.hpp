#pragma once
// The work of one forward of generation (training.generation) on one rank: the prefill of every
// prompt, or one decode step. Private to core: the lowerer makes the generation phase's ops from
// these; docs/semantics.md, "Generation", says what each stands for.

#include <cstdint>

#include "shardscope/core/kernel.hpp"
#include "shardscope/core/scenario.hpp"

namespace shardscope {

struct GenerationForward {
  std::int64_t tokens = 0;    // this forward's tokens: sequences × prompt (prefill), or sequences
  std::int64_t keys = 0;      // positions each token attends to (the KV cache after this forward)
  KernelSet embed;            // the lookup of the forward's tokens
  KernelSet block;            // one block: projections, attention over the cache, MLP, cache update
  KernelSet head;             // final norm and output projection of each sequence's last token
  KernelSet sampling;         // the next token from the last logits: the fp32 copy, softmax, pick
  Bytes hidden = 0;           // the residual stream handed from block to block
  Bytes block_transient = 0;  // the most a block holds at once besides its input (no_grad frees
                              // each intermediate when its last reader is done)
  Bytes logits = 0;           // sequences × vocab in the compute dtype
};

/// Forward `step` of a generation call: 0 the prefill (every prompt token, causal), step i > 0
/// the decode of one token per sequence attending to prompt + i cached positions. Hugging Face's
/// generate computes the logits of each sequence's last position only (logits_to_keep = 1).
GenerationForward generation_forward(const Scenario& s, std::int64_t step);

/// One block's KV cache, keys and values of every sequence of a call at `positions` positions,
/// in the compute dtype.
Bytes kv_cache_bytes(const Scenario& s, std::int64_t positions);

/// What one block's cache keeps alive after the prefill. A DynamicCache stores the prefill's keys
/// and values as given: views of their projection's output, so a fused qkv projection (GPT-style
/// blocks: GPT-2's c_attn) keeps the whole q, k, v output until the first decode step's torch.cat
/// replaces it; separate projections (Llama-style) keep exactly the keys and values. A StaticCache
/// copies them into its own tensors.
Bytes prefill_cache_bytes(const Scenario& s);

}  // namespace shardscope
