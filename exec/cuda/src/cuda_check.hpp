#pragma once
// CUDA, cuBLASLt and NCCL status codes as exceptions that name the call and where it was made.
// Destructors must not throw: they use the *_LOG forms, which print and go on.

#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <cstdio>

#include "cublaslt_library.hpp"
#include "shardscope/core/error.hpp"

namespace shardscope::exec::cuda {

struct CudaError : Error {
  using Error::Error;
};

[[noreturn]] inline void fail(const char* library, const char* status, const char* call,
                              const char* file, int line) {
  throw CudaError(fmt::format("{} error {} in {} ({}:{})", library, status, call, file, line));
}

inline const char* status_text(cudaError_t e) {
  return cudaGetErrorName(e);
}
inline const char* status_text(ncclResult_t r) {
  return ncclGetErrorString(r);
}
inline const char* status_text(cublasStatus_t s) {
  return cublaslt().get_status_name(s);
}
const char* status_text(CUresult r);  // the driver's name for it (cuda_segment_memory.cpp)

inline bool ok(cudaError_t e) {
  return e == cudaSuccess;
}
// ncclInProgress is not success: a non-blocking communicator's call that returns it is waited
// for (CudaBackend::settle) before the communicator is used again.
inline bool ok(ncclResult_t r) {
  return r == ncclSuccess;
}
inline bool ok(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS;
}
inline bool ok(CUresult r) {
  return r == CUDA_SUCCESS;
}

inline const char* library_of(cudaError_t) {
  return "CUDA";
}
inline const char* library_of(ncclResult_t) {
  return "NCCL";
}
inline const char* library_of(cublasStatus_t) {
  return "cuBLASLt";
}
inline const char* library_of(CUresult) {
  return "CUDA driver";
}

}  // namespace shardscope::exec::cuda

// NOLINTBEGIN(cppcoreguidelines-macro-usage): the call's text and place are what make these useful
#define SHARDSCOPE_CUDA(call)                                                                   \
  do {                                                                                          \
    const auto shardscope_status_ = (call);                                                     \
    if (!::shardscope::exec::cuda::ok(shardscope_status_)) {                                    \
      ::shardscope::exec::cuda::fail(::shardscope::exec::cuda::library_of(shardscope_status_),  \
                                     ::shardscope::exec::cuda::status_text(shardscope_status_), \
                                     #call, __FILE__, __LINE__);                                \
    }                                                                                           \
  } while (false)

#define SHARDSCOPE_CUDA_LOG(call)                                                              \
  do {                                                                                         \
    const auto shardscope_status_ = (call);                                                    \
    if (!::shardscope::exec::cuda::ok(shardscope_status_)) {                                   \
      std::fprintf(stderr, "shardscope: %s error %s in %s (%s:%d)\n",                          \
                   ::shardscope::exec::cuda::library_of(shardscope_status_),                   \
                   ::shardscope::exec::cuda::status_text(shardscope_status_), #call, __FILE__, \
                   __LINE__);                                                                  \
    }                                                                                          \
  } while (false)
// NOLINTEND(cppcoreguidelines-macro-usage)
