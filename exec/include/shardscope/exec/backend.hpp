#pragma once
// The seam between the executor and the hardware. exec::run issues a schedule's ops through a
// Backend exactly as the IR says; a backend runs them (host threads, CUDA streams and NCCL) and
// reports when each ran. Backends differ in what an op does, never in the order it is issued.
//
// Contract, per run: begin() once; then, in IR order, for each op: allocate() its buffers, the
// waits the op needs (stream_wait for a dependency on another stream, host_wait for a CPU op or
// cpu_wait), launch() it (or run_host() for CPU-stream work), free() what it frees; then finish().
// Any call may throw; after a throw the executor calls abort() and nothing else.

#include <string>
#include <vector>

#include "shardscope/core/schedule.hpp"

namespace shardscope::exec {

/// When an op ran, in ns since the run's start on this rank's clock.
struct OpSpan {
  TimeNs start = 0;
  TimeNs end = 0;
};

struct MemoryUsage {
  Bytes allocated = 0;
  Bytes reserved = 0;
  Bytes capacity = 0;  // the most the allocator may reserve in this run; 0 before begin()
};

class Backend {
 public:
  virtual ~Backend() = default;
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  /// "host", "cuda": Provenance::backend.
  virtual std::string name() const = 0;
  /// What ran it, e.g. "host, rank 0 of 4 (threads)": Provenance::device.
  virtual std::string device() const = 0;
  virtual int rank() const = 0;

  /// Creates the streams (priority by kind: communication and copy streams high, as FSDP2's),
  /// the communicators and one completion event per op.
  virtual void begin(const Schedule& schedule) = 0;
  /// A device buffer through the backend's allocator, on the stream of the op that allocates it.
  virtual void allocate(BufferId id, const Buffer& buffer, StreamId stream) = 0;
  virtual void free(BufferId id, const Buffer& buffer) = 0;
  virtual MemoryUsage memory() const = 0;
  /// What the run's report should say about this backend's setup, one line each (the CUDA
  /// backend's memory budget on the device it was given); empty before begin().
  virtual std::vector<std::string> setup_notes() const { return {}; }
  /// `stream` waits (without blocking the CPU) until op `event` has completed.
  virtual void stream_wait(StreamId stream, OpId event) = 0;
  /// The CPU blocks until op `event` has completed.
  virtual void host_wait(OpId event) = 0;
  /// Enqueues a GPU-stream op (kernels, copies, a collective on its communicator).
  virtual void launch(OpId id, const Op& op) = 0;
  /// Runs CPU-stream work (the optimizer under CPU offload) on the calling thread.
  virtual void run_host(OpId id, const Op& op) = 0;
  /// Waits for every stream to drain; returns each op's span, by op id.
  virtual std::vector<OpSpan> finish() = 0;
  /// Stops all work after an error or an interrupt; must not throw.
  virtual void abort() noexcept = 0;
};

}  // namespace shardscope::exec
