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
        return V(
            _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16)));
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

// v, kept in a register: GCC otherwise folds a loaded vector into every instruction that uses
// it, loading it again for each (one load per multiply-add instead of one per C of them, which
// makes the few-rows kernel load-bound).
inline fvec in_register(fvec v) {
    auto r = static_cast<typename fvec::register_type>(v);
#if defined(__GNUC__)
    asm("" : "+v"(r));
#endif
    return fvec(r);
}

inline float widen_one(float v) { return v; }
inline float widen_one(std::int8_t v) { return static_cast<float>(v); }
inline float widen_one(std::uint16_t v) { return bf16_to_float(v); }

// y[i, o] for R rows from channel o's accumulators: lanes summed, then the k beyond the last
// whole vector, then the scales (alpha, and int8's per channel).
template <class Stored, int R>
void finish_sums(const ops::weight_view& w, const float* x, index_t ldx, float* y, index_t ldy, float alpha, bool accumulate, index_t o,
                 const fvec* s) {
    const index_t K = w.in, kv = K / flanes * flanes;
    const Stored* row = static_cast<const Stored*>(w.data) + o * K;
    const float sc = alpha * (w.scale ? w.scale[o] : 1.0f);
    for (int i = 0; i < R; ++i) {
        float d = xsimd::hadd(s[i]);
        for (index_t k = kv; k < K; ++k) d += x[i * ldx + k] * widen_one(row[k]);
        float& out = y[i * ldy + o];
        out = accumulate ? out + sc * d : sc * d;
    }
}

// Rows of x packed for the fused kernel: step j's R vectors side by side (xp[j·R + i] =
// x[i, j·flanes : (j + 1)·flanes]), so that one pointer with constant offsets reaches them all:
// with a pointer per row, eight rows, the channels' pointers and the loop's own did not fit the
// 16 general registers and GCC kept some on the stack, reloaded every step.
template <int R>
const fvec* pack_rows(const float* x, index_t ldx, index_t kv) {
    thread_local growing_buffer<fvec> packed;
    fvec* p = packed.at_least(static_cast<std::size_t>(R * (kv / flanes)));
    for (index_t j = 0; j < kv / flanes; ++j)
        for (int i = 0; i < R; ++i) p[j * R + i] = fvec::load_unaligned(x + i * ldx + j * flanes);
    return p;
}

// A pass of the row groups below over one stretch of k: the next block of channels is pulled
// into L2 a few lines a step; between stretches a group's accumulators wait in `acc` (the same
// sums, continued in the same order).
struct row_group_pass {
    const char* next = nullptr;  // the next block's bytes not yet prefetched
    const char* end = nullptr;
    index_t lines = 0;       // lines to prefetch a step
    index_t k0 = 0, k1 = 0;  // this stretch of k (multiples of flanes)
    bool first = true, last = true;
    fvec* acc = nullptr;  // (channel − block0, row) accumulators between stretches
    index_t block0 = 0;
};

// Output channels [o0, o1) for R rows of x (packed: xp), C channels at a time (C·R accumulators
// in registers). Each accumulator sums its row's products lane by lane in the order of k, then
// across lanes (finish_sums): the same operations for any R, C and stretches of k, so a row's
// result does not depend on its neighbours. Without a pass: all of k, each channel group
// prefetching the next one (a decoding step: the weights come from memory once). With a pass:
// its stretch of k, prefetching its next block into L2.
template <class Stored, int R, int C, bool Grouped>
void fused_rows(const ops::weight_view& w, const fvec* xp, const float* x, index_t ldx, float* y, index_t ldy, float alpha, bool accumulate,
                index_t o0, index_t o1, row_group_pass* pass) {
    const auto* W = static_cast<const Stored*>(w.data);
    const index_t K = w.in, kv = K / flanes * flanes;
    const index_t k0 = pass ? pass->k0 : 0, k1 = pass ? pass->k1 : kv;
    const bool first = !pass || pass->first, last = !pass || pass->last;
    index_t o = o0;
    for (; o + C <= o1; o += C) {
        fvec s[C][R];
        fvec* saved = pass ? pass->acc + (o - pass->block0) * R : nullptr;
        for (int c = 0; c < C; ++c)
            for (int i = 0; i < R; ++i) s[c][i] = first ? fvec(0.0f) : saved[c * R + i];
        const Stored* wp = W + o * K + k0;
        const fvec* xq = xp + k0 / flanes * R;
        // Without a pass, the next channel group is prefetched a slice per step: one step here
        // consumes a quarter (int8) or half (bfloat16) of a cache line per channel, too little
        // for the out-of-order window to keep enough lines in flight on its own (measured: int8
        // read at 8 GB/s per core without this, at the bandwidth with it).
        constexpr index_t ahead = static_cast<index_t>(C * flanes * sizeof(Stored));  // bytes of the next group per step
        const char* next = reinterpret_cast<const char*>(W + (o + C) * K);
        const char* pf = pass ? pass->next : nullptr;
        const char* const pf_end = pass ? pass->end : nullptr;
        const index_t pf_bytes = pass ? pass->lines * 64 : 0;
        for (index_t j = (k1 - k0) / flanes; j > 0; --j, wp += flanes, xq += R) {
            if constexpr (!Grouped) {
                for (index_t b = 0; b < ahead; b += 64) _mm_prefetch(next + b, _MM_HINT_T0);
                next += ahead;
            } else if (pf < pf_end) {
                for (index_t b = 0; b < pf_bytes; b += 64) _mm_prefetch(pf + b, _MM_HINT_T1);
                pf += pf_bytes;
            }
            fvec wv[C];
            for (int c = 0; c < C; ++c) wv[c] = widen(wp + c * K);
            for (int i = 0; i < R; ++i) {
                const fvec xv = in_register(xq[i]);
                for (int c = 0; c < C; ++c) s[c][i] = xsimd::fma(xv, wv[c], s[c][i]);
            }
        }
        if (pass) pass->next = pf;
        for (int c = 0; c < C; ++c) {
            if (last) finish_sums<Stored, R>(w, x, ldx, y, ldy, alpha, accumulate, o + c, s[c]);
            else
                for (int i = 0; i < R; ++i) saved[c * R + i] = s[c][i];
        }
    }
    if constexpr (C > 1)
        if (o < o1) fused_rows<Stored, R, 1, Grouped>(w, xp, x, ldx, y, ldy, alpha, accumulate, o, o1, pass);
}

