// Moving values inside a backend's memory, one dispatch point each, so that model code never
// copies device data with memcpy or a host loop:
//
//   strided_copy   dst[i·ds0 + j·ds1 + k·ds2 + c] = src[i·ss0 + j·ss1 + k·ss2 + c]
//                  for i < n0, j < n1, k < n2, c < width   (rows of `width` in three nested strides:
//                  a step's keys and values appended to the self-attention cache, beams reordered)
//   fill           x[0 … count) = value
//   store_rows     row r of x (n values) → row r of dst in a cache precision: float32, bfloat16,
//                  or int8 with scale[r] = max|x_r| / 127 (the cross-attention cache)
#pragma once
#include "../backend/backend.hpp"
#include "../core/tensor.hpp"
#include "attention.hpp"

namespace locost::ops {

struct strided_copy_op {};
struct fill_op {};
struct store_rows_op {};

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

} // namespace locost::ops
