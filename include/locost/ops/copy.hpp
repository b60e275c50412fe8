// Moving values inside a backend's memory, one dispatch point each, so that model code never
// copies device data with memcpy or a host loop:
//
//   strided_copy   dst[i·ds0 + j·ds1 + k·ds2 + c] = src[i·ss0 + j·ss1 + k·ss2 + c]
//                  for i < n0, j < n1, k < n2, c < width   (rows of `width` in three nested strides:
//                  a step's keys and values appended to the self-attention cache, beams reordered)
//   fill           x[0 … count) = value
//   store_rows     row r of x (n values) → row r of dst in a cache precision: float32, bfloat16,
//                  or int8 with scale[r] = max|x_r| / 127 (the cross-attention cache)
//   gather_sum     out[s, :] = Σ_{k ∈ [offsets[s], offsets[s+1])} x[rows[k], :]   in that order;
//                  an empty segment gives zeros (one row per segment gathers rows: LED's global
//                  tokens; several sum them: LongT5's transient-global blocks)
#pragma once
#include <cstdint>

#include "../backend/backend.hpp"
#include "../core/tensor.hpp"
#include "attention.hpp"

namespace locost::ops {

struct strided_copy_op {};
struct fill_op {};
struct store_rows_op {};
struct gather_sum_op {};

struct copy_layout {
    index_t n0 = 1, n1 = 1, n2 = 1, width = 0;
    index_t dst0 = 0, dst1 = 0, dst2 = 0;  // element strides of i, j, k in dst
    index_t src0 = 0, src1 = 0, src2 = 0;  // the same in src
};

template <class Backend, class T>
void strided_copy(T* dst, const T* src, const copy_layout& l) {
    if (l.n0 * l.n1 * l.n2 * l.width == 0) return;
    kernel<strided_copy_op, Backend, T>::run(dst, src, l);
}

template <class Backend, class T>
void fill(T* x, index_t count, T value) {
    if (count > 0) kernel<fill_op, Backend, T>::run(x, count, value);
}

// x: (rows, n) with row stride ldx; dst: (rows, n) of the storage type of p (f32, bf16 or i8;
// never native), densely; scale: (rows), int8 only.
template <class Backend, class T>
void store_rows(kv_precision p, const T* x, index_t ldx, index_t rows, index_t n, void* dst, float* scale) {
    if (rows > 0) kernel<store_rows_op, Backend, T>::run(p, x, ldx, rows, n, dst, scale);
}

// x: rows of n values, row stride ldx; offsets (S + 1) and rows (offsets[S]) in the backend's
// memory; out: (S, n) with row stride ldo.
template <class Backend, class T>
void gather_sum(const T* x, index_t ldx, index_t n, const std::int64_t* offsets, const std::int64_t* rows, index_t S, T* out, index_t ldo) {
    if (S > 0 && n > 0) kernel<gather_sum_op, Backend, T>::run(x, ldx, n, offsets, rows, S, out, ldo);
}

}  // namespace locost::ops
