#pragma once
// The CUDA/NCCL backend (`shardscope run --backend cuda`), built when the CUDA toolkit, cuBLASLt
// and NCCL are found (SHARDSCOPE_HAVE_CUDA). A CUDA stream per IR stream (communication and copy
// streams at high priority, as FSDP2 creates them), an event pair per op for its completion and
// its measured span, buffers from the caching-allocator policy the simulator models (cudaMalloc'd
// segments, or cuMemMap'd pages of expandable ones), compute ops running their kernels (cuBLASLt
// GEMMs of the IR's shapes, attention as blocked GEMMs and a softmax kernel, bandwidth kernels for
// memory-bound traffic, a fused AdamW), copies between the IR's buffers, and collectives either
// through NCCL (one communicator per IR communicator, split from the world) or emulated on one GPU
// (--comm emulate: a kernel per collective that moves its data and stays resident for the time the
// collective model predicts).

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "shardscope/core/caching_allocator.hpp"
#include "shardscope/exec/backend.hpp"

namespace shardscope::exec {

enum class CommMode {
  nccl,     // real collectives: one GPU per rank
  emulate,  // one GPU plays rank 0 of the schedule's world; the wire is modelled
};

struct CudaBackendOptions {
  int rank = 0;
  int world = 1;   // processes (GPUs) in the job; 1 under emulate
  int device = 0;  // the CUDA device of this rank
  CommMode comm = CommMode::emulate;
  std::string nccl_id;  // ncclUniqueId bytes from rank 0 (comm nccl)
  // The modelled duration of an op the GPU cannot run as kernels: an emulated collective's wire
  // time, a custom model's compute (no shapes). The CLI passes the simulator's.
  std::function<TimeNs(OpId, const Op&)> modelled_time;
  int emulated_channels = 16;  // SMs an emulated collective occupies (NCCL's channels)
  bool pinned_host = true;     // h2d/d2h from pinned (cudaMallocHost) or pageable memory
  Bytes memory_capacity = 0;   // the caching allocator's limit; 0: what the device has free
  // What NCCL allocates outside the allocator when its communicators first connect (the
  // simulator's memory_outside_allocator().nccl_buffers): kept free for it (device_budget.hpp).
  Bytes nccl_outside_to_come = 0;
  AllocatorParams allocator;                   // expandable segments map pages with cuMemMap
  std::chrono::milliseconds timeout{300'000};  // NCCL watchdog: a collective stuck this long aborts
};

/// Whether a CUDA device can be used here; otherwise why not (no driver, no GPU).
bool cuda_device_available(std::string* why = nullptr);

/// How many CUDA devices this process sees (CUDA_VISIBLE_DEVICES applied); 0 without a driver.
int visible_cuda_devices();

/// A fresh NCCL unique id (rank 0 makes it; the launcher's rendezvous sends it to every rank).
std::string make_nccl_id();

std::unique_ptr<Backend> make_cuda_backend(CudaBackendOptions options);

}  // namespace shardscope::exec
