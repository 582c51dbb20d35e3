#include "shardscope/sim/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "op_cost_cache.hpp"
#include "shardscope/core/device_memory.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/memory_ledger.hpp"

namespace shardscope::sim {
namespace {

constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max();

struct Active {
  OpId op;
  Resource resource;
  double remaining;  // ns of work at full rate left at time `since`
  TimeNs since = 0;
  bool fixed = false;      // a fixed time is a measured fact: never stretched by sharing
  double contended = 1.0;  // OpCost::contended (a GPU op)
  int sms = 0;             // OpCost::sms (a collective)
  double rate = 1.0;
  double shared_rate = 1.0;  // a GPU op's rate with no collective beside it: 1 / GPU ops running
  TimeNs finish = 0;
};

// What couples several engines replaying ranks of one job (simulate_together): an engine tells it
// when it is ready for a collective, and it releases the collective on every engine of the
// collective's instance once the last of them is ready.
class Coupling {
 public:
  virtual void arrive(std::size_t engine, OpId op) = 0;

 protected:
  ~Coupling() = default;
};

class Together;

class Engine {
  friend class Together;        // steps several engines on one clock (next_event, advance)
  using Index = std::uint32_t;  // into the op tables below (ops are counted as OpId, an int32)

 public:
  // `with_memory` false: buffers are neither allocated nor freed (run_step_time). Memory never
  // delays an op in this model, so the times are the same.
  Engine(const Schedule& s, const CostModel& costs, const SimOptions& options,
         bool with_memory = true)
      : s_(s),
        costs_(costs),
        options_(options),
        with_memory_(with_memory),
        allocator_(with_memory ? allocator_capacity(costs.cluster(), options.allocator, s) : 0,
                   options.allocator),
        n_(s.ops.size()) {
    if (with_memory_) allocator_.reserve_buffers(s_.buffers.size());
    stream_is_cpu_.reserve(s_.streams.size());
    for (const auto& st : s_.streams) stream_is_cpu_.push_back(st.kind == StreamKind::cpu);
    // Two passes over the ops. The first costs each op and counts, for the CSR tables below, the
    // ops of each stream and communicator and who waits on each op; the second fills them in
    // issue order. A stream's or communicator's queue is a range of its table; the CPU runs its
    // own ops as it issues them, so they queue on no stream.
    const std::size_t streams = s_.streams.size(), comms = s_.communicators.size();
    cost_.reserve(n_);
    stream_ops_start_.assign(streams + 1, 0);
    comm_ops_start_.assign(comms + 1, 0);
    dependents_start_.assign(n_ + 1, 0);
    pending_deps_.resize(n_);
    op_on_cpu_.resize(n_);
    cpu_busy_.assign(static_cast<std::size_t>(std::max(s_.iterations, 1)), 0);
    retries_by_iteration_.assign(static_cast<std::size_t>(std::max(s_.iterations, 1)), 0);
    OpCostCache cache;
    for (std::size_t i = 0; i < n_; ++i) {
      const Op& op = s_.ops[i];
      cost_.push_back(cache.cost(costs_, s_, op));
      vary(i, cost_.back());
      op_on_cpu_[i] = stream_is_cpu_[static_cast<std::size_t>(op.stream)];
      if (!op_on_cpu_[i]) ++stream_ops_start_[static_cast<std::size_t>(op.stream) + 1];
      if (op.comm != kNone) ++comm_ops_start_[static_cast<std::size_t>(op.comm) + 1];
      pending_deps_[i] = static_cast<int>(op.deps.size());
      for (OpId d : op.deps) ++dependents_start_[static_cast<std::size_t>(d) + 1];
    }
    const auto prefix_sums = [](std::vector<Index>& start) {
      for (std::size_t k = 1; k < start.size(); ++k) start[k] += start[k - 1];
    };
    prefix_sums(stream_ops_start_);
    prefix_sums(comm_ops_start_);
    prefix_sums(dependents_start_);
    stream_ops_.resize(stream_ops_start_.back());
    comm_ops_.resize(comm_ops_start_.back());
    dependents_.resize(dependents_start_.back());
    // The queue heads serve as fill cursors here, then start at the front of each queue.
    stream_head_.assign(stream_ops_start_.begin(), stream_ops_start_.end() - 1);
    comm_head_.assign(comm_ops_start_.begin(), comm_ops_start_.end() - 1);
    std::vector<Index> fill(dependents_start_.begin(), dependents_start_.end() - 1);
    for (std::size_t i = 0; i < n_; ++i) {
      const Op& op = s_.ops[i];
      const auto id = static_cast<OpId>(i);
      if (!op_on_cpu_[i]) stream_ops_[stream_head_[static_cast<std::size_t>(op.stream)]++] = id;
      if (op.comm != kNone) comm_ops_[comm_head_[static_cast<std::size_t>(op.comm)]++] = id;
      for (OpId d : op.deps) dependents_[fill[static_cast<std::size_t>(d)]++] = id;
    }
    stream_head_.assign(stream_ops_start_.begin(), stream_ops_start_.end() - 1);
    comm_head_.assign(comm_ops_start_.begin(), comm_ops_start_.end() - 1);
    rec_.assign(n_, {});
    running_.assign(streams, kNone);
    stream_marked_.assign(streams, 0);
    last_end_on_stream_.assign(streams, kNone);
    last_on_comm_.assign(comms, kNone);
  }

