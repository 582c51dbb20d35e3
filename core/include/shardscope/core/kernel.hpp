#pragma once
// The kernels a compute op stands for. Lowering attaches them so that a backend can run the real
// thing (cuBLASLt GEMMs of these shapes, a fused attention, a bandwidth kernel, a fused optimizer)
// and a cost model can look at shapes; an op's `flops`, `attention_flops` and `bytes` are the sums
// of its kernels' (kernel_set_totals), so the two views never disagree.
//
// Conventions (row-major, as PyTorch lays tensors out):
//   GEMM       C[m×n] = op(A)·op(B), A is [m×k] ([k×m] when transpose_a), B is [k×n] ([n×k] when
//              transpose_b); `batch` independent products; FLOPs 2·m·n·k·batch. nn.Linear's
//              forward y = x·Wᵀ is (m = tokens, n = out, k = in, transpose_b); its input gradient
//              dx = dy·W is (tokens, in, out); its weight gradient dW = dyᵀ·x is (out, in, tokens,
//              transpose_a).
//   attention  fused scaled-dot-product attention (flash): QKᵀ and PV over batch × heads,
//              4·batch·heads·q_len·kv_len·head_dim FLOPs, half of that when causal (the diagonal
//              ignored); the backward recomputes the scores and does 2.5× the forward's FLOPs
//              (FlashAttention-2's accounting). kv_heads < heads is grouped-query attention.
//   memory     memory-bound kernels (norms, RoPE, activations, residual adds, embedding): HBM
//              bytes moved and the few FLOPs they do. An upcast (a conversion to a wider
//              dtype: aten::_to_copy from bf16 or fp16 to fp32) is its own kind: PyTorch's CUDA
//              copy runs it through its generic dynamic-casting loop, at a lower share of HBM
//              bandwidth (sim/cost_model.hpp), where fp32 → bf16 or fp16 has a vectorized kernel
//              of its own (aten/src/ATen/native/cuda/Copy.cu) and is element-wise.
//   loss       cross-entropy over `tokens` rows of `vocab` logits by a recipe (docs/semantics.md,
//              "Loss recipes"): per element 5 FLOPs forward, 3 backward (8 when chunked: the
//              backward recomputes each chunk's forward); HBM bytes per element forward /
//              backward: upcast_fp32 8 / 12 (log_softmax of the fp32 copy read and written, nll;
//              the nll and log_softmax gradients written and read; the `.float()` copy and its
//              backward are memory kernels of e + 4 each, e the logits' element size), fused
//              e / 2e (logits read; read and overwritten with the gradient), chunked e + 12 /
//              2e + 28 (upcast_fp32's and its casts per chunk, the forward again in backward).
//   optimizer  one optimizer step over `elements` sharded parameters of `dtype`, Adam(W) 12
//              FLOPs per element, SGD 2. Fused: one pass that reads parameter, gradient and
//              states and writes parameter and states. Foreach (torch/optim/adam.py,
//              _multi_tensor_adam): one pass per operation: AdamW's decoupled weight decay
//              (parameter read and written), lerp_ of exp_avg with the gradient (3), mul_ and
//              addcmul_ of exp_avg_sq (2 + 3), its sqrt into a temporary (2), div_ and add_ of
//              the temporary (2 + 2), addcdiv_ into the parameter (4): 20 element accesses
//              (Adam, whose default weight decay is 0: 18); SGD's one add_ (3) either way.
// `repeat` runs a kernel that many times back to back (a group of several identical blocks).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "shardscope/core/training_spec.hpp"
#include "shardscope/core/units.hpp"

