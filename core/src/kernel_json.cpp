#include "json_fields.hpp"
#include "shardscope/core/scenario_keys.hpp"

namespace shardscope::detail {

KernelShape read_kernel_shape(Fields& f, const nlohmann::json& j, const std::string& p,
                              KernelKind kind) {
  KernelShape shape;
  const auto count = [&](const char* key, std::int64_t min = 0) {
    return f.integer(j, p, key, min, std::numeric_limits<std::int64_t>::max());
  };
  const auto dtype = [&](const char* key) {
    return f.enumeration(j, p, key, parse_dtype, DType::fp32, kDTypeNames);
  };
  switch (kind) {
    case KernelKind::gemm:
      shape = Gemm{count("m"),
                   count("n"),
                   count("k"),
                   count("batch", 1),
                   f.boolean(j, p, "transpose_a"),
                   f.boolean(j, p, "transpose_b"),
                   dtype("input"),
                   dtype("output")};
      break;
    case KernelKind::attention:
      shape = Attention{count("batch", 1),
                        count("heads", 1),
                        count("kv_heads", 1),
                        count("q_len"),
                        count("kv_len"),
                        count("head_dim"),
                        f.boolean(j, p, "causal"),
                        f.boolean(j, p, "backward"),
                        dtype("dtype")};
      break;
    case KernelKind::memory:
      shape = MemoryBound{
          count("bytes"), f.number(j, p, "flops"),
          // optional: IR files written before upcasts were told apart are element-wise throughout
          j.is_object() && j.contains("memory_kind")
              ? f.enumeration(j, p, "memory_kind", parse_memory_kind, MemoryKind::elementwise,
                              kMemoryKindNames)
              : MemoryKind::elementwise};
      break;
    case KernelKind::loss:
      shape = CrossEntropy{
          count("tokens"), count("vocab"), f.boolean(j, p, "backward"), dtype("logits"),
          // optional: IR files written before loss recipes had only upcast_fp32
          j.is_object() && j.contains("recipe")
              ? f.enumeration(j, p, "recipe", parse_loss_recipe, LossRecipe::upcast_fp32,
                              key_of("training.loss").choices)
              : LossRecipe::upcast_fp32};
      break;
    case KernelKind::optimizer:
      shape = OptimizerUpdate{
          count("elements"),
          f.enumeration(j, p, "optimizer", parse_optimizer, Optimizer::adamw,
                        key_of("training.optimizer").choices),
          dtype("dtype"),
          // optional: IR files written before it priced the fused step only
          j.is_object() && j.contains("impl")
              ? f.enumeration(j, p, "impl", parse_optimizer_impl, OptimizerImpl::fused,
                              key_of("training.optimizer_impl").choices)
              : OptimizerImpl::fused};
      break;
  }
  return shape;
}

}  // namespace shardscope::detail
