#pragma once
// The schedule IR: what one rank issues for the configured iterations, in CPU issue order.
// Ops run on streams, collectives on communicators; buffers are allocated and freed by ops, so
// memory over time is a consequence of the schedule, never a separate guess. All ranks of an FSDP
// job issue the same schedule (SPMD), so one rank's IR describes the job.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/kernel.hpp"
#include "shardscope/core/small_vector.hpp"
#include "shardscope/core/units.hpp"

namespace shardscope {

using StreamId = std::int32_t;
using GroupId = std::int32_t;
using CommId = std::int32_t;
using OpId = std::int32_t;
using BufferId = std::int32_t;
inline constexpr std::int32_t kNone = -1;
/// Ids an op refers to: one to five almost always (a backward op frees five), so they live inline.
using IdList = SmallVector<std::int32_t, 5>;  // 5 ids inline in 24 bytes
static_assert(sizeof(IdList) == 24, "an op holds four id lists: keep them small");

enum class StreamKind {
  cpu,            // the Python thread that issues everything (and runs CPU work)
  compute,        // the default CUDA stream
  communication,  // a stream that issues NCCL collectives
  copy,           // a stream for copies (all-gather copy-in, host transfers)
};

enum class OpKind {
  copy_in,  // gather sharded params into the all-gather input (cast to param dtype)
  all_gather,
  copy_out,  // all-gather output into unsharded parameters
  forward,
  backward,
  recompute,       // forward re-run under activation checkpointing
  reshard,         // free unsharded parameters
  reduce_copy_in,  // copy (and cast) unsharded gradients into the reduce-scatter input
  reduce_scatter,
  all_reduce,  // HSDP: across replicas
  grad_div,    // gradient division / dtype cast into the sharded gradient
  h2d,
  d2h,
  optimizer_step,
  zero_grad,
  stream_wait,  // a stream waits on an event (zero work)
  cpu_wait,     // the CPU blocks on an event (FSDP1 rate limiter, synchronisation)
  state_dict,   // state-dict (checkpoint) work
  other,        // imported work the schedule has no kind for (an unrecognised kernel, a memset)
};
inline constexpr std::size_t kOpKindCount = static_cast<std::size_t>(OpKind::other) + 1;

// generation: the calls of a registered forward method before a step's first micro-batch
// (training.generation), forward-only, under no_grad.
enum class Phase { forward, backward, optimizer, checkpoint, generation };
inline constexpr std::size_t kPhaseCount = 5;

enum class BufferCategory {
  sharded_params,
  all_gather_input,
  all_gather_output,
  unsharded_params,
  unsharded_grads,
  reduce_scatter_input,
  reduce_scatter_output,
  sharded_grads,
  optimizer_states,
  activations,
  recompute,
  logits,
  workspace,
};

enum class Location { gpu, host };

/// Which pool of PyTorch's caching allocator a GPU buffer comes from: the default pools, or the
/// private MemPool a ProcessGroup allocates communication buffers from
/// (ProcessGroupNCCL::allocateTensor: ncclMemAlloc'd segments registered with NCCL), whose
/// segments stay reserved while the process group lives.
enum class MemoryPool { caching_allocator, process_group };

struct Stream {
  std::string name;  // e.g. "compute", "all_gather", "reduce_scatter", "cpu"
  StreamKind kind = StreamKind::compute;
};

struct Communicator {
  std::string name;  // e.g. "shard", "replicate", "post_forward", "reduce_scatter"
  int size = 1;      // ranks
  int nodes = 1;     // NVLink domains the ranks span (nodes unless cluster.nvlink.domain is set)
};

struct ParamGroup {
  std::string name;                // PyTorch module path: "root", "layers.0", ...
  std::int64_t numel = 0;          // unsharded parameters
  std::int64_t sharded_numel = 0;  // per rank, with padding
  DType dtype = DType::fp32;       // original parameter dtype
  bool is_root = false;
};

/// What a collective or copy reads or writes: `count` elements of `dtype` in `buffer`, `offset`
/// bytes in. With `rank_chunk` the region is the rank's own chunk instead, at `offset + position ×
/// count × element size` where position is the rank's place in the op's communicator: an in-place
/// all-gather's input inside its output, as FSDP and nccl-tests place it. All ranks issue the same
/// schedule, so the rank-dependent offset is the backend's to compute.
struct BufferRef {
  BufferId buffer = kNone;
  std::int64_t count = 0;  // elements
  DType dtype = DType::fp32;
  Bytes offset = 0;
  bool rank_chunk = false;

