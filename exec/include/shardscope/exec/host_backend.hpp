#pragma once
// The host backend: runs a schedule on CPU threads, no GPU needed (what CI runs, and a dry run of
// the executor on any laptop). Per rank: a worker thread per stream runs its ops in order, events
// are completion flags, collectives go through a HostWorld shared with the other ranks and move
// real data (checked element by element after every collective), and compute and copies take the
// durations a cost callback gives (the CLI passes the simulator's per-op times). The issuing
// thread pays each op's CPU issue cost from the same callback.
//
// Buffers are placed but never touched: a 70B model's buffers would not fit a CI machine. They
// go through the simulator's caching-allocator policy over address space (DeviceAllocator), so
// "allocated" and "reserved" follow the simulator's rules.
//
// Times: every sleep is to an absolute deadline, so wake-up latency (about 0.05–0.1 ms on Linux)
// delays but does not accumulate within an op; `time_scale` stretches every duration so that this
// latency is small beside the ops, and the recorded spans are divided by it again.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "shardscope/exec/backend.hpp"
#include "shardscope/exec/device_allocator.hpp"
#include "shardscope/exec/host_world.hpp"

namespace shardscope::exec {

/// What an op costs on the host backend.
struct HostCost {
  TimeNs device = 0;   // on its stream (or on the CPU for CPU-stream ops)
  TimeNs cpu = 0;      // the issuing thread's time to issue it
  TimeNs latency = 0;  // of `device`, what no link's bandwidth sets (a slow link leaves it)
};
using HostCostFn = std::function<HostCost(OpId id, const Op& op)>;

struct HostBackendOptions {
  int rank = 0;
  HostWorld* world = nullptr;  // shared by all ranks; required when the schedule has collectives
  HostCostFn cost;             // required
  std::string ranks_as = "threads";  // "threads" or "processes", for the device description
  HostWorld::Clock::time_point epoch = HostWorld::Clock::now();  // time 0 of every rank
  double time_scale = 1.0;   // durations × this; recorded spans ÷ this
  double jitter = 0.0;       // relative standard deviation of every GPU op's duration
  double slow_factor = 1.0;  // this rank's GPU ops' durations × this (a straggler; not its
                             // collectives, host copies or CPU-stream work)
  std::uint64_t seed = 1;    // the random stream of jitter and issue delays (mixed with the rank)
  // Mean of the exponential time the issuing thread is away after each op (variation.issue_delay).
  TimeNs issue_delay = 0;
  // By communicator, or empty: this rank's collectives on it take latency + this × the rest
  // (a slow link in the instance, core/…/rank_speed.hpp link_time_factors).
  std::vector<double> comm_time_factors;
  std::chrono::milliseconds timeout{30'000};  // the longest any wait or collective may take
  // The device the buffers are placed on: the simulator's caching-allocator policy over address
  // space, so allocated and reserved follow the simulator's rules (and the same capacity).
  Bytes memory_capacity = std::numeric_limits<Bytes>::max() / 2;
  AllocatorParams allocator;
};

class HostBackend final : public Backend {
 public:
  explicit HostBackend(HostBackendOptions options);
  ~HostBackend() override;

  std::string name() const override { return "host"; }
  std::string device() const override;
  int rank() const override { return options_.rank; }

  void begin(const Schedule& schedule) override;
  void allocate(BufferId id, const Buffer& buffer, StreamId stream) override;
  void free(BufferId id, const Buffer& buffer) override;
  MemoryUsage memory() const override;
  void stream_wait(StreamId stream, OpId event) override;
  void host_wait(OpId event) override;
  void launch(OpId id, const Op& op) override;
  void run_host(OpId id, const Op& op) override;
  std::vector<OpSpan> finish() override;
  void abort() noexcept override;

  /// Collectives run and elements checked so far (all correct, or the run failed).
  std::int64_t collectives_checked() const { return collectives_checked_.load(); }
  std::int64_t elements_checked() const { return elements_checked_.load(); }

 private:
  using Clock = HostWorld::Clock;
  struct Task {
    bool is_wait = false;
    OpId op = kNone;
  };
  struct Worker {
    std::thread thread;
    std::mutex mutex;
    std::condition_variable ready;
    std::vector<Task> queue;
    std::size_t head = 0;
    bool closed = false;
  };

  void work(Worker& worker);
  void run_op(OpId id);
  void run_collective(OpId id, const Op& op, Clock::time_point& transfer_start);
  void check_regions(OpId id, const Op& op) const;
  Clock::duration duration_of(OpId id) const;
  void issued(OpId id);
  void wait_event(OpId event);
  void wait_turn(OpId id, CommId comm);
  template <typename Done, typename What>
  void wait_for(Done done, What what);
  void fail(OpId op, const std::string& message) noexcept;
  void throw_if_failed() const;
  void stop_workers() noexcept;
  void stop_local() noexcept;             // stops this rank's waits and sleeps (not its peers)
  void sleep_until(Clock::time_point t);  // wakes early on abort

  HostBackendOptions options_;
  const Schedule* schedule_ = nullptr;
  std::vector<std::unique_ptr<Worker>> workers_;  // by stream (none for the CPU stream)
  std::vector<OpSpan> spans_;
  std::vector<HostCost> costs_;  // by op, asked once in begin()
  std::vector<double> factors_;  // by op: jitter × straggler
  // Completion events, one per op.
  mutable std::mutex events_mutex_;
  std::condition_variable event_done_;
  std::vector<char> done_;
  // Collectives per communicator in issue order: a ticket at launch, run when it is their turn.
  std::vector<std::int64_t> ticket_;       // by op
  std::vector<std::int64_t> comm_issued_;  // by communicator (the issuing thread only)
  std::vector<std::int64_t> comm_done_;    // by communicator, under events_mutex_
  // The first failure anywhere on this rank.
  mutable std::mutex error_mutex_;
  std::optional<std::pair<OpId, std::string>> error_;
  std::atomic<bool> aborted_{false};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;    // sleeping ops wake on abort
  Clock::time_point issue_free_{};  // when the issuing thread may issue the next op
  AddressSpaceMemory address_space_;
  std::unique_ptr<DeviceAllocator> allocator_;  // made by begin()
  std::atomic<std::int64_t> collectives_checked_{0};
  std::atomic<std::int64_t> elements_checked_{0};
};

/// A world for `world_size` ranks as threads of this process: the region lives on the heap.
class LocalHostWorld {
 public:
  explicit LocalHostWorld(HostWorldLayout layout);
  HostWorld& world() { return *world_; }

 private:
  std::vector<std::byte> region_;
  std::unique_ptr<HostWorld> world_;
};

}  // namespace shardscope::exec
