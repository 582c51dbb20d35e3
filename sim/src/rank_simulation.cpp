#include "shardscope/sim/rank_simulation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/communicator_layout.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/rank_speed.hpp"

namespace shardscope::sim {
namespace {

// What sets a rank apart before it is known whom it waits for: its GPU's and its links' factors.
using RankKey = std::pair<double, double>;

std::vector<RankKey> keys_by_rank(const RankVariation& v, int world, int gpus_per_node) {
  std::vector<RankKey> key(static_cast<std::size_t>(world), {1.0, 1.0});
  const auto valid = [](double f) { return f > 0 && f <= 100; };
  for (const auto& [rank, factor] : v.gpu_time_factor) {
    if (rank < 0 || rank >= world)
      throw Error(fmt::format("rank {} is not in the world (0..{})", rank, world - 1));
    if (!valid(factor))
      throw Error(fmt::format("rank {}: GPU time factor {} is not in (0, 100]", rank, factor));
    key[static_cast<std::size_t>(rank)].first = factor;
  }
  const int nodes = (world + gpus_per_node - 1) / gpus_per_node;
  for (const auto& [node, factor] : v.link_time_factor) {
    if (node < 0 || node >= nodes)
      throw Error(fmt::format("node {} is not in the cluster (0..{})", node, nodes - 1));
    if (!valid(factor))
      throw Error(fmt::format("node {}: link time factor {} is not in (0, 100]", node, factor));
    for (int r = node * gpus_per_node; r < std::min(world, (node + 1) * gpus_per_node); ++r)
      key[static_cast<std::size_t>(r)].second = factor;
  }
  return key;
}

// instance[k][r]: which instance of communicator k rank r is in.
std::vector<std::vector<int>> instances_of_ranks(const Schedule& s) {
  std::vector<std::vector<int>> out;
  for (const Communicator& comm : s.communicators) {
    auto& by_rank = out.emplace_back(static_cast<std::size_t>(s.world_size));
    for (int r = 0; r < s.world_size; ++r)
      by_rank[static_cast<std::size_t>(r)] = membership(comm, s.world_size, r).instance;
  }
  return out;
}

// Each rank's class: first by its key, then split until every rank of a class sees the same mix
// of classes in each of its communicator instances. Classes are numbered by their lowest rank.
std::vector<int> rank_classes(const Schedule& s, const std::vector<RankKey>& key,
                              bool every_rank_differs) {
  const int world = s.world_size;
  std::vector<int> cls(static_cast<std::size_t>(world));
  std::size_t count = 0;
  if (every_rank_differs) {
    for (int r = 0; r < world; ++r) cls[static_cast<std::size_t>(r)] = r;
    return cls;
  }
  {
    std::map<RankKey, int> ids;
    for (int r = 0; r < world; ++r) {
      const auto [it, added] = ids.emplace(key[static_cast<std::size_t>(r)], 0);
      if (added) it->second = static_cast<int>(count++);
      cls[static_cast<std::size_t>(r)] = it->second;
    }
  }
  const auto instance = instances_of_ranks(s);
  while (true) {
    // Each communicator instance's mix: how many of its ranks are in each class.
    std::vector<std::map<int, std::vector<int>>> mix(s.communicators.size());
    for (std::size_t k = 0; k < s.communicators.size(); ++k) {
      for (int r = 0; r < world; ++r) {
        auto& m = mix[k][instance[k][static_cast<std::size_t>(r)]];
        m.resize(count, 0);
        ++m[static_cast<std::size_t>(cls[static_cast<std::size_t>(r)])];
      }
    }
    std::map<std::vector<int>, int> ids;
    std::vector<int> next(cls.size());
    for (int r = 0; r < world; ++r) {
      std::vector<int> signature{cls[static_cast<std::size_t>(r)]};
      for (std::size_t k = 0; k < s.communicators.size(); ++k) {
        const auto& m = mix[k][instance[k][static_cast<std::size_t>(r)]];
        signature.insert(signature.end(), m.begin(), m.end());
      }
      const auto [it, added] = ids.emplace(std::move(signature), 0);
      if (added) it->second = static_cast<int>(ids.size() - 1);
      next[static_cast<std::size_t>(r)] = it->second;
    }
    const bool settled = ids.size() == count;
    cls = std::move(next);
    count = ids.size();
    if (settled) return cls;
  }
}

// Communicator k's instances as classes: which instance each class is in, and the classes in
// each instance (classes fold ranks of one mix, so all ranks of a class share their instance's
// mix; the representative's instance stands for them).
struct Instances {
  std::vector<int> of_class;                      // by class
  std::vector<std::vector<std::size_t>> members;  // by instance: its classes, ascending
};

std::vector<Instances> instances_by_comm(const Schedule& s, const std::vector<int>& cls,
                                         const std::vector<int>& representative) {
  const int world = s.world_size;
  std::vector<Instances> out;
  for (const Communicator& comm : s.communicators) {
    Instances in;
    std::map<int, int> index;  // instance number → its place in `members`
    for (int rep : representative) {
      const Membership me = membership(comm, world, rep);
      const auto [it, added] = index.emplace(me.instance, static_cast<int>(in.members.size()));
      if (added) {
        std::set<std::size_t> classes;
        for (int p = 0; p < me.size; ++p)
          classes.insert(static_cast<std::size_t>(
              cls[static_cast<std::size_t>(rank_at(comm, world, me.instance, p))]));
        in.members.emplace_back(classes.begin(), classes.end());
      }
      in.of_class.push_back(it->second);
    }
    out.push_back(std::move(in));
  }
  return out;
}

// The job's iteration times: each iteration ends with its last op on any rank.
std::vector<TimeNs> job_iteration_times(const Schedule& s, const std::vector<RankClass>& classes) {
  std::vector<TimeNs> end(static_cast<std::size_t>(std::max(s.iterations, 1)), 0);
  for (const RankClass& c : classes) {
    for (std::size_t o = 0; o < s.ops.size(); ++o) {
      auto& e = end[static_cast<std::size_t>(std::max(s.ops[o].iteration, 0))];
      e = std::max(e, c.result.ops[o].end);
    }
  }
  std::vector<TimeNs> out;
  for (std::size_t i = end.size() > 1 ? 1 : 0; i < end.size(); ++i)
    out.push_back(end[i] - (i > 0 ? end[i - 1] : 0));
  return out;
}

}  // namespace

TimeNs percentile(std::vector<TimeNs> times, double p) {
  if (times.empty()) return 0;
  std::sort(times.begin(), times.end());
  const auto rank =
      static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(times.size())));
  return times[std::clamp<std::size_t>(rank, 1, times.size()) - 1];
}

