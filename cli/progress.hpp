#pragma once
// Progress of a long command on stderr: a bar on a terminal; otherwise (logs) a line every 10 %
// and at least once a minute. Once a few seconds have passed, it says how long is left at the rate
// so far. Thread-safe: the sweep's workers report to it. Timings go to stderr only, so the
// command's output stays the same byte for byte.

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>

namespace shardscope::cli {

class Progress {
 public:
  using Clock = std::chrono::steady_clock;

  /// `what`: "sweep", "plan"; counts are of configurations.
  Progress(std::string what, std::size_t total)
      : what_(std::move(what)), total_(total), tty_(isatty(STDERR_FILENO) != 0) {}

  /// `done` configurations of the total. `work` (0..1) is the share of the work done when
  /// configurations differ in cost (a plan's are weighted by schedule size); else done / total.
  void update(std::size_t done, std::optional<double> work = std::nullopt) {
    std::lock_guard lock(mutex_);
    const double share =
        std::clamp(work.value_or(static_cast<double>(done) /
                                 static_cast<double>(std::max<std::size_t>(1, total_))),
                   0.0, 1.0);
    const int pct = static_cast<int>(100 * share);
    const auto now = Clock::now();
    const std::string counts =
        fmt::format("{}/{} configurations{}", done, total_, left(share, now));
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

  /// A duration to the precision an extrapolation has: "45 s", "12 min", "3.2 h".
  static std::string coarse(double seconds) {
    if (seconds < 90) return fmt::format("{:.0f} s", seconds);
    if (seconds < 90 * 60) return fmt::format("{:.0f} min", seconds / 60);
    return fmt::format("{:.1f} h", seconds / 3600);
  }

 private:
  // "; about 2.5 min left" at the rate so far, once there is a rate worth extrapolating.
  std::string left(double share, Clock::time_point now) const {
    const double elapsed_s = std::chrono::duration<double>(now - start_).count();
    if (share <= 0 || share >= 1 || elapsed_s < 3) return "";
    const double left_s = elapsed_s * (1 - share) / share;
    return fmt::format("; {} so far, about {} left", coarse(elapsed_s), coarse(left_s));
  }

  std::string what_;
  std::size_t total_;
  bool tty_;
  int next_pct_ = 10;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_line_ = start_;
  std::mutex mutex_;
};

}  // namespace shardscope::cli
