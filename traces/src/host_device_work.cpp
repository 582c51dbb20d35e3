#include "host_device_work.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>

namespace shardscope::traces::detail {
namespace {

/// What FSDP asked of a c10d op, read from its shapes; nothing for an op that is not a
/// collective FSDP issues.
struct Asked {
  OpKind kind = OpKind::all_gather;
  std::vector<std::string> gloo_kinds;  // what gloo may call the work it runs for it
  std::int64_t gloo_numel = 0;          // the elements of gloo's first input
  std::int64_t bytes_numel = 0;         // shardscope's bytes, in elements (0: unknown)
  int group_size = 0;                   // 0: unknown
};

std::optional<Asked> asked(const CollectiveIssue& c, int group_size) {
  const std::int64_t first = c.first_numel, second = c.second_numel;
  const auto ratio = [](std::int64_t big, std::int64_t small) {
    return small > 0 && big % small == 0 ? static_cast<int>(big / small) : 0;
  };
  // _allgather_base_(output, input): the gathered output; gloo gathers the input.
  if (c.op == "_allgather_base_" || c.op == "allgather_into_tensor_coalesced_")
    return Asked{OpKind::all_gather, {"all_gather"}, second, first, ratio(first, second)};
  // allgather_(output lists, input list): FSDP1's list form on the CPU (_flat_param.py).
  if (c.op == "allgather_") {
    return Asked{OpKind::all_gather,
                 {"all_gather"},
                 second,
                 group_size > 0 ? second * group_size : 0,
                 group_size};
  }
  // _reduce_scatter_base_(output, input): gloo all-reduces the input and keeps its chunk.
  if (c.op == "_reduce_scatter_base_" || c.op == "reduce_scatter_tensor_coalesced_") {
    return Asked{OpKind::reduce_scatter,
                 {"reduce_scatter", "all_reduce"},
                 second,
                 second,
                 ratio(second, first)};
  }
  if (c.op == "allreduce_" || c.op == "allreduce_coalesced_")
    return Asked{OpKind::all_reduce, {"all_reduce"}, first, first, group_size};
  return std::nullopt;
}

/// The ops of one thread as a tree: each op's direct children, by nesting.
struct OpTree {
  std::vector<const CpuRange*> ops;                // by start, the longer first
  std::vector<std::vector<std::size_t>> children;  // by index into ops
  std::vector<std::size_t> roots;
};

OpTree op_tree(std::vector<const CpuRange*> ops) {
  std::sort(ops.begin(), ops.end(), [](const CpuRange* a, const CpuRange* b) {
    return a->start != b->start ? a->start < b->start : a->end > b->end;
  });
  OpTree t{std::move(ops), {}, {}};
  t.children.resize(t.ops.size());
  std::vector<std::size_t> open;
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    while (!open.empty() && t.ops[open.back()]->end <= t.ops[i]->start) open.pop_back();
    (open.empty() ? t.roots : t.children[open.back()]).push_back(i);
    open.push_back(i);
  }
  return t;
}

/// The device's compute on a CPU: each thread's outermost ops, except that autograd's node
/// wrappers ("autograd::engine::evaluate_function: …") and any op that runs an FSDP or c10d op
/// inside it (a hook on an autograd node) stand for their children, so FSDP's copies are ops of
/// their own; c10d's issuing ops are left out (the work they issue is gloo's). Threads that ran
/// gloo collectives are gloo's.
std::vector<const CpuRange*> device_compute(const std::vector<CpuRange>& cpu_ops,
                                            const std::set<int>& gloo_threads,
                                            const std::vector<std::string>& names) {
  std::map<int, std::vector<const CpuRange*>> by_thread;
  for (const CpuRange& r : cpu_ops) {
    if (!gloo_threads.contains(r.thread)) by_thread[r.thread].push_back(&r);
  }
  const auto name = [&](const CpuRange* r) -> const std::string& {
    return names[static_cast<std::size_t>(r->name)];
  };
  std::vector<const CpuRange*> out;
  for (auto& [thread, ops] : by_thread) {
    const OpTree t = op_tree(std::move(ops));
    // Whether each op runs an FSDP or c10d op inside it: children come after their parent, so
    // one backward pass settles it.
    std::vector<bool> runs_fsdp(t.ops.size(), false);
    for (std::size_t i = t.ops.size(); i-- > 0;) {
      for (std::size_t c : t.children[i]) {
        const std::string& n = name(t.ops[c]);
        if (runs_fsdp[c] || n.starts_with("fsdp::") || n.starts_with("c10d::")) runs_fsdp[i] = true;
      }
    }
    std::vector<std::size_t> todo(t.roots.rbegin(), t.roots.rend());
    while (!todo.empty()) {
      const std::size_t i = todo.back();
      todo.pop_back();
      const std::string& n = name(t.ops[i]);
      if (n.starts_with("autograd::engine::evaluate_function") || runs_fsdp[i]) {
        todo.insert(todo.end(), t.children[i].rbegin(), t.children[i].rend());
      } else if (!n.starts_with("c10d::")) {
        out.push_back(t.ops[i]);
      }
    }
  }
  return out;
}

}  // namespace

