#include "shardscope/sim/calibration_samples.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace shardscope::sim {
namespace {

struct Kind {
  SampleClass cls;
  OpKind kind;     // the sample's kind (forward for all compute)
  bool aggregate;  // all ops of the key in one sample
};

std::optional<Kind> sample_kind(OpKind kind) {
  switch (kind) {
    case OpKind::forward:
    case OpKind::backward:
    case OpKind::recompute:
      return Kind{SampleClass::compute, OpKind::forward, true};
    case OpKind::copy_in:
    case OpKind::copy_out:
    case OpKind::reduce_copy_in:
    case OpKind::grad_div:
    case OpKind::reshard:
    case OpKind::optimizer_step:
      return Kind{SampleClass::compute, kind, true};
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_reduce:
      return Kind{SampleClass::collective, kind, false};
    case OpKind::h2d:
    case OpKind::d2h:
      return Kind{SampleClass::host_copy, kind, false};
    default:
      return std::nullopt;
  }
}

using Key = std::tuple<SampleClass, Phase, std::string, OpKind, int>;  // ..., order

using KeyedOps = std::map<Key, std::vector<const TimelineOp*>>;

// Each iteration's ops by sample key, in one pass; each list in start order. `other_ops` counts
// the ops of kinds calibration does not use.
std::map<int, KeyedOps> keyed_ops(const Timeline& t, int* other_ops = nullptr) {
  std::map<int, KeyedOps> out;
  std::map<std::pair<int, Key>, int> next_order;
  for (const auto& op : t.ops) {
    const auto k = sample_kind(op.kind);
    if (!k) {
      if (other_ops) ++*other_ops;
      continue;
    }
    Key key{k->cls, op.phase, std::string(group_name(t, op)), k->kind, 0};
    if (!k->aggregate) std::get<4>(key) = next_order[{op.iteration, key}]++;
    out[op.iteration][key].push_back(&op);
  }
  return out;
}

// The steady-state (last) iteration's ops by sample key.
KeyedOps steady_state_ops(const Timeline& t) {
  auto all = keyed_ops(t);
  const auto it = all.find(t.last_iteration());
  return it == all.end() ? KeyedOps{} : std::move(it->second);
}

std::set<int> iterations_of(const Timeline& t) {
  std::set<int> out;
  for (const auto& op : t.ops) out.insert(op.iteration);
  return out;
}

// The simulator shares the GPU equally among the GPU ops running at once and slows them by s while
// a collective runs: an op's work T = ∫ (1 − s·c(t)) / k(t) dt over its run. For each compute-class
// op of `t` (by index) this returns (∫ 1/k dt, ∫ c/k dt), so T = first − s·second.
std::vector<std::pair<double, double>> gpu_shares(const Timeline& t) {
  std::vector<std::pair<double, double>> out(t.ops.size(), {0.0, 0.0});
  struct Edge {
    TimeNs time;
    int delta;  // +1 start, −1 end
    bool collective;
    std::size_t op;
  };
  std::vector<Edge> edges;
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const auto& op = t.ops[i];
    if (op.end <= op.start) continue;
    const bool collective = is_collective(op.kind);
    const auto k = sample_kind(op.kind);
    if (!collective && !(k && k->cls == SampleClass::compute)) continue;
    edges.push_back({op.start, +1, collective, i});
    edges.push_back({op.end, -1, collective, i});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return a.time != b.time ? a.time < b.time : a.delta < b.delta;  // ends first
  });
  std::vector<std::size_t> running;  // compute-class ops running now
  int collectives = 0;
  TimeNs last = edges.empty() ? 0 : edges.front().time;
  for (const auto& e : edges) {
    if (e.time > last && !running.empty()) {
      const double share = static_cast<double>(e.time - last) / static_cast<double>(running.size());
      for (std::size_t i : running) {
        out[i].first += share;
        if (collectives > 0) out[i].second += share;
      }
    }
    last = e.time;
    if (e.collective) {
      collectives += e.delta;
    } else if (e.delta > 0) {
      running.push_back(e.op);
    } else {
      std::erase(running, e.op);
    }
  }
  return out;
}

