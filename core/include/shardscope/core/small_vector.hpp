#pragma once
// A vector that keeps its first N elements inline: the IR's per-op id lists (deps, allocs, frees,
// uses) hold one or two entries almost always, and a heap allocation each made lowering
// malloc-bound. Supports what the IR needs: push_back, append, iteration, indexing, comparison.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <vector>

namespace shardscope {

template <typename T, std::uint32_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds plain ids");

 public:
  SmallVector() = default;
  SmallVector(std::initializer_list<T> values) { append(values.begin(), values.end()); }
  SmallVector(const std::vector<T>& values) { append(values.begin(), values.end()); }  // NOLINT: implicit on purpose
  SmallVector(const SmallVector& other) { append(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { take(other); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) {
      size_ = 0;
      append(other.begin(), other.end());
    }
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> values) {
    size_ = 0;
    append(values.begin(), values.end());
    return *this;
  }
  SmallVector& operator=(const std::vector<T>& values) {
    size_ = 0;
    append(values.begin(), values.end());
    return *this;
  }
  ~SmallVector() { release(); }

  void push_back(T value) {
    if (size_ == capacity_) grow(capacity_ * 2);
    data()[size_++] = value;
  }
  template <typename It>
  void append(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }
  /// std::vector-style append at the end (the only position the IR uses).
  template <typename It>
  void insert(const T* /*end*/, It first, It last) {
    append(first, last);
  }
  void clear() { size_ = 0; }

  T* data() { return on_heap() ? heap_ : inline_; }
  const T* data() const { return on_heap() ? heap_ : inline_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  const T& front() const { return data()[0]; }
  const T& back() const { return data()[size_ - 1]; }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  bool on_heap() const { return capacity_ > N; }
  void grow(std::uint32_t capacity) {
    T* bigger = new T[capacity];
    std::memcpy(bigger, data(), size_ * sizeof(T));
    if (on_heap()) delete[] heap_;
    heap_ = bigger;
    capacity_ = capacity;
  }
  void release() {
    if (on_heap()) {  // the common inline case makes no call
      delete[] heap_;
      capacity_ = N;
    }
    size_ = 0;
  }
  void take(SmallVector& other) {
    if (other.on_heap()) {
      heap_ = other.heap_;
      capacity_ = other.capacity_;
      other.capacity_ = N;
    } else {
      std::memcpy(inline_, other.inline_, sizeof inline_);  // fixed size: inlined, no call
    }
    size_ = other.size_;
    other.size_ = 0;
  }

  // The inline ids and the heap pointer share their bytes: capacity_ > N says which is in use.
  union {
    T inline_[N]{};
    T* heap_;
  };
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = N;
};

}  // namespace shardscope
