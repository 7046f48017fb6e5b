// Tensor construction, views and copies. CPU strided copies are done here; CUDA ones go through
// core/cuda (cudaMemcpy for contiguous data, a gather kernel for strided data).
#include "core/tensor.h"

#include <cstring>
#include <utility>

#include "core/cuda/cuda_api.h"

namespace vela {

Shape Tensor::contiguous_strides(const Shape& shape) {
  Shape st = shape;
  int64_t s = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    st[i] = s;
    s *= shape[i];
  }
  return st;
}

int Tensor::norm_dim(int d, int rank) const {
  int r = d < 0 ? d + rank : d;
  VELA_CHECK(r >= 0 && r < rank, "dimension ", d, " out of range for tensor ", str());
  return r;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) VELA_CHECK(d >= 0, "negative extent in shape ", shape.str());
  Tensor t;
  t.storage_ = Storage::allocate(static_cast<size_t>(shape.numel()) * dtype_size(dtype), device);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) VELA_CHECK(d >= 0, "negative extent in shape ", shape.str());
  return alias(
      Storage::allocate_zeroed(static_cast<size_t>(shape.numel()) * dtype_size(dtype), device), 0,
      shape, dtype);
}

Tensor Tensor::zeros_pinned(const Shape& shape, DType dtype) {
  if (!cuda::available()) return zeros(shape, dtype);
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  void* p = cuda::host_alloc_pinned(bytes);
  std::memset(p, 0, bytes);
  std::shared_ptr<void> keep(p, [](void* q) { cuda::host_free_pinned(q); });
  return from_blob(p, shape, dtype, Device::cpu(), std::move(keep));
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device device,
                         std::shared_ptr<void> keepalive) {
  Tensor t;
  t.storage_ = Storage::borrow(data, static_cast<size_t>(shape.numel()) * dtype_size(dtype), device,
                               std::move(keepalive));
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::alias(const std::shared_ptr<Storage>& storage, int64_t byte_offset,
                     const Shape& shape, DType dtype) {
  const int64_t es = static_cast<int64_t>(dtype_size(dtype));
  VELA_CHECK(storage != nullptr, "Tensor::alias: no storage");
  VELA_CHECK(byte_offset >= 0 && byte_offset % es == 0, "Tensor::alias: byte offset ", byte_offset,
             " is not a multiple of the element size ", es);
  VELA_CHECK(byte_offset + shape.numel() * es <= static_cast<int64_t>(storage->bytes),
             "Tensor::alias: ", shape.numel() * es, " bytes at offset ", byte_offset,
             " exceed the storage's ", storage->bytes);
  Tensor t;
  t.storage_ = storage;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.offset_ = byte_offset / es;
  t.dtype_ = dtype;
  return t;
}

bool Tensor::is_contiguous() const {
  int64_t s = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != s) return false;
    s *= shape_[i];
  }
  return true;
}

std::string Tensor::str() const {
  if (!defined()) return "<undefined tensor>";
  return std::string(dtype_name(dtype_)) + shape_.str() + " " + device().str();
}

Tensor Tensor::view(Shape shape) const {
  VELA_CHECK(is_contiguous(), "view of non-contiguous tensor ", str(), "; use reshape()");
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      VELA_CHECK(infer < 0, "view: more than one -1 in ", shape.str());
      infer = i;
    } else {
      VELA_CHECK(shape[i] >= 0, "view: bad extent in ", shape.str());
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    VELA_CHECK(known > 0 && numel() % known == 0, "view: cannot infer ", shape.str(), " from ", str());
    shape[infer] = numel() / known;
  }
  VELA_CHECK(shape.numel() == numel(), "view: shape ", shape.str(), " does not match ", str());
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  return is_contiguous() ? view(shape) : contiguous().view(shape);
}

