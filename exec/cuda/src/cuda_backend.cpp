#include "shardscope/exec/cuda_backend.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "cuda_check.hpp"
#include "cuda_segment_memory.hpp"
#include "device_kernels.hpp"
#include "kernel_runner.hpp"
#include "shardscope/exec/device_allocator.hpp"
#include "shardscope/exec/device_budget.hpp"
#include "shardscope/exec/executor.hpp"
#include "shardscope/exec/host_world.hpp"

namespace shardscope::exec {
namespace cuda {
namespace {

using Clock = std::chrono::steady_clock;

// Copies without named buffers and host staging go a scratch region at a time.
constexpr Bytes kRegion = KernelRunner::kRegion;

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::fp32:
      return ncclFloat32;
    case DType::bf16:
      return ncclBfloat16;
    case DType::fp16:
      return ncclFloat16;
    case DType::fp8:
      return ncclFloat8e4m3;
  }
  return ncclFloat32;
}

// NCCL's error name and, where it recorded one, its own sentence about the failure (what
// NCCL_DEBUG=WARN would print: which argument it refused and why), so a failed run says why.
std::string nccl_reason(ncclResult_t r, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  std::string reason = ncclGetErrorString(r);
  if (last != nullptr && *last != '\0') reason += fmt::format(" (NCCL: {})", last);
  return reason;
}

bool runs_on_cpu(const Schedule& s, const Op& op) {
  return s.streams[static_cast<std::size_t>(op.stream)].kind == StreamKind::cpu;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(CudaBackendOptions options) : options_(std::move(options)) {}
  ~CudaBackend() override { release(); }

  std::string name() const override { return "cuda"; }
  std::string device() const override {
    return fmt::format(
        "{} (device {}), rank {} of {}, {}; attention as blocked cuBLASLt GEMMs and "
        "a softmax kernel",
        gpu_name_, options_.device, options_.rank, options_.world,
        options_.comm == CommMode::nccl ? "NCCL collectives"
                                        : "emulated collectives (--comm emulate)");
  }
  int rank() const override { return options_.rank; }

  void begin(const Schedule& s) override {
    s_ = &s;
    SHARDSCOPE_CUDA(cudaSetDevice(options_.device));
    cudaDeviceProp prop{};
    SHARDSCOPE_CUDA(cudaGetDeviceProperties(&prop, options_.device));
    gpu_name_ = prop.name;
    int least = 0, greatest = 0;
    SHARDSCOPE_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    for (const Stream& st : s.streams) {
      cudaStream_t stream = nullptr;
      if (st.kind != StreamKind::cpu) {
        const bool high = st.kind == StreamKind::communication || st.kind == StreamKind::copy;
        SHARDSCOPE_CUDA(
            cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, high ? greatest : least));
      }
      streams_.push_back(stream);
    }
    start_.resize(s.ops.size());
    end_.resize(s.ops.size());
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      SHARDSCOPE_CUDA(cudaEventCreate(&start_[i]));
      SHARDSCOPE_CUDA(cudaEventCreate(&end_[i]));
    }
    host_spans_.assign(s.ops.size(), {});
    kernels_ = std::make_unique<KernelRunner>();
    if (options_.pinned_host) {
      SHARDSCOPE_CUDA(cudaMallocHost(&host_staging_, static_cast<std::size_t>(kRegion)));
    } else {
      pageable_.resize(static_cast<std::size_t>(kRegion));
      host_staging_ = pageable_.data();
    }
    start_communicators(s);
    // Measured once the scratch regions, the cuBLASLt workspace and the communicators exist; NCCL's
    // channel buffers come later, at each communicator's first collective.
    std::size_t free_bytes = 0, total = 0;
    SHARDSCOPE_CUDA(cudaMemGetInfo(&free_bytes, &total));
    budget_ = {options_.memory_capacity, static_cast<Bytes>(free_bytes),
               options_.comm == CommMode::nccl ? options_.nccl_outside_to_come : 0};
    memory_ = std::make_unique<CudaSegmentMemory>(options_.device);
    allocator_ =
        std::make_unique<DeviceAllocator>(*memory_, budget_.capacity(), options_.allocator);
    SHARDSCOPE_CUDA(cudaDeviceSynchronize());
    SHARDSCOPE_CUDA(cudaEventCreate(&base_));
    SHARDSCOPE_CUDA(cudaEventRecord(base_, nullptr));
    SHARDSCOPE_CUDA(cudaEventSynchronize(base_));
    host_base_ = Clock::now();
  }

  void allocate(BufferId id, const Buffer& buffer, StreamId stream) override {
    if (buffer.location == Location::gpu)
      allocator_->allocate(id, buffer.size, stream, buffer.pool);
  }
  void free(BufferId id, const Buffer& buffer) override {
    if (buffer.location == Location::gpu) allocator_->free(id);
  }
  MemoryUsage memory() const override {
    return allocator_
               ? MemoryUsage{allocator_->allocated(), allocator_->reserved(), budget_.capacity()}
               : MemoryUsage{};
  }
  std::vector<std::string> setup_notes() const override {
    if (!allocator_) return {};
    return {describe(budget_)};
  }

  void stream_wait(StreamId stream, OpId event) override {
    SHARDSCOPE_CUDA(cudaStreamWaitEvent(stream_of(stream), end_[static_cast<std::size_t>(event)]));
  }

  void host_wait(OpId event) override {
    const Op& op = s_->ops[static_cast<std::size_t>(event)];
    if (runs_on_cpu(*s_, op)) return;  // the issuing thread already ran it
    wait_until([&] { return cudaEventQuery(end_[static_cast<std::size_t>(event)]); },
               fmt::format("op {}", event));
  }

  void launch(OpId id, const Op& op) override {
    const auto i = static_cast<std::size_t>(id);
    cudaStream_t st = stream_of(op.stream);
    SHARDSCOPE_CUDA(cudaEventRecord(start_[i], st));
    run_op(id, op, st);
    SHARDSCOPE_CUDA(cudaEventRecord(end_[i], st));
  }

  void run_host(OpId id, const Op& op) override {
    const auto t0 = Clock::now();
    if (op.kind == OpKind::optimizer_step) cpu_adamw(op);
    host_spans_[static_cast<std::size_t>(id)] = {since_base(t0), since_base(Clock::now())};
  }

  std::vector<OpSpan> finish() override {
    // Every stream drained, polled so that a stuck collective is caught by the watchdog.
    wait_until(
        [this] {
          for (cudaStream_t st : streams_) {
            if (st == nullptr) continue;
            if (const cudaError_t e = cudaStreamQuery(st); e != cudaSuccess) return e;
          }
          return cudaSuccess;
        },
        "the end of the run");
    // Each op from its own events: its duration between its start and end events, its start
    // from its iteration's first device op (whose offset from the base event is the only long
    // interval). cudaEventElapsedTime returns float milliseconds, 24 bits: from a single base, a
    // short op's span would lose microseconds a minute into the run.
    std::vector<OpSpan> spans(s_->ops.size());
    int iteration = -1;
    cudaEvent_t anchor = base_;
    TimeNs anchor_at = 0;
    for (std::size_t i = 0; i < spans.size(); ++i) {
      const Op& op = s_->ops[i];
      if (runs_on_cpu(*s_, op)) {
        spans[i] = host_spans_[i];
        continue;
      }
      if (op.iteration != iteration) {
        iteration = op.iteration;
        anchor_at = elapsed(base_, start_[i]);
        anchor = start_[i];
      }
      const TimeNs start = anchor_at + elapsed(anchor, start_[i]);
      spans[i] = {start, start + elapsed(start_[i], end_[i])};
    }
    return spans;
  }

  void abort() noexcept override {
    for (ncclComm_t c : comms_) {
      if (c != nullptr) SHARDSCOPE_CUDA_LOG(ncclCommAbort(c));
    }
    comms_.clear();
    if (world_comm_ != nullptr) SHARDSCOPE_CUDA_LOG(ncclCommAbort(world_comm_));
    world_comm_ = nullptr;
  }

 private:
  cudaStream_t stream_of(StreamId st) const { return streams_[static_cast<std::size_t>(st)]; }
  TimeNs since_base(Clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - host_base_).count();
  }
  static TimeNs elapsed(cudaEvent_t from, cudaEvent_t to) {
    float ms = 0;
    SHARDSCOPE_CUDA(cudaEventElapsedTime(&ms, from, to));
    return std::llround(static_cast<double>(ms) * 1e6);
  }

  // Polls instead of blocking, so a stuck collective is noticed: NCCL's asynchronous errors and
  // the timeout abort every communicator and name what was waited for.
  template <typename Query>
  void wait_until(Query done, const std::string& what) {
    const auto deadline = Clock::now() + options_.timeout;
    for (;;) {
      const cudaError_t e = done();
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) SHARDSCOPE_CUDA(e);
      for (ncclComm_t c : comms_) {
        ncclResult_t async = ncclSuccess;
        SHARDSCOPE_CUDA(ncclCommGetAsyncError(c, &async));
        if (async != ncclSuccess && async != ncclInProgress) {
          const std::string reason = nccl_reason(async, c);
          abort();
          throw CudaError(fmt::format("NCCL reported {} while waiting for {}", reason, what));
        }
      }
      if (Clock::now() > deadline) {
        abort();
        throw CudaError(
            fmt::format("waited {} s for {}: a collective is stuck (a missing peer, "
                        "or ranks issuing collectives in different orders); "
                        "communicators aborted",
                        options_.timeout.count() / 1000, what));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void start_communicators(const Schedule& s) {
    const bool collectives = std::any_of(s.ops.begin(), s.ops.end(),
                                         [](const Op& op) { return is_collective(op.kind); });
    if (options_.comm == CommMode::emulate || !collectives) return;
    if (options_.world != s.world_size) {
      throw Error(
          fmt::format("--comm nccl needs one process per rank of the schedule's world "
                      "({} ranks), got {}; on one GPU use --comm emulate",
                      s.world_size, options_.world));
    }
    if (options_.nccl_id.size() != sizeof(ncclUniqueId))
      throw Error("--comm nccl needs the NCCL unique id from rank 0's rendezvous");
    ncclUniqueId id{};
    std::memcpy(&id, options_.nccl_id.data(), sizeof(id));
    // Non-blocking communicators: a rank that never joins ends in an error after the timeout
    // instead of hanging every rank in ncclCommInitRank, before any watchdog exists (PyTorch's
    // ProcessGroupNCCL offers the same nonblocking mode).
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    settle(world_comm_,
           ncclCommInitRankConfig(&world_comm_, options_.world, id, options_.rank, &config),
           "ncclCommInitRankConfig (the world communicator)");
    // A non-blocking split writes the new communicator through the pointer it was given when
    // its asynchronous job ends, not before it returns: each split gets its slot in comms_ for
    // good (reserved, never moved), released with the others even if it does not settle.
    comms_.reserve(s.communicators.size());
    for (const Communicator& c : s.communicators) {
      const Membership m = membership(c, s.world_size, options_.rank);
      ncclComm_t& slot = comms_.emplace_back(nullptr);
      const ncclResult_t r = ncclCommSplit(world_comm_, m.instance, m.position, &slot, &config);
      const std::string what = fmt::format("ncclCommSplit (communicator '{}')", c.name);
      settle(world_comm_, r, what);
      settle(await_split(slot, what), ncclSuccess, what);
    }
  }

  // The communicator a non-blocking split has written to `slot`, once it has; a split that
  // fails reports on the parent, and one that never ends is a timeout.
  ncclComm_t await_split(ncclComm_t& slot, const std::string& what) {
    const auto deadline = Clock::now() + options_.timeout;
    for (;;) {
      ncclComm_t comm = std::atomic_ref<ncclComm_t>(slot).load();
      if (comm != nullptr) return comm;
      ncclResult_t state = ncclSuccess;
      SHARDSCOPE_CUDA(ncclCommGetAsyncError(world_comm_, &state));
      if (state != ncclSuccess && state != ncclInProgress)
        throw CudaError(fmt::format("NCCL error {} in {}", nccl_reason(state, world_comm_), what));
      if (Clock::now() > deadline)
        throw CudaError(fmt::format("{} gave no communicator within {} s", what,
                                    options_.timeout.count() / 1000));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // A call on a non-blocking communicator may return ncclInProgress; the communicator is usable
  // once ncclCommGetAsyncError stops saying so. Waits at most the timeout, then aborts it.
  void settle(ncclComm_t comm, ncclResult_t started, const std::string& what) {
    if (started != ncclSuccess && started != ncclInProgress)
      throw CudaError(fmt::format("NCCL error {} in {}", nccl_reason(started, comm), what));
    if (comm == nullptr) return;
    const auto deadline = Clock::now() + options_.timeout;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      SHARDSCOPE_CUDA(ncclCommGetAsyncError(comm, &state));
      if (state == ncclSuccess) return;
      if (state != ncclInProgress)
        throw CudaError(fmt::format("NCCL error {} in {}", nccl_reason(state, comm), what));
      if (Clock::now() > deadline) {
        SHARDSCOPE_CUDA_LOG(ncclCommAbort(comm));
        std::replace(comms_.begin(), comms_.end(), comm, ncclComm_t{nullptr});
        if (comm == world_comm_) world_comm_ = nullptr;
        throw CudaError(
            fmt::format("{} did not finish within {} s: a rank did not join (is "
                        "every rank started, with the same rendezvous?)",
                        what, options_.timeout.count() / 1000));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // ---- what an op does
  void run_op(OpId id, const Op& op, cudaStream_t st) {
    switch (op.kind) {
      case OpKind::forward:
      case OpKind::backward:
      case OpKind::recompute:
      case OpKind::optimizer_step:
        if (op.kernels == kNone) {
          occupy(id, op, st);  // a custom model's op: no shapes, the modelled time
        } else {
          for (const Kernel& k : op_kernels(*s_, op)) {
            for (std::int64_t r = 0; r < k.repeat; ++r) kernels_->run(k, st);
          }
        }
        return;
      case OpKind::copy_in:
      case OpKind::copy_out:
      case OpKind::reduce_copy_in:
      case OpKind::grad_div:
      case OpKind::reshard:
        device_copy(id, op, st);
        return;
      case OpKind::h2d:
      case OpKind::d2h:
        host_copy(op, st);
        return;
      case OpKind::all_gather:
      case OpKind::reduce_scatter:
      case OpKind::all_reduce:
        collective(id, op, st);
        return;
      case OpKind::stream_wait:
      case OpKind::cpu_wait:
      case OpKind::zero_grad:
      case OpKind::state_dict:
      case OpKind::other:
        return;
    }
  }

  // Where `ref` lies in device memory: its buffer's address, its offset and, for the rank's own
  // chunk, this rank's place in the op's communicator. Null for a host buffer or an unnamed
  // region; a named GPU buffer that is not allocated is a broken schedule.
  std::byte* region(OpId id, const Op& op, const BufferRef& ref) const {
    if (!ref.named()) return nullptr;
    if (s_->buffers[static_cast<std::size_t>(ref.buffer)].location != Location::gpu) return nullptr;
    std::byte* base = allocator_->address(ref.buffer);
    if (base == nullptr)
      throw Error(fmt::format("{} names {}, which is not allocated when it is issued",
                              describe_op(*s_, id), buffer_name(*s_, ref.buffer)));
    Bytes at = ref.offset;
    if (ref.rank_chunk && op.comm != kNone) {
      const Communicator& c = s_->communicators[static_cast<std::size_t>(op.comm)];
      at += membership(c, s_->world_size, options_.rank).position * ref.bytes();
    }
    return base + at;
  }

  // A device copy between the regions the IR names (a cast copies the smaller side's bytes:
  // the traffic, not the conversion, is what costs). A copy that gathers from several buffers
  // (reduce_copy_in of per-parameter gradients) names none: its bytes move as traffic.
  void device_copy(OpId id, const Op& op, cudaStream_t st) {
    if (op.bytes == 0) return;
    std::byte* src = region(id, op, op.input);
    std::byte* dst = region(id, op, op.output);
    if (src != nullptr && dst != nullptr) {
      const Bytes n = std::min(op.input.bytes(), op.output.bytes());
      SHARDSCOPE_CUDA(
          cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n), cudaMemcpyDeviceToDevice, st));
    } else {
      kernels_->move_traffic(2 * op.bytes, st);
    }
  }

  void host_copy(const Op& op, cudaStream_t st) {
    for (Bytes done = 0; done < op.bytes; done += kRegion) {
      const auto n = static_cast<std::size_t>(std::min(kRegion, op.bytes - done));
      if (op.kind == OpKind::h2d) {
        SHARDSCOPE_CUDA(
            cudaMemcpyAsync(kernels_->scratch(0), host_staging_, n, cudaMemcpyHostToDevice, st));
      } else {
        SHARDSCOPE_CUDA(
            cudaMemcpyAsync(host_staging_, kernels_->scratch(0), n, cudaMemcpyDeviceToHost, st));
      }
    }
  }

  // A custom model's compute, or an emulated collective: the SMs busy for the modelled time.
  void occupy(OpId id, const Op& op, cudaStream_t st, const void* in = nullptr,
              std::size_t in_bytes = 0, void* out = nullptr, std::size_t out_bytes = 0) {
    const TimeNs t = options_.modelled_time ? options_.modelled_time(id, op) : 0;
    SHARDSCOPE_CUDA(emulated_collective(in, in_bytes, out, out_bytes,
                                        static_cast<std::uint64_t>(std::max<TimeNs>(t, 0)),
                                        options_.emulated_channels, st));
  }

  // The collective on exactly the regions, counts and dtype the IR names (check_schedule holds
  // them to the communicator's size).
  void collective(OpId id, const Op& op, cudaStream_t st) {
    std::byte* in = region(id, op, op.input);
    std::byte* out = region(id, op, op.output);
    if (in == nullptr || out == nullptr)
      throw Error(fmt::format("{} does not name GPU buffers for its input and output",
                              describe_op(*s_, id)));
    if (options_.comm == CommMode::emulate) {
      occupy(id, op, st, in, static_cast<std::size_t>(op.input.bytes()), out,
             static_cast<std::size_t>(op.output.bytes()));
      return;
    }
    ncclComm_t comm = comms_[static_cast<std::size_t>(op.comm)];
    const ncclDataType_t type = nccl_type(op.output.dtype);
    ncclResult_t r = ncclSuccess;
    switch (op.kind) {
      case OpKind::all_gather:  // count: per rank
        r = ncclAllGather(in, out, static_cast<std::size_t>(op.input.count), type, comm, st);
        break;
      case OpKind::reduce_scatter:  // count: per rank
        r = ncclReduceScatter(in, out, static_cast<std::size_t>(op.output.count), type, ncclSum,
                              comm, st);
        break;
      default:
        r = ncclAllReduce(in, out, static_cast<std::size_t>(op.input.count), type, ncclSum, comm,
                          st);
        break;
    }
    settle(comm, r, describe_op(*s_, id));  // enqueued; its completion is the end event's
  }

  // A non-blocking communicator is finalized (its outstanding work flushed) before it is
  // destroyed; one that does not finish within the timeout is aborted instead.
  void destroy(ncclComm_t comm) noexcept {
    if (comm == nullptr) return;
    ncclResult_t state = ncclCommFinalize(comm);
    const auto deadline = Clock::now() + options_.timeout;
    while (state == ncclInProgress && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) break;
    }
    if (state == ncclSuccess) {
      SHARDSCOPE_CUDA_LOG(ncclCommDestroy(comm));
    } else {
      SHARDSCOPE_CUDA_LOG(ncclCommAbort(comm));
    }
  }

  // torch.optim.AdamW on the CPU (CPU offload): fp32 in host memory, split over the cores.
  void cpu_adamw(const Op& op) {
    std::int64_t elements = 0;
    for (const Kernel& k : op_kernels(*s_, op)) {
      if (const auto* o = std::get_if<OptimizerUpdate>(&k.shape))
        elements += o->elements * k.repeat;
    }
    constexpr std::int64_t kPass = 1 << 24;
    if (host_state_.empty() && elements > 0)
      host_state_.assign(static_cast<std::size_t>(4 * std::min(elements, kPass)), 0.001F);
    const std::int64_t per_pass = static_cast<std::int64_t>(host_state_.size() / 4);
    // One thread per core for the whole step (not per pass): thread t owns the elements i ≡ t
    // (mod threads) of every pass, in a layout fixed by the pass size, so no two threads touch
    // the same element and no pass waits for another.
    const unsigned threads = std::max(1U, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([this, elements, per_pass, t, threads] {
        float* p = host_state_.data();
        float* g = p + per_pass;
        float* m = g + per_pass;
        float* v = m + per_pass;
        for (std::int64_t done = 0; done < elements; done += per_pass) {
          const std::int64_t n = std::min(per_pass, elements - done);
          for (std::int64_t i = t; i < n; i += threads) {
            m[i] = 0.9F * m[i] + 0.1F * g[i];
            v[i] = 0.95F * v[i] + 0.05F * g[i] * g[i];
            p[i] -= 1e-4F * (0.1F * p[i] + m[i] / (std::sqrt(v[i]) + 1e-8F));
          }
        }
      });
    }
    for (auto& th : pool) th.join();
  }

  // After a clean run the communicators are destroyed (after an error abort() already aborted
  // them); then the memory, the events and the streams.
  void release() noexcept {
    for (ncclComm_t c : comms_) destroy(c);
    comms_.clear();
    destroy(world_comm_);
    world_comm_ = nullptr;
    allocator_.reset();
    memory_.reset();
    kernels_.reset();
    for (auto& e : start_) SHARDSCOPE_CUDA_LOG(cudaEventDestroy(e));
    for (auto& e : end_) SHARDSCOPE_CUDA_LOG(cudaEventDestroy(e));
    if (base_ != nullptr) SHARDSCOPE_CUDA_LOG(cudaEventDestroy(base_));
    for (cudaStream_t st : streams_) {
      if (st != nullptr) SHARDSCOPE_CUDA_LOG(cudaStreamDestroy(st));
    }
    if (options_.pinned_host && host_staging_ != nullptr)
      SHARDSCOPE_CUDA_LOG(cudaFreeHost(host_staging_));
  }

  CudaBackendOptions options_;
  const Schedule* s_ = nullptr;
  std::string gpu_name_;
  std::vector<cudaStream_t> streams_;  // per IR stream; nullptr for the CPU lane
  std::vector<cudaEvent_t> start_, end_;
  cudaEvent_t base_ = nullptr;
  Clock::time_point host_base_;
  std::vector<OpSpan> host_spans_;  // CPU-lane ops, timed on the host clock from the base
  void* host_staging_ = nullptr;
  std::vector<std::byte> pageable_;
  std::vector<float> host_state_;
  std::unique_ptr<KernelRunner> kernels_;
  std::unique_ptr<CudaSegmentMemory> memory_;  // made by begin(), for the device
  std::unique_ptr<DeviceAllocator> allocator_;
  DeviceBudget budget_;
  ncclComm_t world_comm_ = nullptr;
  std::vector<ncclComm_t> comms_;  // per IR communicator
};

}  // namespace
}  // namespace cuda

int visible_cuda_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

bool cuda_device_available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why != nullptr) *why = fmt::format("no usable CUDA driver ({})", cudaGetErrorString(e));
    return false;
  }
  if (n == 0) {
    if (why != nullptr) *why = "no CUDA device";
    return false;
  }
  return true;
}

std::string make_nccl_id() {
  ncclUniqueId id{};
  SHARDSCOPE_CUDA(ncclGetUniqueId(&id));
  return {reinterpret_cast<const char*>(&id), sizeof(id)};
}

std::unique_ptr<Backend> make_cuda_backend(CudaBackendOptions options) {
  return std::make_unique<cuda::CudaBackend>(std::move(options));
}

}  // namespace shardscope::exec
