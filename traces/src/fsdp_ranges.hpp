#pragma once
// Which FSDP group a trace's CPU ranges belong to. FSDP2 names the module in its ranges
// ("FSDP::pre_forward (layers.0)"); FSDP1's name none ("FullyShardedDataParallel._pre_forward"),
// so its units are named by the order its hooks run in.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kineto_events.hpp"

namespace shardscope::traces::detail {

/// The module an FSDP2 range names: "FSDP::pre_forward (layers.0)" → "layers.0",
/// "FSDP::backward_prefetch for layers.3" → "layers.3"; the root's ranges, which name none
/// ("FSDP::pre_forward", "FSDP::root_pre_forward"; "()" in older versions) → "root". Nothing for
/// a range that is not FSDP2's.
std::optional<std::string> fsdp2_module(std::string_view range);

/// The group a range names: its FSDP1 unit (set by name_fsdp1_units) or the FSDP2 module.
std::optional<std::string> range_module(const CpuRange& range,
                                        const std::vector<std::string>& names);

/// Whether work after this range, on its thread, belongs to the group it names until another
/// such range: FSDP2's pre-forward and pre-backward hooks, FSDP1's pre-backward hook.
bool starts_group_work(std::string_view range);

/// Names FSDP1's units (CpuRange::module) by the order PyTorch runs them: within each root
/// forward (the outermost "FullyShardedDataParallel.forward"), the root, then each nested unit's
/// forward in turn as layers.0, layers.1, ... (ModuleWrapPolicy over a transformer's blocks wraps
/// them in that order, and shardscope names FSDP1's groups so); after it, the first pre-backward
/// hook is the root's (it fires on the model's output) and the others run in reverse forward
/// order, as the post-backward hooks do, the root's last. Returns the units named in the last
/// forward, the root included (0: no FSDP1 ranges).
int name_fsdp1_units(std::vector<CpuRange>& ranges, const std::vector<std::string>& names,
                     const std::function<std::int32_t(const std::string&)>& intern);

/// The FSDP ranges (FSDP::*, FullyShardedDataParallel.*) no group is attributed to, by kind:
/// neither the range nor one enclosing it on its thread names a group.
std::map<std::string, std::int64_t> unmapped_fsdp_ranges(const std::vector<CpuRange>& ranges,
                                                         const std::vector<std::string>& names);

/// "FSDP::pre_forward (layers.0)" → "FSDP::pre_forward"; "... for layers.3" likewise.
std::string fsdp_range_kind(std::string_view name);

}  // namespace shardscope::traces::detail
