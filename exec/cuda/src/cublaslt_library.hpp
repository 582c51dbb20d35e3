#pragma once
// cuBLASLt, opened when the first GEMM needs it rather than linked. The library is about 540 MB
// (CUDA 13) and mapping and relocating it at load time cost every process that linked it about
// 75 ms before main() on the 2-core development VM (an empty C program linked against
// libcublasLt.so.13: 75 ms a run against 1 ms, 20 runs each): every shardscope command, the GUI
// and each test process, though only the CUDA backend's GEMMs use it.
//
// The library opened is the major version the headers were compiled against, found as the
// dynamic loader finds a linked one (LD_LIBRARY_PATH, the executable's run path, the loader's
// cache), then in the CUDA toolkit's library folder of the build.

#include <cublasLt.h>

namespace shardscope::exec::cuda {

/// The cuBLASLt functions the backend calls, resolved from the opened library.
struct CublasLt {
  decltype(&::cublasLtGetVersion) get_version = nullptr;
  decltype(&::cublasLtGetStatusName) get_status_name = nullptr;
  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtDestroy) destroy = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) matmul_algo_get_heuristic = nullptr;
  decltype(&::cublasLtMatmulDescCreate) matmul_desc_create = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) matmul_desc_destroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) matmul_preference_create = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) matmul_preference_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) matmul_preference_set_attribute = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) matrix_layout_create = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) matrix_layout_destroy = nullptr;
  decltype(&::cublasLtMatrixLayoutSetAttribute) matrix_layout_set_attribute = nullptr;
};

/// The library's name: libcublasLt.so.<the toolkit's major version>, which is cuBLAS's own
/// (cuBLAS 13 ships with CUDA 13; the tests check it against the headers' CUBLAS_VER_MAJOR).
const char* cublaslt_soname();

/// cuBLASLt, opened on the first call (thread-safe) and kept open for the process. Throws
/// CudaError naming the library, the places looked in and the loader's reason when it cannot be
/// opened or lacks a function; every later call throws the same.
const CublasLt& cublaslt();

}  // namespace shardscope::exec::cuda
