#include "shardscope/sim/rank_simulation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/communicator_layout.hpp"
#include "shardscope/core/error.hpp"

namespace shardscope::sim {
namespace {

// Far more than a straggler's chain of waits needs (a few rounds in every case measured): a
// schedule that has not settled by then is reported, not replayed forever.
constexpr int kMaxReplays = 64;

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
std::vector<int> rank_classes(const Schedule& s, const std::vector<double>& factor) {
  const int world = s.world_size;
  std::vector<int> cls(static_cast<std::size_t>(world));
  std::size_t count = 0;
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

// peers[c][k]: the classes in class c's instance of communicator k (c's own included).
std::vector<std::vector<std::vector<std::size_t>>> peer_classes(
    const Schedule& s, const std::vector<int>& cls, const std::vector<int>& representative) {
  const int world = s.world_size;
  std::vector<std::vector<std::vector<std::size_t>>> peers(representative.size());
  for (std::size_t c = 0; c < representative.size(); ++c) {
    for (const Communicator& comm : s.communicators) {
      const Membership me = membership(comm, world, representative[c]);
      std::set<std::size_t> in;
      for (int p = 0; p < me.size; ++p)
        in.insert(static_cast<std::size_t>(
            cls[static_cast<std::size_t>(rank_at(comm, world, me.instance, p))]));
      peers[c].emplace_back(in.begin(), in.end());
    }
  }
  return peers;
}

}  // namespace

RankSimulation simulate_ranks(const Scenario& scenario, const Schedule& schedule,
                              const RankVariation& variation, const SimOptions& options) {
  const std::vector<double> factor = factors_by_rank(variation, schedule.world_size);
  const std::vector<int> cls = rank_classes(schedule, factor);
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
  const auto peers = peer_classes(schedule, cls, representative);
  const CostModel costs(scenario);
  const std::size_t n = schedule.ops.size(), classes = out.classes.size();

  // The latest readiness among the classes of each collective's instance, for class c.
  const auto holds = [&](std::size_t c) {
    std::vector<TimeNs> until(n, 0);
    for (std::size_t o = 0; o < n; ++o) {
      const Op& op = schedule.ops[o];
      if (!is_collective(op.kind) || op.comm == kNone) continue;
      for (std::size_t d : peers[c][static_cast<std::size_t>(op.comm)])
        until[o] = std::max(until[o], out.classes[d].result.ops[o].ready);
    }
    return until;
  };

  std::vector<std::vector<TimeNs>> not_before(classes);
  while (true) {
    if (++out.replays > kMaxReplays)
      throw Error(fmt::format("the ranks' replays did not settle in {} rounds", kMaxReplays));
    for (std::size_t c = 0; c < classes; ++c) {
      SimOptions o = options;
      o.allocator = scenario.allocator;
      o.gpu_time_factor = out.classes[c].gpu_time_factor;
      o.not_before = not_before[c];
      out.classes[c].result = simulate(schedule, costs, o);
      if (out.replays == 1)
        out.classes[c].alone_step_time =
            analysis::summarize(out.classes[c].result.timeline, false).step_time;
    }
    if (classes == 1) break;  // nobody to wait for
    bool moved = false;
    for (std::size_t c = 0; c < classes; ++c) {
      std::vector<TimeNs> next = holds(c);
      if (not_before[c].empty()
              ? std::any_of(next.begin(), next.end(), [](TimeNs t) { return t > 0; })
              : next != not_before[c])
        moved = true;
      not_before[c] = std::move(next);
    }
    if (!moved) break;
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
      TimeNs earliest = rec.ready;
      for (std::size_t d : peers[c][static_cast<std::size_t>(op.comm)])
        earliest = std::min(earliest, out.classes[d].result.ops[o].ready);
      if (earliest < rec.ready && rec.ready == rec.start) ++rc.arrived_last;
    }
    if (rc.arrived_last > out.classes[out.straggler].arrived_last) out.straggler = c;
  }
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
