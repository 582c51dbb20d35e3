#include "plan_progress.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardscope::sim::planning {

namespace {

double median_of(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2),
                   values.end());
  return values[values.size() / 2];
}

TimeNs scaled(TimeNs t, double factor) {
  return static_cast<TimeNs>(std::llround(static_cast<double>(t) * factor));
}

}  // namespace

void WorkEstimate::Visited::add(const Visited& other) {
  members += other.members;
  read += other.read;
  lowered += other.lowered;
  beyond += other.beyond;
  expected += other.expected;
}

std::int64_t WorkEstimate::wave_work(const ComputeClass& cls, const WaveCounts& wave) {
  const auto n = [](std::size_t count) { return static_cast<double>(count); };
  return std::llround(
      static_cast<double>(cls.ops) *
      (kReadWork * n(wave.read) + n(wave.lowered - wave.beyond) + kBeyondWork * n(wave.beyond)));
}

std::int64_t WorkEstimate::timing_work(const ToTime& group) {
  return std::llround(kTimingWork * static_cast<double>(group.ops));
}

void WorkEstimate::wave_done(const ComputeClass& cls, const WaveCounts& wave) {
  const auto n = [](std::size_t count) { return static_cast<double>(count); };
  visiting_.add({n(wave.members), n(wave.read), n(wave.lowered), n(wave.beyond),
                 cls.floor_share * n(wave.members)});
}

void WorkEstimate::class_done(const ComputeClass& cls, TimeNs best_floor) {
  visited_[{cls.part, cls.ops}].add(visiting_);
  visited_all_.add(visiting_);
  visiting_ = {};
  if (best_floor > 0 && cls.bound > 0)
    best_over_bound_.push_back(static_cast<double>(best_floor) / static_cast<double>(cls.bound));
}

void WorkEstimate::group_timed(TimeNs step, TimeNs floor) {
  if (floor > 0) step_over_floor_.push_back(static_cast<double>(step) / static_cast<double>(floor));
}

// The finished classes most like `c`: of its part and schedule size, else of its part and the
// nearest size, else all, else the class being visited.
const WorkEstimate::Visited& WorkEstimate::most_like(const ComputeClass& c) const {
  const Visited* best = nullptr;
  double distance = std::numeric_limits<double>::infinity();
  for (const auto& [key, v] : visited_) {
    if (key.first != c.part || v.members == 0) continue;
    const double d = std::abs(std::log(static_cast<double>(std::max<std::int64_t>(1, key.second))) -
                              std::log(static_cast<double>(std::max<std::int64_t>(1, c.ops))));
    if (d <= distance) best = &v, distance = d;
  }
  if (best) return *best;
  return visited_all_.members > 0 ? visited_all_ : visiting_;
}

double WorkEstimate::class_work(const ComputeClass& c, std::size_t members) const {
  const Visited& v = most_like(c);
  const double read_share = v.members > 0 ? v.read / v.members : 1.0;
  const double lowered_scale = v.expected > 0 ? v.lowered / v.expected : 1.0;
  const double beyond_share = v.lowered > 0 ? v.beyond / v.lowered : 0.0;
  return static_cast<double>(c.ops) * static_cast<double>(members) *
         (kReadWork * read_share +
          c.floor_share * lowered_scale * (1 - beyond_share * (1 - kBeyondWork)));
}

std::int64_t WorkEstimate::ahead(std::size_t k, std::size_t unsettled,
                                 const std::set<Prediction>& predictions,
                                 const TimingQueue& to_time) const {
  std::set<Prediction> promised = predictions;
  const double above_floor = step_over_floor_.empty() ? 1.0 : median_of(step_over_floor_);
  for (const auto& [key, group] : to_time) {
    promised.emplace(scaled(key.first, above_floor), group.members.front().peak_reserved,
                     strategy_of(space_, group.members.front().index));
  }
  const double gap = best_over_bound_.empty() ? 1.0 : median_of(best_over_bound_);
  for (std::size_t j = k + 1; j < classes_.size(); ++j) {
    if (classes_[j].saved > options_.memory_budget || classes_[j].floor_share == 0) continue;
    promised.emplace(scaled(classes_[j].bound, gap), options_.memory_budget, space_.size() + j);
  }
  const double reach = options_.exhaustive
                           ? std::numeric_limits<double>::infinity()
                           : top_entries_reach(promised, std::numeric_limits<TimeNs>::max(),
                                               options_.top, options_.entries);
  double ahead = class_work(classes_[k], unsettled);
  for (std::size_t j = k + 1; j < classes_.size(); ++j) {
    if (static_cast<double>(classes_[j].bound) > reach) break;  // visited by increasing bound
    if (classes_[j].saved > options_.memory_budget) continue;   // settled without lowering
    ahead += class_work(classes_[j], classes_[j].members.size());
  }
  for (const auto& [key, group] : to_time) {
    if (static_cast<double>(key.first) > reach) break;
    ahead += kTimingWork * static_cast<double>(group.ops);
  }
  return std::llround(ahead);
}

}  // namespace shardscope::sim::planning
