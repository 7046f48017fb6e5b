// Shape: a small fixed-capacity list of int64 extents (also used for strides). Lives inline in
// Tensor so that making views never touches the heap (views are built in the decode loop).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace vela {

class Shape {
 public:
  static constexpr int kMaxDims = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    VELA_CHECK(dims.size() <= kMaxDims, "tensor rank ", dims.size(), " exceeds ", kMaxDims);
    for (int64_t d : dims) d_[n_++] = d;
  }
  template <typename It>
  Shape(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t& operator[](int i) { return d_[i]; }
  // Negative index counts from the end, like Python.
  int64_t at(int i) const {
    int j = i < 0 ? i + n_ : i;
    VELA_CHECK(j >= 0 && j < n_, "dimension ", i, " out of range for rank ", n_);
    return d_[j];
  }
  int64_t back() const { return d_[n_ - 1]; }
  void push_back(int64_t v) {
    VELA_CHECK(n_ < kMaxDims, "tensor rank exceeds ", kMaxDims);
    d_[n_++] = v;
  }
  void erase(int i) {
    for (int k = i; k + 1 < n_; ++k) d_[k] = d_[k + 1];
    --n_;
  }
  void insert(int i, int64_t v) {
    VELA_CHECK(n_ < kMaxDims, "tensor rank exceeds ", kMaxDims);
    for (int k = n_; k > i; --k) d_[k] = d_[k - 1];
    d_[i] = v;
    ++n_;
  }
  const int64_t* begin() const { return d_; }
  const int64_t* end() const { return d_ + n_; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < n_; ++i) n *= d_[i];
    return n;
  }
  bool operator==(const Shape& o) const {
    return n_ == o.n_ && std::equal(d_, d_ + n_, o.d_);
  }
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < n_; ++i) s += (i ? ", " : "") + std::to_string(d_[i]);
    return s + "]";
  }

 private:
  int64_t d_[kMaxDims] = {};
  int n_ = 0;
};

}  // namespace vela
