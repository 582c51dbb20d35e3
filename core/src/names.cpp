// Printable names of the scenario enums (the same spellings the scenario files use).
#include <fmt/format.h>

#include "shardscope/core/fsdp_policy.hpp"
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
  switch (optimizer) {
    case Optimizer::adamw:
      return "adamw";
    case Optimizer::adam:
      return "adam";
    case Optimizer::sgd:
      return "sgd";
  }
  return "adamw";
}

std::optional<Optimizer> parse_optimizer(std::string_view text) {
  for (const Optimizer o : {Optimizer::adamw, Optimizer::adam, Optimizer::sgd}) {
    if (to_string(o) == text) return o;
  }
  return std::nullopt;
}

std::string_view to_string(Synchronize synchronize) {
  switch (synchronize) {
    case Synchronize::none:
      return "none";
    case Synchronize::after_forward:
      return "after_forward";
    case Synchronize::after_step:
      return "after_step";
  }
  return "none";
}

std::string_view to_string(LossRecipe loss) {
  switch (loss) {
    case LossRecipe::upcast_fp32:
      return "upcast_fp32";
    case LossRecipe::fused:
      return "fused";
    case LossRecipe::chunked:
      return "chunked";
  }
  return "upcast_fp32";
}

std::optional<LossRecipe> parse_loss_recipe(std::string_view text) {
  for (const LossRecipe l : {LossRecipe::upcast_fp32, LossRecipe::fused, LossRecipe::chunked}) {
    if (to_string(l) == text) return l;
  }
  return std::nullopt;
}

int optimizer_states_per_param(Optimizer optimizer) {
  return optimizer == Optimizer::sgd ? 1 : 2;
}

std::string_view to_string(FsdpApi api) {
  return api == FsdpApi::fsdp2 ? "fsdp2" : "fsdp1";
}

std::string_view to_string(ShardingStrategy strategy) {
  switch (strategy) {
    case ShardingStrategy::full_shard:
      return "FULL_SHARD";
    case ShardingStrategy::shard_grad_op:
      return "SHARD_GRAD_OP";
    case ShardingStrategy::no_shard:
      return "NO_SHARD";
    case ShardingStrategy::hybrid_shard:
      return "HYBRID_SHARD";
    case ShardingStrategy::hybrid_shard_zero2:
      return "_HYBRID_SHARD_ZERO2";
  }
  return "FULL_SHARD";
}

std::string_view to_string(BackwardPrefetch prefetch) {
  switch (prefetch) {
    case BackwardPrefetch::backward_pre:
      return "BACKWARD_PRE";
    case BackwardPrefetch::backward_post:
      return "BACKWARD_POST";
    case BackwardPrefetch::none:
      return "none";
  }
  return "none";
}

std::string_view to_string(SyncSchedule schedule) {
  return schedule == SyncSchedule::every_microbatch ? "every_microbatch" : "last_microbatch";
}

std::string_view to_string(StateDictType type) {
  switch (type) {
    case StateDictType::full:
      return "FULL_STATE_DICT";
    case StateDictType::sharded:
      return "SHARDED_STATE_DICT";
    case StateDictType::local:
      return "LOCAL_STATE_DICT";
  }
  return "SHARDED_STATE_DICT";
}

}  // namespace shardscope
