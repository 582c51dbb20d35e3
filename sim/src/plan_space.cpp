#include "shardscope/sim/plan_space.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "shardscope/core/error.hpp"
#include "shardscope/core/scenario_keys.hpp"

namespace shardscope::sim {

std::size_t PlanPart::size() const {
  std::size_t n = 1;
  for (const auto& d : dimensions) n *= d.choices.size();
  return dimensions.empty() ? 1 : n;
}

std::size_t PlanSpace::size() const {
  std::size_t n = 0;
  for (const auto& p : parts) n += p.size();
  return n;
}

PlanConfig decode(const PlanSpace& space, std::size_t index) {
  PlanConfig c;
  while (c.part + 1 < space.parts.size() && index >= space.parts[c.part].size()) {
    index -= space.parts[c.part].size();
    ++c.part;
  }
  const auto& dims = space.parts[c.part].dimensions;
  c.choices.resize(dims.size());
  for (std::size_t d = dims.size(); d-- > 0;) {
    c.choices[d] = index % dims[d].choices.size();
    index /= dims[d].choices.size();
  }
  return c;
}

std::size_t encode(const PlanSpace& space, const PlanConfig& c) {
  std::size_t index = 0;
  for (std::size_t p = 0; p < c.part; ++p) index += space.parts[p].size();
  std::size_t inner = 0;
  const auto& dims = space.parts[c.part].dimensions;
  for (std::size_t d = 0; d < dims.size(); ++d)
    inner = inner * dims[d].choices.size() + c.choices[d];
  return index + inner;
}

namespace {

// Configuration `index` with every dimension marked by `flag` at its first choice.
std::size_t at_first_choice(const PlanSpace& space, std::size_t index, bool PlanDimension::*flag) {
  PlanConfig c = decode(space, index);
  const auto& dims = space.parts[c.part].dimensions;
  for (std::size_t d = 0; d < dims.size(); ++d)
    if (dims[d].*flag) c.choices[d] = 0;
  return encode(space, c);
}

}  // namespace

std::size_t strategy_of(const PlanSpace& space, std::size_t index) {
  return at_first_choice(space, index, &PlanDimension::tuning);
}

std::size_t timing_of(const PlanSpace& space, std::size_t index) {
  return at_first_choice(space, index, &PlanDimension::memory_only);
}

std::vector<Setting> settings_of(const PlanSpace& space, const PlanConfig& c) {
  std::vector<Setting> out = space.common;
  const auto& part = space.parts[c.part];
  out.emplace_back("fsdp.api", part.api);
  for (std::size_t d = 0; d < part.dimensions.size(); ++d) {
    const auto& choice = part.dimensions[d].choices[c.choices[d]];
    out.insert(out.end(), choice.settings.begin(), choice.settings.end());
  }
  return out;
}

std::string configuration_text(const PlanSpace& space, const PlanConfig& c) {
  const auto& dims = space.parts[c.part].dimensions;
  std::string out;
  for (std::size_t d = 0; d < dims.size(); ++d)
    out += fmt::format("{}{}={}", d ? ", " : "", dims[d].name, dims[d].choices[c.choices[d]].label);
  return out;
}

namespace {

// Removes a dotted key from a tree, if there.
void erase_key(ConfigTree& tree, const std::string& dotted) {
  const auto parts = split_key_path(dotted);
  ConfigTree* node = &tree;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!node->is_object() || !node->contains(parts[i])) return;
    node = &(*node)[parts[i]];
  }
  if (node->is_object()) node->erase(parts.back());
}

}  // namespace

ConfigTree configuration_tree(const ConfigTree& base, const PlanSpace& space, std::size_t index) {
  const PlanConfig config = decode(space, index);
  ConfigTree tree = base;
  for (const auto& key : space.parts[config.part].cleared) erase_key(tree, key);
  std::vector<Problem> problems;
  for (const auto& [key, value] : settings_of(space, config))
    set_override(tree, key, parse_override_value(value), problems);
  throw_if_any(std::move(problems));
  return tree;
}

namespace {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// A dimension whose choices set one key each; memory rules added by the caller.
PlanDimension simple(std::string name, bool compute, const std::string& key,
                     const std::vector<std::string>& values) {
  PlanDimension d{std::move(name), compute, {}, {}};
  for (const auto& v : values) d.choices.push_back({v, {{key, v}}});
  return d;
}

// memory_at_least for choices listed from least to most memory, each above all before it.
std::vector<std::vector<std::size_t>> increasing(std::size_t n) {
  std::vector<std::vector<std::size_t>> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < i; ++j) out[i].push_back(j);
  }
  return out;
}

