#include "shardscope/core/time_left.hpp"

#include <fmt/format.h>

namespace shardscope {

std::optional<double> TimeLeft::update(double elapsed_s, double done, double total, bool trusted) {
  if (!trusted) return std::nullopt;
  if (!since_) {
    since_ = Since{elapsed_s, done};
    return std::nullopt;
  }
  const double worked = done - since_->done;
  if (worked <= 0 || done >= total) return std::nullopt;
  return (elapsed_s - since_->elapsed_s) * (total - done) / worked;
}

std::string coarse_duration(double seconds) {
  if (seconds < 90) return fmt::format("{:.0f} s", seconds);
  if (seconds < 90 * 60) return fmt::format("{:.0f} min", seconds / 60);
  return fmt::format("{:.1f} h", seconds / 3600);
}

std::string time_left_phrase(double elapsed_s, bool trusted, std::optional<double> left_s) {
  if (elapsed_s < kSayTimeLeftAfterS) return "";
  if (left_s) return fmt::format("about {} left", coarse_duration(*left_s));
  return trusted ? "" : "estimating the time left";
}

}  // namespace shardscope
