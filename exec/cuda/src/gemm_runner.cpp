#include "gemm_runner.hpp"

#include "cuda_check.hpp"

namespace shardscope::exec::cuda {
namespace {

constexpr std::size_t kWorkspace = 32ULL << 20;  // what PyTorch gives cuBLASLt on Hopper

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::fp32:
      return CUDA_R_32F;
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::fp16:
      return CUDA_R_16F;
    case DType::fp8:
      break;
  }
  throw CudaError("fp8 GEMMs need per-tensor scales and are not run yet; use bf16 or fp16");
}

cublasLtMatrixLayout_t layout(DType d, std::int64_t rows, std::int64_t cols, std::int64_t batch) {
  cublasLtMatrixLayout_t l = nullptr;
  SHARDSCOPE_CUDA(cublaslt().matrix_layout_create(
      &l, cuda_type(d), static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols), rows));
  if (batch > 1) {
    const int count = static_cast<int>(batch);
    const std::int64_t stride = rows * cols;
    SHARDSCOPE_CUDA(cublaslt().matrix_layout_set_attribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                           &count, sizeof(count)));
    SHARDSCOPE_CUDA(cublaslt().matrix_layout_set_attribute(
        l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return l;
}

}  // namespace

// Row-major C[m×n] = op(A)·op(B) is column-major Cᵀ[n×m] = op(B)ᵀ·op(A)ᵀ: cuBLASLt is given B as
// its first operand and A as its second, each viewed column-major (so a row-major [r×c] matrix
// is a column-major [c×r] one with leading dimension c).
struct GemmRunner::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulHeuristicResult_t algo{};
  bool fp32_scale = true;

  ~Plan() {
    SHARDSCOPE_CUDA_LOG(cublaslt().matrix_layout_destroy(first));
    SHARDSCOPE_CUDA_LOG(cublaslt().matrix_layout_destroy(second));
    SHARDSCOPE_CUDA_LOG(cublaslt().matrix_layout_destroy(out));
    SHARDSCOPE_CUDA_LOG(cublaslt().matmul_desc_destroy(desc));
  }
};

GemmRunner::GemmRunner() {
  SHARDSCOPE_CUDA(cublaslt().create(&handle_));
  SHARDSCOPE_CUDA(cudaMalloc(&workspace_, kWorkspace));
}

GemmRunner::~GemmRunner() {
  for (auto& [key, plan] : plans_) delete plan;  // NOLINT(cppcoreguidelines-owning-memory)
  SHARDSCOPE_CUDA_LOG(cudaFree(workspace_));
  SHARDSCOPE_CUDA_LOG(cublaslt().destroy(handle_));
}

GemmRunner::Plan& GemmRunner::plan_for(const Gemm& g) {
  const Key key{g.m, g.n, g.k, g.batch, g.transpose_a, g.transpose_b, g.input, g.output};
  if (const auto it = plans_.find(key); it != plans_.end()) return *it->second;
  auto plan = std::make_unique<Plan>();
  SHARDSCOPE_CUDA(cublaslt().matmul_desc_create(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_first = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  SHARDSCOPE_CUDA(cublaslt().matmul_desc_set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                       &op_first, sizeof(op_first)));
  SHARDSCOPE_CUDA(cublaslt().matmul_desc_set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                       &op_second, sizeof(op_second)));
  // First operand: B row-major [k×n] (col-major [n×k]); transposed B is stored [n×k] (col-major
  // [k×n]). Second: A row-major [m×k] (col-major [k×m]); transposed A is stored [k×m].
  plan->first =
      g.transpose_b ? layout(g.input, g.k, g.n, g.batch) : layout(g.input, g.n, g.k, g.batch);
  plan->second =
      g.transpose_a ? layout(g.input, g.m, g.k, g.batch) : layout(g.input, g.k, g.m, g.batch);
  plan->out = layout(g.output, g.n, g.m, g.batch);
  cublasLtMatmulPreference_t pref = nullptr;
  SHARDSCOPE_CUDA(cublaslt().matmul_preference_create(&pref));
  const std::size_t workspace = kWorkspace;
  SHARDSCOPE_CUDA(cublaslt().matmul_preference_set_attribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  int found = 0;
  const auto status =
      cublaslt().matmul_algo_get_heuristic(handle_, plan->desc, plan->first, plan->second,
                                           plan->out, plan->out, pref, 1, &plan->algo, &found);
  SHARDSCOPE_CUDA_LOG(cublaslt().matmul_preference_destroy(pref));
  SHARDSCOPE_CUDA(status);
  if (found == 0) {
    throw CudaError(fmt::format("cuBLASLt has no algorithm for a {}×{}×{} GEMM (batch {})", g.m,
                                g.n, g.k, g.batch));
  }
  Plan& out = *plan;
  plans_.emplace(key, plan.release());
  return out;
}

void GemmRunner::run(const Gemm& g, const void* a, const void* b, void* c, cudaStream_t stream) {
  if (g.m == 0 || g.n == 0 || g.k == 0) return;
  Plan& p = plan_for(g);
  const float alpha = 1.0F, beta = 0.0F;
  SHARDSCOPE_CUDA(cublaslt().matmul(handle_, p.desc, &alpha, b, p.first, a, p.second, &beta, c,
                                    p.out, c, p.out, &p.algo.algo, workspace_, kWorkspace, stream));
}

}  // namespace shardscope::exec::cuda
