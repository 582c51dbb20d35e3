#pragma once
// Every knob of PyTorch's FSDP APIs: fully_shard (FSDP2) and FullyShardedDataParallel (FSDP1).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/units.hpp"

namespace shardscope {

enum class FsdpApi { fsdp2, fsdp1 };
enum class ShardingStrategy {
  full_shard,
  shard_grad_op,
  no_shard,
  hybrid_shard,
  hybrid_shard_zero2
};
enum class BackwardPrefetch { backward_pre, backward_post, none };
enum class SyncSchedule { every_microbatch, last_microbatch };
enum class StateDictType { full, sharded, local };
/// Which fully_shard calls get MixedPrecisionPolicy.output_dtype: the one policy passed to every
/// call (PyTorch casts each module's outputs), or a policy that sets it on the root's call only.
enum class OutputCastModules { every_module, root };
/// Where FSDP2's all-gather outputs live: the caching allocator (DefaultAllGather), or a custom
/// AllGather's buffer per group, allocated by its first allocate() and kept.
enum class AllGatherBuffer { caching_allocator, persistent };
/// Where FSDP2's communication buffers (all-gather outputs, reduce-scatter inputs and outputs)
/// are allocated: the caching allocator's default pools (torch.empty), or the process group's
/// own pool (FSDPModule.set_allocate_memory_from_process_group_for_comm(True)).
enum class CommBufferPool { caching_allocator, process_group };

/// fully_shard(reshard_after_forward=...): true, false, or an int world size to reshard to.
struct ReshardAfterForward {
  enum class Mode { on, off, to_size };
  Mode mode = Mode::on;
  std::int64_t size = 0;  // mode == to_size

  bool operator==(const ReshardAfterForward&) const = default;
};

/// FSDP2's MixedPrecisionPolicy and FSDP1's MixedPrecision, every field (docs/semantics.md,
/// "Mixed-precision casts").
struct MixedPrecision {
  std::optional<DType> param_dtype;   // all-gather and compute dtype; unset: the original dtype
  std::optional<DType> reduce_dtype;  // gradient reduction dtype; unset: param_dtype
  std::optional<DType> output_dtype;  // FSDP2: floating-point forward outputs cast to it
  OutputCastModules output_dtype_modules = OutputCastModules::every_module;
  std::optional<DType> buffer_dtype;  // FSDP1: module buffers cast to it; unset: param_dtype
  // Floating-point forward inputs cast to param_dtype in each module's pre-forward; unset: the
  // API's default (FSDP2 true, FSDP1 false).
  std::optional<bool> cast_forward_inputs;
  bool cast_root_forward_inputs = true;   // FSDP1: the root's inputs cast (its default)
  bool keep_low_precision_grads = false;  // FSDP1
  // FSDP1's _module_classes_to_ignore: module classes the auto-wrap policy wraps in their own
  // full-precision FSDP unit. The default is (_BatchNorm,).
  std::vector<std::string> module_classes_to_ignore{"_BatchNorm"};
};

/// The dtype FSDP all-gathers and computes in: param_dtype, unset: the parameters' own, fp32.
DType param_dtype(const MixedPrecision& mp);
/// Whether `mp` casts forward inputs under `api` (its default when the scenario does not say).
bool casts_forward_inputs(const MixedPrecision& mp, FsdpApi api);

struct CpuOffload {
  bool params = false;  // sharded parameters, gradients and optimizer step on the CPU
  bool pin_memory = true;
};

struct CheckpointPolicy {
  std::int64_t every = 0;  // save a state dict every N optimizer steps; 0 = never
  StateDictType state_dict_type = StateDictType::sharded;
  bool offload_to_cpu = false;
  bool rank0_only = false;
};

struct FsdpPolicy {
  FsdpApi api = FsdpApi::fsdp2;
  ShardingStrategy sharding_strategy =
      ShardingStrategy::full_shard;  // FSDP1's knob; FSDP2 derives it
  std::int64_t mesh_replicate = 1;   // resolved: replicate × shard = world size
  std::int64_t mesh_shard = 1;
  ReshardAfterForward reshard_after_forward;  // FSDP2
  bool reshard_root_after_forward = false;    // newer PyTorch: explicit True reshards the root too
  bool reshard_last_after_forward = true;     // false: torchtitan keeps the last block unsharded
  BackwardPrefetch backward_prefetch = BackwardPrefetch::backward_pre;  // FSDP1
  bool forward_prefetch = false;                                        // FSDP1
  std::int64_t forward_prefetch_modules = 0;   // FSDP2 explicit prefetch of the next k; 0: none
  std::int64_t backward_prefetch_modules = 0;  // FSDP2 explicit prefetch; 0: implicit (one group)
  // FSDP2: the training step calls FSDPModule.unshard(async_op=True) on the first N block groups
  // before each forward; 0: never.
  std::int64_t unshard_ahead = 0;
  AllGatherBuffer all_gather_buffer = AllGatherBuffer::caching_allocator;  // FSDP2
  CommBufferPool comm_buffer_pool = CommBufferPool::caching_allocator;     // FSDP2
  bool limit_all_gathers = true;                                           // FSDP1 rate limiter
  MixedPrecision mixed_precision;
  CpuOffload cpu_offload;
  std::int64_t blocks_per_group = 1;
  SyncSchedule requires_gradient_sync = SyncSchedule::every_microbatch;
  SyncSchedule requires_all_reduce = SyncSchedule::every_microbatch;  // HSDP
  // FSDP2's set_is_last_backward: true on every backward (PyTorch's default), or only on the last
  // micro-batch's, when the root's final callback finalizes the backward.
  SyncSchedule is_last_backward = SyncSchedule::every_microbatch;
  bool reshard_after_backward = true;
  bool separate_reduce_scatter_group = false;
  bool post_optim_event = false;
  CheckpointPolicy checkpoint;

  bool is_hybrid() const { return mesh_replicate > 1; }
};

std::string_view to_string(FsdpApi api);
std::string_view to_string(ShardingStrategy strategy);  // PyTorch's spelling: FULL_SHARD, ...
std::string_view to_string(BackwardPrefetch prefetch);
std::string_view to_string(SyncSchedule schedule);
std::string_view to_string(StateDictType type);
std::string_view to_string(OutputCastModules modules);
std::string_view to_string(AllGatherBuffer buffer);
std::string_view to_string(CommBufferPool pool);

}  // namespace shardscope
