#include "cublaslt_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <string>

#include "cuda_check.hpp"

#if !defined(SHARDSCOPE_CUDA_LIBRARY_DIR) || !defined(SHARDSCOPE_CUBLASLT_SONAME)
#error "the build names cuBLASLt and the CUDA toolkit's library folder (exec/CMakeLists.txt)"
#endif

namespace shardscope::exec::cuda {
namespace {

// What opening the library gave: its functions, or why there are none.
struct Loaded {
  CublasLt functions;
  std::string error;
};

// A literal, so that scripts/gpu-campaign can read from the binary which library it opens.
const std::string& soname() {
  static const std::string kName = SHARDSCOPE_CUBLASLT_SONAME;
  return kName;
}

void* open_library(std::string& why) {
  // RTLD_LOCAL: its symbols are reached through dlsym only, and stay out of other libraries'
  // symbol lookups.
  if (void* h = dlopen(soname().c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  why = dlerror();
  const std::string in_toolkit = std::string(SHARDSCOPE_CUDA_LIBRARY_DIR) + "/" + soname();
  if (void* h = dlopen(in_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  why += fmt::format("; {}", dlerror());
  return nullptr;
}

template <typename F>
void resolve(void* library, const char* name, F& out, std::string& missing) {
  out = reinterpret_cast<F>(dlsym(library, name));  // NOLINT: dlsym's documented use
  if (!out) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", name);
}

Loaded load() {
  Loaded l;
  std::string why;
  void* library = open_library(why);  // never closed: the backend may use it until exit
  if (!library) {
    l.error = fmt::format(
        "the CUDA backend's GEMMs need cuBLASLt ({}), which could not be opened from the "
        "loader's path (LD_LIBRARY_PATH, the run path, its cache) nor from {}: {}",
        soname(), SHARDSCOPE_CUDA_LIBRARY_DIR, why);
    return l;
  }
  CublasLt& f = l.functions;
  std::string missing;
  resolve(library, "cublasLtGetVersion", f.get_version, missing);
  resolve(library, "cublasLtGetStatusName", f.get_status_name, missing);
  resolve(library, "cublasLtCreate", f.create, missing);
  resolve(library, "cublasLtDestroy", f.destroy, missing);
  resolve(library, "cublasLtMatmul", f.matmul, missing);
  resolve(library, "cublasLtMatmulAlgoGetHeuristic", f.matmul_algo_get_heuristic, missing);
  resolve(library, "cublasLtMatmulDescCreate", f.matmul_desc_create, missing);
  resolve(library, "cublasLtMatmulDescDestroy", f.matmul_desc_destroy, missing);
  resolve(library, "cublasLtMatmulDescSetAttribute", f.matmul_desc_set_attribute, missing);
  resolve(library, "cublasLtMatmulPreferenceCreate", f.matmul_preference_create, missing);
  resolve(library, "cublasLtMatmulPreferenceDestroy", f.matmul_preference_destroy, missing);
  resolve(library, "cublasLtMatmulPreferenceSetAttribute", f.matmul_preference_set_attribute,
          missing);
  resolve(library, "cublasLtMatrixLayoutCreate", f.matrix_layout_create, missing);
  resolve(library, "cublasLtMatrixLayoutDestroy", f.matrix_layout_destroy, missing);
  resolve(library, "cublasLtMatrixLayoutSetAttribute", f.matrix_layout_set_attribute, missing);
  if (!missing.empty()) {
    l.error = fmt::format("the cuBLASLt opened ({}) lacks {}", soname(), missing);
    l.functions = {};
  }
  return l;
}

}  // namespace

const char* cublaslt_soname() {
  return soname().c_str();
}

const CublasLt& cublaslt() {
  static const Loaded kLoaded = load();  // opened once; C++ makes the first call's wait safe
  if (!kLoaded.error.empty()) throw CudaError(kLoaded.error);
  return kLoaded.functions;
}

}  // namespace shardscope::exec::cuda
