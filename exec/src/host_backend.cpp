#include "shardscope/exec/host_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "dtype_codec.hpp"
#include "shardscope/core/rank_speed.hpp"
#include "shardscope/exec/executor.hpp"

namespace shardscope::exec {
namespace {

// The test pattern every rank's collective input holds: small integers, exact in every dtype.
float pattern(int position, std::size_t element) {
  return static_cast<float>(position + 1) + static_cast<float>(element % 7);
}

float rounded(float value, DType dtype) {
  std::array<std::byte, 4> one{};
  detail::store(one.data(), 0, dtype, value);
  return detail::load(one.data(), 0, dtype);
}

}  // namespace

LocalHostWorld::LocalHostWorld(HostWorldLayout layout)
    : region_(HostWorld::region_bytes(layout)),
      world_(std::make_unique<HostWorld>(region_.data(), std::move(layout))) {}

HostBackend::HostBackend(HostBackendOptions options) : options_(std::move(options)) {
  if (!options_.cost) throw Error("the host backend needs a cost callback");
  if (!(options_.time_scale > 0) || !(options_.slow_factor > 0) || !(options_.jitter >= 0))
    throw Error("host backend: time scale and slow factor must be > 0, jitter ≥ 0");
}

HostBackend::~HostBackend() {
  // Only this rank's threads: a rank that finished must not stop its peers.
  stop_local();
  stop_workers();
}

std::string HostBackend::device() const {
  const int world = options_.world ? options_.world->layout().world_size : 1;
  return fmt::format("host, rank {} of {} ({})", options_.rank, world, options_.ranks_as);
}

void HostBackend::begin(const Schedule& schedule) {
  schedule_ = &schedule;
  const std::size_t n = schedule.ops.size();
  spans_.assign(n, {});
  done_.assign(n, 0);
  ticket_.assign(n, 0);
  comm_issued_.assign(schedule.communicators.size(), 0);
  comm_done_.assign(schedule.communicators.size(), 0);
  costs_.reserve(n);
  factors_.reserve(n);
  // The same draws as the simulator's per-rank replay for this seed and rank.
  const auto jitter_of = jitter_draws(options_.jitter, options_.seed, options_.rank, n);
  const auto delay_of = issue_delay_draws(options_.issue_delay, options_.seed, options_.rank, n);
  bool collectives = false;
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = schedule.ops[i];
    costs_.push_back(options_.cost(static_cast<OpId>(i), op));
    if (!delay_of.empty()) costs_.back().cpu += delay_of[i];
    const double jitter = jitter_of.empty() ? 1.0 : jitter_of[i];
    // A slow rank is a slow GPU and jitter a GPU op's varying time, as the simulator's per-rank
    // replay models them (sim::simulate_ranks, the same draws for the same seed and rank): its
    // kernels stretch; collectives and host copies run at the links' speed and CPU-stream work at
    // the host's. A draw is taken for every op, so each op's draw is the same whatever its kind.
    const bool on_gpu =
        !is_collective(op.kind) && op.kind != OpKind::h2d && op.kind != OpKind::d2h &&
        schedule.streams.at(static_cast<std::size_t>(op.stream)).kind != StreamKind::cpu;
    double link = 1.0;  // a slow link stretches a collective's bandwidth part, not its latency
    const HostCost& c = costs_.back();
    if (is_collective(op.kind) && op.comm != kNone && !options_.comm_time_factors.empty() &&
        c.device > 0) {
      const double f = options_.comm_time_factors.at(static_cast<std::size_t>(op.comm));
      link = (static_cast<double>(c.latency) + f * static_cast<double>(c.device - c.latency)) /
             static_cast<double>(c.device);
    }
    factors_.push_back((on_gpu ? jitter * options_.slow_factor : link) * options_.time_scale);
    collectives = collectives || is_collective(op.kind);
  }
  if (collectives && !options_.world) throw Error("the schedule has collectives but no host world");
  allocator_ = std::make_unique<DeviceAllocator>(address_space_, options_.memory_capacity,
                                                 options_.allocator);
  workers_.clear();
  for (std::size_t st = 0; st < schedule.streams.size(); ++st) {
    workers_.push_back(std::make_unique<Worker>());
    if (schedule.streams[st].kind == StreamKind::cpu) continue;  // the issuing thread runs those
    Worker& w = *workers_.back();
    w.thread = std::thread([this, &w] { work(w); });
  }
  issue_free_ = Clock::now();
}

