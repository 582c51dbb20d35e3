#include "shardscope/exec/executor.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "shardscope/core/memory_ledger.hpp"

namespace shardscope::exec {
namespace {

// One memory sample per op that allocates (placed at its start) or frees (placed at its end); the
// ledger notes the peaks at every allocation.
void sample(MemoryLedger& memory, OpId op, bool at_end, const Backend& backend) {
  const MemoryUsage usage = backend.memory();
  memory.sample(op, at_end, usage.allocated, usage.reserved);
}

// Buffer `b` made live for `op` (kNone: before the first op) on `stream`, and noted.
void allocate(const Schedule& s, BufferId b, OpId op, Phase phase, StreamId stream,
              Backend& backend, MemoryLedger& memory) {
  const Buffer& buf = s.buffers[static_cast<std::size_t>(b)];
  backend.allocate(b, buf, stream);
  const MemoryUsage usage = backend.memory();
  memory.allocated(buf, op, phase, usage.allocated, usage.reserved);
}

Timeline skeleton(const Schedule& s, const Backend& backend, const RunOptions& options) {
  Timeline t = timeline_of(s);
  t.source = "measured";
  t.provenance = {
      options.scenario, backend.device(),  backend.name(), std::string(shardscope_version()),
      backend.rank(),   options.overrides, options.job};
  t.facts.model_flops_per_token = options.facts.model_flops_per_token;
  t.facts.peak_flops = options.facts.peak_flops;
  t.memory_capacity = options.memory_capacity;
  return t;
}

// Issues op `i`: its buffers, its waits, the op itself.
void issue(const Schedule& s, OpId id, Backend& backend, MemoryLedger& memory) {
  const Op& op = s.ops[static_cast<std::size_t>(id)];
  for (BufferId b : op.allocs) allocate(s, b, id, op.phase, op.stream, backend, memory);
  if (!op.allocs.empty()) sample(memory, id, false, backend);
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
  if (!op.frees.empty()) sample(memory, id, true, backend);
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
  MemoryLedger memory;
  OpId current = kNone;
  std::vector<OpSpan> spans;
  try {
    backend.begin(s);
    // The device may give the allocator less than the run stands for (device_budget.hpp).
    if (const Bytes c = backend.memory().capacity; c > 0)
      t.memory_capacity = t.memory_capacity > 0 ? std::min(t.memory_capacity, c) : c;
    for (std::size_t b = 0; b < s.buffers.size(); ++b) {
      if (s.buffers[b].live_at_start)
        allocate(s, static_cast<BufferId>(b), kNone, Phase::forward, default_stream(s), backend,
                 memory);
    }
    sample(memory, kNone, false, backend);
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
  memory.move_into(t, s, spans);
  t.ops.reserve(s.ops.size());
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    t.ops.push_back(timeline_op_of(s, static_cast<OpId>(i), spans[i].start, spans[i].end));
  sort_timeline_ops(t.ops);
  return t;
}

}  // namespace shardscope::exec
