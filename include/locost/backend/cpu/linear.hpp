// Linear layers on the CPU (ops/linear.hpp): native weights are a GEMM; bfloat16 and int8 weights
// are widened in registers, never expanded in memory.
//
// A few rows (≤ 8: a decoding step's hypotheses) run a fused kernel: each weight vector is
// loaded once in its stored width, widened (bfloat16: a shift; int8: sign extension and
// conversion, both exact) and multiplied into every row's accumulators, so the bytes read are
// the stored bytes. Up to 64 rows (a batch of documents decoding together) run the same kernel
// eight rows at a time over blocks of channels that stay in L2. More rows (teacher-forced
// scoring, a prompt) widen a block of output channels into a per-thread float buffer that stays
// in L2 and multiply it by GEMM; there the arithmetic dominates and the widening is a small
// share of it.
//
// Threads: the output channels are split over the OpenMP threads (both cores' bandwidth serve
// one decoding step), unless called from inside a parallel region.
#pragma once
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <xsimd/xsimd.hpp>

#include "../../config/error.hpp"
#include "../../core/aligned.hpp"
#include "../../core/dtype.hpp"
#include "../../ops/gemm.hpp"
#include "../../ops/linear.hpp"
#include "bf16_products.hpp"
#include "i8_products.hpp"
#include "threads.hpp"

namespace locost {

namespace cpu_detail {

using fvec = xsimd::batch<float>;
inline constexpr index_t flanes = static_cast<index_t>(fvec::size);

// Rows up to which the fused kernel runs (beyond: widen blocks, then GEMM).
inline constexpr index_t linear_fused_rows = ops::linear_few_rows;

// flanes stored weights starting at p, widened to float exactly. (Templates, so that only the
// branch of the vector width this build uses is instantiated.)
template <class V = fvec>
V widen(const std::int8_t* p) {
#if defined(__AVX512F__)
    if constexpr (V::size == 16) return V(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))));
#endif
#if defined(__AVX2__)
    if constexpr (V::size == 8) return V(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
#endif
    alignas(64) float t[V::size];
    for (std::size_t i = 0; i < V::size; ++i) t[i] = static_cast<float>(p[i]);
    return V::load_aligned(t);
}

template <class V = fvec>
V widen(const std::uint16_t* p) {
#if defined(__AVX512F__)
    if constexpr (V::size == 16)
        return V(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16)));
#endif
#if defined(__AVX2__)
    if constexpr (V::size == 8)
        return V(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16)));
#endif
    alignas(64) float t[V::size];
    for (std::size_t i = 0; i < V::size; ++i) t[i] = bf16_to_float(p[i]);
    return V::load_aligned(t);
}

template <class V = fvec>
V widen(const float* p) {
    return V::load_unaligned(p);
}

inline float widen_one(float v) { return v; }
inline float widen_one(std::int8_t v) { return static_cast<float>(v); }
inline float widen_one(std::uint16_t v) { return bf16_to_float(v); }