  SimulationResult run() {
    run_to_end();
    return finish();
  }

  // The step as analysis::summarize measures it on the timeline (steady_state): from the last end
  // of the next-to-last iteration's ops to the last end of the last iteration's.
  TimeNs run_step_time() {
    run_to_end();
    const int last = last_iteration(s_);
    TimeNs start = 0, end = 0;
    for (std::size_t i = first_op_of(s_, last - 1); i < n_; ++i) {
      TimeNs& t = s_.ops[i].iteration == last ? end : start;
      t = std::max(t, rec_[i].end);
    }
    return end - start;
  }

  // ---- the steps of run(), for simulate_together's one clock over several engines
  void couple(Coupling* coupling, std::size_t index) {
    coupling_ = coupling;
    index_ = index;
    released_.assign(n_, 0);
    ready_seen_.assign(n_, 0);
  }
  void begin() {
    if (with_memory_) allocate_live_at_start();
    if (options_.record_memory_samples) sample_memory();
  }
  // Issues and starts everything that can at the current time.
  void settle() {
    issue_ready();
    start_ready();
  }
  bool done() const { return completed_ == n_; }
  Error stalled() const {
    return Error(fmt::format("simulation stalled at {} with {} of {} ops done (schedule bug)",
                             format_duration(now_), completed_, n_));
  }
  // The other ranks are ready for collective `id`: it may start (at the next settle()).
  void release(OpId id) {
    released_[static_cast<std::size_t>(id)] = 1;
    mark_stream(static_cast<std::size_t>(s_.ops[static_cast<std::size_t>(id)].stream));
  }
  SimulationResult finish() {
    finish_timeline();
    return std::move(result_);
  }

 private:
  void run_to_end() {
    begin();
    while (true) {
      settle();
      if (done()) break;
      const TimeNs next = next_event();
      if (next == kNever) throw stalled();
      advance(next);
    }
  }

  // This rank's variation (SimOptions): its GPU's speed and jitter, its links, its CPU's delays.
  void vary(std::size_t i, OpCost& c) const {
    const auto scaled = [](TimeNs t, double f) {
      return static_cast<TimeNs>(std::llround(static_cast<double>(t) * f));
    };
    if (c.resource == Resource::gpu &&
        (options_.gpu_time_factor != 1.0 || !options_.op_time_factors.empty())) {
      c.duration =
          scaled(c.duration,
                 options_.gpu_time_factor *
                     (options_.op_time_factors.empty() ? 1.0 : options_.op_time_factors.at(i)));
    }
    const CommId comm = s_.ops[i].comm;
    if (comm != kNone && !options_.comm_time_factors.empty() &&
        (c.resource == Resource::network || c.resource == Resource::nvlink)) {
      const double f = options_.comm_time_factors.at(static_cast<std::size_t>(comm));
      if (f != 1.0) c.duration = c.latency + scaled(c.duration - c.latency, f);
    }
    if (!options_.issue_delays.empty()) c.cpu += options_.issue_delays.at(i);
  }

