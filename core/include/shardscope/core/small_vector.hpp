#pragma once
// A vector that keeps its first N elements inline: the IR's per-op id lists (deps, allocs, frees,
// uses) hold one to five entries almost always, and a heap allocation each made lowering
// malloc-bound. Supports what the IR needs: push_back, append, iteration, indexing, comparison.
//
// Layout: N elements and a 32-bit count, nothing else (an IdList of five ids is 24 bytes). Once
// the elements move to the heap, the inline bytes hold the heap pointer and its capacity, and the
// count's top bit says so.

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
  static_assert(N * sizeof(T) >= sizeof(T*) + sizeof(std::uint32_t),
                "the inline bytes must hold a heap pointer and a capacity");

 public:
  SmallVector() = default;
  SmallVector(std::initializer_list<T> values) { append(values.begin(), values.end()); }
  SmallVector(const std::vector<T>& values) {
    append(values.begin(), values.end());
  }  // NOLINT: implicit on purpose
  SmallVector(const SmallVector& other) { append(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { take(other); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) {
      clear();
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
    clear();
    append(values.begin(), values.end());
    return *this;
  }
  SmallVector& operator=(const std::vector<T>& values) {
    clear();
    append(values.begin(), values.end());
    return *this;
  }
  ~SmallVector() { release(); }

  /// Room for `capacity` elements without another allocation (a no-op when there is).
  void reserve(std::uint32_t capacity) {
    if (capacity > (on_heap() ? heap_capacity() : N)) grow(capacity);
  }
  void push_back(T value) {
    const std::uint32_t n = size_ & kCount;
    if (!on_heap()) {
      if (n < N) {
        inline_[n] = value;
        ++size_;
        return;
      }
      grow(2 * N);
    } else if (n == heap_capacity()) {
      grow(2 * n);
    }
    heap_data()[n] = value;
    ++size_;
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
  void clear() { size_ &= kOnHeap; }

  T* data() { return on_heap() ? heap_data() : inline_; }
  const T* data() const { return on_heap() ? heap_data() : inline_; }
  T* begin() { return data(); }
  T* end() { return data() + size(); }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size(); }
  std::size_t size() const { return size_ & kCount; }
  bool empty() const { return size() == 0; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  const T& front() const { return data()[0]; }
  const T& back() const { return data()[size() - 1]; }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  static constexpr std::uint32_t kOnHeap = std::uint32_t{1} << 31;
  static constexpr std::uint32_t kCount = kOnHeap - 1;

  bool on_heap() const { return (size_ & kOnHeap) != 0; }
  // On the heap, the inline bytes hold the pointer, then the capacity (copied in and out: the
  // bytes are T's).
  T* heap_data() const {
    T* p;
    std::memcpy(&p, inline_, sizeof p);
    return p;
  }
  std::uint32_t heap_capacity() const {
    std::uint32_t c;
    std::memcpy(&c, reinterpret_cast<const unsigned char*>(inline_) + sizeof(T*), sizeof c);
    return c;
  }
  void set_heap(T* p, std::uint32_t capacity) {
    std::memcpy(inline_, &p, sizeof p);
    std::memcpy(reinterpret_cast<unsigned char*>(inline_) + sizeof(T*), &capacity, sizeof capacity);
  }

  void grow(std::uint32_t capacity) {
    T* bigger = new T[capacity];
    const std::uint32_t n = size_ & kCount;
    std::memcpy(bigger, data(), n * sizeof(T));
    if (on_heap()) delete[] heap_data();
    set_heap(bigger, capacity);
    size_ = n | kOnHeap;
  }
  void release() {
    if (on_heap()) delete[] heap_data();  // the common inline case makes no call
    size_ = 0;
  }
  void take(SmallVector& other) {
    std::memcpy(inline_, other.inline_,
                sizeof inline_);  // the elements, or the heap pointer and capacity
    size_ = other.size_;
    other.size_ = 0;
  }

  T inline_[N]{};
  std::uint32_t size_ = 0;  // the count; the top bit: the elements are on the heap
};

}  // namespace shardscope
