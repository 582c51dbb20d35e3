#include "shardscope/traces/kineto_import.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "fsdp_ranges.hpp"
#include "host_device_work.hpp"
#include "kineto_events.hpp"
#include "kineto_reader.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/output_file.hpp"
#include "shardscope/core/units.hpp"

namespace shardscope::traces {
namespace detail {

Bytes dtype_bytes(std::string_view dtype) {
  std::string d(dtype.starts_with("c10::") ? dtype.substr(5) : dtype);
  for (char& c : d) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (d == "double" || d == "long" || d == "int64") return 8;
  if (d == "float" || d == "int" || d == "int32" || d == "float32") return 4;
  if (d == "bfloat16" || d == "half" || d == "float16" || d == "short") return 2;
  if (d == "byte" || d == "char" || d == "bool" || d.find("float8") != std::string::npos) return 1;
  return 0;
}

}  // namespace detail

namespace {

using nlohmann::json;
using namespace detail;  // NOLINT(google-build-using-namespace): the importer's own records

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Kineto writes microseconds, since the epoch in older versions (about 1.8e15 us today). A time
// beyond this bound (about 127 years) is not a profiler's.
constexpr double kMaxTraceMicroseconds = 4e15;
// Sizes and counts no trace of one GPU comes near: 1 PiB, 2^24 ranks.
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 50;
constexpr std::int64_t kMaxRanks = std::int64_t{1} << 24;
// A profiled window lasts seconds to minutes; a trace spanning more than this (about 11.6 days)
// is refused, which keeps every sum of its times and durations far inside TimeNs.
constexpr TimeNs kMaxTraceSpan = 1'000'000'000'000'000;

/// Microseconds (fractional, Kineto's unit) to integer nanoseconds.
TimeNs to_ns(double us) {
  return static_cast<TimeNs>(std::llround(us * 1000.0));
}

std::string text(const json& e, const char* key) {
  const auto it = e.find(key);
  if (it == e.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<std::int64_t>());
  return {};
}

/// An integer argument, or nothing when it is absent, not a number, or beyond ±2^53 (no count,
/// size or id a profiler writes comes near; the bound keeps products with element sizes in range).
std::optional<std::int64_t> integer_arg(const json& args, const char* key) {
  constexpr double kLimit = 9007199254740992.0;  // 2^53
  const auto it = args.find(key);
  if (it == args.end()) return std::nullopt;
  double value = 0;
  if (it->is_number()) {
    value = it->get<double>();
  } else if (it->is_string()) {
    try {
      value = std::stod(it->get<std::string>());
    } catch (const std::exception&) {
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  if (!std::isfinite(value) || std::abs(value) > kLimit) return std::nullopt;
  return static_cast<std::int64_t>(value);
}

std::optional<GpuClass> gpu_class(const std::string& cat, const std::string& name) {
  const std::string n = lower(name);
  if (cat == "kernel") {
    if (n.starts_with("nccl")) return GpuClass::nccl;
    return GpuClass::kernel;
  }
  if (cat == "gpu_memcpy" || cat == "memcpy") {
    if (n.find("htod") != std::string::npos) return GpuClass::memcpy_h2d;
    if (n.find("dtoh") != std::string::npos) return GpuClass::memcpy_d2h;
    return GpuClass::memcpy_other;
  }
  if (cat == "gpu_memset" || cat == "memset") return GpuClass::memset;
  return std::nullopt;
}

/// The collective an NCCL kernel runs: its "Collective name" arg, else its name (both the old
/// ncclKernel_AllGather_RING_LL_Sum_float and the new ncclDevKernel_AllGather_RING_LL schemes).
std::optional<OpKind> collective_kind(const json& args, const std::string& name) {
  std::string c = lower(text(args, "Collective name"));
  if (c.empty()) c = lower(name);
  if (c.find("allgather") != std::string::npos || c.find("all_gather") != std::string::npos)
    return OpKind::all_gather;
  if (c.find("reducescatter") != std::string::npos || c.find("reduce_scatter") != std::string::npos)
    return OpKind::reduce_scatter;
  if (c.find("allreduce") != std::string::npos || c.find("all_reduce") != std::string::npos)
    return OpKind::all_reduce;
  return std::nullopt;
}

/// A CPU range the mapping looks at: FSDP hooks, FSDP's custom ops, steps, the optimizer and
/// autograd's backward functions.
bool kept_cpu_range(std::string_view name) {
  return name.starts_with("FSDP::") || name.starts_with("FullyShardedDataParallel.") ||
         name.starts_with("fsdp::") || name.starts_with("ProfilerStep#") ||
         name.starts_with("Optimizer.step") || name.starts_with("Optimizer.zero_grad") ||
         name.starts_with("autograd::engine::evaluate_function");
}

/// The elements of a shape in Kineto's "Input Dims" ([2, 3]); a tensor list ([[2], [3]]) counts
/// its first tensor; 0 for no tensor.
std::int64_t first_numel(const json& dims) {
  if (!dims.is_array() || dims.empty()) return 0;
  if (dims[0].is_array()) return first_numel(dims[0]);
  std::int64_t n = 1;
  for (const json& d : dims) n *= d.is_number() ? d.get<std::int64_t>() : 0;
  return n;
}

/// The elements of the op's `i`-th input, from record_shapes' "Input Dims".
std::int64_t input_numel(const json& args, std::size_t i) {
  const auto it = args.find("Input Dims");
  if (it == args.end() || !it->is_array() || it->size() <= i) return 0;
  return first_numel((*it)[i]);
}

// What the CPU ranges around a kernel's launch say about it.
struct LaunchContext {
  bool in_optimizer = false;
  bool in_backward_function = false;
  bool in_backward_hook = false;
  std::optional<OpKind> copy_kind;
  std::optional<std::string> module;            // the innermost enclosing range naming one
  std::optional<std::string> last_hook_module;  // the last pre-forward/backward hook this step
};

// The phase work belongs to by where it was launched: the optimizer's ranges; a backward hook,
// autograd's evaluate_function or a thread other than the steps' (autograd's device threads);
// else forward.
Phase launch_phase(const LaunchContext& context, const Launch& launch, int main_thread) {
  if (context.in_optimizer) return Phase::optimizer;
  if (context.in_backward_hook || context.in_backward_function ||
      (main_thread >= 0 && launch.thread != main_thread))
    return Phase::backward;
  return Phase::forward;
}

// Time windows [first, second), sorted and disjoint.
using Windows = std::vector<std::pair<TimeNs, TimeNs>>;

bool in_windows(const Windows& windows, TimeNs time) {
  const auto after = std::upper_bound(windows.begin(), windows.end(), time,
                                      [](TimeNs x, const auto& w) { return x < w.first; });
  return after != windows.begin() && time < std::prev(after)->second;
}

/// Everything read from the events, then turned into a Timeline.
class Importer {
 public:
  explicit Importer(std::string origin) { report_.file = std::move(origin); }

  void on_event(const json& e) {
    ++report_.events;
    if (!e.is_object()) return;
    const std::string cat_raw = text(e, "cat");
    const std::string cat = lower(cat_raw);
    ++report_.by_category[cat_raw.empty() ? "(none)" : cat_raw];
    const std::string ph = text(e, "ph");
    const std::string name = text(e, "name");
    const json& args = e.contains("args") && e["args"].is_object() ? e["args"] : empty_;
    bool bad = false;
    const auto ts = time_of(e, "ts", false, bad);
    if (ph == "i" || ph == "I") {
      if (name == "[memory]" && ts) memory_event(*ts, args);
      return;
    }
    if (ph != "X" || !ts) return;
    const double dur = time_of(e, "dur", true, bad).value_or(0);
    if (bad) return;
    const TimeNs start = to_ns(*ts), end = start + to_ns(dur);
    note_span(start, end);  // durations are never negative (time_of)
    if (auto cls = gpu_class(cat, name)) {
      gpu_event(*cls, start, end, e, args, name);
      return;
    }
    if (!gpu_seen_) host_event(cat, name, start, end, e, args);
    if (cat == "cuda_runtime" || cat == "cuda_driver" || cat == "runtime") {
      const int thread = thread_of(e);
      if (auto c = integer_arg(args, "correlation")) launches_[*c] = {thread, start, end};
      // cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, ...: the host cost of one launch.
      if (name.find("Launch") != std::string::npos)
        launch_calls_.push_back({start, end, thread, 0});
      return;
    }
    if ((cat == "cpu_op" || cat == "user_annotation" || cat == "operator") &&
        kept_cpu_range(name)) {
      ranges_.push_back({start, end, thread_of(e), intern(name)});
      if (name.starts_with("FSDP::") || name.starts_with("FullyShardedDataParallel."))
        ++report_.fsdp_ranges[fsdp_range_kind(name)];
    }
  }

  ImportedTrace finish(const json& top);

 private:
  /// The event's time or duration `key` in microseconds; nullopt when absent. One that is not a
  /// finite number within ±kMaxTraceMicroseconds (a duration: 0 up to it) is no profiler's: the
  /// event is malformed, counted under the key, and `bad` is set.
  std::optional<double> time_of(const json& e, const char* key, bool duration, bool& bad) {
    const auto it = e.find(key);
    if (it == e.end()) return std::nullopt;
    if (it->is_number()) {
      const double us = it->get<double>();
      if (std::isfinite(us) && std::abs(us) <= kMaxTraceMicroseconds && (!duration || us >= 0))
        return us;
    }
    ++report_.malformed[key];
    bad = true;
    return std::nullopt;
  }

  /// A count or size argument: nullopt when absent; one that is not a whole number in
  /// [lowest, highest] makes the event malformed (counted under the key, `bad` set).
  std::optional<std::int64_t> count_of(const json& args, const char* key, std::int64_t lowest,
                                       std::int64_t highest, bool& bad) {
    if (!args.contains(key)) return std::nullopt;
    const auto value = integer_arg(args, key);
    if (value && *value >= lowest && *value <= highest) return value;
    ++report_.malformed[key];
    bad = true;
    return std::nullopt;
  }

  void note_span(TimeNs first, TimeNs last) {
    first_ = std::min(first_, first);
    last_ = std::max(last_, last);
  }

  /// Refuses a trace whose events lie further apart than any profiled window.
  void check_span() const {
    if (first_ > last_ || last_ - first_ <= kMaxTraceSpan) return;
    throw ValidationError({Problem{
        report_.file, "traceEvents",
        fmt::format("spans {}, from its first event to its last", format_duration(last_ - first_)),
        fmt::format("a profiled window of at most {}", format_duration(kMaxTraceSpan))}});
  }

  HostOverheads host_overheads() const;

  // Until a GPU event shows the trace is not CPU-only: what its CPU ops, gloo's collectives and
  // the c10d ops that issued them would make of the CPU as the device (host_device_work.hpp).
  void host_event(const std::string& cat, const std::string& name, TimeNs start, TimeNs end,
                  const json& e, const json& args) {
    if (cat == "cpu_op") {
      if (name.starts_with("c10d::")) {
        issues_.push_back(
            {start, thread_of(e), name.substr(6), input_numel(args, 0), input_numel(args, 1)});
      }
      cpu_ops_.push_back({start, end, thread_of(e), intern(name)});
    } else if (cat == "user_annotation" && name.starts_with("gloo:")) {
      const auto types = args.find("Input type");
      const std::string type =
          types != args.end() && types->is_array() && !types->empty() && (*types)[0].is_string()
              ? (*types)[0].get<std::string>()
              : "";
      host_collectives_.push_back({start, end, thread_of(e), intern(name), name.substr(5),
                                   input_numel(args, 0), dtype_bytes(type)});
    }
  }

  // A GPU event: the trace has a device; what was kept of the CPU as one goes.
  void saw_gpu() {
    if (gpu_seen_) return;
    gpu_seen_ = true;
    cpu_ops_ = {};
    issues_ = {};
    host_collectives_ = {};
    host_memory_ = {};
  }

  /// The event's CPU thread ("pid/tid"), numbered in order of first use.
  int thread_of(const json& e) {
    const auto [it, added] = threads_.try_emplace(text(e, "pid") + "/" + text(e, "tid"),
                                                  static_cast<int>(threads_.size()));
    return it->second;
  }

  std::int32_t intern(const std::string& name) {
    const auto [it, added] = name_ids_.try_emplace(name, static_cast<std::int32_t>(names_.size()));
    if (added) names_.push_back(name);
    return it->second;
  }

  void memory_event(double ts, const json& args) {
    const auto device = integer_arg(args, "Device Id");
    const bool host = device && *device < 0;
    if (host && gpu_seen_) return;  // host memory beside a device's
    bool bad = false;
    const auto allocated = count_of(args, "Total Allocated", 0, kMaxBytes, bad);
    const auto reserved = count_of(args, "Total Reserved", 0, kMaxBytes, bad);
    if (bad || (!allocated && !reserved)) return;
    MemorySample m;
    m.time = to_ns(ts);
    note_span(m.time, m.time);
    m.allocated = allocated.value_or(0);
    m.reserved = reserved.value_or(0);
    (host ? host_memory_ : memory_).push_back(std::move(m));
  }

  void gpu_event(GpuClass cls, TimeNs start, TimeNs end, const json& e, const json& args,
                 const std::string& name) {
    saw_gpu();
    GpuWork w;
    w.start = start;
    w.end = end;
    w.cls = cls;
    const auto arg_or = [&](const char* arg, const char* field) {
      std::string value = text(args, arg);
      return value.empty() ? text(e, field) : value;
    };
    const std::string device = arg_or("device", "pid"), stream = arg_or("stream", "tid");
    w.stream = device + "/" + stream;
    w.correlation = integer_arg(args, "correlation");
    w.name = intern(name);
    bool bad = false;
    if (cls == GpuClass::nccl) {
      w.collective = collective_kind(args, name);
      const Bytes elem = dtype_bytes(text(args, "dtype"));
      const auto in = count_of(args, "In msg nelems", 0, kMaxBytes, bad).value_or(0);
      const auto out = count_of(args, "Out msg nelems", 0, kMaxBytes, bad).value_or(0);
      w.bytes = elem * (w.collective == OpKind::all_gather ? out : std::max(in, out));
      w.comm_name = text(args, "Process Group Name");
      w.comm_size = static_cast<int>(count_of(args, "Group size", 1, kMaxRanks, bad).value_or(0));
    } else if (cls != GpuClass::kernel) {
      w.bytes = count_of(args, "bytes", 0, kMaxBytes, bad).value_or(0);
    }
    if (bad) return;
    gpu_.push_back(std::move(w));
  }

  const std::string& name_of(std::int32_t id) const { return names_[static_cast<std::size_t>(id)]; }

  // The context of every launch, by correlation id: one sweep per thread over its ranges and
  // launches in time order, with a stack of the ranges open at the launch. Ranges on one thread
  // nest, so each range is pushed and popped once; a range that does not nest is still checked
  // against the launch time before it counts. O((ranges + launches) · log + launches · depth).
  template <typename IterationAt>
  std::unordered_map<std::int64_t, LaunchContext> launch_contexts(
      const std::vector<const CpuRange*>& steps, const IterationAt& iteration_at) const {
    std::unordered_map<int, std::vector<const CpuRange*>> ranges;
    for (const CpuRange& r : ranges_) ranges[r.thread].push_back(&r);
    std::unordered_map<int, std::vector<std::pair<TimeNs, std::int64_t>>> launches;
    for (const auto& [correlation, l] : launches_)
      launches[l.thread].emplace_back(l.time, correlation);
    std::unordered_map<std::int64_t, LaunchContext> out;
    for (auto& [thread, list] : launches) {
      std::sort(list.begin(), list.end());
      auto& rs = ranges[thread];
      std::sort(rs.begin(), rs.end(), [](const CpuRange* a, const CpuRange* b) {
        return a->start != b->start ? a->start < b->start : a->end > b->end;
      });
      std::vector<const CpuRange*> open;
      std::optional<std::pair<TimeNs, std::string>> last_hook;  // (start, module)
      std::size_t next = 0;
      for (const auto& [time, correlation] : list) {
        for (; next < rs.size() && rs[next]->start <= time; ++next) {
          const CpuRange* r = rs[next];
          while (!open.empty() && open.back()->end < r->start) open.pop_back();
          open.push_back(r);
          if (starts_group_work(name_of(r->name))) {
            if (auto m = range_module(*r, names_)) last_hook = std::pair{r->start, *m};
          }
        }
        while (!open.empty() && open.back()->end < time) open.pop_back();
        LaunchContext c;
        for (const CpuRange* r : open) {
          if (r->end < time) continue;  // a range that did not nest, already over
          const std::string& name = name_of(r->name);
          if (name.starts_with("Optimizer.")) c.in_optimizer = true;
          if (name.starts_with("autograd::engine::evaluate_function"))
            c.in_backward_function = true;
          if (name == "fsdp::all_gather_copy_in") c.copy_kind = OpKind::copy_in;
          if (name == "fsdp::split_with_sizes_copy") c.copy_kind = OpKind::copy_out;
          if (name == "fsdp::chunk_cat") c.copy_kind = OpKind::reduce_copy_in;
          if (auto m = range_module(*r, names_)) c.module = m;  // the innermost naming range wins
          if (name.starts_with("FSDP::pre_backward") || name.starts_with("FSDP::post_backward") ||
              name.starts_with("FullyShardedDataParallel._pre_backward") ||
              name.starts_with("FullyShardedDataParallel._post_backward")) {
            c.in_backward_hook = true;
          }
        }
        // A hook names the group of the work after it only within its own step.
        const TimeNs step_start =
            steps.empty() ? 0 : steps[static_cast<std::size_t>(iteration_at(time))]->start;
        if (last_hook && last_hook->first >= step_start) c.last_hook_module = last_hook->second;
        out.emplace(correlation, std::move(c));
      }
    }
    return out;
  }

  // The root forwards under no_grad: each FSDP2 root forward ("FSDP::root_pre_forward": the
  // root's forward and every call of a registered method such as generate, and each forward
  // that method makes) after which nothing of a backward launched before the next root forward
  // or its step's end. From its root pre-forward to that point; none in a trace with no backward
  // at all (an inference trace is forward work throughout).
  template <typename IterationAt>
  Windows no_grad_forwards(const std::vector<const CpuRange*>& steps,
                           const IterationAt& iteration_at, int main_thread,
                           const std::unordered_map<std::int64_t, LaunchContext>& contexts) const {
    std::vector<TimeNs> backward;
    for (const auto& [correlation, launch] : launches_) {
      const auto it = contexts.find(correlation);
      if (it != contexts.end() && launch_phase(it->second, launch, main_thread) == Phase::backward)
        backward.push_back(launch.time);
    }
    if (backward.empty()) return {};
    std::sort(backward.begin(), backward.end());
    std::vector<TimeNs> roots;
    for (const CpuRange& r : ranges_)
      if (name_of(r.name).starts_with("FSDP::root_pre_forward")) roots.push_back(r.start);
    std::sort(roots.begin(), roots.end());
    Windows out;
    for (std::size_t i = 0; i < roots.size(); ++i) {
      TimeNs end = i + 1 < roots.size() ? roots[i + 1] : std::numeric_limits<TimeNs>::max();
      if (!steps.empty()) {
        const CpuRange& step = *steps[static_cast<std::size_t>(iteration_at(roots[i]))];
        if (step.start <= roots[i] && roots[i] < step.end) end = std::min(end, step.end);
      }
      const auto next_backward = std::lower_bound(backward.begin(), backward.end(), roots[i]);
      if (next_backward == backward.end() || *next_backward >= end) out.emplace_back(roots[i], end);
    }
    return out;
  }

  ImportReport report_;
  json empty_ = json::object();
  std::unordered_map<std::string, int> threads_;
  std::unordered_map<std::string, std::int32_t> name_ids_;
  std::vector<std::string> names_;
  std::unordered_map<std::int64_t, Launch> launches_;
  std::vector<CpuRange> launch_calls_;  // launch API calls (their name is not kept)
  std::vector<CpuRange> ranges_;
  std::vector<GpuWork> gpu_;
  std::vector<MemorySample> memory_;
  // A CPU-only trace's device work, kept until a GPU event is seen (host_event).
  bool gpu_seen_ = false;
  TimeNs first_ = std::numeric_limits<TimeNs>::max();
  TimeNs last_ = std::numeric_limits<TimeNs>::min();
  std::vector<CpuRange> cpu_ops_;
  std::vector<CollectiveIssue> issues_;
  std::vector<HostCollective> host_collectives_;
  std::vector<MemorySample> host_memory_;
};

/// The size of every process group distributedInfo lists, when they all have one (0 otherwise).
int uniform_group_size(const json& top) {
  const auto info = top.find("distributedInfo");
  if (info == top.end() || !info->is_object()) return 0;
  const auto groups = info->find("pg_config");
  if (groups == info->end() || !groups->is_array() || groups->empty()) return 0;
  std::optional<std::int64_t> size;
  for (const json& g : *groups) {
    const auto n = g.is_object() ? integer_arg(g, "pg_size") : std::nullopt;
    if (!n || (size && *size != *n)) return 0;
    size = n;
  }
  return static_cast<int>(*size);
}

ImportedTrace Importer::finish(const json& top) {
  check_span();
  ImportedTrace out;
  Timeline& t = out.timeline;
  ImportReport& report = out.report;
  report = std::move(report_);
  t.source = "imported";
  t.name = std::filesystem::path(report.file).filename().string();
  // A trace names no scenario (its file is its name): nothing is to be re-simulated from it.
  t.provenance.backend = "kineto";
  t.provenance.version = std::string(shardscope_version());
  if (top.contains("schemaVersion")) report.kineto_schema = top["schemaVersion"].dump();
  // The trace's key facts: one out of range is refused, naming it (what rank, how many ranks and
  // how much memory the run had are not to be guessed).
  const auto fact = [&](const json& object, const char* key, const std::string& path,
                        std::int64_t lowest, std::int64_t highest) -> std::optional<std::int64_t> {
    if (!object.contains(key)) return std::nullopt;
    const auto value = integer_arg(object, key);
    if (value && *value >= lowest && *value <= highest) return value;
    throw ValidationError({Problem{report.file, path, fmt::format("is {}", object[key].dump()),
                                   fmt::format("a whole number from {} to {}", lowest, highest)}});
  };
  if (const auto it = top.find("distributedInfo"); it != top.end() && it->is_object()) {
    const auto world = fact(*it, "world_size", "distributedInfo.world_size", 1, kMaxRanks);
    const auto rank = fact(*it, "rank", "distributedInfo.rank", 0, world.value_or(kMaxRanks) - 1);
    t.provenance.rank = static_cast<int>(rank.value_or(0));
    t.facts.world_size = static_cast<int>(world.value_or(1));
  }
  if (const auto it = top.find("deviceProperties");
      it != top.end() && it->is_array() && !it->empty() && (*it)[0].is_object()) {
    t.provenance.device = text((*it)[0], "name");
    t.memory_capacity =
        fact((*it)[0], "totalGlobalMem", "deviceProperties[0].totalGlobalMem", 1, kMaxBytes)
            .value_or(0);
  }

  // Steps: ProfilerStep#N ranges in time order; the thread that ran them is the main thread.
  std::vector<const CpuRange*> steps;
  std::unordered_map<int, int> step_threads;
  for (const CpuRange& r : ranges_) {
    if (name_of(r.name).starts_with("ProfilerStep#")) {
      steps.push_back(&r);
      ++step_threads[r.thread];
    }
  }
  std::sort(steps.begin(), steps.end(),
            [](const CpuRange* a, const CpuRange* b) { return a->start < b->start; });
  int main_thread = -1, most = 0;
  for (const auto& [thread, n] : step_threads) {
    if (n > most || (n == most && thread < main_thread)) main_thread = thread, most = n;
  }
  report.iterations = std::max<int>(1, static_cast<int>(steps.size()));
  t.facts.iterations = report.iterations;
  const auto iteration_at = [&](TimeNs time) {
    const auto after = std::upper_bound(steps.begin(), steps.end(), time,
                                        [](TimeNs x, const CpuRange* r) { return x < r->start; });
    return std::max(0, static_cast<int>(after - steps.begin()) - 1);
  };

  // A trace of a GPU run with no GPU event lost its device work (the profiler was not given
  // ProfilerActivity.CUDA): its CPU ranges are no step time. A GPU run shows in kernel launch
  // calls or an NCCL process group; deviceProperties alone does not tell (Kineto lists the
  // machine's GPUs for a CPU run with gloo too).
  const auto info = top.find("distributedInfo");
  const bool nccl = info != top.end() && info->is_object() && info->contains("backend") &&
                    (*info)["backend"] == "nccl";
  if (gpu_.empty() && (nccl || !launch_calls_.empty())) {
    throw ValidationError({Problem{
        report.file, "traceEvents",
        fmt::format("has no GPU event (kernel, copy or set) though {}: the profiler "
                    "recorded CPU activity only",
                    !launch_calls_.empty() ? fmt::format("the CPU launched {} kernels and copies",
                                                         launch_calls_.size())
                                           : std::string("the run used NCCL")),
        "a trace profiled with ProfilerActivity.CUDA as well as ProfilerActivity.CPU"}});
  }
  // A CPU-only trace: the CPU is the device (host_device_work.hpp).
  if (gpu_.empty() && !cpu_ops_.empty()) {
    report.cpu_device = true;
    std::vector<std::string> thread_names(threads_.size());
    for (const auto& [key, index] : threads_) thread_names[static_cast<std::size_t>(index)] = key;
    HostDeviceWork host = host_device_work(cpu_ops_, host_collectives_, issues_, names_,
                                           thread_names, uniform_group_size(top));
    gpu_ = std::move(host.work);
    launches_ = std::move(host.launches);
    report.unpaired_host_collectives = host.unpaired_collectives;
    report.unpaired_collective_issues = host.unpaired_issues;
    if (memory_.empty()) memory_ = std::move(host_memory_);
    if (t.provenance.device.empty()) t.provenance.device = "CPU";
  }
  report.fsdp1_units =
      name_fsdp1_units(ranges_, names_, [this](const std::string& n) { return intern(n); });
  report.unmapped_fsdp_ranges = unmapped_fsdp_ranges(ranges_, names_);

  const auto contexts = launch_contexts(steps, iteration_at);
  const Windows no_grad = no_grad_forwards(steps, iteration_at, main_thread, contexts);
  report.no_grad_forwards = static_cast<std::int64_t>(no_grad.size());

  // Streams, communicators and groups are numbered in order of first use.
  std::unordered_map<std::string, StreamId> stream_ids;
  std::vector<bool> stream_nccl, stream_compute;
  std::map<std::pair<std::string, int>, CommId> comm_ids;
  std::unordered_map<std::string, GroupId> group_ids;
  std::unordered_map<std::string, std::int32_t> label_ids;
  const auto group_id = [&](const std::string& name) {
    const auto [it, added] = group_ids.try_emplace(name, static_cast<GroupId>(t.groups.size()));
    if (added) t.groups.push_back(name);
    return it->second;
  };
  const auto label_id = [&](const std::string& name) {
    const std::string label = name.size() > 160 ? name.substr(0, 157) + "..." : name;
    const auto [it, added] =
        label_ids.try_emplace(label, static_cast<std::int32_t>(t.op_labels.size()));
    if (added) t.op_labels.push_back(label);
    return it->second;
  };

  std::sort(gpu_.begin(), gpu_.end(),
            [](const GpuWork& a, const GpuWork& b) { return a.start < b.start; });
  TimeNs base = gpu_.empty() ? 0 : gpu_.front().start;
  for (const CpuRange* s : steps) base = std::min(base, s->start);
  for (const MemorySample& m : memory_) base = std::min(base, m.time);

  for (const GpuWork& w : gpu_) {
    TimelineOp op;
    op.start = w.start - base;
    op.end = std::max(w.end, w.start) - base;
    op.bytes = w.bytes;
    op.label = label_id(name_of(w.name));
    const auto [sit, new_stream] =
        stream_ids.try_emplace(w.stream, static_cast<StreamId>(t.streams.size()));
    if (new_stream) {
      t.streams.push_back({"stream " + w.stream, StreamKind::copy});
      stream_nccl.push_back(false);
      stream_compute.push_back(false);
    }
    op.stream = sit->second;

    // Where it was launched: the thread, the time, and the kept ranges around the launch.
    std::optional<Launch> launch;
    if (w.correlation) {
      if (const auto it = launches_.find(*w.correlation); it != launches_.end())
        launch = it->second;
    }
    if (!launch) ++report.gpu_ops_without_launch;
    if (launch && launch->end >= launch->time && launch->time >= base) {
      op.issue_start = launch->time - base;
      op.issue_end = launch->end - base;
    }
    op.iteration = iteration_at(launch ? launch->time : w.start);
    Phase phase = Phase::forward;
    const LaunchContext* context = nullptr;
    if (launch) context = &contexts.at(*w.correlation);
    std::optional<OpKind> copy_kind;
    std::optional<std::string> module;
    if (context) {
      copy_kind = context->copy_kind;
      module = context->module;
      phase = launch_phase(*context, *launch, main_thread);
      // A forward under no_grad (docs/traces.md, FSDP2's root_pre_forward ranges).
      if (phase == Phase::forward && in_windows(no_grad, launch->time)) phase = Phase::generation;
      if (!module && phase != Phase::optimizer) module = context->last_hook_module;
    }
    op.phase = phase;
    if (module) op.group = group_id(*module);

    switch (w.cls) {
      case GpuClass::nccl:
        stream_nccl[static_cast<std::size_t>(op.stream)] = true;
        if (w.collective) {
          op.kind = *w.collective;
          const std::string comm =
              w.comm_name.empty() ? fmt::format("group of {}", w.comm_size) : w.comm_name;
          const auto [cit, new_comm] = comm_ids.try_emplace(
              std::pair{comm, w.comm_size}, static_cast<CommId>(t.communicators.size()));
          if (new_comm) t.communicators.push_back({comm, std::max(1, w.comm_size), 1});
          op.comm = cit->second;
        } else {
          op.kind = OpKind::other;
        }
        break;
      case GpuClass::kernel:
        stream_compute[static_cast<std::size_t>(op.stream)] = true;
        if (copy_kind) {
          op.kind = *copy_kind;
        } else if (!launch) {
          op.kind = OpKind::other;
        } else {
          op.kind = phase == Phase::optimizer  ? OpKind::optimizer_step
                    : phase == Phase::backward ? OpKind::backward
                                               : OpKind::forward;
        }
        break;
      case GpuClass::memcpy_h2d:
        op.kind = OpKind::h2d;
        break;
      case GpuClass::memcpy_d2h:
        op.kind = OpKind::d2h;
        break;
      case GpuClass::memcpy_other:
      case GpuClass::memset:
        op.kind = OpKind::other;
        break;
    }
    ++report.ops_by_kind[std::string(to_string(op.kind))];
    if (op.kind == OpKind::other) ++report.unrecognised[name_of(w.name)];
    t.ops.push_back(std::move(op));
  }
  for (std::size_t s = 0; s < t.streams.size(); ++s) {
    if (stream_nccl[s]) {
      t.streams[s].kind = StreamKind::communication;
    } else if (stream_compute[s]) {
      t.streams[s].kind = StreamKind::compute;
    }
  }
  sort_timeline_ops(t.ops);

  t.host = host_overheads();
  const auto median = [](std::vector<TimeNs> v) {
    if (v.empty()) return TimeNs{0};
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2),
                     v.end());
    return v[(v.size() - 1) / 2];
  };
  report.launch_calls = static_cast<std::int64_t>(launch_calls_.size());
  report.launch_median = median(t.host.launch);
  report.fsdp_hooks = static_cast<std::int64_t>(t.host.fsdp_hook.size());
  report.fsdp_hook_median = median(t.host.fsdp_hook);
  std::sort(memory_.begin(), memory_.end(),
            [](const MemorySample& a, const MemorySample& b) { return a.time < b.time; });
  for (MemorySample& m : memory_) m.time -= base;
  report.memory_samples = static_cast<std::int64_t>(memory_.size());
  t.memory = std::move(memory_);
  t.peaks = peaks_from_samples(t);
  return out;
}

// At most kMaxHostSamples of `samples` (in time order), every k-th: deterministic and spread over
// the run.
std::vector<TimeNs> thinned(std::vector<TimeNs> samples) {
  if (samples.size() <= kMaxHostSamples) return samples;
  const std::size_t stride = (samples.size() + kMaxHostSamples - 1) / kMaxHostSamples;
  std::vector<TimeNs> out;
  out.reserve(samples.size() / stride + 1);
  for (std::size_t i = 0; i < samples.size(); i += stride) out.push_back(samples[i]);
  return out;
}

// The FSDP hook ranges that stand for the simulator's hooks, one per all-gather, reshard and
// reduce-scatter it charges (docs/traces.md): FSDP2's pre_forward and pre_backward (unshard),
// post_forward and post_backward_reshard (reshard), post_backward_reduce; FSDP1's _pre_forward,
// _pre_backward_hook, _post_forward and _post_backward_hook.
bool fsdp_hook_range(std::string_view name) {
  static constexpr std::array<std::string_view, 9> kHooks{
      "FSDP::pre_forward",
      "FSDP::pre_backward",
      "FSDP::post_forward",
      "FSDP::post_backward_reshard",
      "FSDP::post_backward_reduce",
      "FullyShardedDataParallel._pre_forward",
      "FullyShardedDataParallel._pre_backward_hook",
      "FullyShardedDataParallel._post_forward",
      "FullyShardedDataParallel._post_backward_hook"};
  const std::string_view kind = name.substr(0, name.find(" ("));
  return std::find(kHooks.begin(), kHooks.end(), kind) != kHooks.end();
}

HostOverheads Importer::host_overheads() const {
  // Launch calls per thread in time order, with prefix sums of their durations, so a hook's
  // launches are two binary searches away.
  std::map<int, std::vector<const CpuRange*>> by_thread;
  std::vector<const CpuRange*> calls;
  calls.reserve(launch_calls_.size());
  for (const CpuRange& c : launch_calls_) calls.push_back(&c);
  std::sort(calls.begin(), calls.end(),
            [](const CpuRange* a, const CpuRange* b) { return a->start < b->start; });
  HostOverheads h;
  for (const CpuRange* c : calls) {
    h.launch.push_back(c->end - c->start);
    by_thread[c->thread].push_back(c);
  }
  std::map<int, std::vector<TimeNs>> prefix;
  for (const auto& [thread, list] : by_thread) {
    auto& sums = prefix[thread];
    sums.push_back(0);
    for (const CpuRange* c : list) sums.push_back(sums.back() + (c->end - c->start));
  }
  std::vector<const CpuRange*> hooks;
  for (const CpuRange& r : ranges_) {
    if (fsdp_hook_range(name_of(r.name))) hooks.push_back(&r);
  }
  std::sort(hooks.begin(), hooks.end(),
            [](const CpuRange* a, const CpuRange* b) { return a->start < b->start; });
  for (const CpuRange* r : hooks) {
    TimeNs launched = 0;
    if (const auto it = by_thread.find(r->thread); it != by_thread.end()) {
      const auto& list = it->second;
      const auto first = std::lower_bound(list.begin(), list.end(), r->start,
                                          [](const CpuRange* c, TimeNs t) { return c->start < t; });
      const auto last = std::upper_bound(list.begin(), list.end(), r->end,
                                         [](TimeNs t, const CpuRange* c) { return t < c->start; });
      const auto& sums = prefix.at(r->thread);
      launched = sums[static_cast<std::size_t>(last - list.begin())] -
                 sums[static_cast<std::size_t>(first - list.begin())];
    }
    h.fsdp_hook.push_back(std::max<TimeNs>(0, (r->end - r->start) - launched));
  }
  h.launch = thinned(std::move(h.launch));
  h.fsdp_hook = thinned(std::move(h.fsdp_hook));
  return h;
}

}  // namespace

ImportedTrace import_kineto(const std::filesystem::path& path) {
  Importer importer(path.string());
  const json top =
      detail::read_trace_events(path, [&](const json& event) { importer.on_event(event); });
  return importer.finish(top);
}

ImportedTrace import_kineto_text(std::string_view text, const std::string& origin) {
  Importer importer(origin);
  const json top = detail::read_trace_events_text(
      text, origin, [&](const json& event) { importer.on_event(event); });
  return importer.finish(top);
}

std::string import_report_text(const ImportReport& r) {
  std::string out = fmt::format("imported {}\n", r.file);
  const auto row = [&](std::string_view label, const std::string& value) {
    out += fmt::format("  {:<31} {}\n", label, value);
  };
  if (!r.kineto_schema.empty()) row("Kineto schema", r.kineto_schema);
  row("trace events", fmt::format("{} events", r.events));
  std::int64_t skipped = 0;
  std::string fields;
  for (const auto& [field, n] : r.malformed) {
    skipped += n;
    fields += fmt::format("{}{} {}", fields.empty() ? "" : ", ", field, n);
  }
  row("malformed events", skipped == 0 ? std::string("none")
                                       : fmt::format("{} skipped (by field: {})", skipped, fields));
  row("iterations", fmt::format("{} (ProfilerStep ranges)", r.iterations));
  row("memory samples", fmt::format("{} samples", r.memory_samples));
  row("host launch calls", r.launch_calls == 0 ? std::string("none recorded")
                                               : fmt::format("{} calls, median {}", r.launch_calls,
                                                             format_duration(r.launch_median)));
  row("FSDP hooks", r.fsdp_hooks == 0
                        ? std::string("none recorded")
                        : fmt::format("{} hooks, median {} less their launches", r.fsdp_hooks,
                                      format_duration(r.fsdp_hook_median)));
  std::int64_t gpu = 0;
  for (const auto& [kind, n] : r.ops_by_kind) gpu += n;
  if (r.cpu_device) {
    row("device", "the CPU (no GPU work: CPU ops compute, gloo collectives communicate)");
    row("device ops", fmt::format("{} CPU ops and gloo collectives", gpu));
    row("  gloo collectives unpaired",
        fmt::format("{} with no issuing c10d op, {} c10d ops with no gloo collective",
                    r.unpaired_host_collectives, r.unpaired_collective_issues));
  } else {
    row("GPU ops",
        fmt::format("{} ops ({} with no CPU launch found)", gpu, r.gpu_ops_without_launch));
  }
  for (const auto& [kind, n] : r.ops_by_kind)
    row(fmt::format("  {}", kind), fmt::format("{} ops", n));
  row("FSDP ranges", r.fsdp_ranges.empty() ? std::string("none (not an FSDP run, or unnamed)")
                                           : fmt::format("{} kinds", r.fsdp_ranges.size()));
  for (const auto& [kind, n] : r.fsdp_ranges)
    row(fmt::format("  {}", kind), fmt::format("{} ranges", n));
  if (!r.fsdp_ranges.empty()) {
    std::int64_t unmapped = 0;
    for (const auto& [kind, n] : r.unmapped_fsdp_ranges) unmapped += n;
    row("unmapped FSDP ranges", fmt::format("{} ranges attributed to no group", unmapped));
    for (const auto& [kind, n] : r.unmapped_fsdp_ranges)
      row(fmt::format("  {}", kind), fmt::format("{} ranges", n));
    row("no-grad root forwards",
        r.no_grad_forwards == 0
            ? std::string("none (FSDP2 root forwards with no backward after them)")
            : fmt::format("{} forwards with no backward after them: phase generation",
                          r.no_grad_forwards));
  }
  if (r.fsdp1_units > 0) {
    row("FSDP1 units", fmt::format("{} named by order (root, layers.0, ...): FSDP1's ranges name "
                                   "no module",
                                   r.fsdp1_units));
  }
  row("events by category", "");
  for (const auto& [cat, n] : r.by_category)
    row(fmt::format("  {}", cat), fmt::format("{} events", n));
  std::vector<std::pair<std::int64_t, std::string>> other;
  for (const auto& [name, n] : r.unrecognised) other.emplace_back(n, name);
  std::sort(other.begin(), other.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  row("imported as other", fmt::format("{} distinct names", other.size()));
  for (std::size_t i = 0; i < std::min<std::size_t>(other.size(), 10); ++i) {
    const std::string& name = other[i].second;
    row("", fmt::format("{} ops  {}", other[i].first,
                        name.size() > 100 ? name.substr(0, 97) + "..." : name));
  }
  return out;
}

bool looks_like_kineto_trace(const std::filesystem::path& path) {
  require_regular_file(path);  // a FIFO would block here and could not be read a second time
  gzFile file = gzopen(path.string().c_str(), "rb");
  if (file == nullptr) return false;
  std::string head(std::size_t{64} * 1024, '\0');
  const int n = gzread(file, head.data(), static_cast<unsigned>(head.size()));
  const int direct = gzdirect(file);
  gzclose(file);
  if (n <= 0) return false;
  head.resize(static_cast<std::size_t>(n));
  if (direct == 0) return head.find("shardscope.timeline") == std::string::npos;  // gzip
  if (head.find("shardscope.timeline") != std::string::npos) return false;
  return head.find("\"traceEvents\"") != std::string::npos ||
         head.find("\"schemaVersion\"") != std::string::npos ||
         head.find("\"deviceProperties\"") != std::string::npos;
}

namespace {

Timeline read_timeline_or_trace_file(const std::filesystem::path& path) {
  if (looks_like_kineto_trace(path)) return import_kineto(path).timeline;
  const auto ext = path.extension();
  if (ext == ".yaml" || ext == ".yml") {
    throw ValidationError(
        {Problem{path.string(), "", "is a scenario, not a run (a timeline or a trace)",
                 fmt::format("simulate it first: shardscope simulate {} "
                             "--timeline run.json, then use run.json",
                             path.string())}});
  }
  return timeline_from_json(read_text_file(path.string()), path.string());
}

}  // namespace

Timeline read_timeline_or_trace(const std::filesystem::path& path) {
  Timeline run = read_timeline_or_trace_file(path);
  const bool worked = std::any_of(run.ops.begin(), run.ops.end(),
                                  [](const TimelineOp& op) { return op.duration() > 0; });
  if (!worked) {
    throw ValidationError({Problem{
        path.string(), "",
        run.ops.empty() ? std::string("has no ops: no device work was recorded")
                        : fmt::format("has {} ops, none of which took any time", run.ops.size()),
        "a run with device work: a trace of at least one profiled step"}});
  }
  return run;
}

}  // namespace shardscope::traces
