#pragma once
// Every key a scenario file may hold, in one table: its type, unit, physical range, choices,
// default, what it models, which FSDP API it belongs to, how a settings picker shows it and which
// values the planner tries. Everything that lists keys reads it: the scenario reader (bounds,
// choice spellings, the other API's knobs), the enums' names (core/src/names.cpp), `shardscope
// keys` and docs/scenario.md, the planner's space (sim/src/plan_space.cpp) and the GUI's settings
// panel.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shardscope/core/fsdp_policy.hpp"

namespace shardscope {

enum class KeyType {
  section,      // a mapping of further keys
  list,         // a list of sections (model.groups)
  integer,      // a whole number in [min, max]
  number,       // a real number in [min, max]
  boolean,      // true or false
  text,         // free text (names, paths)
  choice,       // one of `choices`
  dtype,        // fp32, bf16, fp16 (fp8 where said)
  bytes,        // integer bytes or "80GiB", "96GB"; range in bytes
  duration,     // "3.4us", "2ms"; range in nanoseconds
  bandwidth,    // bytes/s or "450GB/s", "400Gb/s"; range in bytes/s
  flops_rate,   // FLOP/s or "989TFLOP/s"; range in FLOP/s
  bool_or_int,  // fsdp.reshard_after_forward: true, false or an integer in [min, max]
};

struct Scenario;

/// How `shardscope plan` searches a key as a dimension of its own (sim/src/plan_space.cpp).
struct KeySearch {
  std::string_view values;       // the values tried, "a, b"; empty: not a dimension of its own
  bool changes_compute = false;  // the values change the compute ops, not only the schedule
  bool memory_grows = false;     // each value needs at least the memory of every value before it
  // The values only change how FSDP schedules the same training (prefetching, the all-gather
  // limit, how many blocks one unit wraps, the allocator's segments), not what is computed, in
  // which precision, or where the state lives: configurations that differ only in tuning knobs
  // are one strategy in the planner's ranking (sim/…/plan_entries.hpp).
  bool tuning = false;
  // The values change only the caching allocator's decisions: neither the schedule nor its costs
  // read them, so configurations that differ only in such knobs have one step time (the planner
  // lowers and times one of them and replays the memory of each).
  bool memory_only = false;
};

struct ScenarioKey {
  std::string_view path;  // normalised: list items as [] ("model.groups[].params")
  KeyType type;
  double min = 0;  // in the type's base unit (see KeyType); unused where meaningless
  double max = 0;
  std::string_view unit = {};  // what a bare number means ("tokens", "W", "ms"); empty where none
  // For choice and dtype keys the spellings, "a, b, c", in the order of the enum they name (the
  // i-th choice is the enum's i-th value); for text, what it names.
  std::string_view choices = {};
  std::string_view default_value = {};
  std::string_view models = {};  // what it models
  // The FSDP API the key belongs to (written under the other, it is an error); nullopt: any.
  std::optional<FsdpApi> api = std::nullopt;
  std::string_view instead = {};  // for a key of one API: what to write under the other
  // A short name for pickers (the GUI's settings panel, the planner's dimensions); empty: the key
  // is not offered there.
  std::string_view label = {};
  // Where `choices` is no closed list (text, bool_or_int): the values a picker offers.
  std::string_view offered = {};
  // The key's value in a read scenario, as a scenario file spells it; set for offered keys.
  std::string (*value_of)(const Scenario&) = nullptr;
  KeySearch search = {};
  bool names_a_file = false;  // text naming a file, relative to the scenario's folder
};

/// The whole table, sections before their keys, in the order of docs/scenario.md.
std::span<const ScenarioKey> scenario_keys();
/// The entry for a normalised path, or nullptr.
const ScenarioKey* find_scenario_key(std::string_view normalised_path);
/// The entry for a path the table must have (a key the program itself names, normalised or not);
/// throws std::logic_error if not there.
const ScenarioKey& key_of(std::string_view normalised_path);
/// "a, b, c" as its items.
std::vector<std::string_view> split_choices(std::string_view list);
/// The values a picker offers for a key: the presets, `offered`, its choices, or false and true.
std::vector<std::string> offered_values(const ScenarioKey& key);
/// Whether a key may be written under an API.
bool key_applies(const ScenarioKey& key, FsdpApi api);
/// The index of `text` among the choices of `path`, or nullopt.
std::optional<std::size_t> choice_index(std::string_view path, std::string_view text);
/// The spelling of choice `index` of `path` (an enum's name); throws std::logic_error past the
/// last choice.
std::string_view choice_text(std::string_view path, std::size_t index);

/// The enum value `E` whose name `text` is among the choices of `path` (the i-th choice names
/// the i-th enumerator), or nullopt.
template <typename E>
std::optional<E> parse_choice(std::string_view path, std::string_view text) {
  const auto index = choice_index(path, text);
  if (!index) return std::nullopt;
  return static_cast<E>(*index);
}
/// The name of enum value `value`: the choice of `path` at its index.
template <typename E>
std::string_view choice_name(std::string_view path, E value) {
  return choice_text(path, static_cast<std::size_t>(value));
}

/// The job a scenario describes, as its labelled keys spell it (ScenarioKey::value_of), those of
/// its FSDP API only, in table order: what two runs must share to be compared.
std::vector<std::pair<std::string, std::string>> job_settings(const Scenario& scenario);

/// The type's name as docs and errors spell it ("integer", "size", ...).
std::string_view to_string(KeyType type);
/// The range of a key in words with units ("1..1,000,000", "1 GB/s..10 TB/s"), empty when none.
std::string key_range_text(const ScenarioKey& key);
/// The table as aligned text (`shardscope keys`), only keys starting with `prefix`.
std::string scenario_keys_text(std::string_view prefix = {});
/// The table as Markdown (docs/scenario.md).
std::string scenario_keys_markdown();

}  // namespace shardscope
