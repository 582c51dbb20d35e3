#pragma once
// The compact records the Kineto importer keeps of a trace's events (kineto_import.cpp), shared
// with the pieces that build device work from a CPU-only trace (host_device_work.cpp) and
// attribute FSDP ranges to groups (fsdp_ranges.cpp).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardscope/core/schedule.hpp"
#include "shardscope/core/units.hpp"

namespace shardscope::traces::detail {

/// A CPU range: an op, an FSDP hook or op range, a step. `module` is the group it names when the
/// range's own name does not say it (FSDP1's, named by order in fsdp_ranges.cpp); an index into
/// the importer's names, or -1.
struct CpuRange {
  TimeNs start = 0, end = 0;
  int thread = 0;
  std::int32_t name = 0;
  std::int32_t module = -1;
};

/// Where work was launched from: the CPU thread and time.
struct Launch {
  int thread = 0;
  TimeNs time = 0;
  TimeNs end = -1;  // when the launch call returned (-1: no launch call, as in a CPU-only trace)
};

// What a piece of device work is, from its category and name.
enum class GpuClass { kernel, nccl, memcpy_h2d, memcpy_d2h, memcpy_other, memset };

/// One piece of device work: a GPU kernel, copy or set, or (CPU-only traces) a top-level CPU op
/// or a gloo collective.
struct GpuWork {
  TimeNs start = 0, end = 0;
  GpuClass cls = GpuClass::kernel;
  std::string stream;  // "<device>/<stream>", or "cpu <thread>" and "gloo <thread>"
  std::optional<std::int64_t> correlation;
  std::int32_t name = 0;
  Bytes bytes = 0;
  std::optional<OpKind> collective;
  std::string comm_name;
  int comm_size = 0;
};

/// Bytes per element of the dtype names Kineto writes ("BFloat16", "c10::BFloat16", "float",
/// ...); 0 for a name it does not know.
Bytes dtype_bytes(std::string_view dtype);

}  // namespace shardscope::traces::detail
