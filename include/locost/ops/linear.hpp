// A linear layer's product with its weight W stored (out, in) as PyTorch's Linear stores it:
//
//     y(rows, out) = alpha · x(rows, in) · Wᵀ  [+ y when accumulate]
//
// W may be stored in the computation's own scalar type (native: the product is ops::gemm), in
// bfloat16, or in int8 with one float scale per output channel (W[o, :] ≈ scale[o] · q[o, :],
// symmetric, scale = max|W[o, :]| / 127). The reduced precisions are storage only: x stays in
// the scalar type, each weight is widened exactly in registers and the sums accumulate in the
// scalar type, so the only error is the weight's rounding. Why: a decoding step reads every
// weight of the decoder and LM head once for one row per hypothesis, so its time is the bytes
// of those weights (base model: 496 MB in float32, 248 in bfloat16, 124 in int8) over the
// machine's read bandwidth (bench/RESULTS.md, "Reduced-precision weights").
//
// bf16_products is the one precision that is not storage only: W is stored in bfloat16 as
// above, and a product of more than a few rows (an encoder's tile, the cross-attention cache's
// projection) also rounds x to bfloat16 and multiplies bfloat16 by bfloat16 with float32 sums
// (model_options' compute = bf16). Why: those products are arithmetic-bound, and AVX512-BF16
// (or AMX) does twice float32's multiply-adds per instruction; a product of bfloat16 values is
// exact in float32, so the error is the two roundings. Few-row products keep x in float32.
//
// i8_products is the int8 counterpart (compute = int8): W stored as i8, and a product of more
// than a few rows also quantizes each row of x symmetrically to int8 with its own scale
// (s_r = max|x[r, :]|/127, q = round(x·127/max|x[r, :]|)), multiplies int8 by int8 with exact
// int32 sums and scales the sums by s_r·scale[o]. Why: AVX512-VNNI (or AMX) does four times
// float32's multiply-adds per instruction; the error is the two roundings, each up to half a
// step of its row's largest value. Few-row products keep x in float32, as for i8.
#pragma once
#include <cstdint>

#include "../backend/backend.hpp"
#include "../core/tensor.hpp"
#include "precision.hpp"

namespace locost::ops {

// weight_precision { native, bf16, i8, bf16_products, i8_products }: ops/precision.hpp.

// Stored as bfloat16 (bf16, bf16_products)?
constexpr bool stored_bf16(weight_precision p) { return p == weight_precision::bf16 || p == weight_precision::bf16_products; }
// Stored as int8 with a scale per output channel (i8, i8_products)?
constexpr bool stored_i8(weight_precision p) { return p == weight_precision::i8 || p == weight_precision::i8_products; }

// One stored (out, in) weight matrix, rows dense (row o at data + o·in elements of its type).
struct weight_view {
    weight_precision precision = weight_precision::native;
    const void* data = nullptr;
    const float* scale = nullptr;  // int8: (out)
    index_t out = 0, in = 0;
};

// "A few rows": products of at most this many rows keep x in float32 under bf16_products and
// i8_products (a decoding step's hypotheses), on every backend, so that backends agree on which
// products round x.
inline constexpr index_t linear_few_rows = 8;

struct linear_op {};

// y (rows, out, row stride ldy) = alpha · x (rows, in, row stride ldx) · Wᵀ [+ y].
template <class Backend, class Scalar>
void linear(const weight_view& w, const Scalar* x, index_t ldx, index_t rows, Scalar* y, index_t ldy, Scalar alpha = Scalar(1),
            bool accumulate = false) {
    if (rows == 0 || w.out == 0) return;
    kernel<linear_op, Backend, Scalar>::run(w, x, ldx, rows, y, ldy, alpha, accumulate);
}

// The same with dense rows: y (rows, out) = x (rows, in) · Wᵀ [+ y].
template <class Backend, class Scalar>
void linear(const weight_view& w, const Scalar* x, Scalar* y, index_t rows, bool accumulate = false) {
    linear<Backend, Scalar>(w, x, w.in, rows, y, w.out, Scalar(1), accumulate);
}

}  // namespace locost::ops