RankSimulation simulate_ranks(const Scenario& scenario, const Schedule& schedule,
                              const RankVariation& variation, const SimOptions& options) {
  const int gpus_per_node = std::max(1, scenario.cluster.gpus_per_node);
  const std::vector<RankKey> key = keys_by_rank(variation, schedule.world_size, gpus_per_node);
  if (!(variation.jitter >= 0 && variation.jitter <= 1))
    throw Error(fmt::format("jitter {} is not in [0, 1]", variation.jitter));
  if (variation.issue_delay < 0)
    throw Error(fmt::format("issue delay {} is negative", format_duration(variation.issue_delay)));
  const std::vector<int> cls =
      rank_classes(schedule, key, variation.jitter > 0 || variation.issue_delay > 0);
  RankSimulation out;
  out.world_size = schedule.world_size;
  std::vector<int> representative;
  for (int r = 0; r < schedule.world_size; ++r) {
    const auto c = static_cast<std::size_t>(cls[static_cast<std::size_t>(r)]);
    if (c == out.classes.size()) {
      out.classes.push_back({});
      out.classes.back().gpu_time_factor = key[static_cast<std::size_t>(r)].first;
      out.classes.back().link_time_factor = key[static_cast<std::size_t>(r)].second;
      representative.push_back(r);
    }
    out.classes[c].ranks.push_back(r);
  }
  const auto instances = instances_by_comm(schedule, cls, representative);
  const CostModel costs(scenario);
  const std::size_t n = schedule.ops.size(), classes = out.classes.size();

  // The earliest readiness among the classes of a collective's instance.
  const auto earliest_ready_in_instance = [&](std::size_t o, std::size_t c) {
    const Instances& in = instances[static_cast<std::size_t>(schedule.ops[o].comm)];
    TimeNs t = out.classes[c].result.ops[o].ready;
    for (std::size_t d : in.members[static_cast<std::size_t>(in.of_class[c])])
      t = std::min(t, out.classes[d].result.ops[o].ready);
    return t;
  };
  // One engine per class on one clock; each communicator instance a group (ids unique across
  // communicators).
  std::vector<std::vector<int>> group(classes);
  int offset = 0;
  for (const Instances& in : instances) {
    for (std::size_t c = 0; c < classes; ++c) group[c].push_back(offset + in.of_class[c]);
    offset += static_cast<int>(in.members.size());
  }
  std::vector<SimOptions> per_class;
  for (std::size_t c = 0; c < classes; ++c) {
    SimOptions o = options;
    o.allocator = scenario.allocator;
    o.gpu_time_factor = out.classes[c].gpu_time_factor;
    o.op_time_factors = jitter_draws(variation.jitter, variation.seed, representative[c], n);
    o.comm_time_factors =
        link_time_factors(schedule, variation.link_time_factor, representative[c], gpus_per_node);
    o.issue_delays = issue_delay_draws(variation.issue_delay, variation.seed, representative[c], n);
    per_class.push_back(std::move(o));
  }
  auto results = simulate_together(schedule, costs, per_class, group);
  for (std::size_t c = 0; c < classes; ++c) {
    out.classes[c].result = std::move(results[c]);
    // The same rank with nobody to wait for: what waiting cost it.
    out.classes[c].alone_step_time =
        classes == 1 ? analysis::summarize(out.classes[c].result.timeline, false).step_time
                     : analysis::summarize(simulate(schedule, costs, per_class[c]).timeline, false)
                           .step_time;
  }

  const int last = schedule.iterations - 1;
  for (std::size_t c = 0; c < classes; ++c) {
    RankClass& rc = out.classes[c];
    rc.step_time = analysis::summarize(rc.result.timeline, false).step_time;
    out.step_time = std::max(out.step_time, rc.step_time);
    for (std::size_t o = 0; o < n; ++o) {
      const Op& op = schedule.ops[o];
      if (!is_collective(op.kind) || op.comm == kNone) continue;
      const OpRecord& rec = rc.result.ops[o];
      const bool held_others =
          earliest_ready_in_instance(o, c) < rec.ready && rec.ready == rec.start;
      if (held_others) rc.last_ready.push_back(static_cast<OpId>(o));
      if (op.iteration != last) continue;
      ++rc.collectives;
      if (rec.start > rec.ready) {
        rc.waited[std::string(to_string(op.kind))] += rec.start - rec.ready;
        rc.waited_total += rec.start - rec.ready;
      }
      if (held_others) ++rc.arrived_last;
    }
    if (rc.arrived_last > out.classes[out.straggler].arrived_last) out.straggler = c;
  }
  out.iteration_times = job_iteration_times(schedule, out.classes);
  return out;
}

RankVariation rank_variation(const VariationSpec& spec, int world_size, int gpus_per_node) {
  RankVariation v;
  v.gpu_time_factor = gpu_time_factors(spec, world_size, gpus_per_node);
  v.jitter = spec.jitter;
  v.link_time_factor = spec.slow_links;
  v.issue_delay = spec.issue_delay;
  v.seed = spec.seed;
  return v;
}

std::vector<std::size_t> most_waited_for(const RankSimulation& r, std::size_t count) {
  std::vector<std::size_t> order(r.classes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return r.classes[a].arrived_last > r.classes[b].arrived_last;
  });
  if (order.size() > count) order.resize(count);
  return order;
}

std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace shardscope::sim
