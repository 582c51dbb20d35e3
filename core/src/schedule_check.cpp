#include "shardscope/core/schedule_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/depth_first_search.hpp>
#include <cmath>

namespace shardscope {
namespace {

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;

// Records one back edge (u → v): u is reachable from v, so v … u → v is a cycle.
struct CycleFinder : boost::default_dfs_visitor {
  std::optional<std::pair<Vertex, Vertex>>* found;
  template <typename Edge, typename G>
  void back_edge(Edge e, const G& g) const {
    if (!*found) *found = std::pair{boost::source(e, g), boost::target(e, g)};
  }
};

bool in_range(std::int64_t id, std::size_t size) {
  return id >= 0 && static_cast<std::size_t>(id) < size;
}

bool runs_kernels(OpKind kind) {
  return kind == OpKind::forward || kind == OpKind::backward || kind == OpKind::recompute ||
         kind == OpKind::optimizer_step;
}

bool same_flops(Flops a, Flops b) {
  return std::abs(a - b) <= 1e-9 * std::max(a, b);
}

// An op's kernels exist, suit its kind, and add up to its FLOPs and bytes.
template <typename Add>
void check_kernels(const Schedule& s, const Op& op, const std::string& key,
                   const std::vector<KernelTotals>& totals, Add&& add) {
  if (op.kernels == kNone) return;
  if (!in_range(op.kernels, s.kernel_sets.size())) {
    add(key + ".kernels", fmt::format("kernel set {} does not exist", op.kernels));
    return;
  }
  if (!runs_kernels(op.kind)) {
    add(key + ".kernels", fmt::format("{} runs no kernels", to_string(op.kind)),
        "forward, backward, recompute, optimizer_step");
    return;
  }
  const KernelTotals& t = totals[static_cast<std::size_t>(op.kernels)];
  if (!same_flops(op.flops, t.flops) || !same_flops(op.attention_flops, t.attention_flops) ||
      op.bytes != t.memory_bytes) {
    add(key,
        fmt::format("carries {} FLOPs ({} in attention) and {} B, but its kernels (set {}) add up "
                    "to {} FLOPs ({} in attention) and {} B",
                    op.flops, op.attention_flops, op.bytes, op.kernels, t.flops, t.attention_flops,
                    t.memory_bytes),
        "flops, attention_flops and bytes equal to the kernels' sums");
  }
}

bool op_lists(const Op& op, BufferId b) {
  const auto in = [b](const IdList& ids) {
    return std::find(ids.begin(), ids.end(), b) != ids.end();
  };
  return in(op.allocs) || in(op.uses) || in(op.frees);
}

// A data-moving op's input and output: named, inside a live buffer of their dtype, listed among
// the op's buffers, and sized as its kind and communicator say.
template <typename Add>
void check_data_refs(const Schedule& s, std::size_t i, const std::vector<std::int64_t>& alloc_at,
                     const std::vector<std::int64_t>& free_at, Add&& add) {
  const Op& op = s.ops[i];
  const std::string key = fmt::format("ops[{}]", i);
  if (!moves_data(op.kind)) {
    if (op.input.named() || op.output.named())
      add(key, fmt::format("{} moves no data: it names no input or output", to_string(op.kind)));
    return;
  }
  const int comm_size = in_range(op.comm, s.communicators.size())
                            ? s.communicators[static_cast<std::size_t>(op.comm)].size
                            : 1;
  bool sound = true;
  for (const auto& [ref, field] :
       {std::pair{&op.input, "input"}, std::pair{&op.output, "output"}}) {
    const std::string at = fmt::format("{}.{}", key, field);
    if (!ref->named()) {
      // A copy may gather from several buffers (reduce_copy_in reads each parameter's gradient):
      // then it names none and its allocs, uses and frees say which.
      if (is_collective(op.kind))
        add(at,
            fmt::format("{} must name the buffer it {}", to_string(op.kind),
                        ref == &op.input ? "reads" : "writes"),
            "{buffer, count, dtype, offset}");
      sound = false;
      continue;
    }
    if (!in_range(ref->buffer, s.buffers.size())) {
      add(at, fmt::format("buffer {} does not exist", ref->buffer));
      sound = false;
      continue;
    }
    const auto b = static_cast<std::size_t>(ref->buffer);
    const Buffer& buf = s.buffers[b];
    const std::string name = buffer_name(s, ref->buffer);
    if (ref->dtype != buf.dtype)
      add(at,
          fmt::format("reads {} as {}, but it holds {}", name, to_string(ref->dtype),
                      to_string(buf.dtype)),
          std::string(to_string(buf.dtype)));
    const Bytes chunks = ref->rank_chunk ? comm_size : 1;
    if (ref->count < 1 || ref->offset < 0 || ref->offset + chunks * ref->bytes() > buf.size)
      add(at, fmt::format("{} elements{} from byte {} do not fit {} ({} B)", ref->count,
                          ref->rank_chunk ? fmt::format(" per rank × {}", comm_size) : "",
                          ref->offset, name, buf.size));
    if (!op_lists(op, ref->buffer))
      add(at, fmt::format("names {}, which the op neither allocates, uses nor frees", name),
          "a buffer in its allocs, uses or frees");
    const auto when = static_cast<std::int64_t>(i);
    if ((!buf.live_at_start && (alloc_at[b] < 0 || when < alloc_at[b])) ||
        (free_at[b] >= 0 && when > free_at[b]))
      add(at, fmt::format("names {}, which is not live at this op", name));
  }
  if (!sound) return;
  const BufferRef& in = op.input;
  const BufferRef& out = op.output;
  const auto expect = [&](bool ok, std::string what) {
    if (!ok) add(key, std::move(what));
  };
  switch (op.kind) {
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_reduce: {
      expect(in.dtype == out.dtype,
             fmt::format("{} of {} into {}: a collective does not cast", to_string(op.kind),
                         to_string(in.dtype), to_string(out.dtype)));
      const BufferRef& whole = op.kind == OpKind::reduce_scatter ? in : out;
      const BufferRef& part = op.kind == OpKind::reduce_scatter ? out : in;
      const std::int64_t ranks = op.kind == OpKind::all_reduce ? 1 : comm_size;
      expect(whole.count == part.count * ranks,
             fmt::format("{} over {} ranks: {} elements in, {} out", to_string(op.kind), comm_size,
                         in.count, out.count));
      expect(op.bytes == whole.bytes(),
             fmt::format("carries {} B, but its {} is {} B", op.bytes,
                         op.kind == OpKind::reduce_scatter ? "input" : "output", whole.bytes()));
      break;
    }
    case OpKind::h2d:
    case OpKind::d2h: {
      const bool up = op.kind == OpKind::h2d;
      const Location from = s.buffers[static_cast<std::size_t>(in.buffer)].location;
      const Location to = s.buffers[static_cast<std::size_t>(out.buffer)].location;
      expect(from == (up ? Location::host : Location::gpu) &&
                 to == (up ? Location::gpu : Location::host),
             fmt::format("{} copies {} → {} memory", to_string(op.kind), to_string(from),
                         to_string(to)));
      [[fallthrough]];
    }
    case OpKind::copy_out:  // the all-gather output is padded to a multiple of the ranks
      expect(in.count >= out.count,
             fmt::format("copies {} elements out into {}", in.count, out.count));
      break;
    case OpKind::reduce_copy_in:  // into the padded reduce-scatter input
      expect(in.count <= out.count,
             fmt::format("copies {} elements in into {}", in.count, out.count));
      break;
    default:  // element for element, casting where the dtypes differ
      expect(in.count == out.count, fmt::format("copies {} elements into {}", in.count, out.count));
      break;
  }
}

}  // namespace

std::vector<BufferLifetime> buffer_lifetimes(const Schedule& s) {
  std::vector<BufferLifetime> out(s.buffers.size());
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    for (BufferId b : s.ops[i].allocs) {
      if (in_range(b, out.size()) && out[static_cast<std::size_t>(b)].alloc == kNone)
        out[static_cast<std::size_t>(b)].alloc = static_cast<OpId>(i);
    }
    for (BufferId b : s.ops[i].frees) {
      if (in_range(b, out.size()) && out[static_cast<std::size_t>(b)].free == kNone)
        out[static_cast<std::size_t>(b)].free = static_cast<OpId>(i);
    }
  }
  return out;
}

