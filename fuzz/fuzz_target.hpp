#pragma once
// Shared by every fuzz target. Each target defines LLVMFuzzerTestOneInput; it is linked either
// with libFuzzer (clang, `make fuzz`) or with replay_main.cpp, which runs it over files so the seed
// corpora and every crash ever found replay in `make test` on any compiler.
//
// Contract of a target: any input either parses or throws shardscope::ValidationError. Any other
// exception, a crash, a sanitizer report or a hang is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "shardscope/core/error.hpp"

namespace shardscope::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Runs `f`; a ValidationError is the expected answer to bad input, anything else propagates.
template <typename F>
void expect_clean_errors(F&& f) {
  try {
    f();
  } catch (const ValidationError&) {
  }
}

}  // namespace shardscope::fuzz