void HostBackend::allocate(BufferId id, const Buffer& buffer, StreamId stream) {
  throw_if_failed();
  if (buffer.location == Location::gpu) allocator_->allocate(id, buffer.size, stream, buffer.pool);
}

void HostBackend::free(BufferId id, const Buffer& buffer) {
  if (buffer.location == Location::gpu) allocator_->free(id);
}

MemoryUsage HostBackend::memory() const {
  return allocator_ ? MemoryUsage{allocator_->allocated(), allocator_->reserved(),
                                  options_.memory_capacity}
                    : MemoryUsage{};
}

void HostBackend::stream_wait(StreamId stream, OpId event) {
  throw_if_failed();
  Worker& w = *workers_.at(static_cast<std::size_t>(stream));
  {
    std::lock_guard lock(w.mutex);
    w.queue.push_back({true, event});
  }
  w.ready.notify_one();
}

void HostBackend::host_wait(OpId event) {
  throw_if_failed();
  try {
    wait_event(event);
  } catch (const std::exception&) {
    throw_if_failed();  // a stream's failure is the cause: report it, not this wait
    throw;
  }
  throw_if_failed();
}

HostWorld::Clock::duration HostBackend::duration_of(OpId id) const {
  const auto& c = costs_[static_cast<std::size_t>(id)];
  return std::chrono::nanoseconds(static_cast<std::int64_t>(
      std::llround(static_cast<double>(c.device) * factors_[static_cast<std::size_t>(id)])));
}

// The regions a data-moving op names are live in this rank's allocator when it is issued (its
// allocations come before, its frees after) and inside their buffers: the IR, not a guess, says
// what the op reads and writes.
void HostBackend::check_regions(OpId id, const Op& op) const {
  for (const BufferRef* ref : {&op.input, &op.output}) {
    if (!ref->named()) continue;
    const Buffer& buf = schedule_->buffers.at(static_cast<std::size_t>(ref->buffer));
    if (buf.location != Location::gpu) continue;  // host memory is not this allocator's
    const std::string what = fmt::format("{} names {}", describe_op(*schedule_, id),
                                         buffer_name(*schedule_, ref->buffer));
    if (allocator_->address(ref->buffer) == nullptr)
      throw Error(fmt::format("{}, which is not allocated when it is issued", what));
    const int ranks = ref->rank_chunk && op.comm != kNone
                          ? schedule_->communicators[static_cast<std::size_t>(op.comm)].size
                          : 1;
    if (ref->dtype != buf.dtype || ref->offset + ranks * ref->bytes() > buf.size)
      throw Error(fmt::format("{} as {} × {} from byte {}, which does not fit its {} B of {}", what,
                              ref->count, to_string(ref->dtype), ref->offset, buf.size,
                              to_string(buf.dtype)));
  }
}

void HostBackend::launch(OpId id, const Op& op) {
  throw_if_failed();
  if (moves_data(op.kind)) check_regions(id, op);
  if (op.comm != kNone)
    ticket_[static_cast<std::size_t>(id)] = comm_issued_[static_cast<std::size_t>(op.comm)]++;
  std::this_thread::sleep_until(issue_free_);  // the CPU is still busy issuing the last op
  Worker& w = *workers_.at(static_cast<std::size_t>(op.stream));
  {
    std::lock_guard lock(w.mutex);
    w.queue.push_back({false, id});
  }
  w.ready.notify_one();
  issued(id);
}

