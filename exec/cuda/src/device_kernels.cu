#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "device_kernels.hpp"

namespace shardscope::exec::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(std::size_t items) {
  const std::size_t b = (items + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? (b == 0 ? 1 : b) : 65535 * 8);
}

__device__ std::uint32_t hash(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

__global__ void fill_random_kernel(std::uint16_t* data, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    // A bf16 in [-1, 1): sign, exponent 0x70..0x7e, random mantissa.
    const std::uint32_t h = hash(static_cast<std::uint32_t>(i) ^ seed);
    data[i] = static_cast<std::uint16_t>((h & 0x8000U) | (0x3800U + (h >> 20 & 0x7ffU)));
  }
}

__global__ void move_kernel(const uint4* src, uint4* dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

// One block per row: max, sum of exponentials, normalise; fp32 inside.
__global__ void softmax_kernel(__nv_bfloat16* scores, std::int64_t rows, std::int64_t cols,
                               bool causal, std::int64_t causal_offset) {
  const std::int64_t row = blockIdx.x % rows;
  __nv_bfloat16* p = scores + static_cast<std::int64_t>(blockIdx.x) * cols;
  const std::int64_t live = causal ? min(cols, causal_offset + row + 1) : cols;
  __shared__ float reduce[kThreads];
  float m = -INFINITY;
  for (std::int64_t c = threadIdx.x; c < live; c += blockDim.x)
    m = fmaxf(m, __bfloat162float(p[c]));
  reduce[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) reduce[threadIdx.x] = fmaxf(reduce[threadIdx.x], reduce[threadIdx.x + s]);
    __syncthreads();
  }
  m = reduce[0];
  __syncthreads();
  float sum = 0;
  for (std::int64_t c = threadIdx.x; c < live; c += blockDim.x)
    sum += __expf(__bfloat162float(p[c]) - m);
  reduce[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) reduce[threadIdx.x] += reduce[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = 1.0F / reduce[0];
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    p[c] = c < live ? __float2bfloat16(__expf(__bfloat162float(p[c]) - m) * inv)
                    : __float2bfloat16(0.0F);
  }
}

template <typename T>
__device__ float load(const T* p, std::int64_t i) {
  if constexpr (sizeof(T) == 2) {
    return __bfloat162float(p[i]);
  } else {
    return p[i];
  }
}

template <typename T>
__device__ void store(T* p, std::int64_t i, float v) {
  if constexpr (sizeof(T) == 2) {
    p[i] = __float2bfloat16(v);
  } else {
    p[i] = v;
  }
}

template <typename T>
__global__ void adamw_kernel(T* param, const T* grad, T* m, T* v, std::int64_t n, float lr,
                             float b1, float b2, float eps, float wd, float c1, float c2) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float g = load(grad, i);
    float p = load(param, i);
    const float mi = b1 * load(m, i) + (1 - b1) * g;
    const float vi = b2 * load(v, i) + (1 - b2) * g * g;
    p -= lr * wd * p;
    p -= lr * (mi / c1) / (sqrtf(vi / c2) + eps);
    store(param, i, p);
    store(m, i, mi);
    store(v, i, vi);
  }
}

__device__ std::uint64_t global_ns() {
  std::uint64_t t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void emulated_collective_kernel(const uint4* in, std::size_t in_n, uint4* out,
                                           std::size_t out_n, std::uint64_t duration_ns) {
  __shared__ std::uint64_t start;
  if (threadIdx.x == 0) start = global_ns();
  __syncthreads();
  if (in_n > 0) {
    for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < out_n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
      out[i] = in[i % in_n];
    }
  }
  if (threadIdx.x == 0) {
    while (global_ns() - start < duration_ns) __nanosleep(1000);
  }
  __syncthreads();
}

