#include "shardscope/exec/executor.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace shardscope::exec {
namespace {

// Memory as the CPU changes it: one sample per op that allocates (placed at its start) or frees
// (placed at its end), and the peaks at every allocation.
class MemoryRecorder {
 public:
  explicit MemoryRecorder(Timeline& t) : t_(t) {
    by_category_.assign(all_buffer_categories().size(), 0);
    t_.peaks.allocated_by_phase.assign(4, 0);
    t_.peaks.allocated.by_category = by_category_;
    t_.peaks.reserved.by_category = by_category_;
  }

  void allocated(const Buffer& b, OpId op, Phase phase, MemoryUsage usage) {
    if (b.location == Location::gpu) by_category_[static_cast<std::size_t>(b.category)] += b.size;
    auto& by_phase = t_.peaks.allocated_by_phase[static_cast<std::size_t>(phase)];
    by_phase = std::max(by_phase, usage.allocated);
    if (usage.allocated > t_.peaks.allocated.bytes)
      t_.peaks.allocated = {usage.allocated, 0, op, by_category_};
    if (usage.reserved > t_.peaks.reserved.bytes)
      t_.peaks.reserved = {usage.reserved, 0, op, by_category_};
  }

  void freed(const Buffer& b) {
    if (b.location == Location::gpu) by_category_[static_cast<std::size_t>(b.category)] -= b.size;
  }

  void sample(OpId op, bool at_end, MemoryUsage usage) {
    t_.memory.push_back({0, usage.allocated, usage.reserved, by_category_, op});
    at_end_.push_back(at_end);
  }

  // Once the spans are known: samples and peaks at their ops (as the simulator places them).
  void place(const std::vector<OpSpan>& spans) { place_memory_at_ops(t_, at_end_, spans); }

 private:
  Timeline& t_;
  std::vector<Bytes> by_category_;
  std::vector<bool> at_end_;
};

Timeline skeleton(const Schedule& s, const Backend& backend, const RunOptions& options) {
  Timeline t = timeline_of(s);
  t.source = "measured";
  t.provenance = {options.scenario, backend.device(), backend.name(),
                  std::string(shardscope_version()), backend.rank()};
  t.facts.model_flops_per_token = options.facts.model_flops_per_token;
  t.facts.peak_flops = options.facts.peak_flops;
  t.memory_capacity = options.memory_capacity;
  return t;
}

// Issues op `i`: its buffers, its waits, the op itself.
void issue(const Schedule& s, OpId id, Backend& backend, MemoryRecorder& memory) {
  const Op& op = s.ops[static_cast<std::size_t>(id)];
  for (BufferId b : op.allocs) {
    const Buffer& buf = s.buffers[static_cast<std::size_t>(b)];
    backend.allocate(b, buf, op.stream);
    memory.allocated(buf, id, op.phase, backend.memory());
  }
  if (!op.allocs.empty()) memory.sample(id, false, backend.memory());
  const bool on_cpu = s.streams[static_cast<std::size_t>(op.stream)].kind == StreamKind::cpu;
  for (OpId d : op.deps) {
    if (on_cpu || op.kind == OpKind::cpu_wait) {
      backend.host_wait(d);
    } else if (s.ops[static_cast<std::size_t>(d)].stream != op.stream) {
      backend.stream_wait(op.stream, d);
    }
  }
  if (on_cpu) {
    backend.run_host(id, op);
  } else {
    backend.launch(id, op);
  }
  for (BufferId b : op.frees) {
    const Buffer& buf = s.buffers[static_cast<std::size_t>(b)];
    backend.free(b, buf);
    memory.freed(buf);
  }
  if (!op.frees.empty()) memory.sample(id, true, backend.memory());
}

}  // namespace

std::string describe_op(const Schedule& s, OpId id) {
  const Op& op = s.ops[static_cast<std::size_t>(id)];
  std::string out =
      fmt::format("op {} ({} {}, {}, iteration {}", id, to_string(op.kind),
                  op.group == kNone ? "-" : s.groups[static_cast<std::size_t>(op.group)].name,
                  to_string(op.phase), op.iteration);
  if (op.comm != kNone)
    out +=
        fmt::format(", communicator {}", s.communicators[static_cast<std::size_t>(op.comm)].name);
  return out + ")";
}

Timeline run(const Schedule& s, Backend& backend, const RunOptions& options) {
  Timeline t = skeleton(s, backend, options);
  MemoryRecorder memory(t);
  OpId current = kNone;
  std::vector<OpSpan> spans;
  try {
    backend.begin(s);
    for (std::size_t b = 0; b < s.buffers.size(); ++b) {
      if (s.buffers[b].live_at_start) {
        backend.allocate(static_cast<BufferId>(b), s.buffers[b], 0);
        memory.allocated(s.buffers[b], kNone, Phase::forward, backend.memory());
      }
    }
    memory.sample(kNone, false, backend.memory());
    int iteration = -1;
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      if (options.stop && options.stop->load()) throw Interrupted("interrupted");
      current = static_cast<OpId>(i);
      if (s.ops[i].iteration != iteration) {
        iteration = s.ops[i].iteration;
        if (options.on_iteration) options.on_iteration(iteration);
      }
      issue(s, current, backend, memory);
    }
    current = kNone;
    spans = backend.finish();
  } catch (const Interrupted&) {
    backend.abort();
    throw;
  } catch (const ExecError&) {
    backend.abort();
    throw;
  } catch (const std::exception& e) {
    backend.abort();
    // A backend error carries the op it happened at when it knows it (a stream worker's op);
    // otherwise it happened while issuing `current`.
    if (current == kNone) throw ExecError(kNone, fmt::format("run failed: {}", e.what()));
    throw ExecError(current, fmt::format("{} failed: {}", describe_op(s, current), e.what()));
  }
  memory.place(spans);
  t.ops.reserve(s.ops.size());
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    t.ops.push_back(timeline_op_of(s, static_cast<OpId>(i), spans[i].start, spans[i].end));
  sort_timeline_ops(t.ops);
  return t;
}

}  // namespace shardscope::exec