void HostBackend::run_host(OpId id, const Op&) {
  throw_if_failed();
  std::this_thread::sleep_until(issue_free_);
  run_op(id);
  throw_if_failed();
  issued(id);
}

// The issuing thread is busy for the op's CPU cost before it may issue the next.
void HostBackend::issued(OpId id) {
  const auto cpu =
      static_cast<double>(costs_[static_cast<std::size_t>(id)].cpu) * options_.time_scale;
  issue_free_ = Clock::now() + std::chrono::nanoseconds(std::llround(cpu));
}

void HostBackend::work(Worker& w) {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(w.mutex);
      w.ready.wait(lock, [&] { return w.head < w.queue.size() || w.closed; });
      if (w.head == w.queue.size()) return;  // closed and drained
      task = w.queue[w.head++];
    }
    if (aborted_.load()) continue;  // drain without running
    try {
      if (task.is_wait) {
        wait_event(task.op);
      } else {
        run_op(task.op);
      }
    } catch (const std::exception& e) {
      fail(task.op, e.what());
    }
  }
}

void HostBackend::run_op(OpId id) {
  const Op& op = schedule_->ops[static_cast<std::size_t>(id)];
  // A communicator runs its collectives one at a time in issue order (one NCCL stream per
  // process group), whichever stream issued them.
  if (op.comm != kNone) wait_turn(id, op.comm);
  const auto start = Clock::now();
  auto transfer_start = start;
  if (is_collective(op.kind)) run_collective(id, op, transfer_start);
  const auto duration = duration_of(id);
  sleep_until(transfer_start + duration);
  // An op that costs nothing (a wait, a view) is instantaneous here, whatever this thread's own
  // overhead was: its span says what the op took, not what the host took to get to it.
  const auto end = duration.count() == 0 && !is_collective(op.kind) ? start : Clock::now();
  const auto since_epoch = [&](Clock::time_point t) {
    const double ns = static_cast<double>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t - options_.epoch).count());
    return static_cast<TimeNs>(std::llround(ns / options_.time_scale));
  };
  spans_[static_cast<std::size_t>(id)] = {since_epoch(start), since_epoch(end)};
  {
    std::lock_guard lock(events_mutex_);
    done_[static_cast<std::size_t>(id)] = 1;
    if (op.comm != kNone) ++comm_done_[static_cast<std::size_t>(op.comm)];
  }
  event_done_.notify_all();
}

void HostBackend::wait_turn(OpId id, CommId comm) {
  const std::int64_t ticket = ticket_[static_cast<std::size_t>(id)];
  wait_for([&] { return comm_done_[static_cast<std::size_t>(comm)] == ticket; },
           [] { return std::string("the collectives issued before it on its communicator"); });
}

