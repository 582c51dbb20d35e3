#pragma once
// Every key a scenario file may hold, in one table: its type, unit, physical range, default and
// what it models. The scenario reader takes each key's bounds from here, `shardscope keys` prints
// it and docs/scenario.md is generated from it, so the three cannot disagree. Keys that PyTorch
// accepts but shardscope does not model are listed too, as rejected, with the reason.

#include <optional>
#include <span>
#include <string>
#include <string_view>

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
  rejected,     // accepted by PyTorch, not modelled by shardscope: an error naming `models`
};

struct ScenarioKey {
  std::string_view path;  // normalised: list items as [] ("model.groups[].params")
  KeyType type;
  double min = 0;  // in the type's base unit (see KeyType); unused where meaningless
  double max = 0;
  std::string_view unit;     // what a bare number means ("tokens", "W", "ms"); empty where none
  std::string_view choices;  // for choice: "a, b, c"; for text: what it names
  std::string_view default_value;
  std::string_view models;  // what it models; for rejected keys, why they are rejected
};

/// The whole table, sections before their keys, in the order of docs/scenario.md.
std::span<const ScenarioKey> scenario_keys();
/// The entry for a normalised path, or nullptr.
const ScenarioKey* find_scenario_key(std::string_view normalised_path);
/// The type's name as docs and errors spell it ("integer", "size", ...).
std::string_view to_string(KeyType type);
/// The range of a key in words with units ("1..1,000,000", "1 GB/s..10 TB/s"), empty when none.
std::string key_range_text(const ScenarioKey& key);
/// The table as aligned text (`shardscope keys`), only keys starting with `prefix`.
std::string scenario_keys_text(std::string_view prefix = {});
/// The table as Markdown (docs/scenario.md).
std::string scenario_keys_markdown();

}  // namespace shardscope