  [[nodiscard]] bool named() const { return buffer != kNone; }
  [[nodiscard]] Bytes bytes() const { return count * bytes_per_element(dtype); }
  friend bool operator==(const BufferRef&, const BufferRef&) = default;
};

/// Ops that move data between named buffers: every collective and copy names its input and
/// output (check_schedule holds the lowering to it; the backends use exactly those).
inline bool moves_data(OpKind kind) {
  switch (kind) {
    case OpKind::copy_in:
    case OpKind::all_gather:
    case OpKind::copy_out:
    case OpKind::reduce_copy_in:
    case OpKind::reduce_scatter:
    case OpKind::all_reduce:
    case OpKind::h2d:
    case OpKind::d2h:
      return true;
    default:
      return false;
  }
}

struct Op {
  OpKind kind = OpKind::forward;
  StreamId stream = 0;
  GroupId group = kNone;
  Phase phase = Phase::forward;
  int iteration = 0;
  int microbatch = 0;
  CommId comm = kNone;
  std::int32_t label =
      kNone;  // index into Schedule::op_labels: what PyTorch calls it, e.g. "prefetch", "embed"
  std::int32_t kernels = kNone;  // index into Schedule::kernel_sets (compute ops); kNone: unknown
  Bytes bytes = 0;               // collective: gathered/pre-scatter size; copy: bytes moved
  Flops flops = 0;               // with kernels: their sum (kernel_set_totals)
  Flops attention_flops = 0;  // the part of `flops` in attention kernels (flash attention), ≤ flops
  std::optional<TimeNs> fixed_time;  // overrides every cost model
  IdList deps;                       // ops this one waits for (cross-stream events, CPU waits)
  IdList allocs;                     // buffers
  IdList frees;
  IdList uses;
  BufferRef input;   // moves_data(kind): what it reads
  BufferRef output;  // moves_data(kind): what it writes (an all-reduce: its input, in place)
};

/// A buffer's name, kept as parts (lowering names thousands of buffers; a string each cost more
/// than the rest of the buffer): "<group>/<label>@i<iteration>m<microbatch>", each part only when
/// set. buffer_name() spells it out.
struct BufferName {
  std::int32_t label = kNone;       // index into Schedule::buffer_labels
  bool group_prefix = false;        // "<group name>/" first
  std::int32_t iteration = kNone;   // "@i<iteration>"
  std::int32_t microbatch = kNone;  // "m<microbatch>"
};

struct Buffer {
  BufferName name;
  Bytes size = 0;
  DType dtype = DType::fp32;
  BufferCategory category = BufferCategory::workspace;
  GroupId group = kNone;
  Location location = Location::gpu;
  bool live_at_start = false;  // exists before the first op (sharded params, optimizer states)
  MemoryPool pool = MemoryPool::caching_allocator;
};

struct Schedule {
  std::string name;
  int world_size = 1;
  int iterations = 1;
  std::int64_t tokens_per_iteration = 0;  // per rank, all micro-batches
  std::vector<Stream> streams;
  std::vector<Communicator> communicators;
  std::vector<ParamGroup> groups;
  std::vector<Op> ops;
  std::vector<Buffer> buffers;
  std::vector<std::string> buffer_labels;  // name labels, see BufferName
  std::vector<std::string> op_labels;      // Op::label texts
  std::vector<KernelSet> kernel_sets;      // Op::kernels: what compute ops run
};

/// The op's label ("" when it has none).
inline std::string_view op_label(const Schedule& s, const Op& op) {
  return op.label == kNone ? std::string_view()
                           : std::string_view(s.op_labels[static_cast<std::size_t>(op.label)]);
}

/// The op's kernels (empty when it has none).
inline std::span<const Kernel> op_kernels(const Schedule& s, const Op& op) {
  if (op.kernels == kNone) return {};
  return s.kernel_sets[static_cast<std::size_t>(op.kernels)];
}

/// The highest iteration any op belongs to (0 for an empty schedule): the steady state's. The CPU
/// issues one iteration after another, so the last op's (check_schedule holds ops to that order).
inline int last_iteration(const Schedule& s) {
  return s.ops.empty() ? 0 : s.ops.back().iteration;
}

/// The index of the first op of `iteration` or of a later one (ops.size() when none): where a
/// pass over one iteration starts (check_schedule holds ops in the order of their iterations).
inline std::size_t first_op_of(const Schedule& s, int iteration) {
  return static_cast<std::size_t>(
      std::partition_point(s.ops.begin(), s.ops.end(),
                           [&](const Op& op) { return op.iteration < iteration; }) -
      s.ops.begin());
}

/// The default CUDA stream, on which the model was built: buffers live at start (sharded
/// parameters) were allocated there. The first compute stream, else stream 0.
inline StreamId default_stream(const Schedule& s) {
  for (std::size_t i = 0; i < s.streams.size(); ++i) {
    if (s.streams[i].kind == StreamKind::compute) return static_cast<StreamId>(i);
  }
  return 0;
}

/// The buffer's full name, e.g. "layers.3/all_gather_output@i1m0".
std::string buffer_name(const Schedule& schedule, BufferId id);

inline constexpr std::string_view kScheduleSchema = "shardscope.schedule/3";

std::string_view to_string(StreamKind kind);
std::string_view to_string(OpKind kind);
std::string_view to_string(Phase phase);
std::string_view to_string(BufferCategory category);
std::string_view to_string(Location location);
std::string_view to_string(MemoryPool pool);
std::optional<StreamKind> parse_stream_kind(std::string_view text);
std::optional<OpKind> parse_op_kind(std::string_view text);
std::optional<Phase> parse_phase(std::string_view text);
std::optional<BufferCategory> parse_buffer_category(std::string_view text);
std::optional<Location> parse_location(std::string_view text);
std::optional<MemoryPool> parse_memory_pool(std::string_view text);

/// All values of an enum in declaration order (for tables, tests and legends).
std::span<const OpKind> all_op_kinds();
std::span<const BufferCategory> all_buffer_categories();

inline bool is_collective(OpKind kind) {  // inline: asked for every op in every simulation
  return kind == OpKind::all_gather || kind == OpKind::reduce_scatter || kind == OpKind::all_reduce;
}

}  // namespace shardscope
