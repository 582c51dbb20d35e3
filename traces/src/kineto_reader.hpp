#pragma once
// Streams a Chrome-trace JSON document (plain or gzip) as SAX events and hands each element of
// "traceEvents" to a callback as a small JSON object, one at a time; the other top-level values
// (schemaVersion, deviceProperties, distributedInfo, ...) are kept whole. Memory stays at one
// event plus what the callback keeps, whatever the file's size.

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace shardscope::traces::detail {

using EventCallback = std::function<void(const nlohmann::json& event)>;

/// The top-level values other than traceEvents. Throws ValidationError naming `origin` when the
/// document is not JSON, is not an object or has no traceEvents array.
nlohmann::json read_trace_events(const std::filesystem::path& path, const EventCallback& on_event);
nlohmann::json read_trace_events_text(std::string_view json, const std::string& origin,
                                      const EventCallback& on_event);

}  // namespace shardscope::traces::detail
