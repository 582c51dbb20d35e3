#include "shardscope/sim/worker_pool.hpp"

#include <algorithm>
#include <exception>

namespace shardscope::sim {

WorkerPool& WorkerPool::shared() {
  static WorkerPool pool;
  return pool;
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

std::size_t WorkerPool::threads() const {
  std::lock_guard lock(mutex_);
  return threads_.size();
}

void WorkerPool::run(unsigned helpers, const std::function<void()>& work) {
  Job job;
  job.work = &work;
  job.unclaimed = helpers;
  if (helpers > 0) {
    std::lock_guard lock(mutex_);
    while (threads_.size() < helpers) threads_.emplace_back([this] { loop(); });
    queue_.push_back(&job);
  }
  if (helpers == 1) wake_.notify_one();
  if (helpers > 1) wake_.notify_all();

  std::exception_ptr failure;
  try {
    work();
  } catch (...) {
    failure = std::current_exception();
  }
  if (helpers > 0) {
    std::unique_lock lock(mutex_);
    if (job.unclaimed > 0) {
      queue_.erase(std::find(queue_.begin(), queue_.end(), &job));
      job.unclaimed = 0;
    }
    finished_.wait(lock, [&] { return job.running == 0; });
  }
  if (failure) std::rethrow_exception(failure);
}

void WorkerPool::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return quit_ || !queue_.empty(); });
    if (quit_) return;
    Job* job = queue_.front();
    if (--job->unclaimed == 0) queue_.pop_front();
    ++job->running;
    lock.unlock();
    (*job->work)();
    lock.lock();
    if (--job->running == 0) finished_.notify_all();
  }
}

}  // namespace shardscope::sim