// One block per held SM: it takes the SM's whole shared memory (dynamic, set by the launch), so
// no block of another kernel that needs shared memory is placed on that SM while it lives.
__global__ void hold_sms_kernel(volatile int* started, const volatile int* release,
                                std::uint64_t max_ns) {
  extern __shared__ unsigned char held[];
  if (threadIdx.x == 0) {
    held[0] = 0;
    const std::uint64_t start = global_ns();
    // A flag of its own, a plain store: no atomics to host memory (not every PCIe host has them).
    started[blockIdx.x] = 1;
    __threadfence_system();
    while (*release == 0 && global_ns() - start < max_ns) __nanosleep(10000);
  }
  __syncthreads();
}

}  // namespace

cudaError_t fill_random(void* data, std::size_t bytes, std::uint32_t seed, cudaStream_t stream) {
  const std::size_t n = bytes / 2;
  fill_random_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<std::uint16_t*>(data), n,
                                                             seed);
  return cudaGetLastError();
}

cudaError_t move_bytes(const void* src, void* dst, std::size_t bytes, cudaStream_t stream) {
  const std::size_t n = bytes / 2 / sizeof(uint4);
  if (n == 0) return cudaSuccess;
  move_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const uint4*>(src),
                                                      static_cast<uint4*>(dst), n);
  return cudaGetLastError();
}

cudaError_t softmax_rows(void* scores, std::int64_t rows, std::int64_t cols, bool causal,
                         std::int64_t causal_offset, std::int64_t batch, cudaStream_t stream) {
  if (rows == 0 || cols == 0 || batch == 0) return cudaSuccess;
  softmax_kernel<<<static_cast<unsigned>(rows * batch), kThreads, 0, stream>>>(
      static_cast<__nv_bfloat16*>(scores), rows, cols, causal, causal_offset);
  return cudaGetLastError();
}

cudaError_t adamw(const AdamWArgs& a, cudaStream_t stream) {
  if (a.n == 0) return cudaSuccess;
  const float c1 = 1.0F - std::pow(a.beta1, static_cast<float>(a.step));
  const float c2 = 1.0F - std::pow(a.beta2, static_cast<float>(a.step));
  const int blocks = blocks_for(static_cast<std::size_t>(a.n));
  if (a.bf16) {
    adamw_kernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<__nv_bfloat16*>(a.param), static_cast<const __nv_bfloat16*>(a.grad),
        static_cast<__nv_bfloat16*>(a.exp_avg), static_cast<__nv_bfloat16*>(a.exp_avg_sq), a.n,
        a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, c1, c2);
  } else {
    adamw_kernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<float*>(a.param), static_cast<const float*>(a.grad),
        static_cast<float*>(a.exp_avg), static_cast<float*>(a.exp_avg_sq), a.n, a.lr, a.beta1,
        a.beta2, a.eps, a.weight_decay, c1, c2);
  }
  return cudaGetLastError();
}

cudaError_t emulated_collective(const void* input, std::size_t input_bytes, void* output,
                                std::size_t output_bytes, std::uint64_t duration_ns, int ctas,
                                cudaStream_t stream) {
  const int blocks = std::max(ctas, 1);
  emulated_collective_kernel<<<blocks, kThreads, 0, stream>>>(
      static_cast<const uint4*>(input), input_bytes / sizeof(uint4), static_cast<uint4*>(output),
      output_bytes / sizeof(uint4), duration_ns);
  return cudaGetLastError();
}

cudaError_t hold_sms(int sms, int* started, const int* release, std::uint64_t max_ns,
                     cudaStream_t stream) {
  if (sms <= 0) return cudaSuccess;
  int device = 0;
  int shared = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (const cudaError_t e =
          cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
      e != cudaSuccess)
    return e;
  if (const cudaError_t e = cudaFuncSetAttribute(
          hold_sms_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared);
      e != cudaSuccess)
    return e;
  hold_sms_kernel<<<sms, 32, static_cast<std::size_t>(shared), stream>>>(started, release, max_ns);
  return cudaGetLastError();
}

}  // namespace shardscope::exec::cuda
