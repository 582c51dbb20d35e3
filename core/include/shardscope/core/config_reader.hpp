#pragma once
// Typed, problem-collecting access to a ConfigTree. Every getter records the key as known,
// returns a fallback on a missing or wrong value, and adds a Problem instead of throwing;
// `finish()` then reports every key nobody asked for, with a "did you mean". So one pass finds
// every problem.

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/text_index.hpp"
#include "shardscope/core/units.hpp"

namespace shardscope {

class ConfigReader {
 public:
  ConfigReader(const ConfigTree& root, std::string file);

  /// True when the key exists (and marks it known).
  bool has(std::string_view path);
  /// Number of items of a list at `path` (0 when missing; a problem when not a list).
  std::size_t list_size(std::string_view path);

  std::optional<bool> get_bool(std::string_view path);
  std::optional<std::int64_t> get_int(std::string_view path, std::int64_t min, std::int64_t max);
  std::optional<double> get_number(std::string_view path, double min, double max);
  std::optional<std::string> get_string(std::string_view path);
  /// A string from a fixed set; anything else is a problem listing the allowed values.
  std::optional<std::string> get_enum(std::string_view path,
                                      std::span<const std::string_view> allowed);
  std::optional<DType> get_dtype(std::string_view path);
  /// Integer bytes or a string with a unit ("96GB", "80GiB"): > 0, or ≥ 0 with `allow_zero` (a
  /// size that can switch something off).
  std::optional<Bytes> get_bytes(std::string_view path, bool allow_zero = false);
  /// A string with a unit ("3.4us", "25ms").
  std::optional<TimeNs> get_duration(std::string_view path);
  /// Number (bytes/s) or a string with a unit ("450GB/s", "400Gb/s").
  std::optional<BytesPerSecond> get_bandwidth(std::string_view path);
  /// Number (FLOP/s) or a string with a unit ("989TFLOP/s").
  std::optional<FlopsPerSecond> get_flops_rate(std::string_view path);
  /// Marks every key below `path` as known without reading it (a sub-tree read elsewhere).
  void mark_subtree_known(std::string_view path);
  /// When present, a problem "only used with ..." (and the key counts as known).
  void reject_if_present(std::string_view path, std::string_view why,
                         std::string_view instead = {});

  void add_problem(std::string_view path, std::string message, std::string allowed = {});
  /// Reports unknown keys. Call once after every getter.
  void finish();

  const std::string& file() const { return file_; }
  std::vector<Problem>& problems() { return problems_; }
  std::vector<Problem> take_problems() { return std::move(problems_); }

 private:
  const ConfigTree* find(std::string_view path);
  const ConfigTree* walk(std::string_view path);
  void index_mapping(const ConfigTree& node, std::int32_t parent);
  std::string_view index_path(std::int32_t entry) const;
  void wrong_type(std::string_view path, std::string_view expected, const ConfigTree& value);
  void sort_known_keys();
  bool is_known(std::string_view norm);
  std::set<std::string, std::less<>> known_with_parents();
  void collect_unknown(const ConfigTree& node, std::string& path, std::string& norm);

  const ConfigTree& root_;
  std::string file_;
  // Normalised keys read ("model.groups[].name"), in order, repeats kept; finish() sorts them once.
  std::vector<std::string> known_;
  std::vector<std::string_view> known_sorted_;  // distinct known keys, sorted (sort_known_keys)
  bool known_sorted_ready_ = false;
  // Every node find() walked through, sorted in finish(): such a node is known (it was read or lies
  // above a key that was), which finish() tells by its address without comparing key text.
  std::vector<const ConfigTree*> visited_;
  std::set<std::string, std::less<>> known_subtrees_;
  // Every node reachable through mapping keys alone, by its dotted path ("fsdp.mixed_precision"),
  // built once: a plain key path is then one hash lookup instead of a map search per part (a
  // reader asks for ~90 keys, most of them absent). Paths with list indices take walk().
  struct IndexEntry {
    std::uint32_t offset, length;  // the path in index_text_
    const ConfigTree* node;
    std::int32_t parent;  // entry of the mapping above, -1 at the top
    bool visited;         // in visited_ already
  };
  std::string index_text_;
  std::vector<IndexEntry> index_;
  TextIndex index_by_path_;  // entries by their path
  std::string scratch_;      // find()'s normalised path, reused
  std::vector<Problem> problems_;
};

/// Levenshtein distance, for "did you mean".
std::size_t edit_distance(std::string_view a, std::string_view b);
/// The closest candidate within a sensible distance, or empty.
std::string closest_match(std::string_view word, std::span<const std::string> candidates);

}  // namespace shardscope