// Output channels [o0, o1) for R rows, C channels at a time (C·R accumulators in registers).
template <class Stored, int R, int C>
void linear_few_rows(const ops::weight_view& w, const float* x, index_t ldx, float* y, index_t ldy, float alpha, bool accumulate,
                     index_t o0, index_t o1) {
    const auto* W = static_cast<const Stored*>(w.data);
    const index_t K = w.in, kv = K / flanes * flanes;
    index_t o = o0;
    for (; o + C <= o1; o += C) {
        fvec s[C][R];
        for (int c = 0; c < C; ++c)
            for (int i = 0; i < R; ++i) s[c][i] = fvec(0.0f);
        // The next channel group, prefetched a slice per step: one step here consumes a
        // quarter (int8) or half (bfloat16) of a cache line per channel, too little for the
        // out-of-order window to keep enough lines in flight on its own (measured: int8 read
        // at 8 GB/s per core without this, at the bandwidth with it).
        const char* next = reinterpret_cast<const char*>(W + (o + C) * K);
        constexpr index_t ahead = static_cast<index_t>(C * flanes * sizeof(Stored));  // bytes of the next group per step
        for (index_t k = 0; k < kv; k += flanes) {
            for (index_t b = 0; b < ahead; b += 64) _mm_prefetch(next + k / flanes * ahead + b, _MM_HINT_T0);
            fvec xr[R];
            for (int i = 0; i < R; ++i) xr[i] = fvec::load_unaligned(x + i * ldx + k);
            for (int c = 0; c < C; ++c) {
                const fvec wv = widen(W + (o + c) * K + k);
                for (int i = 0; i < R; ++i) s[c][i] = xsimd::fma(xr[i], wv, s[c][i]);
            }
        }
        for (int c = 0; c < C; ++c) {
            const Stored* row = W + (o + c) * K;
            const float sc = alpha * (w.scale ? w.scale[o + c] : 1.0f);
            for (int i = 0; i < R; ++i) {
                float d = xsimd::hadd(s[c][i]);
                for (index_t k = kv; k < K; ++k) d += x[i * ldx + k] * widen_one(row[k]);
                float& out = y[i * ldy + o + c];
                out = accumulate ? out + sc * d : sc * d;
            }
        }
    }
    if constexpr (C > 1)
        if (o < o1) linear_few_rows<Stored, R, 1>(w, x, ldx, y, ldy, alpha, accumulate, o, o1);
}

template <class Stored, int R = 1>
void linear_few_rows_dispatch(index_t rows, const ops::weight_view& w, const float* x, index_t ldx, float* y, index_t ldy, float alpha,
                              bool accumulate, index_t o0, index_t o1) {
    if constexpr (R < linear_fused_rows) {
        if (rows != R) return linear_few_rows_dispatch<Stored, R + 1>(rows, w, x, ldx, y, ldy, alpha, accumulate, o0, o1);
    }
    // One or two rows leave registers for four channels at a time, which keeps enough
    // independent FMA chains in flight; more rows use two.
    linear_few_rows<Stored, R, (R <= 2 ? 4 : 2)>(w, x, ldx, y, ldy, alpha, accumulate, o0, o1);
}

// Rows up to which a product runs the fused kernel eight rows at a time over blocks of channels
// that stay in L2 (a batch of documents decoding together: one row per document): the first
// eight rows read a block from memory, the others find it in L2. Each row's arithmetic is that of
// the one-row kernel (the same sums in the same order), so a document's result in a batch is
// bit for bit that of its own run; a GEMM library at these row counts rounds differently (and
// packs the weights on every call, no faster here: 16-18 documents of BART base, 21 ms a step).
inline constexpr index_t linear_grouped_rows = 64;

template <class Stored>
void linear_row_groups(index_t rows, const ops::weight_view& w, const float* x, index_t ldx, float* y, index_t ldy, float alpha,
                       bool accumulate, index_t o0, index_t o1) {
    const index_t channel_bytes = w.in * static_cast<index_t>(sizeof(Stored));
    const index_t block = std::max<index_t>(4, (index_t{192} << 10) / std::max<index_t>(1, channel_bytes));
    for (index_t b0 = o0; b0 < o1; b0 += block) {
        const index_t b1 = std::min(o1, b0 + block);
        for (index_t r = 0; r < rows; r += linear_fused_rows)
            linear_few_rows_dispatch<Stored>(std::min(linear_fused_rows, rows - r), w, x + r * ldx, ldx, y + r * ldy, ldy, alpha,
                                             accumulate, b0, b1);
    }
}

