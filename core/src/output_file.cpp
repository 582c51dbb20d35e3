#include "shardscope/core/output_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "shardscope/core/units.hpp"

namespace shardscope {
namespace fs = std::filesystem;
namespace {

ValidationError write_error(const fs::path& path, std::string message, std::string allowed = {}) {
  return ValidationError({Problem{path.string(), "", std::move(message), std::move(allowed)}});
}

std::string errno_text(int error) {
  return std::strerror(error);
}

// Writes all of `text` to `fd`; returns 0 or the errno of the failed write.
int write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

// The file a path names once symbolic links are followed, dangling ones too (writing through a
// dangling link creates its target, as the shell's `>` does).
fs::path resolved(const fs::path& path) {
  fs::path p = path;
  std::error_code ec;
  for (int hop = 0; hop < 40 && fs::is_symlink(fs::symlink_status(p, ec)); ++hop) {
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) break;
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  const fs::path canonical = fs::weakly_canonical(p, ec);
  return ec ? p : canonical;
}

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec) && !ec;
  return resolved(a) == resolved(b);
}

// ".NAME.partial.XXXXXX" beside the target, for mkstemp.
std::string temp_name_pattern(const fs::path& dir, const fs::path& path) {
  return (dir / fmt::format(".{}.partial.XXXXXX", path.filename().string())).string();
}

// A special file (device, FIFO) in place: opened without O_CREAT or O_TRUNC, non-blocking so a FIFO
// with no reader fails (ENXIO) instead of waiting forever.
void write_special(const fs::path& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    throw write_error(path, error == ENXIO
                                ? "is a FIFO with no reader"
                                : fmt::format("cannot open for writing ({})", errno_text(error)));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const int error = write_all(fd, text);
  ::close(fd);
  if (error != 0) throw write_error(path, fmt::format("write failed ({})", errno_text(error)));
}

// A regular file, replaced atomically through an unnamed temporary file in the same directory.
void write_regular(const fs::path& path, std::string_view text) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  fs::path named_tmp;  // only when the file system has no O_TMPFILE: a named temporary
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    std::string pattern = temp_name_pattern(dir, path);
    fd = ::mkstemp(pattern.data());
    if (fd >= 0) {
      named_tmp = pattern;
      ::fchmod(fd, 0644);
    }
  }
  if (fd < 0) {
    throw write_error(path, fmt::format("cannot open for writing ({})", errno_text(errno)),
                      "a path in an existing, writable directory");
  }
  int error = write_all(fd, text);
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (error == 0 && named_tmp.empty()) {
    // Give the complete file a temporary name, then move it over the target in one step.
    std::string pattern = temp_name_pattern(dir, path);
    const int probe = ::mkstemp(pattern.data());  // reserves a unique name
    if (probe < 0) {
      error = errno;
    } else {
      ::close(probe);
      ::unlink(pattern.c_str());
      const std::string proc = fmt::format("/proc/self/fd/{}", fd);
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, pattern.c_str(), AT_SYMLINK_FOLLOW) != 0) {
        error = errno;
      } else {
        named_tmp = pattern;
      }
    }
  }
  ::close(fd);
  if (error == 0 && ::rename(named_tmp.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    if (!named_tmp.empty()) ::unlink(named_tmp.c_str());
    throw write_error(path, fmt::format("write failed ({})", errno_text(error)));
  }
}

}  // namespace

std::vector<Problem> check_output_path(const fs::path& output, std::string_view option,
                                       std::span<const fs::path> inputs) {
  std::vector<Problem> problems;
  const auto problem = [&](std::string message, std::string allowed = {}) {
    problems.push_back(
        {output.string(), std::string(option), std::move(message), std::move(allowed)});
  };
  for (const auto& input : inputs) {
    if (!input.empty() && same_file(output, input)) {
      problem(fmt::format("is the input {}; it would be overwritten", input.string()),
              "another file name");
      return problems;
    }
  }
  std::error_code ec;
  const fs::path target = resolved(output);
  const auto status = fs::status(target, ec);
  if (fs::is_directory(status)) {
    problem("is a directory", "a file name");
    return problems;
  }
  if (fs::exists(status)) {
    if (::access(target.c_str(), W_OK) != 0)
      problem(fmt::format("is not writable ({})", errno_text(errno)));
    return problems;  // a regular file is replaced; a special file is written in place
  }
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) {
    problem(fmt::format("cannot open for writing: the directory {} does not exist", dir.string()),
            "a path in an existing, writable directory");
  } else if (::access(dir.c_str(), W_OK) != 0) {
    problem(fmt::format("cannot open for writing: the directory {} is not writable", dir.string()),
            "a path in an existing, writable directory");
  }
  return problems;
}

void check_output_paths(std::span<const std::pair<std::string, std::string>> outputs,
                        std::span<const fs::path> inputs) {
  std::vector<Problem> problems;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& [option, path] = outputs[i];
    if (path.empty()) continue;
    auto found = check_output_path(path, option, inputs);
    problems.insert(problems.end(), found.begin(), found.end());
    for (std::size_t j = 0; j < i; ++j) {
      if (!outputs[j].second.empty() && same_file(path, outputs[j].second)) {
        problems.push_back({path, option, fmt::format("is also the file of {}", outputs[j].first),
                            "a different file for each output"});
      }
    }
  }
  throw_if_any(std::move(problems));
}

void write_text_file_atomic(const fs::path& path, std::string_view text) {
  const fs::path target = resolved(path);  // a symbolic link stays a link; its target is written
  std::error_code ec;
  const auto status = fs::status(target, ec);
  if (fs::is_directory(status)) throw write_error(path, "is a directory", "a file name");
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    write_special(target, text);
  } else {
    write_regular(target, text);
  }
}

void require_regular_file(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || status.type() == fs::file_type::not_found)
    throw ValidationError(
        {Problem{path.string(), "", "cannot read the file", "an existing readable file"}});
  if (status.type() == fs::file_type::directory)
    throw ValidationError({Problem{path.string(), "", "is a directory", "a file"}});
  if (status.type() != fs::file_type::regular) {
    throw ValidationError(
        {Problem{path.string(), "",
                 "is not a regular file (a FIFO, a device or a socket: it may block or never end)",
                 "a regular file"}});
  }
}

std::string read_text_file(const fs::path& path, std::uintmax_t max_bytes) {
  require_regular_file(path);
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (!ec && size > max_bytes) {
    throw ValidationError({Problem{
        path.string(), "", fmt::format("is {}", format_bytes(static_cast<Bytes>(size))),
        fmt::format("a file of at most {}", format_bytes(static_cast<Bytes>(max_bytes)))}});
  }
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ValidationError(
        {Problem{path.string(), "", "cannot read the file", "an existing readable file"}});
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace shardscope