  // ---- CPU
  bool deps_done(std::size_t op) const { return pending_deps_[op] == 0; }

  void issue_ready() {
    while (next_issue_ < n_ && cpu_free_ <= now_) {
      const auto i = next_issue_;
      const Op& op = s_.ops[i];
      const bool on_cpu = op_on_cpu_[i];
      if (on_cpu && !deps_done(i))
        return;  // the CPU blocks (event.synchronize, CPU optimizer waits)
      if (with_memory_ && (!op.allocs.empty() || !op.frees.empty())) memory(i);
      rec_[i].issue = now_;
      if (on_cpu) {
        run_on_cpu(i);
      } else {
        // It joined its stream's queue. Only the head of an idle stream can start now; an op behind
        // another starts when that one completes, which marks the stream then.
        const auto st = static_cast<std::size_t>(op.stream);
        if (running_[st] == kNone && static_cast<std::size_t>(stream_ops_[stream_head_[st]]) == i)
          mark_stream(st);
        cpu_free_ = now_ + cost_[i].cpu;
        cpu_busy(op.iteration, cost_[i].cpu);
      }
      ++next_issue_;
    }
  }

  // A CPU op runs as it is issued (its dependencies are done): the CPU is busy for its work and
  // its issue overhead.
  void run_on_cpu(std::size_t i) {
    const TimeNs work = std::max(cost_[i].duration, TimeNs{0});
    rec_[i].ready = now_;
    rec_[i].start = now_;
    if (options_.record_critical_path) attribute_cpu_start(i);
    cpu_free_ = now_ + work + cost_[i].cpu;
    cpu_busy(s_.ops[i].iteration, work + cost_[i].cpu);
    if (work == 0)
      complete(static_cast<OpId>(i));
    else
      activate(static_cast<OpId>(i), Resource::host, static_cast<double>(work));
  }

  // The work a GPU op did not do from a.since to `until` because collectives ran beside it
  // (Timeline::contention_by_iteration). The test is inline, the accounting out of the event
  // loop's way: most activities at most events run at their shared rate.
  void account_contention(const Active& a, TimeNs until) {
    if (a.resource == Resource::gpu && a.rate < a.shared_rate) add_contention(a, until);
  }
  [[gnu::noinline]] void add_contention(const Active& a, TimeNs until) {
    add_by_iteration(contention_, s_.ops[static_cast<std::size_t>(a.op)].iteration,
                     (a.shared_rate - a.rate) * static_cast<double>(until - a.since));
  }

  void cpu_busy(int iteration, TimeNs t) { add_by_iteration(cpu_busy_, iteration, t); }

  // Adds `value` to `by_iteration[iteration]`, growing it to hold that iteration.
  template <typename T>
  static void add_by_iteration(std::vector<T>& by_iteration, int iteration, T value) {
    const auto i = static_cast<std::size_t>(iteration);
    if (by_iteration.size() <= i) by_iteration.resize(i + 1, T{});
    by_iteration[i] += value;
  }

  // Sharded parameters (and anything else live at start) were allocated on the default stream at
  // model construction.
  void allocate_live_at_start() {
    const StreamId compute = default_stream(s_);
    for (std::size_t b = 0; b < s_.buffers.size(); ++b) {
      if (s_.buffers[b].live_at_start)
        allocate_buffer(static_cast<BufferId>(b), compute, kNone, Phase::forward);
    }
  }

  // A GPU buffer through the allocator model; the first that does not fit is reported and the
  // simulation goes on, so the rest of the timeline is still there to inspect. Forced inline: it
  // runs once per allocation, and as a call it cost 0.5 % of a sweep point.
  [[gnu::always_inline]] void allocate_buffer(BufferId b, StreamId stream, OpId op, Phase phase) {
    const Buffer& buf = s_.buffers[static_cast<std::size_t>(b)];
    if (buf.location != Location::gpu) return;
    const int retries_before = allocator_.retries();
    const bool fitted = allocator_.allocate(b, buf.size, stream, buf.pool);
    if (allocator_.retries() != retries_before)
      count_retries(op, allocator_.retries() - retries_before);
    if (!fitted) {
      if (!out_of_memory_) {
        out_of_memory_ =
            OutOfMemoryEvent{op, buffer_name(s_, b), buf.category, buf.size, allocator_.reserved()};
      }
      return;
    }
    ledger_.allocated(buf, op, phase, allocator_.allocated(), allocator_.reserved());
  }

