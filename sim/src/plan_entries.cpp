#include "shardscope/sim/plan_entries.hpp"

#include <algorithm>
#include <limits>

namespace shardscope::sim {

bool within_entry(const PlanMember& leader, const PlanMember& m, const EntryTolerance& t) {
  const double reach = static_cast<double>(leader.step_time) * (1.0 + t.time);
  if (static_cast<double>(m.step_time) > reach) return false;
  if (t.time == 0 && t.memory == 0) return m.peak_reserved == leader.peak_reserved;
  return m.peak_reserved >= leader.peak_reserved - t.memory;
}

std::vector<std::vector<std::size_t>> top_entries(const std::vector<PlanMember>& fitting,
                                                  std::size_t top, const EntryTolerance& t) {
  std::vector<std::vector<std::size_t>> entries;
  for (std::size_t i = 0; i < fitting.size(); ++i) {
    const PlanMember& m = fitting[i];
    if (entries.size() == top &&
        static_cast<double>(m.step_time) >
            static_cast<double>(fitting[entries.back().front()].step_time) * (1.0 + t.time))
      break;  // beyond the last entry's reach, so every entry's: nothing later joins one
    const auto entry = std::find_if(entries.begin(), entries.end(), [&](const auto& members) {
      return within_entry(fitting[members.front()], m, t);
    });
    if (entry != entries.end()) {
      entry->push_back(i);
    } else if (entries.size() < top) {
      entries.push_back({i});
    }
  }
  return entries;
}

double top_entries_reach(const std::set<std::pair<TimeNs, Bytes>>& predictions, TimeNs floor,
                         std::size_t top, const EntryTolerance& t) {
  std::vector<PlanMember> leaders;
  for (const auto& [time, reserved] : predictions) {
    if (time >= floor) break;  // a prediction still to come may sort before this one
    const PlanMember p{0, time, reserved};
    if (std::any_of(leaders.begin(), leaders.end(),
                    [&](const PlanMember& leader) { return within_entry(leader, p, t); }))
      continue;
    leaders.push_back(p);
    if (leaders.size() == top) return static_cast<double>(time) * (1.0 + t.time);
  }
  return std::numeric_limits<double>::infinity();
}

}  // namespace shardscope::sim
