#include "shardscope/sim/worker_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace shardscope::sim {
namespace {

// A job of `items` items shared through a counter, as the sweep runs its points.
struct CountingJob {
  explicit CountingJob(std::size_t items) : done(items) {}
  std::atomic<std::size_t> next{0};
  std::vector<std::atomic<int>> done;
  std::atomic<int> calls{0};
  std::function<void()> work() {
    return [this] {
      ++calls;
      for (std::size_t i; (i = next.fetch_add(1)) < done.size();) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        ++done[i];
      }
    };
  }
};

TEST(WorkerPool, EveryItemRunsExactlyOnceOnTheCallerAndItsHelpers) {
  WorkerPool pool;
  CountingJob job(200);
  std::set<std::thread::id> seen;
  std::mutex m;
  const auto count = job.work();
  pool.run(3, [&] {
    {
      std::lock_guard lock(m);
      seen.insert(std::this_thread::get_id());
    }
    count();
  });
  for (const auto& d : job.done) EXPECT_EQ(d.load(), 1);
  EXPECT_GE(job.calls.load(), 1);
  EXPECT_LE(job.calls.load(), 4);
  EXPECT_TRUE(seen.count(std::this_thread::get_id()));
  EXPECT_EQ(pool.threads(), 3U);
}

TEST(WorkerPool, ThreadsAreReusedAcrossRuns) {
  WorkerPool pool;
  for (int r = 0; r < 20; ++r) {
    CountingJob job(10);
    pool.run(2, job.work());
    for (const auto& d : job.done) ASSERT_EQ(d.load(), 1);
  }
  EXPECT_EQ(pool.threads(), 2U);
  CountingJob alone(5);
  pool.run(0, alone.work());
  EXPECT_EQ(alone.calls.load(), 1);
}

TEST(WorkerPool, CallerDoesNotWaitForABusyPool) {
  WorkerPool pool;
  std::atomic<bool> release{false};
  std::atomic<bool> blocking{false};
  // One caller occupies the only pool thread until released.
  std::thread first([&] {
    pool.run(1, [&] {
      if (blocking.exchange(true)) return;  // the caller's own call
      while (!release.load()) std::this_thread::yield();
    });
  });
  while (!blocking.load()) std::this_thread::yield();
  // Whichever call of `first` blocks, this run must finish on its caller alone while it blocks.
  CountingJob job(4);
  pool.run(1, job.work());
  for (const auto& d : job.done) EXPECT_EQ(d.load(), 1);
  release = true;
  first.join();
}

TEST(WorkerPool, CallerExceptionIsRethrownAfterHelpersStop) {
  WorkerPool pool;
  std::atomic<int> helpers_running{0};
  std::atomic<bool> caller_seen{false};
  const auto main_thread = std::this_thread::get_id();
  EXPECT_THROW(pool.run(2,
                        [&] {
                          if (std::this_thread::get_id() == main_thread) {
                            caller_seen = true;
                            throw std::runtime_error("boom");
                          }
                          ++helpers_running;
                          std::this_thread::sleep_for(std::chrono::milliseconds(5));
                          --helpers_running;
                        }),
               std::runtime_error);
  EXPECT_TRUE(caller_seen.load());
  EXPECT_EQ(helpers_running.load(), 0);
}

}  // namespace
}  // namespace shardscope::sim