PlanDimension batch_dimension(int per_rank_sequences, int max_micro_batch) {
  PlanDimension d{"micro-batch × accumulation", true, {}, {}};
  for (int mb : divisors(per_rank_sequences)) {
    if (mb > max_micro_batch) break;
    d.choices.push_back({fmt::format("{} × {}", mb, per_rank_sequences / mb),
                         {{"training.micro_batch", std::to_string(mb)},
                          {"training.grad_accum", std::to_string(per_rank_sequences / mb)}}});
  }
  d.memory_at_least = increasing(d.choices.size());  // a larger micro-batch: more activations
  return d;
}

PlanDimension checkpointing_dimension() {
  // full ≤ every_2 ≤ none and full ≤ selective_op ≤ none; every_2 and selective_op unordered.
  PlanDimension d = simple("checkpointing", true, "training.activation_checkpointing",
                           {"full", "every_2", "selective_op", "none"});
  d.memory_at_least = {{}, {0}, {0}, {0, 1, 2}};
  return d;
}

// The mesh (FSDP2, FSDP1's hybrid strategies) and FSDP1's sharding strategies: derived from the
// world size, so not a table key's own dimension.
PlanDimension sharding_dimension(FsdpApi api, int world) {
  PlanDimension d{"sharding", false, {}, {}};
  auto mesh = [](int replicate, int shard) {
    return std::vector<Setting>{{"fsdp.mesh.replicate", std::to_string(replicate)},
                                {"fsdp.mesh.shard", std::to_string(shard)}};
  };
  if (api == FsdpApi::fsdp2) {
    for (int shard : divisors(world)) {
      std::string label = shard == world ? "FULL_SHARD"
                          : shard == 1   ? "replicate"
                                         : fmt::format("HSDP {} × {}", world / shard, shard);
      d.choices.push_back({label, mesh(world / shard, shard)});
    }
    std::reverse(d.choices.begin(), d.choices.end());  // full sharding first
    return d;
  }
  // A world of one runs NO_SHARD whatever it asks for (the loader clamps as FSDP1 does).
  for (const char* s : {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"}) {
    if (world == 1 && std::string_view(s) != "NO_SHARD") continue;
    d.choices.push_back({s, {{"fsdp.sharding_strategy", s}}});
  }
  for (const char* s : {"HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"}) {
    for (int shard : divisors(world)) {
      if (shard == 1 || shard == world) continue;
      auto settings = mesh(world / shard, shard);
      settings.insert(settings.begin(), {"fsdp.sharding_strategy", s});
      d.choices.push_back({fmt::format("{} {} × {}", s, world / shard, shard), settings});
    }
  }
  return d;
}

// The dimension of a key the key table marks as searched (ScenarioKey::search), named by its label.
PlanDimension searched_dimension(const ScenarioKey& key) {
  std::vector<std::string> values;
  for (const auto v : split_choices(key.search.values)) values.emplace_back(v);
  auto d =
      simple(std::string(key.label), key.search.changes_compute, std::string(key.path), values);
  if (key.search.memory_grows) d.memory_at_least = increasing(values.size());
  d.tuning = key.search.tuning;
  d.memory_only = key.search.memory_only;
  return d;
}

std::vector<PlanDimension> part_dimensions(FsdpApi api, const Scenario& base,
                                           int per_rank_sequences, int max_micro_batch) {
  const int world = base.cluster.world_size();
  // Compute dimensions first, so that one compute class is one contiguous run of indices.
  std::vector<PlanDimension> dims;
  dims.push_back(batch_dimension(per_rank_sequences, max_micro_batch));
  dims.push_back(checkpointing_dimension());
  for (const auto& key : scenario_keys())
    if (key.search.changes_compute && key_applies(key, api))
      dims.push_back(searched_dimension(key));
  dims.push_back(sharding_dimension(api, world));
  if (api == FsdpApi::fsdp2) {
    std::vector<std::string> reshard{"true", "false"};
    // Resharding to the NVLink domain keeps the backward's all-gathers off the network.
    const int domain = base.cluster.gpus_per_nvlink_domain();
    if (domain > 1 && domain < world) reshard.insert(reshard.begin() + 1, std::to_string(domain));
    auto d = simple("reshard_after_forward", false, "fsdp.reshard_after_forward", reshard);
    // Keeping parameters unsharded after forward never needs less memory than resharding.
    d.memory_at_least = increasing(reshard.size());
    dims.push_back(std::move(d));
  }
  for (const auto& key : scenario_keys())
    if (!key.search.values.empty() && !key.search.changes_compute && key_applies(key, api))
      dims.push_back(searched_dimension(key));
  return dims;
}

// The values the choices of `d` set `key` to, in order, each once.
std::vector<std::string> values_of(const PlanDimension& d, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& choice : d.choices)
    for (const auto& [k, v] : choice.settings)
      if (k == key && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  return out;
}

// Keeps the choices of `d` whose setting of `key` is one of `values`; false when `d` does not set
// `key`.
bool narrow(PlanDimension& d, const std::string& key, const std::vector<std::string>& values) {
  bool sets_key = false;
  std::vector<std::size_t> kept;
  for (std::size_t i = 0; i < d.choices.size(); ++i) {
    for (const auto& [k, v] : d.choices[i].settings) {
      if (k != key) continue;
      sets_key = true;
      if (std::find(values.begin(), values.end(), v) != values.end()) kept.push_back(i);
    }
  }
  if (!sets_key) return false;
  PlanDimension narrowed{d.name, d.compute, {}, {}};
  narrowed.tuning = d.tuning;
  narrowed.memory_only = d.memory_only;
  for (std::size_t i : kept) {
    narrowed.choices.push_back(d.choices[i]);
    if (d.memory_at_least.empty()) continue;
    std::vector<std::size_t> below;
    for (std::size_t j : d.memory_at_least[i]) {
      const auto at = std::find(kept.begin(), kept.end(), j);
      if (at != kept.end()) below.push_back(static_cast<std::size_t>(at - kept.begin()));
    }
    narrowed.memory_at_least.push_back(std::move(below));
  }
  d = std::move(narrowed);
  return true;
}

// Keys a user may search with --allow although no dimension does by default: how FSDP and the
// allocator run the step, never what the job is (model, cluster, batch, sequence length), so that
// every configuration of a plan still describes the same job.
bool searchable_on_request(std::string_view key) {
  return key.starts_with("fsdp.") || key.starts_with("allocator.");
}

// --allow KEY=V1,V2 of a key no dimension sets: a dimension of its own in every part whose API
// the key belongs to. It counts as changing compute, so each value is its own compute class with
// its own step-time bound: exact whatever the key does, at the price of bounding each class.
// Its values are unordered in memory (no rule skips one for another).
void add_allowed_dimension(PlanSpace& space, const std::string& flag, const std::string& key,
                           const std::vector<std::string>& values, std::vector<Problem>& problems) {
  const std::string given = fmt::format("{}={}", key, fmt::join(values, ","));
  const ScenarioKey* entry = find_scenario_key(key);
  if (entry == nullptr || !searchable_on_request(key)) {
    problems.push_back({flag, given,
                        "not a knob of how FSDP runs the step: the plan keeps the job fixed",
                        "an fsdp.* or allocator.* key (docs/planner.md), or --fix with one value"});
    return;
  }
  bool added = false;
  for (auto& part : space.parts) {
    const FsdpApi api = part.api == "fsdp2" ? FsdpApi::fsdp2 : FsdpApi::fsdp1;
    if (!key_applies(*entry, api)) continue;
    const std::string name = entry->label.empty() ? key : std::string(entry->label);
    auto& dims = part.dimensions;
    // After the compute dimensions, which come first.
    const auto at =
        std::find_if(dims.begin(), dims.end(), [](const PlanDimension& d) { return !d.compute; });
    dims.insert(at, simple(name, true, key, values));
    added = true;
  }
  if (!added)
    problems.push_back({flag, given, "no part of the plan uses the API this key belongs to",
                        fmt::format("--api {}", entry->api == FsdpApi::fsdp1 ? "fsdp1" : "fsdp2")});
}

// Narrows `space` to the choices that set `key` to one of `values` (--fix: one value, --allow:
// several). A key no dimension sets goes on every configuration when it has one value.
void restrict_space(PlanSpace& space, const std::string& flag, const std::string& key,
                    const std::vector<std::string>& values, std::vector<Problem>& problems) {
  const std::string given = fmt::format("{}={}", key, fmt::join(values, ","));
  if (key == "fsdp.api") {
    std::erase_if(space.parts, [&values](const PlanPart& p) {
      return std::find(values.begin(), values.end(), p.api) == values.end();
    });
    if (space.parts.empty())
      problems.push_back({flag, given, "no part of the plan uses this API",
                          "fsdp2 or fsdp1 (and --api either or the same)"});
    return;
  }
  bool any = false;
  for (auto& part : space.parts) {
    for (auto& d : part.dimensions) {
      const std::vector<std::string> offered = values_of(d, key);
      if (!narrow(d, key, values)) continue;
      any = true;
      if (d.choices.empty())
        problems.push_back(
            {flag, given, fmt::format("no {} choice of {} sets this value", part.api, d.name),
             fmt::format("{}: {}, or leave the knob free", key, fmt::join(offered, ", "))});
    }
  }
  if (any) return;
  if (values.size() == 1) {
    space.common.emplace_back(key, values.front());
  } else {
    add_allowed_dimension(space, flag, key, values, problems);
  }
}

}  // namespace