// Step time of each iteration of one run: its last end less the previous iteration's last end
// (the first iteration: from its first start).
std::vector<MeasuredStep> steps_of(const Timeline& t, int run) {
  std::map<int, std::pair<TimeNs, TimeNs>> span;  // iteration → (first start, last end)
  for (const auto& op : t.ops) {
    auto [it, inserted] = span.try_emplace(op.iteration, op.start, op.end);
    if (!inserted) {
      it->second.first = std::min(it->second.first, op.start);
      it->second.second = std::max(it->second.second, op.end);
    }
  }
  std::vector<MeasuredStep> out;
  std::optional<TimeNs> previous_end;
  for (const auto& [iteration, s] : span) {
    out.push_back({run, iteration, false, s.second - (previous_end ? *previous_end : s.first)});
    previous_end = s.second;
  }
  return out;
}

}  // namespace

std::string_view to_string(SampleClass cls) {
  switch (cls) {
    case SampleClass::compute:
      return "compute";
    case SampleClass::collective:
      return "collective";
    case SampleClass::host_copy:
      return "host copy";
  }
  return "compute";
}

SampleSet match_samples(const Timeline& predicted, const std::vector<Timeline>& measured,
                        double holdout) {
  SampleSet set;
  const KeyedOps reference = steady_state_ops(predicted);
  std::vector<std::pair<int, int>> pairs;  // (run, iteration)
  for (std::size_t r = 0; r < measured.size(); ++r) {
    for (int it : iterations_of(measured[r])) pairs.emplace_back(static_cast<int>(r), it);
  }
  set.iterations = static_cast<int>(pairs.size());
  if (set.iterations >= 2 && holdout > 0) {
    const int held = static_cast<int>(std::ceil(holdout * set.iterations));
    set.held_out_iterations = std::clamp(held, 1, set.iterations - 1);
  }
  const std::set<std::pair<int, int>> held_out(pairs.end() - set.held_out_iterations, pairs.end());
  for (std::size_t r = 0; r < measured.size(); ++r) {
    const Timeline& t = measured[r];
    const auto shares = gpu_shares(t);
    const int run = static_cast<int>(r);
    for (auto step : steps_of(t, run)) {
      step.held_out = held_out.contains({run, step.iteration});
      set.steps.push_back(step);
    }
    for (const auto& [iteration, keyed] : keyed_ops(t, &set.other_ops)) {
      const bool held = held_out.contains({run, iteration});
      for (const auto& [key, ops] : keyed) {
        const auto ref = reference.find(key);
        if (ref == reference.end()) {
          set.unmatched_ops += static_cast<int>(ops.size());
          for (const auto* op : ops) set.unmatched_time += op->duration();
          continue;
        }
        CalibrationSample s;
        s.cls = std::get<0>(key);
        s.run = run;
        s.iteration = iteration;
        s.held_out = held;
        s.phase = std::get<1>(key);
        s.group = std::get<2>(key);
        s.kind = std::get<3>(key);
        s.order = std::get<4>(key);
        for (const auto* op : ops) {
          s.measured += op->duration();
          s.measured_bytes += op->bytes;
          const auto& share = shares[static_cast<std::size_t>(op - t.ops.data())];
          s.gpu_work += share.first;
          s.slowed_work += share.second;
        }
        for (const auto* op : ref->second) {
          if (op->op != kNone) s.ops.push_back(op->op);
        }
        set.samples.push_back(std::move(s));
      }
    }
  }
  return set;
}

std::vector<TimeNs> simulated_times(const SampleSet& set, const Timeline& simulation) {
  const KeyedOps ops = steady_state_ops(simulation);
  std::vector<TimeNs> out;
  out.reserve(set.samples.size());
  for (const auto& s : set.samples) {
    const auto it = ops.find({s.cls, s.phase, s.group, s.kind, s.order});
    if (it == ops.end()) {
      out.push_back(-1);
      continue;
    }
    TimeNs sum = 0;
    for (const auto* op : it->second) sum += op->duration();
    out.push_back(sum);
  }
  return out;
}

}  // namespace shardscope::sim
