// Elementwise and row-wise ops over dense host or device buffers (one dispatch point each):
//   rms_norm      y = w ⊙ x / sqrt(mean(x²) + eps) per row (T5 LayerNorm: no mean, no bias)
//   layer_norm    y = w ⊙ (x − mean(x)) / sqrt(var(x) + eps) + b per row (BART; biased variance)
//   activate      x = act(x)                                  act ∈ activation
//   gate          a = act(a) ⊙ b                              (gated feed-forward)
//   mul           y = y ⊙ q
//   add_rows      y[r, :] += b                                (bias)
//   scale_rows    y[r, :] *= s[r]                             (a padding mask)
//   softmax_rows  x = softmax(x) per row, -inf entries give 0 (an all -inf row gives zeros)
#pragma once
#include "../backend/backend.hpp"
#include "../core/tensor.hpp"

namespace locost {

// The feed-forward activations of T5-family configs ("gelu_new" is the tanh approximation).
enum class activation { relu, gelu_tanh, gelu_erf, silu };

namespace ops {

struct rms_norm_op {};
struct layer_norm_op {};
struct activate_op {};
struct gate_op {};
struct mul_op {};
struct add_rows_op {};
struct scale_rows_op {};
struct softmax_rows_op {};

// x, y: (rows, n) with row strides ldx, ldy; w: (n).
template <class Backend, class T>
void rms_norm(const T* x, index_t ldx, const T* w, T eps, T* y, index_t ldy, index_t rows, index_t n) {
    kernel<rms_norm_op, Backend, T>::run(x, ldx, w, eps, y, ldy, rows, n);
}

// x, y: (rows, n) with row strides ldx, ldy; w, b: (n).
template <class Backend, class T>
void layer_norm(const T* x, index_t ldx, const T* w, const T* b, T eps, T* y, index_t ldy, index_t rows, index_t n) {
    kernel<layer_norm_op, Backend, T>::run(x, ldx, w, b, eps, y, ldy, rows, n);
}

template <activation Act, class Backend, class T>
void activate(T* x, index_t count) {
    kernel<activate_op, Backend, T>::template run<Act>(x, count);
}

// For each of `rows` rows: a[0..n) = act(a[0..n)) ⊙ b[0..n), a and b with row stride ld.
template <activation Act, class Backend, class T>
void gate(T* a, const T* b, index_t rows, index_t n, index_t ld) {
    kernel<gate_op, Backend, T>::template run<Act>(a, b, rows, n, ld);
}

template <class Backend, class T>
void mul(T* y, const T* q, index_t count) {
    kernel<mul_op, Backend, T>::run(y, q, count);
}

template <class Backend, class T>
void add_rows(T* y, const T* b, index_t rows, index_t n) {
    kernel<add_rows_op, Backend, T>::run(y, b, rows, n);
}

template <class Backend, class T>
void scale_rows(T* y, const T* s, index_t rows, index_t n) {
    kernel<scale_rows_op, Backend, T>::run(y, s, rows, n);
}

template <class Backend, class T>
void softmax_rows(T* x, index_t rows, index_t n, index_t ld) {
    kernel<softmax_rows_op, Backend, T>::run(x, rows, n, ld);
}

}  // namespace ops
}  // namespace locost