// Channels at a time for R rows: R·C accumulators, C weight vectors and one row's x within
// AVX-512's 32 registers (one or two rows: four channels, enough independent chains; measured
// on the Xeon: eight rows from L2 at 90 GFLOP/s a core with three, 82 with two, 73 with four).
template <int R>
inline constexpr int linear_channels = R <= 2 ? 4 : 3;

// Up to linear_fused_rows rows (x packed here unless the caller did), all channels of [o0, o1).
template <class Stored, int R = 1>
void linear_few_rows_dispatch(index_t rows, const ops::weight_view& w, const float* x, index_t ldx, float* y, index_t ldy, float alpha,
                              bool accumulate, index_t o0, index_t o1, row_group_pass* pass = nullptr, const fvec* xp = nullptr) {
    if constexpr (R < linear_fused_rows) {
        if (rows != R) return linear_few_rows_dispatch<Stored, R + 1>(rows, w, x, ldx, y, ldy, alpha, accumulate, o0, o1, pass, xp);
    }
    if (!xp) xp = pack_rows<R>(x, ldx, w.in / flanes * flanes);
    if (pass) fused_rows<Stored, R, linear_channels<R>, true>(w, xp, x, ldx, y, ldy, alpha, accumulate, o0, o1, pass);
    else fused_rows<Stored, R, (R <= 2 ? 4 : 2), false>(w, xp, x, ldx, y, ldy, alpha, accumulate, o0, o1, nullptr);
}

// Rows up to which a product runs the fused kernel eight rows at a time (a batch of documents
// decoding together: one row per document). Each row's arithmetic is that of the one-row kernel
// (the same sums in the same order), so a document's result in a batch is bit for bit that of
// its own run; a GEMM library at these row counts rounds differently (and packs the weights on
// every call, no faster here: 16-18 documents of BART base, 21 ms a step).
inline constexpr index_t linear_grouped_rows = 64;

// The row groups' schedule: blocks of channels that stay in L2 (the next block is pulled into
// L2 while the groups work on this one), and within a block, stretches of k short enough that a
// group's rows of x stay in L1 (eight rows of 3,072 floats would not: every step would then load
// nine lines from L2 instead of three).
template <class Stored>
void linear_row_groups(index_t rows, const ops::weight_view& w, const float* x, index_t ldx, float* y, index_t ldy, float alpha,
                       bool accumulate, index_t o0, index_t o1) {
    constexpr index_t group = linear_fused_rows;
    const index_t K = w.in, kv = K / flanes * flanes;
    const index_t channel_bytes = K * static_cast<index_t>(sizeof(Stored));
    const index_t block = std::max<index_t>(4, (index_t{192} << 10) / std::max<index_t>(1, channel_bytes));
    // A stretch: at most 24 KiB of a group's x (half of a 48 KiB L1), in whole vectors.
    const index_t stretch = std::max(flanes, (index_t{24} << 10) / (group * index_t{sizeof(float)}) / flanes * flanes);
    const index_t groups = (rows + group - 1) / group;
    thread_local growing_buffer<fvec> saved, packed;
    row_group_pass pass;
    if (kv > stretch) pass.acc = saved.at_least(static_cast<std::size_t>(block * group));
    // Every group's rows packed once (pack_rows' layout, a group after another).
    fvec* xp = packed.at_least(static_cast<std::size_t>(rows * (kv / flanes)));
    for (index_t r = 0; r < rows; r += group) {
        const index_t n = std::min(group, rows - r);
        for (index_t j = 0; j < kv / flanes; ++j)
            for (index_t i = 0; i < n; ++i) xp[r * (kv / flanes) + j * n + i] = fvec::load_unaligned(x + (r + i) * ldx + j * flanes);
    }
    const auto* base = static_cast<const char*>(w.data);
    for (index_t b0 = o0; b0 < o1; b0 += block) {
        const index_t b1 = std::min(o1, b0 + block), n1 = std::min(o1, b1 + block);
        // The next block's lines spread over this block's steps (every group, channel group, k).
        const index_t steps = std::max<index_t>(1, groups * ((b1 - b0 + 2) / 3) * (kv / flanes));
        pass.next = base + b1 * channel_bytes;
        pass.end = base + n1 * channel_bytes;
        pass.lines = ((n1 - b1) * channel_bytes / 64 + steps - 1) / steps;
        pass.block0 = b0;
        for (index_t r = 0; r < rows; r += group) {
            for (index_t k0 = 0; k0 < kv || k0 == 0; k0 += stretch) {
                pass.k0 = k0;
                pass.k1 = std::min(kv, k0 + stretch);
                pass.first = k0 == 0;
                pass.last = pass.k1 == kv;
                linear_few_rows_dispatch<Stored>(std::min(group, rows - r), w, x + r * ldx, ldx, y + r * ldy, ldy, alpha, accumulate, b0,
                                                 b1, &pass, xp + r * (kv / flanes));
            }
        }
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
