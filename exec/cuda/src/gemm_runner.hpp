#pragma once
// Row-major GEMMs (core/kernel.hpp's convention) through cuBLASLt, with the algorithm chosen once
// per shape by cuBLASLt's heuristic and cached.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "shardscope/core/kernel.hpp"

namespace shardscope::exec::cuda {

class GemmRunner {
 public:
  GemmRunner();
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  /// C = op(A)·op(B) for `g` (batch strided: A, B, C back to back per batch) on `stream`.
  void run(const Gemm& g, const void* a, const void* b, void* c, cudaStream_t stream);

  /// Bytes of A, B and C for `g`.
  static Bytes a_bytes(const Gemm& g) { return g.m * g.k * g.batch * bytes_per_element(g.input); }
  static Bytes b_bytes(const Gemm& g) { return g.k * g.n * g.batch * bytes_per_element(g.input); }
  static Bytes c_bytes(const Gemm& g) { return g.m * g.n * g.batch * bytes_per_element(g.output); }

 private:
  struct Plan;
  using Key =
      std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool, bool, DType, DType>;
  Plan& plan_for(const Gemm& g);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::map<Key, Plan*> plans_;
};

}  // namespace shardscope::exec::cuda
