#include "shardscope/sim/rank_simulation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/communicator_layout.hpp"
#include "shardscope/core/error.hpp"

namespace shardscope::sim {
namespace {

std::vector<double> factors_by_rank(const RankVariation& v, int world) {
  std::vector<double> f(static_cast<std::size_t>(world), 1.0);
  for (const auto& [rank, factor] : v.gpu_time_factor) {
    if (rank < 0 || rank >= world)
      throw Error(fmt::format("rank {} is not in the world (0..{})", rank, world - 1));
    if (!(factor > 0 && factor <= 100))
      throw Error(fmt::format("rank {}: GPU time factor {} is not in (0, 100]", rank, factor));
    f[static_cast<std::size_t>(rank)] = factor;
  }
  return f;
}

// Each rank's class: first by its factor, then split until every rank of a class sees the same
// mix of classes in each of its communicator instances. Classes are numbered by their lowest rank.
std::vector<int> rank_classes(const Schedule& s, const std::vector<double>& factor,
                              bool every_rank_differs) {
  const int world = s.world_size;
  std::vector<int> cls(static_cast<std::size_t>(world));
  std::size_t count = 0;
  if (every_rank_differs) {
    for (int r = 0; r < world; ++r) cls[static_cast<std::size_t>(r)] = r;
    return cls;
  }
  {
    std::map<double, int> ids;
    for (int r = 0; r < world; ++r) {
      const auto [it, added] = ids.emplace(factor[static_cast<std::size_t>(r)], 0);
      if (added) it->second = static_cast<int>(count++);
      cls[static_cast<std::size_t>(r)] = it->second;
    }
  }
  while (true) {
    // Each communicator instance's mix: how many of its ranks are in each class.
    std::vector<std::map<int, std::vector<int>>> mix(s.communicators.size());
    for (std::size_t k = 0; k < s.communicators.size(); ++k) {
      for (int r = 0; r < world; ++r) {
        auto& m = mix[k][membership(s.communicators[k], world, r).instance];
        m.resize(count, 0);
        ++m[static_cast<std::size_t>(cls[static_cast<std::size_t>(r)])];
      }
    }
    std::map<std::vector<int>, int> ids;
    std::vector<int> next(cls.size());
    for (int r = 0; r < world; ++r) {
      std::vector<int> signature{cls[static_cast<std::size_t>(r)]};
      for (std::size_t k = 0; k < s.communicators.size(); ++k) {
        const auto& m = mix[k][membership(s.communicators[k], world, r).instance];
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

// One rank's jitter draws, by op: max(0, 1 + jitter·N(0, 1)) each (empty without jitter).
std::vector<double> jitter_factors(const RankVariation& v, int rank, std::size_t ops) {
  if (v.jitter <= 0) return {};
  constexpr std::uint64_t kMix = 0x9E3779B97F4A7C15;
  std::mt19937_64 rng(v.seed * kMix + static_cast<std::uint64_t>(rank));
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<double> f(ops);
  for (double& x : f) x = std::max(0.0, 1.0 + v.jitter * noise(rng));
  return f;
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
  const std::vector<double> factor = factors_by_rank(variation, schedule.world_size);
  if (!(variation.jitter >= 0 && variation.jitter <= 1))
    throw Error(fmt::format("jitter {} is not in [0, 1]", variation.jitter));
  const std::vector<int> cls = rank_classes(schedule, factor, variation.jitter > 0);
  RankSimulation out;
  out.world_size = schedule.world_size;
  std::vector<int> representative;
  for (int r = 0; r < schedule.world_size; ++r) {
    const auto c = static_cast<std::size_t>(cls[static_cast<std::size_t>(r)]);
    if (c == out.classes.size()) {
      out.classes.push_back({});
      out.classes.back().gpu_time_factor = factor[static_cast<std::size_t>(r)];
      representative.push_back(r);
    }
    out.classes[c].ranks.push_back(r);
  }
  const auto instances = instances_by_comm(schedule, cls, representative);
  const CostModel costs(scenario);
  const std::size_t n = schedule.ops.size(), classes = out.classes.size();

  // The latest (or earliest) readiness among the classes of a collective's instance.
  const auto ready_in_instance = [&](std::size_t o, std::size_t c, bool latest) {
    const Instances& in = instances[static_cast<std::size_t>(schedule.ops[o].comm)];
    TimeNs t = out.classes[c].result.ops[o].ready;
    for (std::size_t d : in.members[static_cast<std::size_t>(in.of_class[c])]) {
      const TimeNs r = out.classes[d].result.ops[o].ready;
      t = latest ? std::max(t, r) : std::min(t, r);
    }
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
    o.op_time_factors = jitter_factors(variation, representative[c], n);
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
      if (!is_collective(op.kind) || op.comm == kNone || op.iteration != last) continue;
      const OpRecord& rec = rc.result.ops[o];
      ++rc.collectives;
      if (rec.start > rec.ready) {
        rc.waited[std::string(to_string(op.kind))] += rec.start - rec.ready;
        rc.waited_total += rec.start - rec.ready;
      }
      if (ready_in_instance(o, c, false) < rec.ready && rec.ready == rec.start) ++rc.arrived_last;
    }
    if (rc.arrived_last > out.classes[out.straggler].arrived_last) out.straggler = c;
  }
  out.iteration_times = job_iteration_times(schedule, out.classes);
  return out;
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