  // Retries by the iteration of the op that allocated (buffers live at start: the first).
  void count_retries(OpId op, int retries) {
    const int iteration = op == kNone ? 0 : s_.ops[static_cast<std::size_t>(op)].iteration;
    add_by_iteration(retries_by_iteration_, iteration, retries);
  }

  // ---- memory at issue time: allocations, then frees
  // Out of line, and called only for ops that allocate or free (most ops do neither). What it
  // does to the allocator depends on the op order alone: replay_memory (memory_replay.cpp) makes
  // the same calls without time, and MemoryReplay.* hold the two equal.
  [[gnu::noinline]] void memory(std::size_t i) {
    const Op& op = s_.ops[i];
    for (BufferId b : op.allocs) allocate_buffer(b, op.stream, static_cast<OpId>(i), op.phase);
    if (options_.record_memory_samples && !op.allocs.empty())
      sample_memory(static_cast<OpId>(i), false);
    for (BufferId b : op.frees) {
      const Buffer& buf = s_.buffers[static_cast<std::size_t>(b)];
      if (buf.location != Location::gpu) continue;
      if (allocator_.free(b)) ledger_.freed(buf);
    }
    if (options_.record_memory_samples && !op.frees.empty())
      sample_memory(static_cast<OpId>(i), true);
  }

  // Samples are taken in issue order and later placed on the GPU timeline: what an op allocates
  // at its start, what it frees at its end, so the chart lines up with the ops that use the memory
  // (the CPU may run far ahead of the GPU) and an op's transient workspace shows for its duration.
  // Called only when the run records samples.
  void sample_memory(OpId op = kNone, bool at_end = false) {
    ledger_.sample(op, at_end, allocator_.allocated(), allocator_.reserved(), now_);
  }

  // ---- GPU streams
  // Only streams whose head may have become startable are looked at: one whose new op is its head
  // with nothing running, whose running op completed, whose head's dependency completed, or whose
  // head reached the front of its communicator. Every op that can start at `now_` does, whatever
  // order streams are visited in: what `start` records depends only on completed ops.
  void mark_stream(std::size_t st) {
    if (stream_marked_[st]) return;
    stream_marked_[st] = 1;
    marked_streams_.push_back(static_cast<StreamId>(st));
  }

  void start_ready() {
    while (!marked_streams_.empty()) {
      const auto st = static_cast<std::size_t>(marked_streams_.back());
      marked_streams_.pop_back();
      stream_marked_[st] = 0;
      Index& head = stream_head_[st];
      const Index end = stream_ops_start_[st + 1];
      // The queue: the stream's ops from `head` that the CPU has issued.
      while (head < end && static_cast<std::size_t>(stream_ops_[head]) < next_issue_ &&
             running_[st] == kNone) {
        const OpId id = stream_ops_[head];
        const Op& op = s_.ops[static_cast<std::size_t>(id)];
        if (!deps_done(static_cast<std::size_t>(id))) break;
        if (op.comm != kNone && comm_ops_[comm_head_[static_cast<std::size_t>(op.comm)]] != id)
          break;
        if (held_for_peers(id)) break;
        ++head;
        start(id, st);
      }
    }
  }

  // A collective this rank could start now that another rank is not ready for (simulate_together):
  // its readiness is recorded once; the coupling releases it when the last rank is ready.
  bool held_for_peers(OpId id) {
    const auto i = static_cast<std::size_t>(id);
    if (coupling_ != nullptr && s_.ops[i].comm != kNone && is_collective(s_.ops[i].kind)) {
      if (released_[i]) return false;
      if (!ready_seen_[i]) {
        ready_seen_[i] = 1;
        rec_[i].ready = now_;
        coupling_->arrive(index_, id);  // may release it at once: this rank was the last
      }
      return !released_[i];
    }
    return false;
  }

