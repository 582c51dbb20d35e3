#include "kineto_reader.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <array>
#include <iterator>
#include <memory>
#include <vector>

#include "shardscope/core/error.hpp"
#include "shardscope/core/output_file.hpp"
#include "shardscope/core/units.hpp"

namespace shardscope::traces::detail {
namespace {

using nlohmann::json;

/// zlib's gzFile (gzip and plain files alike) read 64 KiB at a time and handed out a char at a
/// time through GzIterator, for nlohmann's iterator input: an istream's per-char virtual calls
/// cost a fifth of an import (perf, on HTA's 54 MB df_index_resolver trace).
class GzReader {
 public:
  /// `file_bytes`: the size on disk, which the expansion bound is relative to.
  GzReader(gzFile file, std::uint64_t file_bytes) : file_(file), file_bytes_(file_bytes) {}
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;
  ~GzReader() { gzclose(file_); }

  bool failed() const { return failed_; }
  /// Why reading stopped early: empty, or the bound the stream went past.
  const std::string& refused() const { return refused_; }
  bool at_end() {
    if (next_ == end_) fill();
    return next_ == end_;
  }
  const char& current() const { return buffer_[next_]; }
  void advance() { ++next_; }

 private:
  void fill() {
    if (done_) return;
    const int n = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
    if (n < 0) failed_ = true;  // a corrupt gzip stream: the parser then sees the end
    done_ = n <= 0;
    next_ = 0;
    end_ = n > 0 ? static_cast<std::size_t>(n) : 0;
    total_ += end_;
    if (total_ > kMaxTraceJsonBytes) {
      refuse(fmt::format("expands to more than {} of JSON",
                         format_bytes(static_cast<Bytes>(kMaxTraceJsonBytes))));
    } else if (total_ > kExpansionFreeBytes && total_ / kMaxGzipExpansion > file_bytes_) {
      refuse(fmt::format("expands more than {} times its {} on disk (a gzip bomb?)",
                         kMaxGzipExpansion, format_bytes(static_cast<Bytes>(file_bytes_))));
    }
  }

  // Stops the stream: the parser then sees the end, and the caller reports `refused_`.
  void refuse(std::string why) {
    refused_ = std::move(why);
    done_ = true;
    next_ = end_ = 0;
  }

  gzFile file_;
  std::uint64_t file_bytes_;
  std::uint64_t total_ = 0;
  std::string refused_;
  std::array<char, std::size_t{1} << 16> buffer_{};
  std::size_t next_ = 0, end_ = 0;
  bool failed_ = false, done_ = false;
};

/// An input iterator over a GzReader's chars; a default one is the end. Iterators are only
/// compared with the end, so two are equal when both are at it.
class GzIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  GzIterator() = default;
  explicit GzIterator(GzReader& reader) : reader_(&reader) {}
  reference operator*() const { return reader_->current(); }
  GzIterator& operator++() {
    reader_->advance();
    return *this;
  }
  bool operator==(const GzIterator& other) const { return ended() && other.ended(); }

 private:
  bool ended() const { return reader_ == nullptr || reader_->at_end(); }
  GzReader* reader_ = nullptr;
};

/// nlohmann's SAX interface: builds each trace event (and each other top-level value) as a
/// subtree, hands events to the callback and forgets them.
class TraceSax {
 public:
  explicit TraceSax(const EventCallback& on_event) : on_event_(on_event) {}

  bool null() { return value(json(nullptr)); }
  bool boolean(bool v) { return value(json(v)); }
  bool number_integer(json::number_integer_t v) { return value(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return value(json(v)); }
  bool number_float(json::number_float_t v, const std::string&) { return value(json(v)); }
  bool string(json::string_t& v) { return value(json(std::move(v))); }
  bool binary(json::binary_t&) { return fail("binary values are not JSON"); }

  bool key(json::string_t& k) {
    if (building()) {
      key_ = std::move(k);
    } else if (depth_ == 1) {
      top_key_ = std::move(k);
    }
    return true;
  }

  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) {
    if (!building() && depth_ == 1 && top_key_ == "traceEvents") {
      saw_events_ = true;
      in_events_ = true;
      ++depth_;
      return true;
    }
    return open(json::array());
  }
  bool end_object() { return close(); }
  bool end_array() {
    if (!building() && in_events_ && depth_ == 2) {
      in_events_ = false;
      --depth_;
      return true;
    }
    return close();
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    error_ = fmt::format("not valid JSON at byte {}: {}", position, e.what());
    return false;
  }