Tensor Tensor::slice(int d, int64_t start, int64_t end) const {
  d = norm_dim(d, dim());
  int64_t n = shape_[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  VELA_CHECK(start >= 0 && start <= end && end <= n, "slice [", start, ", ", end, ") of dim ", d,
             " out of range for ", str());
  Tensor t = *this;
  t.offset_ += start * strides_[d];
  t.shape_[d] = end - start;
  return t;
}

Tensor Tensor::select(int d, int64_t index) const {
  d = norm_dim(d, dim());
  if (index < 0) index += shape_[d];
  VELA_CHECK(index >= 0 && index < shape_[d], "select index ", index, " out of range in dim ", d,
             " of ", str());
  Tensor t = *this;
  t.offset_ += index * strides_[d];
  t.shape_.erase(d);
  t.strides_.erase(d);
  return t;
}

Tensor Tensor::transpose(int d0, int d1) const {
  d0 = norm_dim(d0, dim());
  d1 = norm_dim(d1, dim());
  Tensor t = *this;
  std::swap(t.shape_[d0], t.shape_[d1]);
  std::swap(t.strides_[d0], t.strides_[d1]);
  return t;
}

Tensor Tensor::unsqueeze(int d) const {
  d = norm_dim(d, dim() + 1);
  Tensor t = *this;
  int64_t st = d < dim() ? strides_[d] * shape_[d] : 1;
  t.shape_.insert(d, 1);
  t.strides_.insert(d, st);
  return t;
}

Tensor Tensor::squeeze(int d) const {
  d = norm_dim(d, dim());
  VELA_CHECK(shape_[d] == 1, "squeeze of dim ", d, " with extent ", shape_[d], " in ", str());
  Tensor t = *this;
  t.shape_.erase(d);
  t.strides_.erase(d);
  return t;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device());
  t.copy_(*this);
  return t;
}

Tensor Tensor::to(Device dev) const {
  if (dev == device()) return *this;
  Tensor src = contiguous();
  Tensor t = empty(shape_, dtype_, dev);
  if (nbytes() > 0) cuda::copy_bytes(t.data_ptr(), dev, src.data_ptr(), src.device(), nbytes());
  return t;
}

namespace {

// Recursive strided copy on the host; the innermost dimension is a memcpy when contiguous.
void cpu_strided_copy(char* dst, const Shape& dst_strides, const char* src, const Shape& src_strides,
                      const Shape& shape, size_t es, int d) {
  int last = shape.size() - 1;
  if (d == last) {
    if (dst_strides[d] == 1 && src_strides[d] == 1) {
      std::memcpy(dst, src, static_cast<size_t>(shape[d]) * es);
    } else {
      for (int64_t i = 0; i < shape[d]; ++i)
        std::memcpy(dst + i * dst_strides[d] * es, src + i * src_strides[d] * es, es);
    }
    return;
  }
  for (int64_t i = 0; i < shape[d]; ++i)
    cpu_strided_copy(dst + i * dst_strides[d] * es, dst_strides, src + i * src_strides[d] * es,
                     src_strides, shape, es, d + 1);
}

}  // namespace

void Tensor::copy_(const Tensor& src) {
  VELA_CHECK(defined() && src.defined(), "copy_ with an undefined tensor");
  VELA_CHECK(shape_ == src.shape_ && dtype_ == src.dtype_, "copy_: destination ", str(),
             " does not match source ", src.str());
  if (numel() == 0) return;
  size_t es = element_size();
  if (is_cpu() && src.is_cpu()) {
    if (is_contiguous() && src.is_contiguous()) {
      std::memcpy(data_ptr(), src.data_ptr(), nbytes());
    } else if (dim() == 0) {
      std::memcpy(data_ptr(), src.data_ptr(), es);
    } else {
      cpu_strided_copy(static_cast<char*>(data_ptr()), strides_,
                       static_cast<const char*>(src.data_ptr()), src.strides_, shape_, es, 0);
    }
    return;
  }
  if (is_contiguous() && src.is_contiguous()) {
    cuda::copy_bytes(data_ptr(), device(), src.data_ptr(), src.device(), nbytes());
    return;
  }
  // Strided involving a device: make the source contiguous on its device, then copy.
  Tensor s = src;
  if (!s.is_contiguous()) {
    if (s.is_cpu()) {
      s = src.clone();
    } else {
      Tensor c = empty(src.shape_, dtype_, src.device());
      cuda::strided_copy(c.data_ptr(), src.data_ptr(), es, src.dim(), src.shape_.begin(),
                         src.strides_.begin(), src.device().index);
      s = c;
    }
  }
  if (is_contiguous()) {
    cuda::copy_bytes(data_ptr(), device(), s.data_ptr(), s.device(), nbytes());
  } else {
    Tensor staged = s.to(device());  // contiguous on our device
    if (is_cpu()) {
      copy_(staged);
    } else {
      VELA_THROW(Unsupported, "copy_ into a non-contiguous CUDA tensor ", str());
    }
  }
}

void Tensor::zero_() {
  if (numel() == 0) return;
  if (is_contiguous()) {
    if (is_cpu()) std::memset(data_ptr(), 0, nbytes());
    else cuda::zero_bytes(data_ptr(), nbytes(), device().index);
    return;
  }
  copy_(zeros(shape_, dtype_, device()));
}

}  // namespace vela
