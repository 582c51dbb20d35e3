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

// The share of `sorted` above `x`.
double share_above(const std::vector<double>& sorted, double x) {
  const auto above = sorted.end() - std::upper_bound(sorted.begin(), sorted.end(), x);
  return static_cast<double>(above) / static_cast<double>(sorted.size());
}

// The value of `by_kind` (keyed by part and schedule size) for `c`'s part whose schedule size is
// nearest `c`'s (by the distance of their logarithms; the later of equals), among those `usable`
// accepts; nullptr when none is.
template <typename Map, typename Usable>
const typename Map::mapped_type* nearest_of_part(const Map& by_kind, const ComputeClass& c,
                                                 Usable usable) {
  const auto log_of = [](std::int64_t x) {
    return std::log(static_cast<double>(std::max<std::int64_t>(1, x)));
  };
  const typename Map::mapped_type* best = nullptr;
  double distance = std::numeric_limits<double>::infinity();
  for (const auto& [key, value] : by_kind) {
    if (key.first != c.part || !usable(value)) continue;
    const double d = std::abs(log_of(key.second) - log_of(c.ops));
    if (d <= distance) best = &value, distance = d;
  }
  return best;
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
  groups += other.groups;
}

void WorkEstimate::Record::add(const Record& other) {
  total.add(other.total);
  if (waves.size() < other.waves.size()) waves.resize(other.waves.size());
  for (std::size_t i = 0; i < other.waves.size(); ++i) waves[i].add(other.waves[i]);
}

void WorkEstimate::Shares::add(const Shares& other) {
  blind.add(other.blind);
  reached.add(other.reached);
}

void StepCosts::Measured::add(Step step, double secs, double n) {
  seconds[static_cast<std::size_t>(step)] += secs;
  units[static_cast<std::size_t>(step)] += n;
}

double StepCosts::Measured::per_unit(Step step) const {
  const auto s = static_cast<std::size_t>(step);
  return units[s] > 0 ? seconds[s] / units[s] : 0.0;
}

void StepCosts::add(Step step, std::size_t part, double seconds, std::int64_t ops) {
  const double n = step == Step::read ? 1.0 : static_cast<double>(ops);
  all_.add(step, seconds, n);
  by_part_[part].add(step, seconds, n);
}

double StepCosts::seconds(Step step, std::size_t part, std::int64_t ops) const {
  const double n = step == Step::read ? 1.0 : static_cast<double>(ops);
  if (const auto p = by_part_.find(part); p != by_part_.end() && p->second.per_unit(step) > 0)
    return p->second.per_unit(step) * n;
  if (all_.per_unit(step) > 0) return all_.per_unit(step) * n;
  const double replayed = all_.per_unit(Step::replayed);
  return kPrior[static_cast<std::size_t>(step)] * (replayed > 0 ? replayed : lowering_) *
         static_cast<double>(ops);
}

void WorkEstimate::wave_done(const ComputeClass& cls, const WaveCounts& wave) {
  const auto n = [](std::size_t count) { return static_cast<double>(count); };
  const Visited counts{n(wave.members),
                       n(wave.read),
                       n(wave.lowered),
                       n(wave.beyond),
                       cls.floor_share * n(wave.members),
                       n(wave.groups)};
  visiting_.total.add(counts);
  visiting_.waves.push_back(counts);
  visiting_blind_ = visiting_blind_ || !wave.reach_known;
}

void WorkEstimate::floor_seen(const ComputeClass& cls, TimeNs floor) {
  if (cls.bound > 0)
    ratios_[cls.part].lowered.push_back(static_cast<double>(floor) /
                                        static_cast<double>(cls.bound));
}

void WorkEstimate::fit_found(const ComputeClass& cls, TimeNs floor, Bytes peak_reserved,
                             std::size_t strategy, bool new_group) {
  const auto [it, added] = visiting_fits_.try_emplace(strategy, floor, peak_reserved);
  if (!added && floor < it->second.first) it->second = {floor, peak_reserved};
  if (new_group && cls.bound > 0)
    ratios_[cls.part].groups.push_back(static_cast<double>(floor) / static_cast<double>(cls.bound));
}

