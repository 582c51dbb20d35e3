#pragma once
// How a model splits into FSDP parameter groups and what each rank holds of each group.
//   FSDP2 (fully_shard) shards every parameter on dim 0, padding dim 0 up to a multiple of the
//   shard size: per rank ceil(dim0 / W) × (numel / dim0).
//   FSDP1 (FullyShardedDataParallel) flattens a unit's parameters into one FlatParameter padded to
//   a multiple of W: per rank ceil(numel / W).

#include <cstdint>
#include <string>
#include <vector>

#include "shardscope/core/scenario.hpp"

namespace shardscope {

/// A parameter tensor's shape as (dim0, numel / dim0).
struct ParamShape {
  std::int64_t dim0 = 0;
  std::int64_t rest = 1;
  std::int64_t numel() const { return dim0 * rest; }
};

/// Parameter tensors of one transformer block and of the root (embeddings, final norm, head).
std::vector<ParamShape> block_param_shapes(const TransformerConfig& config);
std::vector<ParamShape> root_param_shapes(const TransformerConfig& config);

struct GroupLayout {
  std::string name;  // "root", "layers.0", ... (custom: the group's own name)
  bool is_root = false;
  std::int64_t first_block = 0;  // blocks [first_block, first_block + block_count)
  std::int64_t block_count = 0;
  std::int64_t numel = 0;
  std::int64_t sharded_numel = 0;  // per rank, padded, for the scenario's shard size
  std::int64_t custom_index = -1;  // family custom: index into ModelSpec::groups
};

/// Groups in forward order. Transformer: the root first, then one group per `blocks_per_group`
/// blocks. Custom: the listed groups (a parameterless root first when none is named "root").
std::vector<GroupLayout> param_groups(const Scenario& scenario);

/// Per-rank shard of `shapes` for shard size `world` under `api`.
std::int64_t sharded_numel(const std::vector<ParamShape>& shapes, std::int64_t world, FsdpApi api);

}  // namespace shardscope