  void start(OpId id, std::size_t stream) {
    auto& rec = rec_[static_cast<std::size_t>(id)];
    if (ready_seen_.empty() || !ready_seen_[static_cast<std::size_t>(id)]) rec.ready = now_;
    rec.start = now_;
    if (options_.record_critical_path) attribute_start(id, stream);
    running_[stream] = id;
    const auto& c = cost_[static_cast<std::size_t>(id)];
    if (c.duration <= 0 || c.resource == Resource::none) {
      complete(id);
    } else {
      activate(id, c.resource, static_cast<double>(c.duration));
    }
  }

  // What set a GPU op's start: the latest of its issue, its stream predecessor, its dependencies
  // and its communicator's previous op.
  void attribute_start(OpId id, std::size_t stream) {
    const Op& op = s_.ops[static_cast<std::size_t>(id)];
    Binding why = Binding::issue;  // bound by the CPU: the op issued just before held it
    OpId pred = id > 0 ? id - 1 : kNone;
    TimeNs latest = rec_[static_cast<std::size_t>(id)].issue;
    auto consider = [&](OpId other, Binding b) {
      if (other == kNone) return;
      const TimeNs t = rec_[static_cast<std::size_t>(other)].end;
      if (t > latest || (t == latest && b == Binding::dependency)) {
        latest = t;
        why = b;
        pred = other;
      }
    };
    consider(last_end_on_stream_[stream], Binding::stream);
    for (OpId d : op.deps) consider(d, Binding::dependency);
    if (op.comm != kNone)
      consider(last_on_comm_[static_cast<std::size_t>(op.comm)], Binding::communicator);
    // Ready before it started: only a collective held for other ranks (simulate_together).
    if (const auto& rec = rec_[static_cast<std::size_t>(id)]; rec.ready < rec.start) {
      why = Binding::peers;  // another rank set its start: the path leaves this rank here
      pred = kNone;
    }
    attribute(id, why, pred);
  }

  // What set a CPU op's start: the last of its dependencies to end, or else the CPU itself (the op
  // issued just before it).
  void attribute_cpu_start(std::size_t i) {
    OpId pred = i > 0 ? static_cast<OpId>(i - 1) : kNone;
    Binding why = Binding::issue;
    for (OpId d : s_.ops[i].deps) {
      if (rec_[static_cast<std::size_t>(d)].end >=
          (pred == kNone ? 0 : rec_[static_cast<std::size_t>(pred)].end)) {
        pred = d;
        why = Binding::dependency;
      }
    }
    attribute(static_cast<OpId>(i), why, pred);
  }

  void attribute(OpId id, Binding why, OpId pred) {
    auto& r = rec_[static_cast<std::size_t>(id)];
    r.binding = why;
    r.predecessor = pred;
  }

  void activate(OpId id, Resource resource, double work) {
    const auto i = static_cast<std::size_t>(id);
    active_.push_back({id, resource, work, now_, s_.ops[i].fixed_time.has_value(),
                       cost_[i].contended, cost_[i].sms});
    rates_dirty_ = true;
  }

  void complete(OpId id) {
    auto& r = rec_[static_cast<std::size_t>(id)];
    r.end = now_;
    ++completed_;
    const Op& op = s_.ops[static_cast<std::size_t>(id)];
    const auto st = static_cast<std::size_t>(op.stream);
    if (running_[st] == id) running_[st] = kNone;
    last_end_on_stream_[st] = id;
    mark_stream(st);
    if (op.comm != kNone) {
      const auto c = static_cast<std::size_t>(op.comm);
      Index& head = comm_head_[c];
      if (head < comm_ops_start_[c + 1] && comm_ops_[head] == id) {
        ++head;
        if (head < comm_ops_start_[c + 1])
          mark_stream(
              static_cast<std::size_t>(s_.ops[static_cast<std::size_t>(comm_ops_[head])].stream));
      }
      last_on_comm_[c] = id;
    }
    for (Index k = dependents_start_[static_cast<std::size_t>(id)];
         k < dependents_start_[static_cast<std::size_t>(id) + 1]; ++k) {
      const auto waiter = static_cast<std::size_t>(dependents_[k]);
      if (--pending_deps_[waiter] == 0 && !op_on_cpu_[waiter]) {
        mark_stream(static_cast<std::size_t>(s_.ops[waiter].stream));
      }
    }
  }

