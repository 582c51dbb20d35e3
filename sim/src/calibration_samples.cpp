#include "shardscope/sim/calibration_samples.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "shardscope/sim/cost_model.hpp"

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

// What the SM model says of each op of a measured run (by index), from its sample key's ops in the
// scenario's schedule.
struct MeasuredContention {
  std::vector<double> contended;
  std::vector<int> sms;
  int contended_sms = 0;
};

// The simulator shares the GPU equally among the GPU ops running at once and takes σ·L(t) of
// their throughput while collectives run (L = contention_loss at the SMs they hold): an op's work
// T = ∫ (1 − σ·L(t)) / k(t) dt over its run. For each compute-class op of `t` (by index) this
// returns (∫ 1/k dt, ∫ L/k dt), so T = first − σ·second.
std::vector<std::pair<double, double>> gpu_shares(const Timeline& t, const MeasuredContention& m) {
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
  int held_sms = 0;                  // by the collectives running now
  TimeNs last = edges.empty() ? 0 : edges.front().time;
  for (const auto& e : edges) {
    if (e.time > last && !running.empty()) {
      const double share = static_cast<double>(e.time - last) / static_cast<double>(running.size());
      const double held = held_share(held_sms, m.contended_sms);
      for (std::size_t i : running) {
        out[i].first += share;
        out[i].second += share * contention_loss(m.contended[i], held);
      }
    }
    last = e.time;
    if (e.collective) {
      held_sms += e.delta * m.sms[e.op];
    } else if (e.delta > 0) {
      running.push_back(e.op);
    } else {
      std::erase(running, e.op);
    }
  }
  return out;
}

// Each reference key's contention: a compute key's contended time (its ops' mean, weighted by
// their time), a collective key's SMs.
struct KeyContention {
  double contended = 1.0;
  int sms = 0;
};

std::map<Key, KeyContention> key_contention(const KeyedOps& reference,
                                            const ContentionFacts& facts) {
  std::map<Key, KeyContention> out;
  for (const auto& [key, ops] : reference) {
    KeyContention k;
    double time = 0, weighted = 0;
    for (const auto* op : ops) {
      if (op->op == kNone) continue;
      const auto id = static_cast<std::size_t>(op->op);
      if (id < facts.sms.size() && facts.sms[id] > 0) k.sms = facts.sms[id];
      if (id < facts.contended.size()) {
        const auto t = static_cast<double>(op->duration());
        time += t;
        weighted += t * facts.contended[id];
      }
    }
    if (time > 0) k.contended = weighted / time;
    out.emplace(key, k);
  }
  return out;
}

// The contention of each op of a measured run, from its key's; a collective of no reference key
// holds what a full one does.
MeasuredContention measured_contention(const Timeline& t, const std::map<int, KeyedOps>& keyed,
                                       const std::map<Key, KeyContention>& by_key,
                                       int contended_sms) {
  MeasuredContention m{std::vector<double>(t.ops.size(), 1.0), std::vector<int>(t.ops.size(), 0),
                       contended_sms};
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    if (is_collective(t.ops[i].kind)) m.sms[i] = contended_sms;
  }
  for (const auto& [iteration, ops_by_key] : keyed) {
    for (const auto& [key, ops] : ops_by_key) {
      const auto it = by_key.find(key);
      if (it == by_key.end()) continue;
      for (const auto* op : ops) {
        const auto i = static_cast<std::size_t>(op - t.ops.data());
        m.contended[i] = it->second.contended;
        if (is_collective(op->kind)) m.sms[i] = it->second.sms;
      }
    }
  }
  return m;
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
                        double holdout, const ContentionFacts& facts) {
  SampleSet set;
  const KeyedOps reference = steady_state_ops(predicted);
  const auto by_key = key_contention(reference, facts);
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
    const auto keyed_by_iteration = keyed_ops(t, &set.other_ops);
    const auto shares =
        gpu_shares(t, measured_contention(t, keyed_by_iteration, by_key, facts.contended_sms));
    const int run = static_cast<int>(r);
    for (auto step : steps_of(t, run)) {
      step.held_out = held_out.contains({run, step.iteration});
      set.steps.push_back(step);
    }
    for (const auto& [iteration, keyed] : keyed_by_iteration) {
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