  const std::string& error() const { return error_; }
  bool saw_events() const { return saw_events_; }
  json& top() { return top_; }

 private:
  bool building() const { return !stack_.empty(); }
  bool fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  // A new container: the root, a subtree's start, or a child of the subtree being built.
  bool open(json container) {
    if (stack_.size() >= kMaxTraceNesting)
      return fail(fmt::format("values nest deeper than {} levels", kMaxTraceNesting));
    if (building()) {
      stack_.push_back(&attach(std::move(container)));
      return true;
    }
    if (depth_ == 0) {
      if (!container.is_object()) return fail("a Chrome trace is a JSON object");
      ++depth_;
      return true;
    }
    if (depth_ == 1 || (in_events_ && depth_ == 2)) {
      subtree_ = std::move(container);
      stack_.push_back(&subtree_);
      return true;
    }
    return fail("unexpected nesting");  // unreachable: deeper values are built as subtrees
  }

  bool close() {
    if (!building()) {
      --depth_;
      return true;
    }
    stack_.pop_back();
    if (!building()) finish_subtree();
    return true;
  }

  bool value(json v) {
    if (building()) {
      attach(std::move(v));
    } else if (depth_ == 1) {
      top_[top_key_] = std::move(v);
    } else if (in_events_) {
      on_event_(v);  // a scalar where an event should be: the importer counts and skips it
    } else {
      return fail("a Chrome trace is a JSON object");
    }
    return true;
  }

  json& attach(json v) {
    json& parent = *stack_.back();
    if (parent.is_object()) return parent[key_] = std::move(v);
    parent.push_back(std::move(v));
    return parent.back();
  }

  void finish_subtree() {
    if (in_events_) {
      on_event_(subtree_);
    } else {
      top_[top_key_] = std::move(subtree_);
    }
    subtree_ = json();
  }

  const EventCallback& on_event_;
  json top_ = json::object();
  json subtree_;
  std::vector<json*> stack_;  // the subtree's open containers, innermost last
  std::string key_, top_key_;
  int depth_ = 0;  // containers open outside any subtree: 1 in the root, 2 in traceEvents
  bool in_events_ = false, saw_events_ = false;
  std::string error_;
};

json finish(TraceSax& sax, bool parsed, const std::string& origin) {
  if (!parsed || !sax.error().empty()) {
    throw ValidationError({Problem{origin, "", sax.error().empty() ? "not valid JSON" : sax.error(),
                                   "a PyTorch profiler (Kineto) trace, plain or gzip"}});
  }
  if (!sax.saw_events()) {
    throw ValidationError({Problem{origin, "traceEvents", "is missing",
                                   "a PyTorch profiler (Kineto) trace: an object with a "
                                   "traceEvents array"}});
  }
  return std::move(sax.top());
}

}  // namespace

json read_trace_events(const std::filesystem::path& path, const EventCallback& on_event) {
  const std::string origin = path.string();
  require_regular_file(path);
  gzFile file = gzopen(origin.c_str(), "rb");
  if (file == nullptr) {
    throw ValidationError({Problem{origin, "", "cannot open the trace", "a readable file"}});
  }
  std::error_code ec;
  GzReader reader(file, std::filesystem::file_size(path, ec));
  TraceSax sax(on_event);
  bool parsed = false;
  try {
    parsed = json::sax_parse(GzIterator(reader), GzIterator(), &sax);
  } catch (const json::exception& e) {
    throw ValidationError({Problem{origin, "", e.what(), "a PyTorch profiler (Kineto) trace"}});
  }
  if (!reader.refused().empty()) {
    throw ValidationError({Problem{
        origin, "", reader.refused(),
        fmt::format("a trace of at most {} of JSON, expanding at most {} times when gzipped",
                    format_bytes(static_cast<Bytes>(kMaxTraceJsonBytes)), kMaxGzipExpansion)}});
  }
  if (reader.failed()) {
    throw ValidationError({Problem{origin, "", "the gzip stream is corrupt or truncated",
                                   "a complete .json.gz file"}});
  }
  return finish(sax, parsed, origin);
}

json read_trace_events_text(std::string_view text, const std::string& origin,
                            const EventCallback& on_event) {
  TraceSax sax(on_event);
  bool parsed = false;
  try {
    parsed = json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const json::exception& e) {
    throw ValidationError({Problem{origin, "", e.what(), "a PyTorch profiler (Kineto) trace"}});
  }
  return finish(sax, parsed, origin);
}

}  // namespace shardscope::traces::detail