  // ---- time
  // Rates change only when an activity starts or ends; in between every activity progresses
  // linearly, so its remaining work is brought up to date here, not at every event.
  void update_rates() {
    int counts[7] = {0, 0, 0, 0, 0, 0, 0};
    int held_sms = 0;  // by the collectives running
    for (const auto& a : active_) {
      ++counts[static_cast<int>(a.resource)];
      if (a.resource == Resource::nvlink || a.resource == Resource::network) held_sms += a.sms;
    }
    const double held = held_share(held_sms, costs_.contended_sms());
    const double scale = costs_.contention_scale();
    const auto gpu_rate = [&](const Active& a, int sharing) {
      return contended_rate(a.contended, held, scale) / sharing;
    };
    next_finish_ = kNever;
    for (auto& a : active_) {
      if (a.since != now_) {
        account_contention(a, now_);
        a.remaining = std::max(0.0, a.remaining - a.rate * static_cast<double>(now_ - a.since));
        a.since = now_;
      }
      const int k = std::max(1, counts[static_cast<int>(a.resource)]);
      a.shared_rate = a.fixed ? 1.0 : 1.0 / k;
      a.rate = a.fixed || a.resource == Resource::host ? 1.0
               : a.resource == Resource::gpu           ? gpu_rate(a, k)
                                                       : 1.0 / k;
      a.finish = now_ + static_cast<TimeNs>(std::ceil(a.remaining / a.rate - 1e-6));
      next_finish_ = std::min(next_finish_, a.finish);
    }
    rates_dirty_ = false;
  }

  TimeNs next_event() {
    if (rates_dirty_) update_rates();
    TimeNs next = next_finish_;
    // The CPU issues next when it is free, unless it is blocked on a CPU-side wait.
    const bool blocked = next_issue_ < n_ && op_on_cpu_[next_issue_] && !deps_done(next_issue_);
    if (next_issue_ < n_ && !blocked) next = std::min(next, std::max(cpu_free_, now_));
    return next;
  }

  void advance(TimeNs t) {
    now_ = t;
    if (t < next_finish_) return;  // a CPU issue: nothing finishes
    auto& finished = finished_;    // reused: one event per op would otherwise allocate each time
    finished.clear();
    for (const auto& a : active_) {
      if (a.finish <= t) {
        finished.push_back(a.op);
        account_contention(a, t);
      }
    }
    if (finished.size() > 1) std::sort(finished.begin(), finished.end());  // one finishes, mostly
    active_.erase(std::remove_if(active_.begin(), active_.end(),
                                 [&](const Active& a) { return a.finish <= t; }),
                  active_.end());
    for (OpId id : finished) complete(id);
    rates_dirty_ = true;
  }

  // From the op that ended last, follow what bound each start back through the last iteration.
  std::vector<CriticalStep> exact_critical_path() const {
    OpId cur = kNone;
    TimeNs latest = -1;
    for (std::size_t i = 0; i < n_; ++i) {
      if (rec_[i].end > latest) {
        latest = rec_[i].end;
        cur = static_cast<OpId>(i);
      }
    }
    std::vector<CriticalStep> path;
    const int last = s_.iterations - 1;
    while (cur != kNone && s_.ops[static_cast<std::size_t>(cur)].iteration == last) {
      const OpRecord& rec = rec_[static_cast<std::size_t>(cur)];
      CriticalStep step{cur, false, 0};
      if (rec.predecessor != kNone && rec.binding == Binding::issue) {
        step.issue_bound = true;
        step.cpu_gap = rec.start - rec_[static_cast<std::size_t>(rec.predecessor)].start;
      }
      path.push_back(step);
      cur = rec.predecessor;
    }
    return path;
  }