PlanSpace default_plan_space(const Scenario& base, const PlanInputs& inputs) {
  std::vector<Problem> problems;
  const int world = base.cluster.world_size();
  const std::int64_t seq = base.training.seq_len;
  const std::int64_t tokens = inputs.global_batch_tokens.value_or(seq * base.training.micro_batch *
                                                                  base.training.grad_accum * world);
  const std::int64_t per_step_sequences = tokens / seq;
  if (tokens <= 0 || tokens % seq != 0 || per_step_sequences % world != 0) {
    problems.push_back(
        {"--global-batch-tokens", std::to_string(tokens),
         fmt::format("{} tokens are not a whole number of {}-token sequences on each of {} ranks",
                     tokens, seq, world),
         fmt::format("a multiple of {} tokens", seq * world)});
  }
  std::vector<std::string> apis;
  if (inputs.api == "either") {
    apis = {"fsdp2", "fsdp1"};
  } else if (inputs.api == "fsdp2" || inputs.api == "fsdp1") {
    apis = {inputs.api};
  } else {
    problems.push_back({"--api", inputs.api, "not an FSDP API", "fsdp2, fsdp1 or either"});
  }
  throw_if_any(std::move(problems));
  PlanSpace space;
  const int per_rank = static_cast<int>(per_step_sequences / world);
  for (const auto& api_name : apis) {
    const FsdpApi api = api_name == "fsdp2" ? FsdpApi::fsdp2 : FsdpApi::fsdp1;
    PlanPart part{api_name, part_dimensions(api, base, per_rank, inputs.max_micro_batch), {}};
    for (const auto& key : scenario_keys())
      if (!key_applies(key, api)) part.cleared.emplace_back(key.path);
    part.cleared.emplace_back("fsdp.mesh");
    space.parts.push_back(std::move(part));
  }
  std::vector<Problem> fix_problems;  // `problems` was handed to throw_if_any above
  // The API first: a knob's value is then checked only against the parts left (--emit fsdp2
  // allows fsdp.api=fsdp2, so its --fix fsdp.mesh.shard=4 says nothing about fsdp1's choices).
  for (const bool api_key : {true, false}) {
    for (const auto& [key, value] : inputs.fixed)
      if ((key == "fsdp.api") == api_key)
        restrict_space(space, "--fix", key, {value}, fix_problems);
    for (const auto& [key, values] : inputs.allowed)
      if ((key == "fsdp.api") == api_key)
        restrict_space(space, "--allow", key, values, fix_problems);
  }
  throw_if_any(std::move(fix_problems));
  return space;
}

PlanBase plan_base(ConfigTree tree, const std::string& file, const PlanInputs& inputs) {
  const auto folder = std::filesystem::path(file).parent_path();
  erase_key(tree, "fsdp.mesh");
  Scenario scenario = read_scenario(tree, file, folder);
  PlanSpace space = default_plan_space(scenario, inputs);
  if (space.common.empty()) return {std::move(tree), std::move(scenario), std::move(space)};
  // The space again from the scenario with the fixed keys: they stay in `common`, so every
  // configuration still sets them (to the value the tree already has).
  std::vector<Problem> problems;
  for (const auto& [key, value] : space.common)
    set_override(tree, key, parse_override_value(value), problems);
  throw_if_any(std::move(problems));
  scenario = read_scenario(tree, file, folder);
  space = default_plan_space(scenario, inputs);
  return {std::move(tree), std::move(scenario), std::move(space)};
}

}  // namespace shardscope::sim
