// Printable names of the scenario enums: the choices of their keys in the key table
// (scenario_keys.cpp), so a scenario file, an error and a report spell them alike.
#include <fmt/format.h>

#include "shardscope/core/fsdp_policy.hpp"
#include "shardscope/core/scenario_keys.hpp"
#include "shardscope/core/training_spec.hpp"

namespace shardscope {

std::string to_string(ActivationCheckpointing ac, std::int64_t every) {
  switch (ac) {
    case ActivationCheckpointing::none:
      return "none";
    case ActivationCheckpointing::full:
      return "full";
    case ActivationCheckpointing::selective_op:
      return "selective_op";
    case ActivationCheckpointing::every_n:
      return fmt::format("every_{}", every);
  }
  return "none";
}

std::string_view to_string(Optimizer optimizer) {
  return choice_name("training.optimizer", optimizer);
}

std::optional<Optimizer> parse_optimizer(std::string_view text) {
  return parse_choice<Optimizer>("training.optimizer", text);
}

std::string_view to_string(OptimizerImpl impl) {
  return choice_name("training.optimizer_impl", impl);
}

std::optional<OptimizerImpl> parse_optimizer_impl(std::string_view text) {
  return parse_choice<OptimizerImpl>("training.optimizer_impl", text);
}

std::string_view to_string(Synchronize synchronize) {
  return choice_name("training.synchronize", synchronize);
}

std::string_view to_string(LossRecipe loss) {
  return choice_name("training.loss", loss);
}

std::optional<LossRecipe> parse_loss_recipe(std::string_view text) {
  return parse_choice<LossRecipe>("training.loss", text);
}

std::string_view to_string(KvCache cache) {
  return choice_name("training.generation.kv_cache", cache);
}

std::string_view to_string(Fp8Recipe recipe) {
  return choice_name("training.fp8", recipe);
}

int optimizer_states_per_param(Optimizer optimizer) {
  return optimizer == Optimizer::sgd ? 0 : 2;
}

std::string_view to_string(FsdpApi api) {
  return choice_name("fsdp.api", api);
}

std::string_view to_string(ShardingStrategy strategy) {
  return choice_name("fsdp.sharding_strategy", strategy);
}

std::string_view to_string(BackwardPrefetch prefetch) {
  return choice_name("fsdp.backward_prefetch", prefetch);
}

std::string_view to_string(SyncSchedule schedule) {
  return choice_name("fsdp.requires_gradient_sync", schedule);
}

std::string_view to_string(StateDictType type) {
  return choice_name("fsdp.checkpoint.state_dict_type", type);
}

std::string_view to_string(OutputCastModules modules) {
  return choice_name("fsdp.mixed_precision.output_dtype_modules", modules);
}

std::string_view to_string(AllGatherBuffer buffer) {
  return choice_name("fsdp.all_gather_buffer", buffer);
}

std::string_view to_string(CommBufferPool pool) {
  return choice_name("fsdp.comm_buffer_pool", pool);
}

DType param_dtype(const MixedPrecision& mp) {
  return mp.param_dtype.value_or(DType::fp32);
}

bool casts_forward_inputs(const MixedPrecision& mp, FsdpApi api) {
  // MixedPrecisionPolicy.cast_forward_inputs defaults to True, MixedPrecision's to False.
  return mp.cast_forward_inputs.value_or(api == FsdpApi::fsdp2);
}

}  // namespace shardscope
