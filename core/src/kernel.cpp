#include "shardscope/core/kernel.hpp"

#include <array>

namespace shardscope {

std::int64_t optimizer_accesses_per_element(const OptimizerUpdate& o) {
  if (o.optimizer == Optimizer::sgd) return 3;  // parameter and gradient read, parameter written
  if (o.impl == OptimizerImpl::fused) return 3 + 2 * optimizer_states_per_param(o.optimizer);
  // _multi_tensor_adam's passes (kernel.hpp); AdamW's weight decay is its own pass.
  return o.optimizer == Optimizer::adamw ? 20 : 18;
}

namespace {

double d(std::int64_t x) {
  return static_cast<double>(x);
}

struct FlopsOf {
  Flops operator()(const Gemm& g) const { return 2.0 * d(g.m) * d(g.n) * d(g.k) * d(g.batch); }
  Flops operator()(const Attention& a) const {
    const Flops forward = 4.0 * d(a.batch) * d(a.heads) * d(a.q_len) * d(a.kv_len) * d(a.head_dim) *
                          (a.causal ? 0.5 : 1.0);
    return a.backward ? 2.5 * forward : forward;
  }
  Flops operator()(const MemoryBound& m) const { return m.flops; }
  Flops operator()(const CrossEntropy& l) const {
    const double per_element = !l.backward                       ? 5.0
                               : l.recipe == LossRecipe::chunked ? 5.0 + 3.0
                                                                 : 3.0;
    return per_element * d(l.tokens) * d(l.vocab);
  }
  Flops operator()(const OptimizerUpdate& o) const {
    return d(o.elements) * (optimizer_states_per_param(o.optimizer) == 2 ? 12.0 : 2.0);
  }
};

struct MemoryBytesOf {
  Bytes operator()(const Gemm&) const { return 0; }
  Bytes operator()(const Attention&) const { return 0; }
  Bytes operator()(const MemoryBound& m) const { return m.bytes; }
  // Per element, as kernel.hpp lists them.
  Bytes operator()(const CrossEntropy& l) const {
    const Bytes e = bytes_per_element(l.logits);
    // upcast_fp32: the fp32 logits' log_softmax (read, write) and nll_loss; backward the nll
    // gradient (write) and log_softmax's (read it and the saved output, write). The `.float()`
    // cast before it is its own kernel (e + 4 each way).
    const Bytes upcast_forward = e + 4 + 4 + 4, upcast_backward = 4 + 4 + 4 + 4 + e;
    Bytes per_element = 0;
    switch (l.recipe) {
      case LossRecipe::upcast_fp32:
        per_element = l.backward ? upcast_backward - (4 + e) : upcast_forward - (e + 4);
        break;
      case LossRecipe::fused:
        per_element = l.backward ? 2 * e : e;
        break;
      case LossRecipe::chunked:
        per_element = l.backward ? upcast_forward + upcast_backward : upcast_forward;
        break;
    }
    return l.tokens * l.vocab * per_element;
  }
  Bytes operator()(const OptimizerUpdate& o) const {
    return o.elements * bytes_per_element(o.dtype) * optimizer_accesses_per_element(o);
  }
};

// What a GEMM or an attention must move through HBM at least once: its operands and its result
// (an attention backward reads q, k, v, the output and its gradient and writes three gradients:
// twice its forward's).
struct OperandBytesOf {
  Bytes operator()(const Gemm& g) const {
    return g.batch * ((g.m * g.k + g.k * g.n) * bytes_per_element(g.input) +
                      g.m * g.n * bytes_per_element(g.output));
  }
  Bytes operator()(const Attention& a) const {
    // q and the output at every head, k and v at the kv heads.
    return a.batch * a.head_dim * bytes_per_element(a.dtype) *
           (2 * a.heads * a.q_len + 2 * a.kv_heads * a.kv_len) * (a.backward ? 2 : 1);
  }
  Bytes operator()(const MemoryBound&) const { return 0; }
  Bytes operator()(const CrossEntropy&) const { return 0; }
  Bytes operator()(const OptimizerUpdate&) const { return 0; }
};

constexpr std::array<std::string_view, 5> kKindNames{"gemm", "attention", "memory", "loss",
                                                     "optimizer"};

}  // namespace

Flops shape_flops(const KernelShape& shape) {
  return std::visit(FlopsOf{}, shape);
}

Flops kernel_flops(const Kernel& kernel) {
  return d(kernel.repeat) * shape_flops(kernel.shape);
}

Bytes kernel_memory_bytes(const Kernel& kernel) {
  return kernel.repeat * std::visit(MemoryBytesOf{}, kernel.shape);
}

Bytes kernel_operand_bytes(const Kernel& kernel) {
  return kernel.repeat * std::visit(OperandBytesOf{}, kernel.shape);
}

KernelTotals kernel_set_totals(std::span<const Kernel> kernels) {
  KernelTotals t;
  for (const Kernel& k : kernels) {
    const Flops flops = kernel_flops(k);
    t.flops += flops;
    if (k.kind() == KernelKind::attention) t.attention_flops += flops;
    t.memory_bytes += kernel_memory_bytes(k);
  }
  return t;
}

Bytes kernel_set_operand_bytes(std::span<const Kernel> kernels) {
  Bytes bytes = 0;
  for (const Kernel& k : kernels) bytes += kernel_operand_bytes(k);
  return bytes;
}

std::string_view to_string(KernelKind kind) {
  return kKindNames[static_cast<std::size_t>(kind)];
}

std::optional<KernelKind> parse_kernel_kind(std::string_view text) {
  for (std::size_t i = 0; i < kKindNames.size(); ++i) {
    if (kKindNames[i] == text) return static_cast<KernelKind>(i);
  }
  return std::nullopt;
}

std::string_view to_string(MemoryKind kind) {
  return kind == MemoryKind::upcast ? "upcast" : "elementwise";
}

std::optional<MemoryKind> parse_memory_kind(std::string_view text) {
  if (text == "elementwise") return MemoryKind::elementwise;
  if (text == "upcast") return MemoryKind::upcast;
  return std::nullopt;
}

MemoryBound dtype_conversion(std::int64_t numel, DType from, DType to) {
  const Bytes in = bytes_per_element(from), out = bytes_per_element(to);
  return {numel * (in + out), 0, out > in ? MemoryKind::upcast : MemoryKind::elementwise};
}

}  // namespace shardscope
