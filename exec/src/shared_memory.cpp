#include "shardscope/exec/shared_memory.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "shardscope/core/error.hpp"

namespace shardscope::exec {
namespace {

std::byte* map(int fd, std::size_t size, const std::string& name) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  ::close(fd);
  if (p == MAP_FAILED)
    throw Error(fmt::format("cannot map shared memory {}: {}", name, std::strerror(error)));
  return static_cast<std::byte*>(p);
}

}  // namespace

SharedMemory SharedMemory::create(const std::string& name, std::size_t size) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0)
    throw Error(fmt::format("cannot create shared memory {}: {}", name, std::strerror(errno)));
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int error = errno;
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw Error(
        fmt::format("cannot size shared memory {} to {} B: {}", name, size, std::strerror(error)));
  }
  return SharedMemory(name, map(fd, size, name), size);
}

SharedMemory SharedMemory::open(const std::string& name, std::size_t size) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0)
    throw Error(fmt::format("cannot open shared memory {}: {}", name, std::strerror(errno)));
  return SharedMemory("", map(fd, size, name), size);
}

std::string SharedMemory::unique_name() {
  std::random_device random;
  return fmt::format("/shardscope-{}-{:08x}", ::getpid(), random());
}

SharedMemory::SharedMemory(SharedMemory&& other) noexcept
    : name_(std::move(other.name_)), data_(other.data_), size_(other.size_) {
  other.name_.clear();
  other.data_ = nullptr;
  other.size_ = 0;
}

SharedMemory::~SharedMemory() {
  unlink();
  if (data_ != nullptr) ::munmap(data_, size_);
}

void SharedMemory::unlink() {
  if (!name_.empty()) ::shm_unlink(name_.c_str());
  name_.clear();
}

}  // namespace shardscope::exec
