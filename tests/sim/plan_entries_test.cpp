// The planner's entries and the bound that keeps its pruned search exact (plan_entries.hpp), on
// synthetic predictions: closed-form cases, then properties over random sets.
#include "shardscope/sim/plan_entries.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

namespace shardscope::sim {
namespace {

const EntryTolerance kTolerance{0.005, kGiB};

std::vector<PlanMember> sorted(std::vector<PlanMember> m) {
  std::sort(m.begin(), m.end(), ranks_before);
  return m;
}

// Each configuration a strategy of its own, as where every one differs in more than tuning.
std::vector<PlanMember> own_strategies(std::vector<PlanMember> m) {
  for (PlanMember& p : m) p.strategy = p.index;
  return m;
}

std::set<Prediction> predictions(const std::vector<PlanMember>& m) {
  std::set<Prediction> out;
  for (const PlanMember& p : m) out.emplace(p.step_time, p.peak_reserved, p.strategy);
  return out;
}

// The entries as the configurations' indices.
std::vector<std::vector<std::size_t>> entry_indices(const std::vector<PlanMember>& fitting,
                                                    std::size_t top) {
  std::vector<std::vector<std::size_t>> out;
  for (const auto& entry : top_entries(fitting, top, kTolerance)) {
    auto& indices = out.emplace_back();
    for (std::size_t position : entry) indices.push_back(fitting[position].index);
  }
  return out;
}

TEST(PlanEntries, AConfigurationAsFastAndNoLeanerIsTheSameEntry) {
  // Strategies of their own. 1.000 s at 60 GiB leads. 1.004 s at 60 GiB is within 0.5 %: the
  // same entry; so is 1.004 s at 62 GiB: no faster and no leaner, a knob that only costs memory.
  // 1.004 s at 58.5 GiB is 1.5 GiB leaner: a trade-off with an entry of its own, which 1.006 s at
  // 59 GiB (beyond 0.5 % of the first, within the second's reach and not 1 GiB leaner than it)
  // joins. 1.020 s is beyond both.
  const auto fitting = sorted(own_strategies({{0, 1'000'000'000, 60 * kGiB},
                                              {1, 1'004'000'000, 60 * kGiB},
                                              {2, 1'004'000'000, 62 * kGiB},
                                              {3, 1'004'000'000, 117 * kGiB / 2},
                                              {4, 1'006'000'000, 59 * kGiB},
                                              {5, 1'020'000'000, 50 * kGiB}}));
  EXPECT_EQ(entry_indices(fitting, 5),
            (std::vector<std::vector<std::size_t>>{{0, 1, 2}, {3, 4}, {5}}));
  EXPECT_EQ(entry_indices(fitting, 1), (std::vector<std::vector<std::size_t>>{{0, 1, 2}}));
  // No tolerance: identical predictions only, heavier ones included.
  EXPECT_EQ(top_entries(fitting, 6, {0, 0}).size(), 6u);
  const PlanMember fastest{0, 1'000'000'000, 60 * kGiB};
  EXPECT_FALSE(within_entry(fastest, fastest, {1, 1'000'000'000, 61 * kGiB}, {0, 0}));
  EXPECT_TRUE(within_entry(fastest, fastest, {1, 1'000'000'000, 60 * kGiB}, {0, 0}));
}

TEST(PlanEntries, OneStrategyTunedAnotherWayIsItsEntryOrNotRanked) {
  // Strategy 7 leads at 1.000 s, 60 GiB. Tuned another way at 1.003 s it takes 58 GiB, 2 GiB
  // leaner at the same speed: a member, the entry's leanest. At 1.008 s and 61 GiB it is slower
  // and no leaner than that: tuned worse, not ranked. At 1.010 s and 55 GiB it is a trade-off of
  // its own. Strategy 8 at 1.020 s and 70 GiB is slower and heavier, but another way to train.
  const std::vector<PlanMember> fitting = sorted({{0, 1'000'000'000, 60 * kGiB, 7},
                                                  {1, 1'003'000'000, 58 * kGiB, 7},
                                                  {2, 1'008'000'000, 61 * kGiB, 7},
                                                  {3, 1'010'000'000, 55 * kGiB, 7},
                                                  {4, 1'020'000'000, 70 * kGiB, 8}});
  EXPECT_EQ(entry_indices(fitting, 5), (std::vector<std::vector<std::size_t>>{{0, 1}, {3}, {4}}));
  // Another strategy 1.5 GiB leaner than the fastest but within 1 GiB of the entry's choice is
  // the same entry: the row stands for 58 GiB.
  const std::vector<PlanMember> with_other = sorted(
      {fitting[0], fitting[1], {5, 1'004'000'000, 117 * kGiB / 2, 9}, fitting[3], fitting[4]});
  EXPECT_EQ(entry_indices(with_other, 5),
            (std::vector<std::vector<std::size_t>>{{0, 1, 5}, {3}, {4}}));
  // The first entry stands for its 2 GiB leaner tuning; a 0.5 GiB saving would not be worth it.
  EXPECT_EQ(entry_choice({fitting[0], fitting[1]}, kTolerance).index, 1u);
  EXPECT_EQ(entry_choice({fitting[0], {1, 1'003'000'000, 119 * kGiB / 2, 7}}, kTolerance).index,
            0u);
  EXPECT_EQ(entry_choice({fitting[0], {1, 1'003'000'000, 50 * kGiB, 9}}, kTolerance).index, 0u);
  // Without a tolerance nothing is dropped: every prediction is its own entry.
  EXPECT_EQ(top_entries(fitting, 5, {0, 0}).size(), 5u);
  // The reach counts only the leaders: the worse tuning at 1.008 s is none.
  const auto found = predictions(fitting);
  EXPECT_DOUBLE_EQ(top_entries_reach(found, 2'000'000'000, 2, kTolerance), 1'010'000'000.0 * 1.005);
  EXPECT_DOUBLE_EQ(top_entries_reach(found, 2'000'000'000, 3, kTolerance), 1'020'000'000.0 * 1.005);
}

TEST(PlanEntries, TheReachIsTheKthLeadersOnceThePredictionsBeforeItAreFinal) {
  const auto found = predictions(own_strategies({{0, 1'000'000'000, 60 * kGiB},
                                                 {1, 1'004'000'000, 62 * kGiB},
                                                 {2, 1'004'000'000, 58 * kGiB},
                                                 {3, 1'010'000'000, 60 * kGiB}}));
  constexpr TimeNs kLater = 2'000'000'000;  // nothing faster is still to come
  // Leaders: 1.000 s; 1.004 s at 58 GiB (2 GiB leaner than the first, where 62 GiB joins it);
  // 1.010 s (beyond 1.005 s).
  EXPECT_DOUBLE_EQ(top_entries_reach(found, kLater, 1, kTolerance), 1'005'000'000.0);
  EXPECT_DOUBLE_EQ(top_entries_reach(found, kLater, 2, kTolerance), 1'004'000'000.0 * 1.005);
  EXPECT_DOUBLE_EQ(top_entries_reach(found, kLater, 3, kTolerance), 1'010'000'000.0 * 1.005);
  EXPECT_EQ(top_entries_reach(found, kLater, 4, kTolerance),
            std::numeric_limits<double>::infinity());
  // A prediction at 1.002 s may still come (at 57 GiB it would lead the second entry, and the
  // 58 GiB one would join it): the second leader is not final yet.
  EXPECT_EQ(top_entries_reach(found, 1'002'000'000, 2, kTolerance),
            std::numeric_limits<double>::infinity());
}

// Random predictions clustered so that entries gather several and their tolerances overlap.
std::vector<PlanMember> random_predictions(std::mt19937_64& rng, std::size_t n) {
  std::uniform_int_distribution<TimeNs> time(1'000'000'000, 1'060'000'000);
  std::uniform_int_distribution<Bytes> memory(40, 46);
  std::uniform_int_distribution<std::size_t> strategy(0, 5);  // a few: tunings of one another
  std::vector<PlanMember> out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back({i, time(rng), memory(rng) * kGiB / 2, strategy(rng)});
  return out;
}

TEST(PlanEntries, ASearchThatStopsAtTheReachFindsTheTopEntriesWithEveryMember) {
  // The planner's search on random predictions: configurations in classes, each class with a
  // lower bound on its members' step times, visited in the order of their bounds; before a class
  // the search stops if its bound is beyond the reach of what was found. The top entries of what
  // it found, members included, are those of the whole set.
  std::mt19937_64 rng(7);
  int stopped_early = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const auto all = random_predictions(rng, 80);
    const std::size_t top = 1 + static_cast<std::size_t>(trial % 6);
    std::uniform_int_distribution<std::size_t> pick(0, 11);
    std::uniform_int_distribution<TimeNs> slack(0, 3'000'000);
    std::vector<std::vector<PlanMember>> classes(12);
    for (const PlanMember& m : all) classes[pick(rng)].push_back(m);
    std::vector<std::pair<TimeNs, std::size_t>> bounds;  // (lower bound, class)
    for (std::size_t c = 0; c < classes.size(); ++c) {
      if (classes[c].empty()) continue;
      TimeNs fastest = std::numeric_limits<TimeNs>::max();
      for (const PlanMember& m : classes[c]) fastest = std::min(fastest, m.step_time);
      bounds.emplace_back(fastest - slack(rng), c);
    }
    std::sort(bounds.begin(), bounds.end());
    std::vector<PlanMember> found;
    for (const auto& [bound, c] : bounds) {
      if (static_cast<double>(bound) >
          top_entries_reach(predictions(found), bound, top, kTolerance)) {
        ++stopped_early;
        break;
      }
      found.insert(found.end(), classes[c].begin(), classes[c].end());
    }
    ASSERT_EQ(entry_indices(sorted(found), top), entry_indices(sorted(all), top))
        << "trial " << trial << ", top " << top;
  }
  EXPECT_GT(stopped_early, 100);  // the reach does skip classes
}

}  // namespace
}  // namespace shardscope::sim
