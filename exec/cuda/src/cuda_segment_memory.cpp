#include "cuda_segment_memory.hpp"

#include <cudaTypedefs.h>

#include "cuda_check.hpp"

namespace shardscope::exec::cuda {
namespace {

constexpr Bytes kPage = CachingAllocator::kExpandablePage;

// The driver's virtual-memory entry points, looked up once through the runtime.
struct DriverVmm {
  PFN_cuGetErrorName_v6000 error_name = nullptr;
  PFN_cuMemAddressReserve_v10020 address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
};

template <typename Fn>
void load(Fn& fn, const char* symbol, unsigned version) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  SHARDSCOPE_CUDA(cudaGetDriverEntryPointByVersion(symbol, &p, version, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || p == nullptr) {
    throw CudaError(fmt::format(
        "the CUDA driver has no {} (version {}), which expandable segments need", symbol, version));
  }
  fn = reinterpret_cast<Fn>(p);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
}

const DriverVmm& driver() {
  static const DriverVmm kVmm = [] {
    DriverVmm d;
    load(d.error_name, "cuGetErrorName", 6000);
    load(d.address_reserve, "cuMemAddressReserve", 10020);
    load(d.address_free, "cuMemAddressFree", 10020);
    load(d.create, "cuMemCreate", 10020);
    load(d.release, "cuMemRelease", 10020);
    load(d.map, "cuMemMap", 10020);
    load(d.unmap, "cuMemUnmap", 10020);
    load(d.set_access, "cuMemSetAccess", 10020);
    load(d.granularity, "cuMemGetAllocationGranularity", 10020);
    return d;
  }();
  return kVmm;
}

CUmemAllocationProp device_memory(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

CUdeviceptr device_pointer(std::byte* p) {
  return reinterpret_cast<CUdeviceptr>(p);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
}

}  // namespace

const char* status_text(CUresult r) {
  const char* name = "an unknown CUresult";
  if (driver().error_name != nullptr) driver().error_name(r, &name);
  return name;
}

CudaSegmentMemory::~CudaSegmentMemory() {
  // The allocator unmaps every page before it goes; anything left is given back here.
  while (!pages_.empty()) unmap_page(pages_.begin()->first);
}

std::byte* CudaSegmentMemory::reserve(Bytes bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, static_cast<std::size_t>(bytes));
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the error so later calls do not report it
    return nullptr;
  }
  SHARDSCOPE_CUDA(e);
  return static_cast<std::byte*>(p);
}

void CudaSegmentMemory::release(std::byte* base, Bytes) noexcept {
  SHARDSCOPE_CUDA_LOG(cudaFree(base));
}

std::byte* CudaSegmentMemory::reserve_address(Bytes bytes) {
  const DriverVmm& d = driver();
  const CUmemAllocationProp prop = device_memory(device_);
  std::size_t granularity = 0;
  SHARDSCOPE_CUDA(d.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  if (granularity == 0 || kPage % static_cast<Bytes>(granularity) != 0) {
    throw CudaError(
        fmt::format("the device maps memory in units of {} bytes, which do not divide "
                    "the allocator's {} pages",
                    granularity, format_bytes(kPage)));
  }
  CUdeviceptr base = 0;
  const CUresult r = d.address_reserve(&base, static_cast<std::size_t>(bytes),
                                       static_cast<std::size_t>(kPage), 0, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
  SHARDSCOPE_CUDA(r);
  return reinterpret_cast<std::byte*>(base);  // NOLINT(performance-no-int-to-ptr)
}

bool CudaSegmentMemory::map(std::byte* at, Bytes bytes) {
  const DriverVmm& d = driver();
  const CUmemAllocationProp prop = device_memory(device_);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  const CUdeviceptr first = device_pointer(at);
  for (CUdeviceptr page = first; page < first + static_cast<CUdeviceptr>(bytes); page += kPage) {
    CUmemGenericAllocationHandle handle = 0;
    const CUresult r = d.create(&handle, static_cast<std::size_t>(kPage), &prop, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      for (CUdeviceptr done = first; done < page; done += kPage) unmap_page(done);
      return false;  // all or nothing, as the allocator expects
    }
    SHARDSCOPE_CUDA(r);
    SHARDSCOPE_CUDA(d.map(page, static_cast<std::size_t>(kPage), 0, handle, 0));
    pages_.emplace(page, handle);
    SHARDSCOPE_CUDA(d.set_access(page, static_cast<std::size_t>(kPage), &access, 1));
  }
  return true;
}

void CudaSegmentMemory::unmap(std::byte* at, Bytes bytes) noexcept {
  // cuMemUnmap and cuMemRelease do not wait for work still using the pages (cudaFree does), so
  // every stream that may have touched them is drained first, as PyTorch's expandable segments
  // do before unmapping (CUDACachingAllocator.cpp, ExpandableSegment::unmapHandles). The
  // allocator unmaps only when it gives memory back (an out-of-memory retry, the end of a run).
  SHARDSCOPE_CUDA_LOG(cudaDeviceSynchronize());
  const CUdeviceptr first = device_pointer(at);
  for (CUdeviceptr page = first; page < first + static_cast<CUdeviceptr>(bytes); page += kPage)
    unmap_page(page);
}

void CudaSegmentMemory::unmap_page(CUdeviceptr page) noexcept {
  const auto it = pages_.find(page);
  if (it == pages_.end()) return;
  SHARDSCOPE_CUDA_LOG(driver().unmap(page, static_cast<std::size_t>(kPage)));
  SHARDSCOPE_CUDA_LOG(driver().release(it->second));
  pages_.erase(it);
}

void CudaSegmentMemory::release_address(std::byte* base, Bytes bytes) noexcept {
  SHARDSCOPE_CUDA_LOG(driver().address_free(device_pointer(base), static_cast<std::size_t>(bytes)));
}

}  // namespace shardscope::exec::cuda