  void finish_timeline() {
    // Memory and peaks went into the result as the run recorded them; the rest is the schedule's.
    Timeline t = timeline_of(s_);
    ledger_.move_into(t, s_, rec_);
    t.source = "simulated";
    t.provenance.backend = "simulator";
    t.provenance.device = fmt::format("simulated {}", costs_.cluster().gpu.name);
    t.provenance.version = std::string(shardscope_version());
    t.facts = costs_.run_facts(s_);
    t.memory_capacity = allocator_.capacity();  // a memory fraction's share of the device
    t.cpu_busy_by_iteration = std::move(cpu_busy_);
    contention_.resize(static_cast<std::size_t>(std::max(1, s_.iterations)), 0.0);
    for (const double lost : contention_)
      t.contention_by_iteration.push_back(static_cast<TimeNs>(std::llround(lost)));
    t.allocator_retries = allocator_.retries();
    t.allocator_retries_by_iteration = std::move(retries_by_iteration_);
    t.out_of_memory = std::move(out_of_memory_);
    if (options_.record_critical_path) t.critical_path = exact_critical_path();
    // Timeline order is (start, stream, op). Each stream runs its ops in issue (op id) order, so
    // its starts never decrease: the order is a merge of the per-stream lists, far cheaper than a
    // sort of all ops.
    std::vector<std::vector<OpId>> by_stream(s_.streams.size());
    for (std::size_t i = 0; i < n_; ++i)
      by_stream[static_cast<std::size_t>(s_.ops[i].stream)].push_back(static_cast<OpId>(i));
    std::vector<std::size_t> head(by_stream.size(), 0);
    // The start of each stream's next op (kNever once it has none): the merge scans this array.
    const auto next_start = [&](std::size_t st) {
      return head[st] < by_stream[st].size()
                 ? rec_[static_cast<std::size_t>(by_stream[st][head[st]])].start
                 : kNever;
    };
    std::vector<TimeNs> head_start(by_stream.size());
    for (std::size_t st = 0; st < by_stream.size(); ++st) head_start[st] = next_start(st);
    t.ops.reserve(n_);
    for (std::size_t placed = 0; placed < n_; ++placed) {
      const auto pick = static_cast<std::size_t>(
          std::min_element(head_start.begin(), head_start.end()) - head_start.begin());
      const OpId id = by_stream[pick][head[pick]++];
      head_start[pick] = next_start(pick);
      const OpRecord& rec = rec_[static_cast<std::size_t>(id)];
      TimelineOp& op = t.ops.emplace_back(timeline_op_of(s_, id, rec.start, rec.end));
      if (!op_on_cpu_[static_cast<std::size_t>(id)]) {
        op.issue_start = rec.issue;
        op.issue_end = rec.issue + cost_[static_cast<std::size_t>(id)].cpu;
      }
    }
    result_.timeline = std::move(t);
    result_.ops = std::move(rec_);
  }

