#pragma once
// The time left of a long computation, extrapolated from the rate of its work since its estimate
// of the total became one to trust. The one rule behind every progress display's time left (the
// CLI's line, the GUI's plan status) and the benchmark that measures how far it is from the truth
// (bench/plan_bench), so what is measured is what users read.

#include <optional>
#include <string>

namespace shardscope {

/// Displays say a time left only once this many seconds have passed: a rate measured over less is
/// mostly noise, and a shorter computation is over before the time left would help.
inline constexpr double kSayTimeLeftAfterS = 3;

class TimeLeft {
 public:
  /// At `elapsed_s` seconds, `done` units of work of an estimated `total`; `trusted`: whether
  /// `total` is an estimate worth extrapolating (a search whose total is at first a worst case
  /// says when it knows better). The seconds left at the rate since the first trusted update:
  /// work done before it ran at another rate (setting up, bounding) and is not extrapolated.
  /// Unknown (nullopt) until a trusted update has work after the first, and once done ≥ total.
  std::optional<double> update(double elapsed_s, double done, double total, bool trusted);

 private:
  struct Since {
    double elapsed_s = 0;
    double done = 0;
  };
  std::optional<Since> since_;
};

/// A duration to the precision an extrapolation has: "45 s", "12 min", "3.2 h".
std::string coarse_duration(double seconds);

/// What a display says of the time left at `elapsed_s` seconds, given what TimeLeft::update
/// returned (`left_s`) and whether the work was `trusted`: "about 2 min left" once
/// kSayTimeLeftAfterS have passed and there is a time left; "estimating the time left" after
/// that while the work is not yet known; otherwise nothing (empty).
std::string time_left_phrase(double elapsed_s, bool trusted, std::optional<double> left_s);

}  // namespace shardscope