void WorkEstimate::class_done(const ComputeClass& cls) {
  Shares done;
  (visiting_blind_ ? done.blind : done.reached) = visiting_;
  visited_[{cls.part, cls.ops}].add(done);
  visited_all_.add(done);
  visiting_ = {};
  visiting_blind_ = false;
  if (!visiting_fits_.empty() && cls.bound > 0) yields_[{cls.part, cls.ops}] = visiting_yield(cls);
  visiting_fits_.clear();
  if (const auto r = ratios_.find(cls.part); r != ratios_.end()) {
    std::sort(r->second.lowered.begin(), r->second.lowered.end());
    std::sort(r->second.groups.begin(), r->second.groups.end());
  }
}

WorkEstimate::Yield WorkEstimate::visiting_yield(const ComputeClass& cls) const {
  Yield yield;
  for (const auto& [strategy, fastest] : visiting_fits_)
    yield.emplace_back(static_cast<double>(fastest.first) / static_cast<double>(cls.bound),
                       fastest.second);
  std::sort(yield.begin(), yield.end());
  yield.resize(std::min(yield.size(), options_.top));
  return yield;
}

void WorkEstimate::group_timed(TimeNs step, TimeNs floor) {
  if (floor > 0) step_over_floor_.push_back(static_cast<double>(step) / static_cast<double>(floor));
}

// The finished class of `c`'s part nearest its schedule size visited blind or under a known reach
// (`reached`), as that way of visiting recorded it; nullptr: none of its part was visited so.
const WorkEstimate::Record* WorkEstimate::nearest_visited(const ComputeClass& c,
                                                          bool reached) const {
  const Shares* v = nearest_of_part(
      visited_, c, [&](const Shares& w) { return w.of(reached).total.members > 0; });
  return v ? &v->of(reached) : nullptr;
}

// The finished classes most like `c`: of its part and schedule size, else of its part and the
// nearest size, else all, else the class being visited; of each, what its waves under a known
// reach did, else what the others did.
const WorkEstimate::Record& WorkEstimate::most_like(const ComputeClass& c) const {
  for (const bool reached : {true, false})
    if (const Record* r = nearest_visited(c, reached)) return *r;
  for (const bool reached : {true, false})
    if (visited_all_.of(reached).total.members > 0) return visited_all_.of(reached);
  return visiting_;
}

// What the finished class of `c`'s part nearest its schedule size yielded (nullptr: none of its
// part has).
const WorkEstimate::Yield* WorkEstimate::yield_like(const ComputeClass& c) const {
  return nearest_of_part(yields_, c, [](const Yield&) { return true; });
}

double WorkEstimate::class_seconds(const ComputeClass& c, std::size_t members, double reach,
                                   std::size_t from_wave) const {
  // What the class most like it did; for the rest of the class being visited (`from_wave` > 0),
  // in its waves from `from_wave` on, from a class visited as this one is (blind or under a known
  // reach: their deeper waves differ most). Its own first waves, the most expensive, are no
  // guide to the rest (405B plan: they say six times what the rest takes).
  Visited v = most_like(c).total;
  if (const Record* like = from_wave > 0 ? nearest_visited(c, !visiting_blind_) : nullptr;
      like && from_wave < like->waves.size()) {
    v = {};
    for (std::size_t i = from_wave; i < like->waves.size(); ++i) v.add(like->waves[i]);
  }
  const double read_share = v.members > 0 ? v.read / v.members : 1.0;
  const double lowered_scale = v.expected > 0 ? v.lowered / v.expected : 1.0;
  const double lowered_share = std::min(read_share, c.floor_share * lowered_scale);
  // Of its lowered members, those beyond the reach; of its timing groups, those within it: as
  // the floors over their bounds seen in its part say, else as the class most like it had.
  const auto r = ratios_.find(c.part);
  const double scale = c.bound > 0 ? reach / static_cast<double>(c.bound) : 0;
  double beyond_share = v.lowered > 0 ? v.beyond / v.lowered : 0.0;
  if (r != ratios_.end() && !r->second.lowered.empty() && c.bound > 0)
    beyond_share = share_above(r->second.lowered, scale);
  double timed_share = 1;
  if (r != ratios_.end() && !r->second.groups.empty() && c.bound > 0)
    timed_share = 1 - share_above(r->second.groups, scale);
  const double replayed_per_group =
      v.groups > 0 ? (v.lowered - v.beyond) / v.groups : std::numeric_limits<double>::infinity();
  const double n = static_cast<double>(members);
  const double replayed = n * lowered_share * (1 - beyond_share);
  return n * (read_share - lowered_share) * costs_.seconds(Step::read, c.part, c.ops) +
         n * lowered_share * beyond_share * costs_.seconds(Step::beyond, c.part, c.ops) +
         replayed * costs_.seconds(Step::replayed, c.part, c.ops) +
         replayed / replayed_per_group * timed_share * costs_.seconds(Step::timed, c.part, c.ops);
}