// Moves the data and checks every element: an all-gather must hold each position's pattern, a
// reduction the rounded sum of all positions' patterns.
void HostBackend::run_collective(OpId id, const Op& op, Clock::time_point& transfer_start) {
  HostWorld& world = *options_.world;
  const auto& comm = schedule_->communicators.at(static_cast<std::size_t>(op.comm));
  const Membership me = membership(comm, world.layout().world_size, options_.rank);
  const auto n = static_cast<std::size_t>(me.size);
  // The element type and per-rank count the IR names (check_schedule holds them to the
  // communicator); the world moves at most its chunk size of them.
  const DType dtype = op.output.dtype;
  const std::int64_t per_rank = op.kind == OpKind::reduce_scatter ? op.output.count
                                : op.kind == OpKind::all_gather   ? op.input.count
                                                                  : op.input.count / me.size;
  const std::int64_t chunk_elements = HostWorld::chunk_elements(
      world.layout(), per_rank * bytes_per_element(dtype) * me.size, dtype, me.size);
  const auto chunk = static_cast<std::size_t>(chunk_elements);
  const auto element = static_cast<std::size_t>(bytes_per_element(dtype));
  const std::size_t in_count = op.kind == OpKind::all_gather ? chunk : n * chunk;
  const std::size_t out_count = op.kind == OpKind::reduce_scatter ? chunk : n * chunk;
  std::vector<std::byte> input(in_count * element), output(out_count * element);
  for (std::size_t e = 0; e < in_count; ++e)
    detail::store(input.data(), static_cast<std::int64_t>(e), dtype, pattern(me.position, e));
  CollectiveCall call{id, op.kind, op.comm, dtype, chunk_elements, input, output};
  transfer_start = world.run(options_.rank, call, Clock::now() + options_.timeout);
  for (std::size_t e = 0; e < out_count; ++e) {
    float expected = 0;
    if (op.kind == OpKind::all_gather) {
      expected = pattern(static_cast<int>(e / chunk), e % chunk);
    } else {
      const std::size_t at =
          op.kind == OpKind::reduce_scatter ? static_cast<std::size_t>(me.position) * chunk + e : e;
      for (std::size_t p = 0; p < n; ++p) expected += pattern(static_cast<int>(p), at);
      expected = rounded(expected, dtype);
    }
    const float got = detail::load(output.data(), static_cast<std::int64_t>(e), dtype);
    if (got != expected) {
      throw CollectiveError(fmt::format("{} returned a wrong value at element {}: {} instead of {}",
                                        to_string(op.kind), e, got, expected));
    }
  }
  ++collectives_checked_;
  elements_checked_ += static_cast<std::int64_t>(out_count);
}

void HostBackend::wait_event(OpId event) {
  wait_for([&] { return done_.at(static_cast<std::size_t>(event)) != 0; },
           [&] { return describe_op(*schedule_, event); });
}

// Waits get twice the timeout: when a collective is stuck, the collective fails first and names
// itself, and the ops waiting behind it stop with it. `done` is read under events_mutex_.
template <typename Done, typename What>
void HostBackend::wait_for(Done done, What what) {
  const auto timeout = 2 * options_.timeout;
  const auto deadline = Clock::now() + timeout;
  std::unique_lock lock(events_mutex_);
  while (!done()) {
    if (aborted_.load()) throw Error("stopped (another op failed)");
    if (Clock::now() >= deadline)
      throw Error(fmt::format("timed out after {} ms waiting for {}", timeout.count(), what()));
    event_done_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(20)));
  }
}

void HostBackend::fail(OpId op, const std::string& message) noexcept {
  {
    std::lock_guard lock(error_mutex_);
    if (!error_) error_.emplace(op, message);
  }
  stop_local();
  if (options_.world) options_.world->abort();
}

void HostBackend::throw_if_failed() const {
  std::lock_guard lock(error_mutex_);
  if (error_) {
    throw ExecError(error_->first,
                    fmt::format("{} failed on rank {}: {}", describe_op(*schedule_, error_->first),
                                options_.rank, error_->second));
  }
  if (options_.world && options_.world->aborted())
    throw Error(fmt::format("rank {} stopped: another rank failed", options_.rank));
}

std::vector<OpSpan> HostBackend::finish() {
  stop_workers();  // they drain their queues first
  throw_if_failed();
  return spans_;
}

void HostBackend::abort() noexcept {
  stop_local();
  if (options_.world) options_.world->abort();
  stop_workers();
}

void HostBackend::stop_local() noexcept {
  {
    std::lock_guard lock(sleep_mutex_);
    aborted_ = true;
  }
  wake_.notify_all();
  event_done_.notify_all();
}

void HostBackend::sleep_until(Clock::time_point t) {
  std::unique_lock lock(sleep_mutex_);
  wake_.wait_until(lock, t, [&] { return aborted_.load(); });
}

// Closes every queue (workers finish what is queued, skipping it once aborted) and joins them.
void HostBackend::stop_workers() noexcept {
  for (auto& w : workers_) {
    {
      std::lock_guard lock(w->mutex);
      w->closed = true;
    }
    w->ready.notify_one();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

}  // namespace shardscope::exec
