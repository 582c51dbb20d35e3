// The planner against an exhaustive search of the same space, and the space it searches.
#include "shardscope/sim/planner.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/sim/plan_emit.hpp"

namespace shardscope::sim {
namespace {

const std::string kDefault = std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml";

Scenario base_scenario() {
  return load_scenario(kDefault);
}

// A few hundred configurations of Llama 3.1 8B on 8 GPUs: FSDP2 and FSDP1, four micro-batch
// splits, every checkpointing choice, and the knobs the fix leaves free.
PlanSpace small_space() {
  PlanInputs inputs;
  inputs.global_batch_tokens = 8192 * 8 * 8;  // 8 sequences per rank
  inputs.fixed = {{"training.loss", "fused"},
                  {"fsdp.reshard_after_forward", "true"},
                  {"fsdp.forward_prefetch_modules", "0"},
                  {"fsdp.separate_reduce_scatter_group", "false"},
                  {"fsdp.wrap.blocks_per_group", "1"},
                  {"fsdp.mixed_precision.reduce_dtype", "fp32"},
                  {"fsdp.forward_prefetch", "false"},
                  {"fsdp.limit_all_gathers", "true"},
                  {"allocator.expandable_segments", "false"},
                  {"training.iterations", "2"}};
  return default_plan_space(base_scenario(), inputs);
}

TEST(PlanSpace, IndicesRoundTripAndTheSizeIsTheProduct) {
  const PlanSpace space = small_space();
  std::size_t product_sum = 0;
  for (const auto& part : space.parts) {
    std::size_t n = 1;
    for (const auto& d : part.dimensions) n *= d.choices.size();
    product_sum += n;
  }
  EXPECT_EQ(space.size(), product_sum);
  for (std::size_t i = 0; i < space.size(); i += 7) EXPECT_EQ(encode(space, decode(space, i)), i);
  // The fixed loss is a narrowed dimension; iterations, which no dimension sets, is common.
  EXPECT_EQ(space.common.size(), 1u);
  EXPECT_EQ(space.common[0].first, "training.iterations");
}

TEST(PlanSpace, TheBatchDimensionSplitsTheFixedGlobalBatch) {
  const PlanSpace space = small_space();
  const auto& batch = space.parts[0].dimensions[0];
  ASSERT_EQ(batch.choices.size(), 4u);  // 1 × 8, 2 × 4, 4 × 2, 8 × 1
  for (const auto& c : batch.choices) {
    const int mb = std::stoi(c.settings[0].second), ga = std::stoi(c.settings[1].second);
    EXPECT_EQ(mb * ga, 8) << c.label;
  }
}

TEST(PlanSpace, RejectsWhatCannotBePlanned) {
  PlanInputs inputs;
  inputs.global_batch_tokens = 8192 * 3;  // 3 sequences on 8 ranks
  EXPECT_THROW(default_plan_space(base_scenario(), inputs), ValidationError);
  inputs = {};
  inputs.api = "fsdp3";
  EXPECT_THROW(default_plan_space(base_scenario(), inputs), ValidationError);
  inputs = {};
  inputs.fixed = {{"training.activation_checkpointing", "every_7"}};  // not a choice
  EXPECT_THROW(default_plan_space(base_scenario(), inputs), ValidationError);
}

// FSDP1 runs NO_SHARD in a world of one whatever it is asked (the loader clamps the same way), so
// a one-GPU plan offers that strategy alone rather than three names for one run.
TEST(PlanSpace, FSDP1OnOneGpuOffersNoShardAlone) {
  PlanInputs inputs;
  inputs.api = "fsdp1";
  inputs.global_batch_tokens = 8192 * 8;
  const PlanSpace space =
      default_plan_space(load_scenario(kDefault, {"cluster.gpus_per_node=1"}), inputs);
  ASSERT_EQ(space.parts.size(), 1u);
  const auto& dims = space.parts[0].dimensions;
  const auto sharding = std::find_if(dims.begin(), dims.end(),
                                     [](const PlanDimension& d) { return d.name == "sharding"; });
  ASSERT_NE(sharding, dims.end());
  ASSERT_EQ(sharding->choices.size(), 1u);
  EXPECT_EQ(sharding->choices[0].label, "NO_SHARD");
}

PlanOptions options_with(Bytes budget, bool exhaustive) {
  PlanOptions o;
  o.top = 5;
  o.memory_budget = budget;
  o.exhaustive = exhaustive;
  return o;
}

TEST(Planner, FindsExactlyTheTopOfAnExhaustiveSearchWhileSimulatingLess) {
  const PlanSpace space = small_space();
  const ConfigTree tree = load_config_file(kDefault);
  // A budget some configurations miss, so that the memory rules skip some.
  std::size_t skipped_by_memory = 0, skipped_by_bound = 0, skipped_by_floor = 0, screened = 0;
  for (Bytes budget : {Bytes{40} * kGiB, Bytes{70} * kGiB}) {
    const auto all = plan(tree, kDefault, space, options_with(budget, true));
    const auto fast = plan(tree, kDefault, space, options_with(budget, false));
    ASSERT_EQ(all.simulated, space.size());
    ASSERT_EQ(fast.ranked.size(), all.ranked.size());
    ASSERT_FALSE(all.ranked.empty());
    for (std::size_t i = 0; i < all.ranked.size(); ++i) {
      EXPECT_EQ(fast.ranked[i].index, all.ranked[i].index) << "rank " << i + 1;
      EXPECT_EQ(fast.ranked[i].summary.step_time, all.ranked[i].summary.step_time);
      EXPECT_LE(fast.ranked[i].summary.peak_reserved, budget);
    }
    EXPECT_EQ(
        fast.simulated + fast.skipped_by_bound + fast.skipped_by_memory + fast.screened_by_memory,
        space.size());
    EXPECT_LT(fast.simulated, all.simulated) << "budget " << format_bytes(budget);
    EXPECT_EQ(all.screened_by_memory, 0u);  // the exhaustive search simulates everything
    skipped_by_memory += fast.skipped_by_memory;
    screened += fast.screened_by_memory;
    skipped_by_bound += fast.skipped_by_bound;
    skipped_by_floor += fast.skipped_by_floor;
  }
  // The tight budget skips configurations above ones that missed it; the loose one skips the
  // fully checkpointed classes, whose recompute alone makes them slower than the best five.
  EXPECT_GT(skipped_by_memory, 0u);
  EXPECT_GT(skipped_by_bound, 0u);
  // Lowered schedules whose floor is beyond the reach the first entries timed form.
  EXPECT_GT(skipped_by_floor, 0u);
  // Replicating 8B's fp32 parameters and AdamW states on every GPU (FSDP2's shard size 1,
  // FSDP1's NO_SHARD) holds 12 bytes per parameter, 90 GiB, before the first op.
  EXPECT_GT(screened, 0u);
}

bool valid(const ConfigTree& base, const PlanSpace& space, std::size_t index) {
  try {
    read_scenario(configuration_tree(base, space, index), kDefault);
    return true;
  } catch (const ValidationError&) {
    return false;
  }
}

// Every configuration simulated and every fitting prediction ranked (with no tolerance, so that
// no configuration is dropped as a worse tuning of a ranked one).
PlanResult rank_everything(const ConfigTree& tree, const PlanSpace& space, Bytes budget) {
  PlanOptions o = options_with(budget, true);
  o.top = space.size();
  o.entries = {0, 0};
  return plan(tree, kDefault, space, o);
}

TEST(Planner, TheMemoryRulesHoldOnEveryConfigurationOfTheSpace) {
  // Exhaustively: every configuration below one that fits (one knob lower by the rules) fits.
  const PlanSpace space = small_space();
  const ConfigTree tree = load_config_file(kDefault);
  const auto all = rank_everything(tree, space, Bytes{40} * kGiB);
  std::vector<bool> fits(space.size(), false);
  for (const auto& p : all.ranked) {
    for (const PlanMember& member : p.members) fits[member.index] = true;
  }
  std::size_t checked = 0;
  for (std::size_t i = 0; i < space.size(); ++i) {
    if (!fits[i]) continue;
    const PlanConfig c = decode(space, i);
    const auto& dims = space.parts[c.part].dimensions;
    for (std::size_t d = 0; d < dims.size(); ++d) {
      if (dims[d].memory_at_least.empty()) continue;
      for (std::size_t j : dims[d].memory_at_least[c.choices[d]]) {
        PlanConfig lower = c;
        lower.choices[d] = j;
        const std::size_t li = encode(space, lower);
        // The lower configuration fits too, or its knobs do not combine at all.
        EXPECT_TRUE(fits[li] || !valid(tree, space, li))
            << "configuration " << i << " fits but " << li << " (" << dims[d].name << " "
            << dims[d].choices[j].label << ") does not";
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0u);
}

std::vector<std::size_t> member_indices(const PlannedConfig& p) {
  std::vector<std::size_t> out;
  for (const PlanMember& m : p.members) out.push_back(m.index);
  return out;
}

TEST(Planner, ConfigurationsWithOnePredictionRankAsOne) {
  // With no tolerance (0, 0), exhaustively: the ranking's entries are the distinct (step time,
  // peak reserved) pairs of the fitting configurations, fastest and then leanest first, each with
  // every configuration that has it; the planner's pruned search finds the same entries with the
  // same members.
  const PlanSpace space = small_space();
  const ConfigTree tree = load_config_file(kDefault);
  PlanOptions exact = options_with(Bytes{70} * kGiB, true);
  exact.entries = {0, 0};
  PlanOptions everything = exact;
  everything.top = space.size();
  const auto all = plan(tree, kDefault, space, everything);
  std::size_t members = 0, folded = 0;
  for (std::size_t i = 0; i < all.ranked.size(); ++i) {
    const auto& p = all.ranked[i];
    members += p.members.size();
    ASSERT_FALSE(p.members.empty());
    EXPECT_EQ(p.members.front().index, p.index);
    for (const PlanMember& m : p.members) {
      EXPECT_EQ(m.step_time, p.summary.step_time);
      EXPECT_EQ(m.peak_reserved, p.summary.peak_reserved.value());
    }
    if (p.members.size() > 1) {
      ++folded;
      EXPECT_FALSE(p.no_effect.empty()) << "rank " << i + 1;
    }
    if (i == 0) continue;
    const auto& a = all.ranked[i - 1].summary;
    const auto& b = p.summary;
    EXPECT_TRUE(a.step_time < b.step_time ||
                (a.step_time == b.step_time && a.peak_reserved < b.peak_reserved))
        << "rank " << i + 1;
  }
  EXPECT_EQ(members, all.fitting);
  EXPECT_GT(folded, 0u);  // FSDP2: an explicit backward prefetch of 1 is the implicit one

  exact.exhaustive = false;
  const auto fast = plan(tree, kDefault, space, exact);
  ASSERT_EQ(fast.ranked.size(), 5u);
  for (std::size_t i = 0; i < fast.ranked.size(); ++i)
    EXPECT_EQ(member_indices(fast.ranked[i]), member_indices(all.ranked[i])) << "rank " << i + 1;
}

TEST(Planner, AnEntryHoldsWhatIsWithinItsToleranceAndTheTopEntriesAreDistinct) {
  // The default tolerance (0.5 % step time, 1 GiB reserved), exhaustively: every fitting
  // configuration is in exactly one entry, within its leader's tolerance and in no earlier
  // entry's, or is not ranked because a configuration of its own strategy ranks before it and is
  // not 1 GiB heavier; no leader is within an earlier one's; and the pruned search gives the same
  // top five with the same members.
  const PlanSpace space = small_space();
  const ConfigTree tree = load_config_file(kDefault);
  PlanOptions o = options_with(Bytes{70} * kGiB, true);
  PlanOptions everything = o;
  everything.top = space.size();
  const auto all = plan(tree, kDefault, space, everything);
  std::map<std::size_t, PlanMember> ranked;  // by index
  std::size_t widened = 0;
  for (std::size_t i = 0; i < all.ranked.size(); ++i) {
    const auto& p = all.ranked[i];
    const PlanMember& leader = p.members.front();
    EXPECT_EQ(p.index, entry_choice(p.members, o.entries).index);
    EXPECT_EQ(p.summary.peak_reserved.value(), entry_choice(p.members, o.entries).peak_reserved);
    for (const PlanMember& m : p.members) {
      EXPECT_TRUE(ranked.emplace(m.index, m).second) << "configuration " << m.index << " twice";
      EXPECT_EQ(m.strategy, strategy_of(space, m.index));
      const PlanMember& chosen = entry_choice(p.members, o.entries);
      EXPECT_TRUE(within_entry(leader, chosen, m, o.entries))
          << "rank " << i + 1 << " member " << m.index;
      // Not within an earlier entry as it stood when `m` came (its choice, if that came first).
      for (std::size_t earlier = 0; earlier < i; ++earlier) {
        const auto& before = all.ranked[earlier].members;
        const PlanMember& then = ranks_before(entry_choice(before, o.entries), m)
                                     ? entry_choice(before, o.entries)
                                     : before.front();
        EXPECT_FALSE(within_entry(before.front(), then, m, o.entries))
            << "member " << m.index << " of #" << i + 1 << " belongs to #" << earlier + 1;
      }
      widened += m.step_time != leader.step_time ? 1 : 0;
    }
  }
  EXPECT_GT(widened, 0u);  // the tolerance gathers predictions that differ
  // The ones not ranked: each a worse tuning of a ranked configuration of its strategy.
  std::size_t tuned_worse = 0;
  for (const auto& p : rank_everything(tree, space, Bytes{70} * kGiB).ranked) {
    for (const PlanMember& m : p.members) {
      if (ranked.count(m.index)) continue;
      ++tuned_worse;
      EXPECT_TRUE(std::any_of(ranked.begin(), ranked.end(),
                              [&](const auto& r) {
                                const PlanMember& x = r.second;
                                return x.strategy == m.strategy && ranks_before(x, m) &&
                                       m.peak_reserved >= x.peak_reserved - o.entries.memory;
                              }))
          << "configuration " << m.index << " is neither ranked nor a worse tuning";
    }
  }
  EXPECT_GT(tuned_worse, 0u);

  const auto fast = plan(tree, kDefault, space, options_with(Bytes{70} * kGiB, false));
  ASSERT_EQ(fast.ranked.size(), 5u);
  for (std::size_t i = 0; i < fast.ranked.size(); ++i)
    EXPECT_EQ(member_indices(fast.ranked[i]), member_indices(all.ranked[i])) << "rank " << i + 1;
}

TEST(PlanSpace, ConfigurationsThatDifferOnlyInSchedulingAreOneStrategy) {
  // Tuning dimensions change how FSDP schedules the same training; everything else (the split,
  // checkpointing, loss, dtypes, sharding, resharding, offload) is the strategy.
  PlanInputs inputs;
  inputs.api = "either";
  const PlanSpace space = default_plan_space(base_scenario(), inputs);
  std::set<std::string> tuning, strategy;
  for (const auto& part : space.parts)
    for (const auto& d : part.dimensions) (d.tuning ? tuning : strategy).insert(d.name);
  EXPECT_EQ(tuning,
            (std::set<std::string>{"backward prefetch", "backward_prefetch", "blocks per group",
                                   "expandable segments", "forward prefetch", "forward_prefetch",
                                   "limit_all_gathers", "separate reduce-scatter group"}));
  for (const char* name : {"micro-batch × accumulation", "checkpointing", "loss", "sharding",
                           "reshard_after_forward", "CPU offload", "reduce dtype"})
    EXPECT_TRUE(strategy.count(name)) << name;
  // One knob of each kind changed on the first configuration of the FSDP2 part.
  const auto& dims = space.parts[0].dimensions;
  const PlanConfig first = decode(space, 0);
  for (std::size_t d = 0; d < dims.size(); ++d) {
    PlanConfig other = first;
    other.choices[d] = dims[d].choices.size() - 1;
    if (other.choices[d] == first.choices[d]) continue;
    EXPECT_EQ(strategy_of(space, encode(space, other)) == strategy_of(space, 0), dims[d].tuning)
        << dims[d].name;
  }
}

TEST(PlanSpace, AllowNarrowsASearchedKnobToSeveralValues) {
  PlanInputs inputs;
  inputs.allowed = {{"training.activation_checkpointing", {"none", "selective_op"}},
                    {"fsdp.api", {"fsdp2"}}};
  const PlanSpace space = default_plan_space(base_scenario(), inputs);
  ASSERT_EQ(space.parts.size(), 1u);
  const auto& checkpointing = space.parts[0].dimensions[1];
  ASSERT_EQ(checkpointing.choices.size(), 2u);
  EXPECT_EQ(checkpointing.choices[0].label, "selective_op");
  EXPECT_EQ(checkpointing.choices[1].label, "none");
  // none never needs less memory than selective_op: the rule survives the narrowing.
  EXPECT_EQ(checkpointing.memory_at_least[1], std::vector<std::size_t>{0});
  inputs.allowed = {{"training.iterations", {"2", "3"}}};  // no dimension searches it
  EXPECT_THROW(default_plan_space(base_scenario(), inputs), ValidationError);
}

TEST(PlanSpace, AllowSearchesAKnobOfHowTheStepRunsThatNoDimensionSearches) {
  PlanInputs inputs;
  inputs.allowed = {{"fsdp.comm_buffer_pool", {"caching_allocator", "process_group"}}};
  const PlanSpace space = default_plan_space(base_scenario(), inputs);
  ASSERT_EQ(space.parts.size(), 2u);  // FSDP2 gains the dimension; FSDP1 has no such knob
  const PlanSpace without = default_plan_space(base_scenario(), {});
  EXPECT_EQ(space.parts[0].size(), 2 * without.parts[0].size());
  EXPECT_EQ(space.parts[1].size(), without.parts[1].size());
  const auto& dims = space.parts[0].dimensions;
  const auto pool = std::find_if(dims.begin(), dims.end(), [](const PlanDimension& d) {
    return d.name == "fsdp.comm_buffer_pool";
  });
  ASSERT_NE(pool, dims.end());
  EXPECT_TRUE(pool->compute);  // each value its own class: the bound stays exact
  // Keys that say what the job is stay fixed: the plan compares ways to run one job.
  for (const auto& key : {"training.seq_len", "model.layers", "cluster.nodes"}) {
    inputs.allowed = {{key, {"2", "4"}}};
    EXPECT_THROW(default_plan_space(base_scenario(), inputs), ValidationError) << key;
  }
  // torchtitan cannot say it: planning for --emit torchtitan narrows it back to the default.
  inputs.allowed = {{"fsdp.comm_buffer_pool", {"caching_allocator", "process_group"}}};
  for (auto& constraint : emit_constraints(EmitTarget::torchtitan))
    inputs.allowed.push_back(constraint);
  const PlanSpace titan = default_plan_space(base_scenario(), inputs);
  ASSERT_EQ(titan.parts.size(), 1u);
  const auto& titan_dims = titan.parts[0].dimensions;
  const auto titan_pool =
      std::find_if(titan_dims.begin(), titan_dims.end(),
                   [&pool](const PlanDimension& d) { return d.name == pool->name; });
  ASSERT_NE(titan_pool, titan_dims.end());
  ASSERT_EQ(titan_pool->choices.size(), 1u);
  EXPECT_EQ(titan_pool->choices[0].label, "caching_allocator");
  // A key of the other API only: no part to add it to.
  inputs.api = "fsdp1";
  inputs.allowed = {{"fsdp.comm_buffer_pool", {"caching_allocator", "process_group"}}};
  EXPECT_THROW(default_plan_space(base_scenario(), inputs), ValidationError);
}

TEST(Planner, AnAllowedKnobIsSearchedExactlyAndThePoolChangesMemoryNotTime) {
  PlanInputs inputs;
  inputs.global_batch_tokens = 8192 * 8 * 8;
  inputs.api = "fsdp2";
  inputs.fixed = {{"training.micro_batch", "1"},
                  {"training.loss", "fused"},
                  {"fsdp.backward_prefetch_modules", "1"},
                  {"fsdp.cpu_offload.params", "false"},
                  {"fsdp.mixed_precision.param_dtype", "bf16"},
                  {"fsdp.mixed_precision.reduce_dtype", "fp32"},
                  {"fsdp.forward_prefetch_modules", "0"},
                  {"fsdp.separate_reduce_scatter_group", "false"},
                  {"fsdp.wrap.blocks_per_group", "1"},
                  {"allocator.expandable_segments", "false"},
                  {"training.iterations", "2"}};
  inputs.allowed = {{"training.activation_checkpointing", {"full", "selective_op"}},
                    {"fsdp.comm_buffer_pool", {"caching_allocator", "process_group"}}};
  const PlanSpace space = default_plan_space(base_scenario(), inputs);
  ASSERT_EQ(space.size(), 2u * 2 * 4 * 2);  // checkpointing, pool, sharding, reshard_after_forward
  const ConfigTree tree = load_config_file(kDefault);
  const auto all = rank_everything(tree, space, Bytes{70} * kGiB);
  ASSERT_EQ(all.simulated, space.size());
  // Each configuration with the process group's pool against its twin with the caching
  // allocator: the same step time (registered buffers' speed is not modelled, docs/semantics.md),
  // a different peak reserved somewhere (the pool has segments of its own).
  std::size_t twins = 0, memory_differs = 0;
  for (const auto& a : all.ranked) {
    for (const auto& m : a.members) {
      PlanConfig c = decode(space, m.index);
      const std::string text = configuration_text(space, c);
      if (text.find("fsdp.comm_buffer_pool=process_group") == std::string::npos) continue;
      for (const auto& b : all.ranked) {
        for (const auto& n : b.members) {
          PlanConfig d = decode(space, n.index);
          std::string twin = text;
          twin.replace(twin.find("process_group"), 13, "caching_allocator");
          if (configuration_text(space, d) != twin) continue;
          ++twins;
          EXPECT_EQ(m.step_time, n.step_time) << text;
          memory_differs += m.peak_reserved != n.peak_reserved;
        }
      }
    }
  }
  EXPECT_GT(twins, 0u);
  EXPECT_GT(memory_differs, 0u);
  PlanOptions o = options_with(Bytes{70} * kGiB, false);
  o.top = 3;
  const auto fast = plan(tree, kDefault, space, o);
  o.exhaustive = true;
  const auto exhaustive = plan(tree, kDefault, space, o);
  ASSERT_EQ(fast.ranked.size(), exhaustive.ranked.size());
  for (std::size_t i = 0; i < fast.ranked.size(); ++i)
    EXPECT_EQ(member_indices(fast.ranked[i]), member_indices(exhaustive.ranked[i]))
        << "rank " << i + 1;
}

TEST(Planner, ConfigurationsThatDifferOnlyInTheAllocatorShareAStepTimeAndTheSearchStaysExact) {
  // Expandable segments change only the caching allocator's decisions: the search lowers and
  // times one of each pair and replays the memory of both. CPU offloading and HSDP give step-time
  // floors well above their class's bound, which the search skips by.
  PlanInputs inputs;
  inputs.global_batch_tokens = 8192 * 8 * 4;
  inputs.fixed = {{"training.loss", "fused"},
                  {"fsdp.reshard_after_forward", "true"},
                  {"fsdp.forward_prefetch_modules", "0"},
                  {"fsdp.separate_reduce_scatter_group", "false"},
                  {"fsdp.wrap.blocks_per_group", "1"},
                  {"fsdp.mixed_precision.param_dtype", "bf16"},
                  {"fsdp.forward_prefetch", "false"},
                  {"fsdp.limit_all_gathers", "true"},
                  {"training.iterations", "2"}};
  const PlanSpace space = default_plan_space(base_scenario(), inputs);
  const ConfigTree tree = load_config_file(kDefault);
  const auto all = rank_everything(tree, space, Bytes{70} * kGiB);
  std::map<std::size_t, TimeNs> step_of_timing;
  std::size_t shared = 0, memory_differs = 0;
  std::map<std::size_t, Bytes> reserved_of_timing;
  for (const auto& p : all.ranked) {
    for (const PlanMember& m : p.members) {
      const std::size_t t = timing_of(space, m.index);
      const auto [it, added] = step_of_timing.emplace(t, m.step_time);
      const auto [r, first] = reserved_of_timing.emplace(t, m.peak_reserved);
      if (added) continue;
      ++shared;
      EXPECT_EQ(m.step_time, it->second) << configuration_text(space, decode(space, m.index));
      memory_differs += m.peak_reserved != r->second;
    }
  }
  EXPECT_GT(shared, 50u);
  EXPECT_GT(memory_differs, 0u);
  for (Bytes budget : {Bytes{30} * kGiB, Bytes{70} * kGiB}) {
    PlanOptions o = options_with(budget, false);
    const auto fast = plan(tree, kDefault, space, o);
    o.exhaustive = true;
    const auto exhaustive = plan(tree, kDefault, space, o);
    ASSERT_EQ(fast.ranked.size(), exhaustive.ranked.size());
    ASSERT_FALSE(fast.ranked.empty());
    for (std::size_t i = 0; i < fast.ranked.size(); ++i) {
      EXPECT_EQ(member_indices(fast.ranked[i]), member_indices(exhaustive.ranked[i]))
          << "rank " << i + 1 << ", budget " << format_bytes(budget);
      EXPECT_EQ(fast.ranked[i].summary.step_time, exhaustive.ranked[i].summary.step_time);
    }
    EXPECT_LT(fast.simulated, exhaustive.simulated / 4);
  }
}

TEST(PlanSpace, ThePlanStartsFromTheFixedJobNotTheScenarioMesh) {
  // A scenario's own mesh does not make another cluster size unplannable: the plan decides it.
  const std::string hsdp =
      std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-405b-hsdp-128-nodes.yaml";
  ConfigTree tree = load_config_file(hsdp);
  tree["cluster"]["nodes"] = 64;
  EXPECT_THROW(read_scenario(tree, hsdp), ValidationError);  // replicate 2 × shard 512 ≠ 512
  PlanInputs inputs;
  inputs.api = "fsdp2";
  const PlanBase sized = plan_base(tree, hsdp, inputs);
  EXPECT_EQ(sized.scenario.cluster.world_size(), 512);
  // A fixed cluster size (or model, or sequence length) is the job the space is made for: the
  // shard sizes are those of 64 GPUs, and every configuration is valid for them.
  inputs.fixed = {{"cluster.nodes", "8"}, {"model.preset", "llama3.1-70b"}};
  inputs.global_batch_tokens = std::int64_t{8192} * 64;
  const PlanBase fixed = plan_base(load_config_file(kDefault), kDefault, inputs);
  EXPECT_EQ(fixed.scenario.cluster.world_size(), 64);
  EXPECT_EQ(fixed.scenario.model.block_count(), 80);
  const auto& dims = fixed.space.parts[0].dimensions;
  const auto sharding = std::find_if(dims.begin(), dims.end(),
                                     [](const PlanDimension& d) { return d.name == "sharding"; });
  ASSERT_NE(sharding, dims.end());
  EXPECT_EQ(sharding->choices.size(), 7u);  // 64, 32, ..., 1
  EXPECT_TRUE(valid(fixed.tree, fixed.space, 0));
  EXPECT_TRUE(valid(fixed.tree, fixed.space, fixed.space.size() - 1));
}

TEST(Planner, SameInputSameAnswerWhateverTheThreads) {
  const PlanSpace space = small_space();
  const ConfigTree tree = load_config_file(kDefault);
  PlanOptions one = options_with(Bytes{70} * kGiB, false);
  one.threads = 1;
  PlanOptions two = one;
  two.threads = 2;
  EXPECT_EQ(plan_json(space, plan(tree, kDefault, space, one)),
            plan_json(space, plan(tree, kDefault, space, two)));
}

TEST(Planner, ACancelInTheLastClassLeavesTheResultIncomplete) {
  // One compute class, so the cancel lands in the last one; it used to go unreported there.
  PlanInputs inputs;
  inputs.api = "fsdp2";
  inputs.fixed = {{"training.micro_batch", "2"},
                  {"training.activation_checkpointing", "selective_op"},
                  {"training.loss", "fused"}};
  const PlanSpace space = default_plan_space(base_scenario(), inputs);
  const ConfigTree tree = load_config_file(kDefault);
  std::atomic<bool> cancel{false};
  PlanOptions o = options_with(Bytes{70} * kGiB, false);
  o.cancel = &cancel;
  int reports = 0;  // the first after the bounds, the second after the first wave
  o.progress = [&](const PlanProgress&) {
    if (++reports == 2) cancel.store(true);
  };
  const auto cut = plan(tree, kDefault, space, o);
  EXPECT_TRUE(cut.cancelled);
  EXPECT_GE(reports, 2);  // the cancel landed in the search, not among the bounds
  EXPECT_LT(cut.simulated + cut.skipped_by_memory, space.size());
  o.cancel = nullptr;
  o.progress = nullptr;
  EXPECT_FALSE(plan(tree, kDefault, space, o).cancelled);
}

TEST(Planner, TheWorkIsKnownBeforeTheSearchAndTheProgressEndsAtIt) {
  const PlanSpace space = small_space();
  PlanOptions o = options_with(Bytes{70} * kGiB, false);
  std::optional<PlanWork> work;
  std::vector<PlanProgress> reports;
  o.on_work = [&](const PlanWork& w) {
    EXPECT_TRUE(reports.empty());  // before any lowering
    work = w;
  };
  o.progress = [&](const PlanProgress& at) { reports.push_back(at); };
  const auto result = plan(load_config_file(kDefault), kDefault, space, o);
  ASSERT_TRUE(work);
  EXPECT_EQ(work->configurations, space.size());
  EXPECT_EQ(work->classes, result.classes);
  // Every configuration and every class's bound costs at least one schedule's ops: 2 iterations
  // × 8 micro-batches at most × 34 groups × 24 ops (estimated_schedule_ops).
  EXPECT_EQ(work->largest_schedule, 2 * 8 * (32 + 2) * 24);
  EXPECT_GT(work->ops, static_cast<std::int64_t>(space.size() + work->classes));
  EXPECT_LE(work->ops,
            static_cast<std::int64_t>(space.size() + work->classes) * work->largest_schedule);
  ASSERT_FALSE(reports.empty());
  for (std::size_t i = 1; i < reports.size(); ++i) {
    EXPECT_GE(reports[i].seconds_done, reports[i - 1].seconds_done);
    EXPECT_GE(reports[i].settled, reports[i - 1].settled);
    EXPECT_TRUE(!reports[i - 1].estimated || reports[i].estimated);  // once estimated, it stays
  }
  for (const auto& r : reports) {
    EXPECT_LE(r.seconds_done, r.seconds_total);
    // An estimate rests on a class visited to its end, so none comes before the search has
    // settled a configuration (the bounds' reports carry the worst case).
    EXPECT_TRUE(!r.estimated || r.settled > 0);
  }
  EXPECT_FALSE(reports.front().estimated);
  // It ends at what ran, measured.
  const auto& last = reports.back();
  EXPECT_EQ(last.seconds_done, last.seconds_total);
  EXPECT_GT(last.seconds_done, 0);
  EXPECT_TRUE(last.estimated);
  EXPECT_EQ(last.settled, space.size());
  // How near the estimate is to the truth is timing, measured by bench/plan_bench
  // (time_left_error*), not asserted here.
}

TEST(Planner, ASearchWhereNoConfigurationIsValidSaysWhyInsteadOfNothingFits) {
  PlanInputs inputs;
  inputs.api = "fsdp2";
  inputs.fixed = {{"training.micro_batch", "2"},
                  {"training.activation_checkpointing", "selective_op"},
                  {"training.loss", "fused"},
                  {"model.kv_heads", "5"}};  // a valid key value that 32 heads do not divide by
  const PlanSpace space = default_plan_space(base_scenario(), inputs);
  const auto result =
      plan(load_config_file(kDefault), kDefault, space, options_with(Bytes{70} * kGiB, false));
  EXPECT_TRUE(result.ranked.empty());
  EXPECT_GT(result.simulated, 0u);
  EXPECT_EQ(result.invalid, result.simulated);
  ASSERT_TRUE(result.first_invalid);
  try {
    throw_if_none_valid(space, result);
    FAIL() << "expected a ValidationError";
  } catch (const ValidationError& e) {
    ASSERT_GE(e.problems().size(), 2u);
    EXPECT_NE(e.problems()[0].message.find("every one of the"), std::string::npos);
    EXPECT_EQ(e.problems()[1].key, "model.kv_heads");
  }
}

TEST(Planner, UnderASlowLinkTheP99RankingPrefersHsdpToTheFasterFullShard) {
  // Llama 3.1 8B on 2 nodes within 60 GiB, selective checkpointing: FULL_SHARD at micro-batch 2
  // is the fastest by step time (HSDP 2 × 8 holds a replica's worth more and fits only at
  // micro-batch 1, accumulating twice); with node 1's network links 4× as slow, every FULL_SHARD
  // all-gather and reduce-scatter crosses them, while HSDP crosses them only to all-reduce.
  PlanInputs inputs;
  inputs.global_batch_tokens = 8192 * 2 * 16;
  inputs.api = "fsdp2";
  inputs.fixed = {{"training.loss", "fused"},
                  {"fsdp.reshard_after_forward", "true"},
                  {"fsdp.forward_prefetch_modules", "0"},
                  {"fsdp.backward_prefetch_modules", "1"},
                  {"fsdp.separate_reduce_scatter_group", "false"},
                  {"fsdp.wrap.blocks_per_group", "1"},
                  {"fsdp.cpu_offload.params", "false"},
                  {"fsdp.mixed_precision.param_dtype", "bf16"},
                  {"fsdp.mixed_precision.reduce_dtype", "fp32"},
                  {"allocator.expandable_segments", "false"}};
  inputs.allowed = {{"training.activation_checkpointing", {"selective_op"}},
                    {"training.micro_batch", {"1", "2"}}};
  const ConfigTree tree =
      load_scenario_tree(kDefault, {"cluster.nodes=2", "variation.slow_links=1:4"});
  const PlanSpace space = default_plan_space(read_scenario(tree, kDefault), inputs);
  PlanOptions o = options_with(Bytes{60} * kGiB, false);
  o.top = 2;
  const auto sharding = [&](const PlannedConfig& p) {
    const std::string text = configuration_text(space, p.config);
    return text.find("sharding=FULL_SHARD") != std::string::npos ? "FULL_SHARD" : "HSDP";
  };
  const PlanResult by_step = plan(tree, kDefault, space, o);
  ASSERT_EQ(by_step.ranked.size(), 2U);
  EXPECT_STREQ(sharding(by_step.ranked[0]), "FULL_SHARD");
  EXPECT_FALSE(by_step.ranked[0].percentiles);
  o.objective = PlanObjective::p99;
  const PlanResult by_p99 = plan(tree, kDefault, space, o);
  ASSERT_EQ(by_p99.ranked.size(), 2U);
  EXPECT_STREQ(sharding(by_p99.ranked[0]), "HSDP");
  EXPECT_TRUE(by_p99.p99_exact);  // a slow link only slows: nothing outside could rank
  for (const PlannedConfig& p : by_p99.ranked) {
    ASSERT_TRUE(p.percentiles);
    EXPECT_GE(p.percentiles->p99, p.summary.step_time);  // the job is never faster than symmetric
  }
  EXPECT_LT(by_p99.ranked[0].percentiles->p99, by_p99.ranked[1].percentiles->p99);
  // The FULL_SHARD configuration the step time ranked first, now behind.
  EXPECT_GT(by_p99.ranked[0].summary.step_time, by_step.ranked[0].summary.step_time);
}

}  // namespace
}  // namespace shardscope::sim
