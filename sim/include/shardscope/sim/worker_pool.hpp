#pragma once
// Threads that live for the whole process and help run a job, so a sweep does not start threads
// each time it runs: on a virtual machine a new thread can sit on its parent's CPU for hundreds of
// microseconds until the scheduler moves it, a sizeable part of a millisecond-long sweep, while a
// thread woken from a condition variable starts at once (docs/performance.md). Pool threads also
// keep their malloc arena warm between sweeps.
//
// run(helpers, work) calls `work` on the calling thread and on up to `helpers` pool threads at
// once, and returns when every call has returned. Helpers that have not started by the time the
// caller's own call returns are withdrawn, so a busy pool never makes a caller wait for it: `work`
// must be written so that any number of calls, one or more, finish the job (a shared counter of
// items, as the sweep uses). Several callers may use the pool at once. `work` must not throw on a
// pool thread (that ends the process, as for a std::thread); what it throws on the caller is
// rethrown after the helpers have stopped.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace shardscope::sim {

class WorkerPool {
 public:
  /// The process-wide pool; its threads start on first use and are joined at exit.
  static WorkerPool& shared();

  WorkerPool() = default;
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool();

  void run(unsigned helpers, const std::function<void()>& work);

  /// Threads started so far (they never exceed the most helpers one run asked for).
  std::size_t threads() const;

 private:
  struct Job {
    const std::function<void()>* work = nullptr;
    unsigned unclaimed = 0;  // helper calls not yet taken by a pool thread
    unsigned running = 0;    // helper calls in progress
  };
  void loop();

  mutable std::mutex mutex_;
  std::condition_variable wake_;      // pool threads wait here for jobs
  std::condition_variable finished_;  // callers wait here for their helpers
  std::deque<Job*> queue_;            // jobs with unclaimed helper calls, oldest first
  std::vector<std::thread> threads_;
  bool quit_ = false;
};

}  // namespace shardscope::sim
