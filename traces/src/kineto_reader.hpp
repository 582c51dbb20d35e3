#pragma once
// Streams a Chrome-trace JSON document (plain or gzip) as SAX events and hands each element of
// "traceEvents" to a callback as a small JSON object, one at a time; the other top-level values
// (schemaVersion, deviceProperties, distributedInfo, ...) are kept whole. Memory stays at one
// event plus what the callback keeps, whatever the file's size.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace shardscope::traces::detail {

using EventCallback = std::function<void(const nlohmann::json& event)>;

/// Bounds on what a trace may expand to, so that a hostile file ends in a clear error instead of
/// exhausting memory. The largest real traces are a few GiB of JSON; gzip compresses the shipped
/// ones (tests/data/traces) 13 to 19 times, while a gzip bomb expands a thousand times or more.
inline constexpr std::uint64_t kMaxTraceJsonBytes = std::uint64_t{8} << 30;
inline constexpr std::uint64_t kMaxGzipExpansion = 200;  // past the first 64 MiB
inline constexpr std::uint64_t kExpansionFreeBytes = std::uint64_t{64} << 20;
inline constexpr std::size_t kMaxTraceNesting = 64;  // Kineto's own events nest 3 levels deep

/// The top-level values other than traceEvents. Throws ValidationError naming `origin` when the
/// document is not JSON, is not an object, has no traceEvents array, nests deeper than
/// kMaxTraceNesting or expands beyond the bounds above.
nlohmann::json read_trace_events(const std::filesystem::path& path, const EventCallback& on_event);
nlohmann::json read_trace_events_text(std::string_view json, const std::string& origin,
                                      const EventCallback& on_event);

}  // namespace shardscope::traces::detail
