#include "shardscope/sim/plan_entries.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

namespace shardscope::sim {

namespace {

bool no_tolerance(const EntryTolerance& t) {
  return t.time == 0 && t.memory == 0;
}

double reach_of(const PlanMember& leader, const EntryTolerance& t) {
  return static_cast<double>(leader.step_time) * (1.0 + t.time);
}

// Whether member `m` of the entry led by `fastest` is a better choice for it than `chosen`: a
// tuning of `fastest`'s strategy more than the memory tolerance leaner than it, and leaner than
// `chosen`. The one rule behind entry_choice and the choice a Formation keeps as members come.
bool better_choice(const PlanMember& fastest, const PlanMember& chosen, const PlanMember& m,
                   const EntryTolerance& t) {
  return m.strategy == fastest.strategy && m.peak_reserved < fastest.peak_reserved - t.memory &&
         m.peak_reserved < chosen.peak_reserved;
}

// The entries as they form, one configuration at a time in ranking order: each entry's fastest
// and the member it stands for so far (entry_choice of its members so far), and the leanest
// ranked configuration (in any entry) of each strategy.
class Formation {
 public:
  explicit Formation(const EntryTolerance& t) : t_(t) {}

  std::size_t size() const { return fastest_.size(); }
  const PlanMember& last_fastest() const { return fastest_.back(); }

  // The entry `m` joins (a position, in order of forming), if any.
  std::optional<std::size_t> entry_of(const PlanMember& m) const {
    for (std::size_t e = 0; e < fastest_.size(); ++e)
      if (within_entry(fastest_[e], chosen_[e], m, t_)) return e;
    return std::nullopt;
  }

  // Whether `m`, in no entry, is a ranked configuration's strategy tuned worse: that one is
  // earlier (so no slower) and `m` is not more than the memory tolerance leaner.
  bool tuned_worse(const PlanMember& m) const {
    if (no_tolerance(t_)) return false;
    const auto it = leanest_.find(m.strategy);
    return it != leanest_.end() && m.peak_reserved >= it->second - t_.memory;
  }

  void join(std::size_t e, const PlanMember& m) {
    if (better_choice(fastest_[e], chosen_[e], m, t_)) chosen_[e] = m;
    rank(m);
  }
  void lead(const PlanMember& m) {
    fastest_.push_back(m);
    chosen_.push_back(m);
    rank(m);
  }

 private:
  void rank(const PlanMember& m) {
    const auto [it, added] = leanest_.emplace(m.strategy, m.peak_reserved);
    if (!added) it->second = std::min(it->second, m.peak_reserved);
  }

  const EntryTolerance& t_;
  std::vector<PlanMember> fastest_, chosen_;  // per entry
  std::map<std::size_t, Bytes> leanest_;
};

}  // namespace

bool ranks_before(const PlanMember& a, const PlanMember& b) {
  return std::tie(a.step_time, a.peak_reserved, a.strategy, a.index) <
         std::tie(b.step_time, b.peak_reserved, b.strategy, b.index);
}

bool within_entry(const PlanMember& fastest, const PlanMember& chosen, const PlanMember& m,
                  const EntryTolerance& t) {
  if (static_cast<double>(m.step_time) > reach_of(fastest, t)) return false;
  if (no_tolerance(t)) return m.peak_reserved == fastest.peak_reserved;
  return m.strategy == fastest.strategy || m.peak_reserved >= chosen.peak_reserved - t.memory;
}

std::vector<std::vector<std::size_t>> top_entries(const std::vector<PlanMember>& fitting,
                                                  std::size_t top, const EntryTolerance& t) {
  std::vector<std::vector<std::size_t>> entries;
  Formation formation(t);
  for (std::size_t i = 0; i < fitting.size(); ++i) {
    const PlanMember& m = fitting[i];
    if (entries.size() == top &&
        static_cast<double>(m.step_time) > reach_of(formation.last_fastest(), t))
      break;  // beyond the last entry's reach, so every entry's: nothing later joins one
    if (const auto e = formation.entry_of(m)) {
      entries[*e].push_back(i);
      formation.join(*e, m);
    } else if (entries.size() < top && !formation.tuned_worse(m)) {
      entries.push_back({i});
      formation.lead(m);
    }
  }
  return entries;
}

const PlanMember& entry_choice(const std::vector<PlanMember>& members, const EntryTolerance& t) {
  const PlanMember& fastest = members.front();
  const PlanMember* chosen = &fastest;
  for (const PlanMember& m : members)
    if (better_choice(fastest, *chosen, m, t)) chosen = &m;
  return *chosen;
}

double top_entries_reach(const std::set<Prediction>& predictions, TimeNs floor, std::size_t top,
                         const EntryTolerance& t) {
  Formation formation(t);
  for (const auto& [time, reserved, strategy] : predictions) {
    if (time >= floor) break;  // a prediction still to come may sort before this one
    const PlanMember p{0, time, reserved, strategy};
    if (const auto e = formation.entry_of(p)) {
      formation.join(*e, p);
    } else if (!formation.tuned_worse(p)) {
      formation.lead(p);
      if (formation.size() == top) return reach_of(p, t);
    }
  }
  return std::numeric_limits<double>::infinity();
}

}  // namespace shardscope::sim