std::vector<Problem> check_schedule(const Schedule& s, const std::string& origin) {
  std::vector<Problem> problems;
  auto add = [&](std::string key, std::string message, std::string allowed = {}) {
    problems.push_back({origin, std::move(key), std::move(message), std::move(allowed)});
  };
  if (s.streams.empty()) add("streams", "a schedule needs at least one stream");
  for (std::size_t i = 0; i < s.communicators.size(); ++i) {
    const auto& c = s.communicators[i];
    if (c.size < 1 || c.nodes < 1 || c.nodes > c.size) {
      add(fmt::format("communicators[{}]", i),
          fmt::format("size {} over {} nodes is impossible", c.size, c.nodes), "1 ≤ nodes ≤ size");
    }
  }
  std::vector<KernelTotals> kernel_totals;
  kernel_totals.reserve(s.kernel_sets.size());
  for (const KernelSet& set : s.kernel_sets) kernel_totals.push_back(kernel_set_totals(set));
  const std::size_t n = s.ops.size();
  std::vector<int> alloc_count(s.buffers.size(), 0), free_count(s.buffers.size(), 0);
  std::vector<std::int64_t> alloc_at(s.buffers.size(), -1), free_at(s.buffers.size(), -1);
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = s.ops[i];
    const std::string key = fmt::format("ops[{}]", i);
    if (!in_range(op.stream, s.streams.size()))
      add(key + ".stream", fmt::format("stream {} does not exist", op.stream),
          fmt::format("0..{}", s.streams.size() - 1));
    if (op.iteration < 0 || op.iteration >= s.iterations) {
      add(key + ".iteration",
          fmt::format("iteration {} is not one of the schedule's {}", op.iteration, s.iterations),
          fmt::format("0..{}", s.iterations - 1));
    } else if (i > 0 && op.iteration < s.ops[i - 1].iteration) {
      add(key + ".iteration",
          fmt::format("iteration {} is issued after an op of iteration {}", op.iteration,
                      s.ops[i - 1].iteration),
          "ops in the order of their iterations: the CPU issues one after another");
    }
    if (op.group != kNone && !in_range(op.group, s.groups.size()))
      add(key + ".group", fmt::format("group {} does not exist", op.group));
    if (op.comm != kNone && !in_range(op.comm, s.communicators.size()))
      add(key + ".comm", fmt::format("communicator {} does not exist", op.comm));
    if (is_collective(op.kind) && op.comm == kNone)
      add(key + ".comm", fmt::format("{} needs a communicator", to_string(op.kind)));
    if (!is_collective(op.kind) && op.comm != kNone)
      add(key + ".comm", fmt::format("{} is not a collective", to_string(op.kind)), "-1");
    if (op.kind == OpKind::cpu_wait && in_range(op.stream, s.streams.size()) &&
        s.streams[static_cast<std::size_t>(op.stream)].kind != StreamKind::cpu) {
      add(key + ".stream", "a cpu_wait runs on the CPU lane");
    }
    check_kernels(s, op, key, kernel_totals, add);
    for (OpId d : op.deps) {
      if (!in_range(d, n)) {
        add(key + ".deps", fmt::format("op {} does not exist", d));
      } else if (static_cast<std::size_t>(d) == i) {
        add(key + ".deps", "an op cannot wait on itself");
      } else if (static_cast<std::size_t>(d) > i) {
        add(key + ".deps", fmt::format("waits on op {}, which is issued after it", d),
            "ops wait only on earlier-issued ops");
      }
    }
    auto check_ids = [&](const IdList& ids, const char* field) {
      for (BufferId b : ids) {
        if (!in_range(b, s.buffers.size()))
          add(fmt::format("{}.{}", key, field), fmt::format("buffer {} does not exist", b));
      }
    };
    check_ids(op.allocs, "allocs");
    check_ids(op.frees, "frees");
    check_ids(op.uses, "uses");
    for (BufferId b : op.allocs) {
      if (in_range(b, s.buffers.size())) {
        ++alloc_count[static_cast<std::size_t>(b)];
        if (alloc_at[static_cast<std::size_t>(b)] < 0)
          alloc_at[static_cast<std::size_t>(b)] = static_cast<std::int64_t>(i);
      }
    }
    for (BufferId b : op.frees) {
      if (in_range(b, s.buffers.size())) {
        ++free_count[static_cast<std::size_t>(b)];
        if (free_at[static_cast<std::size_t>(b)] < 0)
          free_at[static_cast<std::size_t>(b)] = static_cast<std::int64_t>(i);
      }
    }
  }
  // Buffers: one allocation (or live at start), at most one free, uses inside the lifetime.
  for (std::size_t b = 0; b < s.buffers.size(); ++b) {
    const Buffer& buf = s.buffers[b];
    const std::string key =
        fmt::format("buffers[{}] ({})", b, buffer_name(s, static_cast<BufferId>(b)));
    if (buf.live_at_start && alloc_count[b] > 0) add(key, "is live at start and allocated again");
    if (!buf.live_at_start && alloc_count[b] == 0)
      add(key, "is never allocated", "allocate it in an op or mark live_at_start");
    if (alloc_count[b] > 1) add(key, fmt::format("is allocated {} times", alloc_count[b]), "once");
    if (buf.pool == MemoryPool::process_group && buf.location != Location::gpu)
      add(key, "is in the process group's pool but not on the GPU", "location gpu");
    if (free_count[b] > 1)
      add(key, fmt::format("is freed {} times", free_count[b]), "at most once");
    if (free_at[b] >= 0 && alloc_at[b] > free_at[b])
      add(key,
          fmt::format("is freed by op {} before its allocation by op {}", free_at[b], alloc_at[b]));
  }
  for (std::size_t i = 0; i < n; ++i) {
    for (BufferId b : s.ops[i].uses) {
      if (!in_range(b, s.buffers.size())) continue;
      const auto bi = static_cast<std::size_t>(b);
      const auto at = static_cast<std::int64_t>(i);
      if (!s.buffers[bi].live_at_start && (alloc_at[bi] < 0 || at < alloc_at[bi])) {
        add(fmt::format("ops[{}].uses", i),
            fmt::format("uses buffer {} ({}) before it is allocated", b, buffer_name(s, b)));
      }
      if (free_at[bi] >= 0 && at > free_at[bi]) {
        add(fmt::format("ops[{}].uses", i), fmt::format("uses buffer {} ({}) after op {} freed it",
                                                        b, buffer_name(s, b), free_at[bi]));
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i) check_data_refs(s, i, alloc_at, free_at, add);
  // Acyclic: dependencies plus the in-order execution of each stream.
  Graph g(n);
  std::vector<std::int64_t> last_on_stream(s.streams.size(), -1);
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = s.ops[i];
    for (OpId d : op.deps) {
      if (in_range(d, n) && static_cast<std::size_t>(d) != i)
        boost::add_edge(static_cast<Vertex>(d), i, g);
    }
    if (in_range(op.stream, s.streams.size())) {
      auto& last = last_on_stream[static_cast<std::size_t>(op.stream)];
      if (last >= 0) boost::add_edge(static_cast<Vertex>(last), i, g);
      last = static_cast<std::int64_t>(i);
    }
  }
  std::optional<std::pair<Vertex, Vertex>> cycle;
  CycleFinder finder;
  finder.found = &cycle;
  std::vector<boost::default_color_type> colors(n);
  if (n > 0) {
    boost::depth_first_search(g, boost::visitor(finder).color_map(boost::make_iterator_property_map(
                                     colors.begin(), boost::get(boost::vertex_index, g))));
  }
  if (cycle) {
    add(fmt::format("ops[{}]", cycle->second),
        fmt::format("dependency cycle: op {} waits (directly or through stream order) on op {}, "
                    "which reaches it again",
                    cycle->second, cycle->first),
        "dependencies and stream order must form a DAG");
  }
  return problems;
}

}  // namespace shardscope
