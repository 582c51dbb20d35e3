#pragma once
// Progress of a long command on stderr: a bar on a terminal, a line every 10 % otherwise (logs).
// Thread-safe: the sweep's workers report to it.

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <string>

namespace shardscope::cli {

class Progress {
 public:
  /// `what`: "sweep", "plan"; `unit`: "configurations".
  Progress(std::string what, std::size_t total)
      : what_(std::move(what)), total_(total), tty_(isatty(STDERR_FILENO) != 0) {}

  void update(std::size_t done) {
    std::lock_guard lock(mutex_);
    const int pct = static_cast<int>(100 * done / std::max<std::size_t>(1, total_));
    if (tty_) {
      const int filled = pct * 30 / 100;
      fmt::print(stderr, "\r[{:<30}] {:>3} % ({}/{} configurations)",
                 std::string(static_cast<std::size_t>(filled), '#'), pct, done, total_);
      if (done == total_) fmt::print(stderr, "\n");
    } else if (pct >= next_pct_ || done == total_) {
      fmt::print(stderr, "{}: {} % ({}/{} configurations)\n", what_, pct, done, total_);
      next_pct_ = pct / 10 * 10 + 10;
    }
  }

 private:
  std::string what_;
  std::size_t total_;
  bool tty_;
  int next_pct_ = 10;
  std::mutex mutex_;
};

}  // namespace shardscope::cli