namespace shardscope {

struct Gemm {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t batch = 1;
  bool transpose_a = false;
  bool transpose_b = false;
  DType input = DType::bf16;   // A and B
  DType output = DType::bf16;  // C
  bool operator==(const Gemm&) const = default;
};

struct Attention {
  std::int64_t batch = 1;
  std::int64_t heads = 1;
  std::int64_t kv_heads = 1;
  std::int64_t q_len = 0;
  std::int64_t kv_len = 0;
  std::int64_t head_dim = 0;
  bool causal = true;
  bool backward = false;
  DType dtype = DType::bf16;
  bool operator==(const Attention&) const = default;
};

/// What a memory-bound kernel does, as far as its rate goes: element-wise arithmetic, copies and
/// narrowing conversions (norms, RoPE, activations, adds), or an upcast (above).
enum class MemoryKind { elementwise, upcast };

struct MemoryBound {
  Bytes bytes = 0;
  Flops flops = 0;
  MemoryKind kind = MemoryKind::elementwise;
  bool operator==(const MemoryBound&) const = default;
};

struct CrossEntropy {
  std::int64_t tokens = 0;
  std::int64_t vocab = 0;
  bool backward = false;
  DType logits = DType::bf16;  // the dtype the head writes the logits in
  LossRecipe recipe = LossRecipe::upcast_fp32;
  bool operator==(const CrossEntropy&) const = default;
};

struct OptimizerUpdate {
  std::int64_t elements = 0;
  Optimizer optimizer = Optimizer::adamw;
  DType dtype = DType::fp32;  // parameters, gradients and states
  OptimizerImpl impl = OptimizerImpl::fused;
  bool operator==(const OptimizerUpdate&) const = default;
};

enum class KernelKind { gemm, attention, memory, loss, optimizer };  // the shape's index

using KernelShape = std::variant<Gemm, Attention, MemoryBound, CrossEntropy, OptimizerUpdate>;

struct Kernel {
  std::string label;  // what it computes, e.g. "wq", "w2.dgrad", "attention", "norms+rope"
  std::int64_t repeat = 1;
  KernelShape shape;
  bool operator==(const Kernel&) const = default;

  KernelKind kind() const { return static_cast<KernelKind>(shape.index()); }
};

/// The kernels of one op, in the order they run. Ops with the same kernels share one set
/// (Schedule::kernel_sets), so a model of a hundred identical blocks stores a handful.
using KernelSet = std::vector<Kernel>;

/// FLOPs of one run of a kernel of this shape (the conventions above).
Flops shape_flops(const KernelShape& shape);
/// FLOPs of one kernel, repeats included.
Flops kernel_flops(const Kernel& kernel);
/// Element accesses per parameter of an optimizer step (reads and writes of parameters,
/// gradients, states and temporaries; kernel.hpp's table): its HBM bytes per element ÷ dtype size.
std::int64_t optimizer_accesses_per_element(const OptimizerUpdate& o);

/// HBM bytes of the memory-bound kinds (memory, loss, optimizer), repeats included; 0 for GEMMs
/// and attention, whose time their FLOPs set.
Bytes kernel_memory_bytes(const Kernel& kernel);

/// The HBM bytes a GEMM or an attention moves at least once: operands and result, so
/// that a thin GEMM (a decode step's: m = sequences) or a decode attention over a KV cache is
/// priced by its bandwidth where that exceeds its FLOPs' time. 0 for the memory-bound kinds.
Bytes kernel_operand_bytes(const Kernel& kernel);
Bytes kernel_set_operand_bytes(std::span<const Kernel> kernels);

/// What an op with these kernels carries: Op::flops, Op::attention_flops, Op::bytes.
struct KernelTotals {
  Flops flops = 0;
  Flops attention_flops = 0;
  Bytes memory_bytes = 0;
};
KernelTotals kernel_set_totals(std::span<const Kernel> kernels);

std::string_view to_string(KernelKind kind);
std::optional<KernelKind> parse_kernel_kind(std::string_view text);
inline constexpr std::string_view kKernelKindNames = "gemm, attention, memory, loss, optimizer";

std::string_view to_string(MemoryKind kind);
std::optional<MemoryKind> parse_memory_kind(std::string_view text);
inline constexpr std::string_view kMemoryKindNames = "elementwise, upcast";

/// aten::_to_copy of `numel` elements: reads `from`, writes `to`; an upcast when `to` is wider.
MemoryBound dtype_conversion(std::int64_t numel, DType from, DType to);

}  // namespace shardscope
