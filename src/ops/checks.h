// Argument checks shared by the op dispatchers (ops/*.cpp), and the row view the CPU kernels use.
// Every failed check throws InvalidArgument naming the op and the offending tensor (Tensor::str()).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/rms_norm.h"

namespace vela::ops {

// A tensor seen as [n_rows, n_cols]: the last dim is contiguous and the leading dims collapse into
// one row stride (so a row slice of a bigger matrix, or one half of a fused projection, qualifies).
struct RowLayout {
  int64_t n_rows = 1;
  int64_t n_cols = 1;
  int64_t row_stride = 1;  // elements between the starts of consecutive rows
};

// Fills *out and returns true when `t` has such a layout.
inline bool row_layout(const Tensor& t, RowLayout* out) {
  RowLayout r;
  int rank = t.dim();
  if (rank == 0) {
    *out = r;
    return true;
  }
  r.n_cols = t.size(rank - 1);
  if (r.n_cols > 1 && t.stride(rank - 1) != 1) return false;
  r.row_stride = r.n_cols;
  r.n_rows = 1;
  bool seen = false;
  int64_t expect = 0;
  for (int d = rank - 2; d >= 0; --d) {
    int64_t n = t.size(d);
    r.n_rows *= n;
    if (n == 1) continue;
    if (!seen) {
      r.row_stride = t.stride(d);
      seen = true;
    } else if (t.stride(d) != expect) {
      return false;
    }
    expect = t.stride(d) * n;
  }
  *out = r;
  return true;
}

// The row layout of a tensor a dispatcher already validated.
inline RowLayout rows_of(const Tensor& t) {
  RowLayout r;
  VELA_ASSERT(row_layout(t, &r), "tensor ", t.str(), " has no row layout");
  return r;
}

inline void check_defined(const char* op, const char* name, const Tensor& t) {
  VELA_CHECK(t.defined(), op, ": ", name, " is undefined");
}

inline void check_rank(const char* op, const char* name, const Tensor& t, int rank) {
  VELA_CHECK(t.dim() == rank, op, ": ", name, " ", t.str(), " must have rank ", rank);
}

inline void check_min_rank(const char* op, const char* name, const Tensor& t, int rank) {
  VELA_CHECK(t.dim() >= rank, op, ": ", name, " ", t.str(), " must have rank >= ", rank);
}

inline void check_dtype(const char* op, const char* name, const Tensor& t, DType dt) {
  VELA_CHECK(t.dtype() == dt, op, ": ", name, " ", t.str(), " must have dtype ", dtype_name(dt));
}

inline void check_floating(const char* op, const char* name, const Tensor& t) {
  VELA_CHECK(is_floating(t.dtype()), op, ": ", name, " ", t.str(),
             " must have a floating dtype (f32, bf16 or f16)");
}

inline void check_same_dtype(const char* op, const char* name, const Tensor& t,
                             const char* ref_name, const Tensor& ref) {
  VELA_CHECK(t.dtype() == ref.dtype(), op, ": ", name, " ", t.str(), " must have the dtype of ",
             ref_name, " ", ref.str());
}

inline void check_same_device(const char* op, const char* name, const Tensor& t,
                              const char* ref_name, const Tensor& ref) {
  VELA_CHECK(t.device() == ref.device(), op, ": ", name, " ", t.str(), " is not on the device of ",
             ref_name, " ", ref.str());
}

inline void check_shape(const char* op, const char* name, const Tensor& t, const Shape& shape) {
  VELA_CHECK(t.shape() == shape, op, ": ", name, " ", t.str(), " must have shape ", shape.str());
}

inline void check_same_shape(const char* op, const char* name, const Tensor& t,
                             const char* ref_name, const Tensor& ref) {
  VELA_CHECK(t.shape() == ref.shape(), op, ": ", name, " ", t.str(), " must have the shape of ",
             ref_name, " ", ref.str());
}

inline void check_contiguous(const char* op, const char* name, const Tensor& t) {
  VELA_CHECK(t.is_contiguous(), op, ": ", name, " ", t.str(), " must be contiguous");
}

// Every position (i32, 1-D) names a row of the rope table. Checked only for host-resident
// positions (a device tensor would need a sync; CUDA kernels leave out-of-range tokens unrotated).
inline void check_positions_in_table(const char* op, const Tensor& positions, const Tensor& table) {
  if (!positions.is_cpu()) return;
  const int32_t* p = positions.data<int32_t>();
  for (int64_t i = 0; i < positions.numel(); ++i)
    VELA_CHECK(p[i] >= 0 && p[i] < table.size(0), op, ": positions[", i, "] = ", p[i],
               " is outside the rope table ", table.str(), " (rows 0..", table.size(0) - 1, ")");
}

// Rows contiguous, leading dims collapsible into one row stride; returns the layout.
inline RowLayout check_rows(const char* op, const char* name, const Tensor& t) {
  RowLayout r;
  VELA_CHECK(row_layout(t, &r), op, ": ", name, " ", t.str(),
             " must have a contiguous last dim and leading dims that flatten to one row stride");
  return r;
}

// check_rows for a tensor the op writes: rows must also not overlap.
inline RowLayout check_out_rows(const char* op, const char* name, const Tensor& t) {
  RowLayout r = check_rows(op, name, t);
  VELA_CHECK(r.n_rows <= 1 || r.row_stride >= r.n_cols, op, ": output ", name, " ", t.str(),
             " has overlapping rows (row stride ", r.row_stride, ")");
  return r;
}

// row_sq: the row sums of squares of x [n_rows, n] in `group`-column groups (ops/rms_norm.h):
// [n_rows, ceil(n / group)] f32, contiguous, on x's device.
inline void check_row_sq(const char* op, const Tensor& row_sq, const Tensor& x, int64_t group) {
  check_defined(op, "row_sq", row_sq);
  check_dtype(op, "row_sq", row_sq, DType::kF32);
  check_shape(op, "row_sq", row_sq, {x.size(0), (x.size(1) + group - 1) / group});
  check_contiguous(op, "row_sq", row_sq);
  check_same_device(op, "row_sq", row_sq, "x", x);
}

// pieces: rms_norm's two pieces of x [n_rows, n] (ops/rms_norm.h): scaled like x, row_sq as above.
inline void check_norm_pieces(const char* op, const NormPieces& pieces, const Tensor& x) {
  check_defined(op, "scaled", pieces.scaled);
  check_same_dtype(op, "scaled", pieces.scaled, "x", x);
  check_same_shape(op, "scaled", pieces.scaled, "x", x);
  check_same_device(op, "scaled", pieces.scaled, "x", x);
  check_out_rows(op, "scaled", pieces.scaled);
  check_row_sq(op, pieces.row_sq, x, kRowSqGroup);
}

}  // namespace vela::ops
