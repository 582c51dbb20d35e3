#pragma once
// A CPU-only trace (a run over gloo: no GPU kernels) as device work: the CPU is the device. Its
// compute is the outermost CPU ops of each thread that runs them; its communication is gloo's
// collectives ("gloo:all_gather" ranges on gloo's worker threads), each paired with the c10d op
// that issued it on the training thread ("c10d::_allgather_base_"), which says what FSDP asked
// for: the kind, the bytes in shardscope's convention and the group size.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kineto_events.hpp"

namespace shardscope::traces::detail {

/// A collective gloo ran: "gloo:<kind>" on a gloo thread, with its first input's elements.
struct HostCollective {
  TimeNs start = 0, end = 0;
  int thread = 0;
  std::int32_t name = 0;  // the range's, in the importer's names
  std::string gloo_kind;  // "all_gather", "all_reduce", "reduce_scatter", ...
  std::int64_t numel = 0;
  Bytes element = 0;
};

/// A c10d op that issued a collective ("c10d::_allgather_base_"), with the elements of its first
/// two tensor arguments (a tensor list counts its first tensor).
struct CollectiveIssue {
  TimeNs start = 0;
  int thread = 0;
  std::string op;  // "_allgather_base_", "allgather_", "_reduce_scatter_base_", "allreduce_"
  std::int64_t first_numel = 0;
  std::int64_t second_numel = 0;
};

struct HostDeviceWork {
  std::vector<GpuWork> work;
  std::unordered_map<std::int64_t, Launch> launches;  // by GpuWork::correlation
  std::int64_t unpaired_collectives = 0;              // gloo collectives no c10d op issued
  std::int64_t unpaired_issues = 0;                   // c10d ops no gloo collective ran
};

/// The device work of a CPU-only trace. `cpu_ops` are every CPU op; `names` the importer's
/// names by id; `thread_names` its threads' "pid/tid" keys by index; `group_size` the process
/// group size where the trace says it for every group (0: unknown), for the ops whose shapes
/// do not.
HostDeviceWork host_device_work(const std::vector<CpuRange>& cpu_ops,
                                const std::vector<HostCollective>& collectives,
                                const std::vector<CollectiveIssue>& issues,
                                const std::vector<std::string>& names,
                                const std::vector<std::string>& thread_names, int group_size);

}  // namespace shardscope::traces::detail