HostDeviceWork host_device_work(const std::vector<CpuRange>& cpu_ops,
                                const std::vector<HostCollective>& collectives,
                                const std::vector<CollectiveIssue>& issues,
                                const std::vector<std::string>& names,
                                const std::vector<std::string>& thread_names, int group_size) {
  HostDeviceWork out;
  std::int64_t correlation = 0;
  const auto add = [&](GpuWork w, Launch launch) {
    w.correlation = ++correlation;
    out.launches.emplace(correlation, launch);
    out.work.push_back(std::move(w));
  };

  std::set<int> gloo_threads;
  for (const HostCollective& c : collectives) gloo_threads.insert(c.thread);
  for (const CpuRange* r : device_compute(cpu_ops, gloo_threads, names)) {
    GpuWork w;
    w.start = r->start;
    w.end = r->end;
    w.cls = GpuClass::kernel;
    w.stream = "cpu " + thread_names[static_cast<std::size_t>(r->thread)];
    w.name = r->name;
    add(std::move(w), {r->thread, r->start});
  }

  // Each issue takes the first collective gloo started at or after it with the kind and size it
  // asked for: gloo runs a group's work in issue order.
  std::map<std::pair<std::string, std::int64_t>, std::deque<const HostCollective*>> waiting;
  std::vector<const HostCollective*> by_start;
  by_start.reserve(collectives.size());
  for (const HostCollective& c : collectives) by_start.push_back(&c);
  std::sort(by_start.begin(), by_start.end(),
            [](const HostCollective* a, const HostCollective* b) { return a->start < b->start; });
  for (const HostCollective* c : by_start) waiting[{c->gloo_kind, c->numel}].push_back(c);
  std::vector<const CollectiveIssue*> ordered;
  ordered.reserve(issues.size());
  for (const CollectiveIssue& i : issues) ordered.push_back(&i);
  std::sort(ordered.begin(), ordered.end(),
            [](const CollectiveIssue* a, const CollectiveIssue* b) { return a->start < b->start; });
  std::int64_t paired = 0;
  for (const CollectiveIssue* issue : ordered) {
    const auto a = asked(*issue, group_size);
    if (!a) continue;
    const HostCollective* found = nullptr;
    for (const std::string& kind : a->gloo_kinds) {
      auto it = waiting.find({kind, a->gloo_numel});
      if (it == waiting.end()) continue;
      auto& queue = it->second;
      const auto at = std::find_if(queue.begin(), queue.end(), [&](const HostCollective* c) {
        return c->start >= issue->start;
      });
      if (at == queue.end() || (found && (*at)->start >= found->start)) continue;
      found = *at;
    }
    if (!found) {
      ++out.unpaired_issues;
      continue;
    }
    auto& queue = waiting[{found->gloo_kind, found->numel}];
    queue.erase(std::find(queue.begin(), queue.end(), found));
    ++paired;
    GpuWork w;
    w.start = found->start;
    w.end = found->end;
    w.cls = GpuClass::nccl;
    w.stream = "gloo " + thread_names[static_cast<std::size_t>(found->thread)];
    w.name = found->name;
    w.collective = a->kind;
    w.bytes = a->bytes_numel * found->element;
    w.comm_size = a->group_size;
    w.comm_name = a->group_size > 0 ? fmt::format("gloo group of {}", a->group_size)
                                    : "gloo group of unknown size";
    add(std::move(w), {issue->thread, issue->start});
  }
  out.unpaired_collectives = static_cast<std::int64_t>(collectives.size()) - paired;
  return out;
}

}  // namespace shardscope::traces::detail
