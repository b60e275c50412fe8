// Linear layers on the CPU (ops/linear.hpp): native weights are a GEMM; bfloat16 and int8 weights
// are widened in registers, never expanded in memory.
//
// A few rows (≤ 8: a decoding step's hypotheses) run a fused kernel: each weight vector is
// loaded once in its stored width, widened (bfloat16: a shift; int8: sign extension and
// conversion, both exact) and multiplied into every row's accumulators, so the bytes read are
// the stored bytes. Up to 64 rows (a batch of documents decoding together) run the same
// arithmetic eight rows at a time over blocks of channels pulled into L2 ahead of use, in
// stretches of k whose rows of x stay in L1 (linear_row_groups). More rows (teacher-forced
// scoring, a prompt) widen a block of output channels into a per-thread float buffer that stays
// in L2 and multiply it by GEMM; there the arithmetic dominates and the widening is a small
// share of it.
//
// Threads: the output channels are split over the OpenMP threads (both cores' bandwidth serve
// one decoding step), unless called from inside a parallel region.
#pragma once
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
#include "isa.hpp"
#include "simd_levels.hpp"

namespace locost {

namespace cpu_detail {

// Rows up to which the fused kernel runs (beyond: widen blocks, then GEMM).
inline constexpr index_t linear_fused_rows = ops::linear_few_rows;

// Rows up to which a product runs the fused kernel eight rows at a time (a batch of documents
// decoding together: one row per document). Each row's arithmetic is that of the one-row kernel
// (the same sums in the same order), so a document's result in a batch is bit for bit that of
// its own run; a GEMM library at these row counts rounds differently (and packs the weights on
// every call, no faster here: 16-18 documents of BART base, 21 ms a step).
inline constexpr index_t linear_grouped_rows = 64;

#define LOCOST_LEVEL_BODY "linear_rows.ipp"
#include "at_levels.ipp"

// linear_rows at the widest level the process may use (isa.hpp); a level the build already
// compiles for at its own width runs the build's copy.
template <class Stored>
void linear_rows_at_level(index_t rows, const ops::weight_view& w, const float* x, index_t ldx, float* y, index_t ldy, float alpha,
                          bool accumulate, index_t o0, index_t o1) {
    LOCOST_RETURN_AT_LEVEL(linear_rows<Stored>(rows, w, x, ldx, y, ldy, alpha, accumulate, o0, o1));
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
        if (rows <= linear_grouped_rows) linear_rows_at_level<Stored>(rows, w, x, ldx, y, ldy, alpha, accumulate, o0, o1);
        else linear_widen_gemm<Stored>(rows, w, x, ldx, y, ldy, alpha, accumulate, o0, o1);
    };
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (threads == 1 || rows * w.out * w.in < (index_t{1} << 16)) {
        slice(0, w.out);
        return;
    }
    parallel_region(threads, [&](index_t t, index_t nt) {
        // Slices of whole 16-channel groups, so that threads never share a cache line of y.
        const index_t per = (w.out + nt * 16 - 1) / (nt * 16) * 16;
        const index_t begin = std::min(w.out, t * per), end = std::min(w.out, begin + per);
        if (begin < end) slice(begin, end);
    });
}

}  // namespace cpu_detail

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

}  // namespace locost
