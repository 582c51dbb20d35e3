#pragma once
// Ctrl-C as a flag while a long command works (sweep, plan): the flag is cleared and a SIGINT
// handler that sets it is installed for the object's lifetime; the previous handler comes back
// when it goes. One at a time: the handler has a single flag to set.

#include <atomic>
#include <csignal>

namespace shardscope::cli {

namespace detail {
inline std::atomic<bool> g_interrupted{false};
extern "C" inline void on_interrupt(int) {
  g_interrupted.store(true);
}
}  // namespace detail

class InterruptFlag {
 public:
  InterruptFlag()
      : previous_((detail::g_interrupted.store(false), std::signal(SIGINT, detail::on_interrupt))) {
  }
  ~InterruptFlag() { std::signal(SIGINT, previous_); }
  InterruptFlag(const InterruptFlag&) = delete;
  InterruptFlag& operator=(const InterruptFlag&) = delete;

  const std::atomic<bool>* flag() const { return &detail::g_interrupted; }
  bool raised() const { return detail::g_interrupted.load(); }

 private:
  void (*previous_)(int);
};

}  // namespace shardscope::cli
