#pragma once
// A POSIX shared-memory object mapped into this process: how ranks that are processes share one
// HostWorld. The creator sizes it (zero-filled); the others open it by name; the name is
// unlinked once every rank has mapped it, so nothing is left in /dev/shm even after a crash.

#include <cstddef>
#include <string>

namespace shardscope::exec {

class SharedMemory {
 public:
  /// Creates a new object of `size` bytes; throws Error when it cannot (name taken, no space).
  static SharedMemory create(const std::string& name, std::size_t size);
  /// Maps an existing object of `size` bytes.
  static SharedMemory open(const std::string& name, std::size_t size);
  /// A name no other live object has: "/shardscope-<pid>-<random>".
  static std::string unique_name();

  SharedMemory(SharedMemory&& other) noexcept;
  SharedMemory& operator=(SharedMemory&&) = delete;
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  ~SharedMemory();

  std::byte* data() const { return data_; }
  /// Removes the name (the mapping stays valid).
  void unlink();

 private:
  SharedMemory(std::string name, std::byte* data, std::size_t size)
      : name_(std::move(name)), data_(data), size_(size) {}

  std::string name_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace shardscope::exec