// Output channels [o0, o1) for many rows: blocks of channels widened into `buf` (≤ 256 KiB of
// floats), each multiplied by GEMM on the calling thread.
template <class Stored>
void linear_widen_gemm(index_t rows, const ops::weight_view& w, const float* x, index_t ldx, float* y, index_t ldy, float alpha,
                       bool accumulate, index_t o0, index_t o1) {
    const auto* W = static_cast<const Stored*>(w.data);
    const index_t K = w.in, kv = K / flanes * flanes;
    const index_t block = std::max<index_t>(16, (index_t{1} << 16) / std::max<index_t>(1, K));
    const auto buf = aligned_alloc_n<float>(static_cast<std::size_t>(std::min(block, o1 - o0) * K));
    for (index_t b0 = o0; b0 < o1; b0 += block) {
        const index_t nb = std::min(block, o1 - b0);
        for (index_t c = 0; c < nb; ++c) {
            const Stored* src = W + (b0 + c) * K;
            float* dst = buf.get() + c * K;
            const fvec sc(w.scale ? w.scale[b0 + c] : 1.0f);
            for (index_t k = 0; k < kv; k += flanes) (widen(src + k) * sc).store_unaligned(dst + k);
            for (index_t k = kv; k < K; ++k) dst[k] = widen_one(src[k]) * (w.scale ? w.scale[b0 + c] : 1.0f);
        }
        ops::gemm<cpu, float>({false, true, rows, nb, K, ldx, K, ldy}, alpha, x, buf.get(), accumulate ? 1.0f : 0.0f, y + b0);
    }
}

template <class Stored>
void linear_reduced(const ops::weight_view& w, const float* x, index_t ldx, index_t rows, float* y, index_t ldy, float alpha,
                    bool accumulate) {
    auto slice = [&](index_t o0, index_t o1) {
        if (rows <= linear_fused_rows) linear_few_rows_dispatch<Stored>(rows, w, x, ldx, y, ldy, alpha, accumulate, o0, o1);
        else if (rows <= linear_grouped_rows) linear_row_groups<Stored>(rows, w, x, ldx, y, ldy, alpha, accumulate, o0, o1);
        else linear_widen_gemm<Stored>(rows, w, x, ldx, y, ldy, alpha, accumulate, o0, o1);
    };
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (threads == 1 || rows * w.out * w.in < (index_t{1} << 16)) {
        slice(0, w.out);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        const index_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        // Slices of whole 16-channel groups, so that threads never share a cache line of y.
        const index_t per = (w.out + nt * 16 - 1) / (nt * 16) * 16;
        const index_t begin = std::min(w.out, t * per), end = std::min(w.out, begin + per);
        if (begin < end) slice(begin, end);
    }
}

} // namespace cpu_detail

template <class Scalar>
struct kernel<ops::linear_op, cpu, Scalar> {
    static void run(const ops::weight_view& w, const Scalar* x, index_t ldx, index_t rows, Scalar* y, index_t ldy, Scalar alpha,
                    bool accumulate) {
        cpu_detail::poll_interrupt();
        if constexpr (std::is_same_v<Scalar, float>) {
            // float32 weights and up to 64 rows: the same fused kernel (its prefetching reads the
            // weights at the machine's bandwidth, where a matrix-vector product reaches ~60 %).
            if (w.precision == ops::weight_precision::native && rows <= cpu_detail::linear_grouped_rows) {
                cpu_detail::linear_reduced<float>(w, x, ldx, rows, y, ldy, alpha, accumulate);
                return;
            }
        }
        if (w.precision == ops::weight_precision::native) {
            ops::gemm<cpu, Scalar>({false, true, rows, w.out, w.in, ldx, w.in, ldy}, alpha, x, static_cast<const Scalar*>(w.data),
                                   Scalar(accumulate ? 1 : 0), y);
            return;
        }
        if constexpr (std::is_same_v<Scalar, float>) {
            if (w.precision == ops::weight_precision::bf16_products && rows > cpu_detail::linear_fused_rows)
                cpu_detail::bf16_products(w, x, ldx, rows, y, ldy, alpha, accumulate);
            else if (w.precision == ops::weight_precision::i8_products && rows > cpu_detail::linear_fused_rows)
                cpu_detail::i8_products(w, x, ldx, rows, y, ldy, alpha, accumulate);
            else if (ops::stored_bf16(w.precision)) cpu_detail::linear_reduced<std::uint16_t>(w, x, ldx, rows, y, ldy, alpha, accumulate);
            else cpu_detail::linear_reduced<std::int8_t>(w, x, ldx, rows, y, ldy, alpha, accumulate);
        } else {
            throw error("weights.precision", "reduced-precision weights (bfloat16, int8) need float32 computation");
        }
    }
};

} // namespace locost
