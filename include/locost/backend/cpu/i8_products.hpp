// Many-row products for weight_precision::i8_products (ops/linear.hpp): each row of x is
// quantized to int8 with its own scale, a block of rows at a time, the block is multiplied by
// the stored int8 weights with exact int32 sums, and the sums are scaled back:
//
//     s_r = max|x[r, :]| / 127,   q[r, k] = round(x[r, k] · 127 / max|x[r, :]|)  (nearest even)
//     y[r, o] = alpha · s_r · scale[o] · Σ_k q[r, k] · W8[o, k]  [+ y[r, o]]
//
// With LOCOST_USE_ONEDNN the int8 product is oneDNN's matmul, which picks the machine's int8
// dot-product instructions at run time (AVX512-VNNI, AMX): on a Zen 4 core about twice its
// bfloat16 rate and four times float32's (bench/RESULTS.md, "int8 encoder products"). A per-row
// activation scale is what keeps the error at half a step of each row's own largest value; the
// oneDNN of Debian 12 (2.6) scales outputs per column only, so the int32 sums come back and the
// row and column scales are applied here, in one pass over a block that is still in cache.
// Without oneDNN, or where it has no int8 kernel, the same numbers (up to float32 summation
// order) come from widening q and the weights to float32 for a GEMM.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "../../core/aligned.hpp"
#include "../../ops/linear.hpp"
#include "bf16_products.hpp"
#include "isa.hpp"

namespace locost::cpu_detail {

#if LOCOST_ISA_REGIONS
LOCOST_BEGIN_ISA_AVX512
inline void quantize_row_avx512(const float* x, index_t n, std::int8_t* q, float& scale) {
    float m = 0;
    index_t k = 0;
    __m512 vm = _mm512_setzero_ps();
    for (; k + 16 <= n; k += 16) vm = _mm512_max_ps(vm, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, vm);
    for (float v : lanes) m = std::max(m, v);
    for (; k < n; ++k) m = std::max(m, std::fabs(x[k]));
    const float inv = m > 0 ? 127.0f / m : 0.0f;
    scale = m > 0 ? m / 127.0f : 0.0f;
    // Rounding to nearest even (the default MXCSR mode, as round_half_even below); |x·inv| ≤ 127 up to
    // one rounding, so the saturating narrowing never clips a value.
    const __m512 vinv = _mm512_set1_ps(inv);
    for (k = 0; k + 16 <= n; k += 16)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + k),
                         _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + k), vinv))));
    for (; k < n; ++k) q[k] = static_cast<std::int8_t>(std::clamp(round_half_even(x[k] * inv), -127.0f, 127.0f));
}
LOCOST_END_ISA
#endif

// q = the row quantized as above, its scale s_r into `scale` (0 for an all-zero row); sixteen
// elements at a time at the avx512 level.
inline void quantize_row(const float* x, index_t n, std::int8_t* q, float& scale) {
#if LOCOST_ISA_REGIONS
    if (isa_at_least(isa_level::avx512)) return quantize_row_avx512(x, n, q, scale);
#endif
    float m = 0;
    for (index_t k = 0; k < n; ++k) m = std::max(m, std::fabs(x[k]));
    const float inv = m > 0 ? 127.0f / m : 0.0f;
    scale = m > 0 ? m / 127.0f : 0.0f;
    for (index_t k = 0; k < n; ++k) q[k] = static_cast<std::int8_t>(std::clamp(round_half_even(x[k] * inv), -127.0f, 127.0f));
}

// y[r, :] = alpha · s_r · (col_scale ⊙ acc[r, :]) [+ y[r, :]] (col_scale: nullptr for none).
template <class Acc>
void scale_back(const Acc* acc, index_t ldacc, const float* row_scale, const float* col_scale, index_t rows, index_t out, float* y,
                index_t ldy, float alpha, bool accumulate) {
    const bool parallel = !omp_in_parallel() && rows * out >= (index_t{1} << 16);
#pragma omp parallel for schedule(static) if (parallel)
    for (index_t r = 0; r < rows; ++r) {
        const float a = alpha * row_scale[r];
        const Acc* src = acc + r * ldacc;
        float* dst = y + r * ldy;
        if (accumulate) {
#pragma omp simd
            for (index_t o = 0; o < out; ++o) dst[o] += a * (col_scale ? col_scale[o] : 1.0f) * static_cast<float>(src[o]);
        } else {
#pragma omp simd
            for (index_t o = 0; o < out; ++o) dst[o] = a * (col_scale ? col_scale[o] : 1.0f) * static_cast<float>(src[o]);
        }
    }
}

// One thread's quantized rows, row scales and int32 sums.
struct i8_scratch {
    growing_buffer<std::int8_t> q;
    growing_buffer<float> s;
    growing_buffer<std::int32_t> acc;
};

// y (rows, out) = alpha · q(x)·Wᵀ [+ y] for W stored int8, rows > the fused kernel's.
inline void i8_products(const ops::weight_view& w, const float* x, index_t ldx, index_t rows, float* y, index_t ldy, float alpha,
                        bool accumulate) {
    // Rows per block: the block's sums (rows × out × 4 B) stay at about 4 MB; a multiple of
    // onednn_row_multiple, and the last block padded with zero rows to one (bf16_products.hpp).
    const index_t per_block = std::clamp<index_t>((index_t{1} << 20) / std::max<index_t>(w.out, 1), 64, 1024);
    const index_t block = std::min(rows, per_block - per_block % onednn_row_multiple);
    const index_t padded = onednn_rows(block);
    // The buffers stay with the thread from call to call: fresh ones take their page faults
    // inside oneDNN's first writes (a T5 encoder's feed-forward product on an AMX Xeon: 2.5 ms a
    // call with fresh buffers, 0.8-1.7 ms with kept ones).
    thread_local i8_scratch buffers;
    std::int8_t* const q = buffers.q.at_least(static_cast<std::size_t>(padded * w.in));
    float* const s = buffers.s.at_least(static_cast<std::size_t>(block));
    std::int32_t* const acc = buffers.acc.at_least(static_cast<std::size_t>(padded * w.out));  // int32, or float32 in the fallback
    aligned_ptr<float> widened;
    for (index_t r0 = 0; r0 < rows; r0 += block) {
        const index_t n = std::min(block, rows - r0);
        const bool parallel = !omp_in_parallel() && n * w.in >= (index_t{1} << 16);
#pragma omp parallel for schedule(static) if (parallel)
        for (index_t r = 0; r < n; ++r) quantize_row(x + (r0 + r) * ldx, w.in, q + r * w.in, s[r]);
#ifdef LOCOST_USE_ONEDNN
        std::fill(q + n * w.in, q + onednn_rows(n) * w.in, std::int8_t{0});
        if (onednn_products::instance().run(q, onednn_rows(n), w, acc, w.out)) {
            scale_back(acc, w.out, s, w.scale, n, w.out, y + r0 * ldy, ldy, alpha, accumulate);
            continue;
        }
#endif
        // The fallback: q widened to float32 (exact), times the widened weights (their scales
        // applied by linear_reduced), then the row scales.
        if (!widened) widened = aligned_alloc_n<float>(static_cast<std::size_t>(block * w.in));
        for (index_t i = 0; i < n * w.in; ++i) widened[i] = static_cast<float>(q[i]);
        float* sums = reinterpret_cast<float*>(acc);
        linear_reduced<std::int8_t>(w, widened.get(), w.in, n, sums, w.out, 1.0f, false);
        scale_back(sums, w.out, s, nullptr, n, w.out, y + r0 * ldy, ldy, alpha, accumulate);
    }
}

}  // namespace locost::cpu_detail
