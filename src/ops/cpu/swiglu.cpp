// CPU silu_mul: out = gate / (1 + exp(-gate)) * up in fp32, parallel over rows, vectorized exp.
#include <cmath>

#include "core/parallel.h"
#include "ops/checks.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {

namespace {
// Elements per thread at least (~15-30 us of SiLU): below that a second thread's wake-up and the
// region's hand-off cost more than they save (measured under OpenMP, kept on the pool). The
// demo's decode step at 16 rows (16 x 1024) runs on one thread: `vela serve` of the demo under 16
// streams with the client on the same 2 vCPUs, 2,541-2,688 -> 2,945-3,072 output tok/s together
// with rotary's grain (8192 and 64 before; bench/results/serve_threads_cpu.txt).
constexpr int64_t kSwigluGrain = 16384;

// out[i] = silu(g[i]) * u[i]; out may alias g or u.
inline void silu_mul_span(const float* g, const float* u, float* out, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 one = _mm512_set1_ps(1.0f);
  for (; i + 16 <= n; i += 16) {
    __m512 gv = _mm512_loadu_ps(g + i);
    __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
    __m512 s = _mm512_div_ps(gv, _mm512_add_ps(one, e));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
  }
#endif
  for (; i < n; ++i) out[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

template <typename T>
void silu_mul_typed(const Tensor& gate, const Tensor& up, Tensor& out) {
  RowLayout rg = rows_of(gate), ru = rows_of(up), ro = rows_of(out);
  const int64_t n = rg.n_cols;
  const T* pg = static_cast<const T*>(gate.data_ptr());
  const T* pu = static_cast<const T*>(up.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  parallel_for(rg.n_rows, std::max<int64_t>(1, kSwigluGrain / std::max<int64_t>(n, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const float* g = row_as_f32(pg + r * rg.row_stride, n, 0);
                   const float* u = row_as_f32(pu + r * ru.row_stride, n, 1);
                   if constexpr (std::is_same_v<T, float>) {
                     silu_mul_span(g, u, po + r * ro.row_stride, n);
                   } else {
                     float* buf = scratch(static_cast<size_t>(n), 2);
                     silu_mul_span(g, u, buf, n);
                     store_f32(buf, po + r * ro.row_stride, n);
                   }
                 }
               });
}

}  // namespace

void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  visit_float(gate.dtype(),
              [&](auto tag) { silu_mul_typed<typename decltype(tag)::type>(gate, up, out); });
}

}  // namespace vela::ops::cpu
