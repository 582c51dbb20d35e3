#pragma once
// Output files the user names (--json, --csv, --trace, GUI exports). Contract:
//  - checked before any work: an output that is an input, two outputs on one file, a directory, a
//    missing or unwritable directory are problems reported up front;
//  - a regular file is replaced atomically: the text goes to an unnamed temporary file in the same
//    directory (O_TMPFILE) that gets a name only once complete, so nothing half-written is ever
//    visible and a killed process leaves nothing behind;
//  - a symbolic link stays a link: its target is what gets replaced;
//  - a special file (/dev/stdout, /dev/full, a FIFO) is written in place, never replaced by a
//    regular file; a FIFO without a reader is an error, not a hang.

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/error.hpp"

namespace shardscope {

/// Problems with writing `output` (named by `option`, e.g. "--json") when `inputs` are read.
/// Empty when the path can be written.
std::vector<Problem> check_output_path(const std::filesystem::path& output, std::string_view option,
                                       std::span<const std::filesystem::path> inputs);

/// Checks every output against the inputs and each other; throws ValidationError with every
/// problem. `outputs` pairs an option name with its path; empty paths are skipped.
void check_output_paths(std::span<const std::pair<std::string, std::string>> outputs,
                        std::span<const std::filesystem::path> inputs);

/// Writes `text` to `path` as the contract above says. Throws ValidationError naming the path on
/// any failure (no space left, permission, a FIFO with no reader).
void write_text_file_atomic(const std::filesystem::path& path, std::string_view text);

/// Refuses (ValidationError naming it) an input that is not a regular file: a FIFO would block
/// the open, a device (/dev/zero, /dev/urandom) never ends, and neither can be read twice.
void require_regular_file(const std::filesystem::path& path);

/// The most a file read whole may hold: every scenario, timeline, profile and calibration a run
/// writes is far below it, and reading it takes a few times as much memory.
inline constexpr std::uintmax_t kMaxTextFileBytes = std::uintmax_t{2} << 30;

/// The whole file; throws ValidationError naming it when it cannot be read, is not a regular
/// file or is larger than `max_bytes`.
std::string read_text_file(const std::filesystem::path& path,
                           std::uintmax_t max_bytes = kMaxTextFileBytes);

}  // namespace shardscope
