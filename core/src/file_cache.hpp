#pragma once
// One parsed copy per file per process (private to core): a sweep reads its scenario at every
// point, and each point names the same device profile or calibration. Keyed by the file's path,
// modification time and size, so an edited file is read again. Thread-safe.

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

namespace shardscope::detail {

/// The file at `path` as `load(path)` reads it, shared while the file is unchanged. A file that
/// cannot be stat'ed is loaded every time, so `load` reports its error.
template <typename T, typename Load>
std::shared_ptr<const T> cached_file(const std::string& path, Load load) {
  using Key = std::tuple<std::string, std::filesystem::file_time_type, std::uintmax_t>;
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<const T>> cache;
  std::error_code ec;
  const std::filesystem::path file(path);
  const auto time = std::filesystem::last_write_time(file, ec);
  const auto size = ec ? 0 : std::filesystem::file_size(file, ec);
  if (ec) return std::make_shared<const T>(load(path));
  const Key key{std::filesystem::absolute(file).lexically_normal().string(), time, size};
  const std::lock_guard lock(mutex);
  auto& slot = cache[key];
  if (!slot) slot = std::make_shared<const T>(load(path));
  return slot;
}

}  // namespace shardscope::detail
