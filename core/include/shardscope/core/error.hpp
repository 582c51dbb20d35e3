#pragma once
// One exception root for the project, and validation problems reported all at once.

#include <stdexcept>
#include <string>
#include <vector>

namespace shardscope {

/// Root of every exception shardscope throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One thing wrong with an input: where (file and key path), what, and what would be allowed.
struct Problem {
  std::string file;     // may be empty (command-line override, in-memory input)
  std::string key;      // dotted key path, e.g. "fsdp.mesh.shard" or "ops[12].deps"
  std::string message;  // what is wrong
  std::string allowed;  // what is allowed, or a suggestion; may be empty

  std::string to_string() const;
};

/// Thrown with every problem found, never just the first.
class ValidationError : public Error {
 public:
  explicit ValidationError(std::vector<Problem> problems);
  const std::vector<Problem>& problems() const { return problems_; }

 private:
  std::vector<Problem> problems_;
};

/// Throws ValidationError when `problems` is non-empty.
void throw_if_any(std::vector<Problem> problems);

}  // namespace shardscope
