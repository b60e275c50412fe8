// Ops that build a model's per-input tables in the backend's memory, from inputs that are
// already there (a mask, an index list, a position count), so that no layer fills a buffer of
// the backend in a host loop:
//
//   add_position_rows   x[r·T + t, :] += table[first + t, :]              learned positions
//   add_sinusoid        x[r·T + t, :] += [sin(p·ω) | cos(p·ω)],  p = first + t   (ω: H/2 floats)
//   key_bias            out[i] = 0 where mask[i] ≠ 0 (or no mask), −∞ where it is 0
//   fill_at             x[index[k]] = value for every index[k] ≥ 0
//   gather_rows         dst[s, :] = src[index[s], :], zeros where index[s] < 0
//   scatter_rows        dst[index[s], :] = src[s, :] for every index[s] ≥ 0
//
// add_sinusoid computes in float32 whatever the scalar type, as torch computes a float32 model's
// table: a = p·ω_k rounded to float, then sin and cos of it (layers/sinusoidal_positions.hpp).
#pragma once
#include <cstdint>

#include "../backend/backend.hpp"
#include "../core/tensor.hpp"

namespace locost::ops {

struct add_position_rows_op {};
struct add_sinusoid_op {};
struct key_bias_op {};
struct fill_at_op {};
struct gather_rows_op {};
struct scatter_rows_op {};

// table: (positions, dim); x: (rows·T, dim); first + T ≤ positions (the caller checks).
template <class Backend, class T>
void add_position_rows(const T* table, index_t dim, index_t first, index_t rows, index_t count, T* x) {
    if (rows > 0 && count > 0) kernel<add_position_rows_op, Backend, T>::run(table, dim, first, rows, count, x);
}

// omega: (dim/2) float32 frequencies in the backend's memory; x: (rows·T, dim), dim even.
template <class Backend, class T>
void add_sinusoid(const float* omega, index_t dim, index_t first, index_t rows, index_t count, T* x) {
    if (rows > 0 && count > 0) kernel<add_sinusoid_op, Backend, T>::run(omega, dim, first, rows, count, x);
}

// mask: n values of 0/1, or nullptr (every key valid); out: n values.
template <class Backend, class T>
void key_bias(const float* mask, index_t n, T* out) {
    if (n > 0) kernel<key_bias_op, Backend, T>::run(mask, n, out);
}

template <class Backend, class T>
void fill_at(T* x, const std::int64_t* index, index_t count, T value) {
    if (count > 0) kernel<fill_at_op, Backend, T>::run(x, index, count, value);
}

// src rows of n values with row stride lds; dst: (S, n) with row stride ldd; index: S entries.
template <class Backend, class T>
void gather_rows(const T* src, index_t lds, index_t n, const std::int64_t* index, index_t S, T* dst, index_t ldd) {
    if (S > 0 && n > 0) kernel<gather_rows_op, Backend, T>::run(src, lds, n, index, S, dst, ldd);
}

// src: (S, n) with row stride lds; index: S entries, distinct where ≥ 0.
template <class Backend, class T>
void scatter_rows(const T* src, index_t lds, index_t n, const std::int64_t* index, index_t S, T* dst, index_t ldd) {
    if (S > 0 && n > 0) kernel<scatter_rows_op, Backend, T>::run(src, lds, n, index, S, dst, ldd);
}

}  // namespace locost::ops
