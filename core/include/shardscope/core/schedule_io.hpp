#pragma once
// The IR's JSON form ("schema": "shardscope.schedule/3"): one stream, group, op or buffer per
// line so diffs stay readable. Writing what was read gives the same bytes.

#include <filesystem>
#include <string>
#include <string_view>

#include "shardscope/core/output_file.hpp"  // write_text_file_atomic, read_text_file
#include "shardscope/core/schedule.hpp"

namespace shardscope {

std::string schedule_to_json(const Schedule& schedule);
/// Throws ValidationError listing every malformed field (with its key path).
Schedule schedule_from_json(std::string_view text, const std::string& origin = "<schedule>");

}  // namespace shardscope