  const Schedule& s_;
  const CostModel& costs_;
  SimOptions options_;
  bool with_memory_ = true;
  std::vector<TimeNs> cpu_busy_;           // by iteration: issue overheads and CPU work
  std::vector<int> retries_by_iteration_;  // the allocator's, by the allocating op's iteration
  std::vector<double> contention_;         // by iteration: GPU work lost beside collectives (ns)
  std::optional<OutOfMemoryEvent> out_of_memory_;  // the first allocation that did not fit
  CachingAllocator allocator_;
  std::size_t n_;
  std::vector<OpCost> cost_;
  std::vector<OpRecord> rec_;
  std::vector<char> stream_is_cpu_;
  std::vector<char> op_on_cpu_;  // per op: it runs on the CPU (read without touching the op)
  std::vector<Index> stream_ops_start_, comm_ops_start_;  // CSR over stream_ops_ / comm_ops_
  std::vector<OpId> stream_ops_, comm_ops_;     // ops of each stream / communicator, issue order
  std::vector<Index> stream_head_, comm_head_;  // next op to start / to run
  std::vector<OpId> running_;
  std::vector<char> stream_marked_;       // in marked_streams_
  std::vector<StreamId> marked_streams_;  // streams whose head may start now
  std::vector<OpId> last_end_on_stream_;
  std::vector<OpId> last_on_comm_;
  std::vector<int> pending_deps_;
  std::vector<Index>
      dependents_start_;  // CSR: ops waiting on op i are dependents_[start[i], start[i+1])
  std::vector<OpId> dependents_;
  std::vector<Active> active_;
  std::vector<OpId> finished_;
  Coupling* coupling_ = nullptr;  // simulate_together: who releases collectives
  std::size_t index_ = 0;         // this engine's place in the coupling
  std::vector<char> released_;    // by op, coupled: every rank of its instance is ready
  std::vector<char> ready_seen_;  // by op, coupled: its readiness is recorded
  MemoryLedger ledger_;
  bool rates_dirty_ = true;
  TimeNs next_finish_ = kNever;  // earliest finish among active_ (valid while !rates_dirty_)
  std::size_t next_issue_ = 0;
  std::size_t completed_ = 0;
  TimeNs now_ = 0;
  TimeNs cpu_free_ = 0;
  SimulationResult result_;
};

// The engines of simulate_together on one clock: a collective is released on every engine of
// its instance when the last of them arrives at it.
class Together final : public Coupling {
 public:
  Together(const Schedule& s, const CostModel& costs, const std::vector<SimOptions>& options,
           const std::vector<std::vector<int>>& instance)
      : s_(s), instance_(instance) {
    for (std::size_t e = 0; e < options.size(); ++e) {
      engines_.push_back(std::make_unique<Engine>(s, costs, options[e]));
      engines_.back()->couple(this, e);
      for (std::size_t k = 0; k < instance[e].size(); ++k) {
        const auto g = static_cast<std::size_t>(instance[e][k]);
        if (members_.size() <= g) members_.resize(g + 1);
        members_[g].push_back(e);
      }
    }
  }

  std::vector<SimulationResult> run() {
    for (auto& e : engines_) e->begin();
    while (true) {
      do {  // a release at this time may let other engines start more at this time
        released_any_ = false;
        for (auto& e : engines_) e->settle();
      } while (released_any_);
      if (std::all_of(engines_.begin(), engines_.end(), [](const auto& e) { return e->done(); }))
        break;
      TimeNs next = kNever;
      for (auto& e : engines_) next = std::min(next, e->next_event());
      if (next == kNever) throw engines_.front()->stalled();
      for (auto& e : engines_) e->advance(next);
    }
    std::vector<SimulationResult> out;
    for (auto& e : engines_) out.push_back(e->finish());
    return out;
  }

  void arrive(std::size_t engine, OpId op) override {
    const auto comm = static_cast<std::size_t>(s_.ops[static_cast<std::size_t>(op)].comm);
    const int group = instance_[engine][comm];
    std::size_t& count = arrived_[{op, group}];
    const auto& members = members_[static_cast<std::size_t>(group)];
    if (++count < members.size()) return;
    arrived_.erase({op, group});
    for (std::size_t e : members) engines_[e]->release(op);
    released_any_ = true;
  }

 private:
  const Schedule& s_;
  const std::vector<std::vector<int>>& instance_;  // [engine][communicator] → group id
  std::vector<std::vector<std::size_t>> members_;  // by group id: its engines
  std::vector<std::unique_ptr<Engine>> engines_;
  std::map<std::pair<OpId, int>, std::size_t> arrived_;  // engines ready, per open collective
  bool released_any_ = false;
};

}  // namespace

SimulationResult simulate(const Schedule& schedule, const CostModel& costs,
                          const SimOptions& options) {
  return Engine(schedule, costs, options).run();
}

TimeNs simulate_step_time(const Schedule& schedule, const CostModel& costs, SimOptions options) {
  options.record_memory_samples = false;
  options.record_critical_path = false;
  return Engine(schedule, costs, options, false).run_step_time();
}

std::vector<SimulationResult> simulate_together(const Schedule& schedule, const CostModel& costs,
                                                const std::vector<SimOptions>& options,
                                                const std::vector<std::vector<int>>& instance) {
  return Together(schedule, costs, options, instance).run();
}

}  // namespace shardscope::sim