double WorkEstimate::ahead(std::size_t k, std::size_t unsettled,
                           const std::set<Prediction>& predictions,
                           const TimingQueue& to_time) const {
  std::set<Prediction> promised = predictions;
  const double above_floor = step_over_floor_.empty() ? 1.0 : median_of(step_over_floor_);
  for (const auto& [key, group] : to_time) {
    promised.emplace(scaled(key.first, above_floor), group.members.front().peak_reserved,
                     strategy_of(space_, group.members.front().index));
  }
  // The class being visited, while members of it are still to come, promises what of its yield
  // the strategies it has found so far do not beat: its first waves, the leanest in memory, fit
  // fewer strategies, and slower ones, than its deeper waves do.
  const std::size_t first_promising = unsettled > 0 ? k : k + 1;
  for (std::size_t j = first_promising; j < classes_.size(); ++j) {
    if (classes_[j].saved > options_.memory_budget) continue;
    const std::size_t first_id = space_.size() + j * options_.top;  // strategies of its own
    const Yield* yield = yield_like(classes_[j]);
    if (!yield) {
      if (j != k || visiting_fits_.empty())
        promised.emplace(classes_[j].bound, options_.memory_budget, first_id);
      continue;
    }
    const Yield found = j == k && classes_[j].bound > 0 ? visiting_yield(classes_[j]) : Yield{};
    std::size_t beaten = 0;  // of the yield's ranks so far, how many found strategies beat
    for (std::size_t i = 0; i < yield->size(); ++i) {
      while (beaten < found.size() && found[beaten].first <= (*yield)[i].first) ++beaten;
      if (beaten + i >= yield->size()) break;  // the yield's size of strategies already
      promised.emplace(scaled(classes_[j].bound, (*yield)[i].first * above_floor),
                       (*yield)[i].second, first_id + i);
    }
  }
  double reach = options_.exhaustive
                     ? std::numeric_limits<double>::infinity()
                     : top_entries_reach(promised, std::numeric_limits<TimeNs>::max(), options_.top,
                                         options_.entries);
  if (!options_.exhaustive && !std::isfinite(reach) && promised.size() >= options_.top) {
    // Too few entries form: the top's size of predictions, each its own entry, reach at least
    // this far.
    const auto kth = std::next(promised.begin(), static_cast<std::ptrdiff_t>(options_.top - 1));
    reach = static_cast<double>(std::get<0>(*kth)) * (1 + options_.entries.time);
  }
  // The class being visited (or next, between classes): none of it is visited once its bound is
  // beyond the reach (the search skips it and every class after it).
  double ahead = k < classes_.size() && static_cast<double>(classes_[k].bound) <= reach
                     ? class_seconds(classes_[k], unsettled, reach, visiting_.waves.size())
                     : 0.0;
  for (std::size_t j = k + 1; j < classes_.size(); ++j) {
    if (static_cast<double>(classes_[j].bound) > reach) break;  // visited by increasing bound
    if (classes_[j].saved > options_.memory_budget) continue;   // settled without lowering
    ahead += class_seconds(classes_[j], classes_[j].members.size(), reach);
  }
  for (const auto& [key, group] : to_time) {
    if (static_cast<double>(key.first) > reach) break;
    ahead += costs_.seconds(Step::timed, group.part, group.ops);
  }
  return ahead;
}

}  // namespace shardscope::sim::planning
