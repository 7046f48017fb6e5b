// CPU LoRA ops: per-row shrink / expand over a Linear's segments (each row a small GEMV against
// its slot's A or B per segment, fp32 accumulation in float order: j ascending), and the hashed
// dropout. Parallel over rows; a row's result depends only on that row.
#include <algorithm>
#include <vector>

#include "core/parallel.h"
#include "ops/checks.h"
#include "ops/cpu/vec.h"
#include "ops/lora_hash.h"
#include "ops/lora_impl.h"

namespace vela::ops::cpu {

namespace {

template <typename T>
void shrink_typed(const Tensor& x, const LoraSegments& segs, const Tensor& slots, Tensor& xa) {
  const RowLayout xl = rows_of(x);
  const int64_t n = xl.n_rows, in = xl.n_cols, r = segs.a[0].size(1), width = segs.n * r;
  const int64_t parts = xa.dim() == 3 ? xa.size(0) : 1, chunk = lora_chunk(in, parts);
  const T* px = static_cast<const T*>(x.data_ptr());
  const int32_t* ps = slots.data<int32_t>();
  float* po = xa.data<float>();
  parallel_for(n, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const int32_t s = ps[i];
      if (s < 0) {
        for (int64_t z = 0; z < parts; ++z)
          for (int64_t k = 0; k < width; ++k) po[(z * n + i) * width + k] = 0.0f;
        continue;
      }
      const float* xr = row_as_f32(px + i * xl.row_stride, in, 0);
      for (int g = 0; g < segs.n; ++g) {
        const T* pa = static_cast<const T*>(segs.a[g].data_ptr());
        for (int64_t k = 0; k < r; ++k) {
          const float* ar = row_as_f32(pa + (s * r + k) * in, in, 1);
          for (int64_t z = 0; z < parts; ++z) {
            float acc = 0.0f;
            for (int64_t j = z * chunk; j < std::min(in, (z + 1) * chunk); ++j) acc += xr[j] * ar[j];
            po[(z * n + i) * width + g * r + k] = acc;
          }
        }
      }
    }
  });
}

template <typename T>
void expand_typed(const Tensor& xa, const LoraSegments& segs, const Tensor& slots,
                  const Tensor& scales) {
  const int64_t parts = xa.dim() == 3 ? xa.size(0) : 1;
  const int64_t n = xa.size(xa.dim() - 2), r = segs.b[0].size(2), width = segs.n * r;
  const float* pxa = xa.data<float>();
  const int32_t* ps = slots.data<int32_t>();
  const float* psc = scales.data<float>();
  parallel_for(n, 1, [&](int64_t r0, int64_t r1) {
    std::vector<float> summed(parts > 1 ? static_cast<size_t>(width) : 0);
    for (int64_t i = r0; i < r1; ++i) {
      const int32_t s = ps[i];
      if (s < 0) continue;
      const float sc = psc[s];
      const float* row = pxa + i * width;
      if (parts > 1) {  // the parts' sums in order z = 0 .. p - 1
        for (int64_t k = 0; k < width; ++k) {
          float acc = 0.0f;
          for (int64_t z = 0; z < parts; ++z) acc += pxa[(z * n + i) * width + k];
          summed[static_cast<size_t>(k)] = acc;
        }
        row = summed.data();
      }
      for (int g = 0; g < segs.n; ++g) {
        const RowLayout yl = rows_of(segs.y[g]);
        const int64_t nc = yl.n_cols;
        const float* v = row + g * r;
        const T* pb = static_cast<const T*>(segs.b[g].data_ptr());
        T* yr = static_cast<T*>(segs.y[g].data_ptr()) + i * yl.row_stride;
        for (int64_t c = 0; c < nc; ++c) {
          const T* br = pb + (s * nc + c) * r;
          float acc = 0.0f;
          for (int64_t k = 0; k < r; ++k) acc += static_cast<float>(br[k]) * v[k];
          yr[c] = T(static_cast<float>(yr[c]) + sc * acc);
        }
      }
    }
  });
}

template <typename T>
void dropout_typed(const Tensor& x, uint64_t seed, uint64_t stream, float p, Tensor& out) {
  const RowLayout xl = rows_of(x), ol = rows_of(out);
  const int64_t n = xl.n_rows, nc = xl.n_cols;
  const T* px = static_cast<const T*>(x.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  const float keep_scale = 1.0f / (1.0f - p);
  parallel_for(n, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t j = 0; j < nc; ++j) {
        const bool keep = lora_uniform(seed, stream, static_cast<uint64_t>(i * nc + j)) >= p;
        const float v = static_cast<float>(px[i * xl.row_stride + j]);
        po[i * ol.row_stride + j] = T(keep ? v * keep_scale : 0.0f);
      }
  });
}

}  // namespace

void lora_shrink(const Tensor& x, const LoraSegments& segs, const Tensor& slots, Tensor& xa) {
  visit_float(x.dtype(),
              [&](auto tag) { shrink_typed<typename decltype(tag)::type>(x, segs, slots, xa); });
}

void lora_expand(const Tensor& xa, const LoraSegments& segs, const Tensor& slots,
                 const Tensor& scales) {
  visit_float(segs.y[0].dtype(), [&](auto tag) {
    expand_typed<typename decltype(tag)::type>(xa, segs, slots, scales);
  });
}

void lora_dropout(const Tensor& x, uint64_t seed, uint64_t stream, float p, Tensor& out) {
  visit_float(x.dtype(), [&](auto tag) {
    dropout_typed<typename decltype(tag)::type>(x, seed, stream, p, out);
  });
}

}  // namespace vela::ops::cpu
