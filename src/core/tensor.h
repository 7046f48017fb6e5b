// Tensor: a typed, strided view of ref-counted Storage on a Device.
//
// Shape and strides are in elements; `offset` is the element offset of [0,...,0] in the storage.
// Views (view, slice, select, transpose, unsqueeze) share storage and never copy. There is no
// autograd: layers own their forward/backward explicitly. A default-constructed Tensor is
// "undefined" (defined() == false). Tensors are cheap to copy (one shared_ptr); not thread-safe for
// concurrent mutation of the same bytes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

namespace vela {

class Tensor {
 public:
  Tensor() = default;

  // ---- construction ----
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu());
  // A zeroed CPU tensor in page-locked memory when a CUDA device is usable (so copies to and from
  // the device can be asynchronous), an ordinary CPU tensor otherwise.
  static Tensor zeros_pinned(const Shape& shape, DType dtype);
  // Wraps memory owned elsewhere (an mmap'd file, a workspace); `keepalive` is held meanwhile.
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device,
                          std::shared_ptr<void> keepalive = nullptr);
  // A contiguous tensor over `storage` starting `byte_offset` bytes in (a multiple of the element
  // size), sharing it: how arenas hand out views without allocating.
  static Tensor alias(const std::shared_ptr<Storage>& storage, int64_t byte_offset,
                      const Shape& shape, DType dtype);
  // A contiguous CPU tensor holding a copy of `values`; shape defaults to [values.size()].
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape = {});

  // ---- metadata ----
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int dim() const { return shape_.size(); }
  int64_t size(int d) const { return shape_.at(d); }
  int64_t stride(int d) const { return strides_.at(d); }
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device : Device::cpu(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  int64_t numel() const { return shape_.numel(); }
  size_t element_size() const { return dtype_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // "f32[2, 3] cpu" — for error messages.
  std::string str() const;

  // ---- data access ----
  void* data_ptr() const {
    return static_cast<char*>(storage_->data) + offset_ * static_cast<int64_t>(element_size());
  }
  template <typename T>
  T* data() const {
    VELA_CHECK(DTypeOf<T>::value == dtype_, "tensor ", str(), " accessed as ",
               dtype_name(DTypeOf<T>::value));
    return static_cast<T*>(data_ptr());
  }
  // Reads one element of a CPU or CUDA tensor (copies to host).
  template <typename T>
  T item() const;
  // Copies to a host vector in logical (row-major) order.
  template <typename T>
  std::vector<T> to_vector() const;

  // ---- views (no copy) ----
  Tensor view(Shape shape) const;  // contiguous only; one extent may be -1
  Tensor slice(int dim, int64_t start, int64_t end) const;
  Tensor select(int dim, int64_t index) const;  // drops `dim`
  Tensor transpose(int d0, int d1) const;
  Tensor unsqueeze(int dim) const;
  Tensor squeeze(int dim) const;

  // ---- copies ----
  Tensor contiguous() const;      // self if already contiguous
  Tensor clone() const;           // always a new contiguous tensor on the same device
  Tensor to(Device device) const; // self if already there
  Tensor reshape(Shape shape) const;  // view when possible, else a contiguous copy
  // Copies src into *this (same shape and dtype; any device pair; any strides).
  void copy_(const Tensor& src);
  void zero_();

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::kF32;

  static Shape contiguous_strides(const Shape& shape);
  int norm_dim(int d, int rank) const;
};

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape shape) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  VELA_CHECK(shape.numel() == static_cast<int64_t>(values.size()), "from_vector: ", values.size(),
             " values do not fill shape ", shape.str());
  Tensor t = empty(shape, DTypeOf<T>::value);
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(T));
  return t;
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  VELA_CHECK(DTypeOf<T>::value == dtype_, "to_vector: tensor ", str(), " read as ",
             dtype_name(DTypeOf<T>::value));
  Tensor c = to(Device::cpu()).contiguous();
  std::vector<T> out(static_cast<size_t>(numel()));
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size() * sizeof(T));
  return out;
}

template <typename T>
T Tensor::item() const {
  VELA_CHECK(numel() == 1, "item() on tensor ", str(), " with ", numel(), " elements");
  return to_vector<T>()[0];
}

}  // namespace vela
