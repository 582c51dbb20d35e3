#pragma once
// The IR's JSON form ("schema": "shardscope.schedule/1"): one stream, group, op or buffer per
// line so diffs stay readable. Writing what was read gives the same bytes.

#include <filesystem>
#include <string>
#include <string_view>

#include "shardscope/core/schedule.hpp"

namespace shardscope {

std::string schedule_to_json(const Schedule& schedule);
/// Throws ValidationError listing every malformed field (with its key path).
Schedule schedule_from_json(std::string_view text, const std::string& origin = "<schedule>");

/// Writes atomically (temporary file, then rename): nothing half-written on failure.
void write_text_file_atomic(const std::filesystem::path& path, std::string_view text);
std::string read_text_file(const std::filesystem::path& path);

}  // namespace shardscope
