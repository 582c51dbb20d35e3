#pragma once
// Progress of a long command on stderr: a bar on a terminal; otherwise (logs) a line every 10 %
// and at least once a minute. Once a few seconds have passed, it says how long is left at the rate
// so far (TimeLeft: since the estimate of the work became one to trust). Thread-safe: the sweep's
// workers report to it. Timings go to stderr only, so the command's output stays the same byte for
// byte.

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "shardscope/core/time_left.hpp"

namespace shardscope::cli {

class Progress {
 public:
  using Clock = std::chrono::steady_clock;

  /// `what`: "sweep", "plan"; counts are of configurations.
  Progress(std::string what, std::size_t total)
      : what_(std::move(what)), total_(total), tty_(isatty(STDERR_FILENO) != 0) {}

  /// `done` configurations of the total, each as much work as another.
  void update(std::size_t done) {
    const auto n = static_cast<double>(done);
    update(done, n, static_cast<double>(std::max<std::size_t>(1, total_)), true);
  }

  /// `done` configurations of the total, and the work: `work_done` units of an estimated
  /// `work_total` (a plan's configurations differ in cost), `trusted` once that estimate is one
  /// to extrapolate (before, the line says it is still estimating).
  void update(std::size_t done, double work_done, double work_total, bool trusted) {
    std::lock_guard lock(mutex_);
    const double share = std::clamp(work_done / std::max(1.0, work_total), 0.0, 1.0);
    const int pct = static_cast<int>(100 * share);
    const auto now = Clock::now();
    const double elapsed_s = std::chrono::duration<double>(now - start_).count();
    const std::optional<double> left_s =
        time_left_.update(elapsed_s, work_done, work_total, trusted);
    const std::string counts =
        fmt::format("{}/{} configurations{}", done, total_, left(elapsed_s, trusted, left_s));
    if (tty_) {
      const int filled = pct * 30 / 100;
      fmt::print(stderr, "\r[{:<30}] {:>3} % ({})\x1b[K",
                 std::string(static_cast<std::size_t>(filled), '#'), pct, counts);
      if (done == total_) fmt::print(stderr, "\n");
    } else if (pct >= next_pct_ || done == total_ || now - last_line_ >= std::chrono::minutes(1)) {
      fmt::print(stderr, "{}: {} % ({})\n", what_, pct, counts);
      next_pct_ = pct / 10 * 10 + 10;
      last_line_ = now;
    }
  }

 private:
  // "; 12 s so far, about 2.5 min left" or "; 12 s so far, estimating the time left"
  // (time_left_phrase), or nothing.
  static std::string left(double elapsed_s, bool trusted, std::optional<double> left_s) {
    const std::string phrase = time_left_phrase(elapsed_s, trusted, left_s);
    if (phrase.empty()) return "";
    return fmt::format("; {} so far, {}", coarse_duration(elapsed_s), phrase);
  }

  std::string what_;
  std::size_t total_;
  bool tty_;
  int next_pct_ = 10;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_line_ = start_;
  TimeLeft time_left_;
  std::mutex mutex_;
};

}  // namespace shardscope::cli
