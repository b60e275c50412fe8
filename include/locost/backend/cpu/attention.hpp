// Attention on the CPU (ops::attention): problems split over OpenMP threads (one head of one
// sequence each). Keys/values are processed in blocks of 256 rows, widened to the scalar type in a
// per-thread buffer (no copy for float32 storage of the same type), so a long int8 or bfloat16
// cache is read once per query batch and never expanded in memory. For up to 4 query rows
// (decoding steps) over any cache, fused prefetching kernels read each row once (bfloat16, int8
// widened in registers) instead. Scores for all keys are kept (nq × nk per thread): exact softmax;
// over more than online_block keys, or over an int8 cache with int8 products (--compute int8,
// cache_tiles_i8.hpp), those few rows go by blocks of keys with an online softmax.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <immintrin.h>
#include <limits>
#include <type_traits>
#include <vector>
#include <xsimd/xsimd.hpp>

#include "../../core/aligned.hpp"
#include "../../ops/attention.hpp"
#include "../../ops/gemm.hpp"
#include "attention_rows.hpp"
#include "cache_tiles_i8.hpp"
#include "linear.hpp"
#include "threads.hpp"

namespace locost {

namespace cpu_detail {

// Fused products with a reduced-precision cache for a few query rows (a decoding step's
// hypotheses of one document): each stored key or value row is loaded once in its stored width,
// widened in registers (exact) and used by every query row, and int8's per-row scale is applied
// to the score, resp. to the probability, so the cache is read once and never expanded. Widening
// blocks into a float buffer and multiplying those by GEMM (the general path below) writes and
// reads four times the int8 bytes again; at 697K tokens that made a step 2.9x the time to read
// the cache once.
//
// Scores: y (NQ × nk, stride ldy) = x (the queries, NQ rows, stride ldx) · Kᵀ;
// values: y (NQ rows, stride ldy) += x (the probabilities, NQ × nk, stride ldx) · V.
// A query row's d values are D vectors (d = D·flanes); the NQ·D vectors of the queries (scores),
// resp. of the outputs (values), stay in registers; with AVX-512 the scores go by groups of keys
// (grouped_scores) and only the last few keys one by one. Rows are prefetched 16 ahead: one step
// consumes one or two cache lines, and prefetching keeps enough of them in flight to read the
// cache at the machine's bandwidth.
#if defined(__AVX512F__) && defined(__AVX512DQ__)
// Lane t of the result is the sum of the 16 lanes of v[t]: a transposing tree of 45 instructions
// for the sixteen sums, where reducing each vector alone takes about nine. Always inlined: as a
// call (GCC 12 declined to inline it in the compiled library) the sixteen accumulators went
// through memory, and the call took 45 % of beam 4's scores.
[[gnu::always_inline]] inline __m512 sum_lanes16(const __m512 v[16]) {
    constexpr __mmask16 all = 0xFFFF;
    constexpr __mmask8 all8 = 0xFF;
    auto lo64 = [](__m512 a, __m512 b) {
        return _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(all8, _mm512_castps_pd(a), _mm512_castps_pd(b)));
    };
    auto hi64 = [](__m512 a, __m512 b) {
        return _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(all8, _mm512_castps_pd(a), _mm512_castps_pd(b)));
    };
    __m512 s2[8], s4[4];
    #pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3] of a = v[2k], b = v[2k+1]
        s2[k] = _mm512_add_ps(_mm512_maskz_unpacklo_ps(all, v[2 * k], v[2 * k + 1]), _mm512_maskz_unpackhi_ps(all, v[2 * k], v[2 * k + 1]));
    #pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)  // per 128-bit lane L: the sums over lane L of v[4k] … v[4k+3]
        s4[k] = _mm512_add_ps(lo64(s2[2 * k], s2[2 * k + 1]), hi64(s2[2 * k], s2[2 * k + 1]));
    const __m512 u0 = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, s4[0], s4[1], 0x88), _mm512_maskz_shuffle_f32x4(all, s4[0], s4[1], 0xDD));
    const __m512 u1 = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, s4[2], s4[3], 0x88), _mm512_maskz_shuffle_f32x4(all, s4[2], s4[3], 0xDD));
    return _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, u0, u1, 0x88), _mm512_maskz_shuffle_f32x4(all, u0, u1, 0xDD));
}

// Scores of NQ query rows (in registers, r) over the keys [0, n − n mod G) in groups of G = 16/P
// keys (P: NQ rounded up to a power of two): the G·NQ dot products of a group accumulate in
// sixteen vectors, one per (query, key), and one transposing tree reduces them all, so a score
// costs ~3 reduction instructions instead of a horizontal sum of its own (at 4 queries, beam 4,
// those sums were half of the scores' instructions). Returns the keys done; the caller finishes
// the rest one by one.
template <class Stored, int NQ, int D>
index_t grouped_scores(const ops::kv_matrix& m, index_t nk, const fvec (&r)[NQ][D], float* y, index_t ldy) {
    constexpr int P = NQ == 1 ? 1 : NQ == 2 ? 2 : 4, G = 16 / P;
    const auto* K = static_cast<const Stored*>(m.data);
    constexpr index_t row_bytes = static_cast<index_t>(D * flanes * sizeof(Stored)), ahead = 16;
    const index_t ng = nk / G * G;
    for (index_t j0 = 0; j0 < ng; j0 += G) {
        __m512 acc[16];
        #pragma GCC unroll 16
        for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
        #pragma GCC unroll 16
        for (int g = 0; g < G; ++g) {
            const Stored* row = K + (j0 + g) * m.ld;
            for (index_t b = 0; b < row_bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(row + ahead * m.ld) + b, _MM_HINT_T0);
            #pragma GCC unroll 8
            for (int c = 0; c < D; ++c) {
                const __m512 k = static_cast<__m512>(widen(row + c * flanes));
                #pragma GCC unroll 4
                for (int i = 0; i < NQ; ++i) acc[i * G + g] = _mm512_fmadd_ps(static_cast<__m512>(r[i][c]), k, acc[i * G + g]);
            }
        }
        __m512 s = sum_lanes16(acc);  // lane i·G + g: query i, key j0 + g
        if (m.scale) {
            const float* sc = m.scale + j0;
            if constexpr (G == 16) s = _mm512_mul_ps(s, _mm512_loadu_ps(sc));
            else if constexpr (G == 8) s = _mm512_mul_ps(s, _mm512_broadcast_f32x8(_mm256_loadu_ps(sc)));
            else s = _mm512_mul_ps(s, _mm512_broadcast_f32x4(_mm_loadu_ps(sc)));
        }
        if constexpr (G == 16) _mm512_storeu_ps(y + j0, s);
        else if constexpr (G == 8) {
            _mm256_storeu_ps(y + j0, _mm512_castps512_ps256(s));
            _mm256_storeu_ps(y + ldy + j0, _mm512_extractf32x8_ps(s, 1));
        } else {
            _mm_storeu_ps(y + j0, _mm512_castps512_ps128(s));
            _mm_storeu_ps(y + ldy + j0, _mm512_extractf32x4_ps(s, 1));
            if constexpr (NQ > 2) _mm_storeu_ps(y + 2 * ldy + j0, _mm512_extractf32x4_ps(s, 2));
            if constexpr (NQ > 3) _mm_storeu_ps(y + 3 * ldy + j0, _mm512_extractf32x4_ps(s, 3));
        }
    }
    return ng;
}
#endif

template <bool Scores, class Stored, int NQ, int D>
void fused_products(const ops::kv_matrix& m, index_t nk, const float* x, index_t ldx, float* y, index_t ldy) {
    const auto* K = static_cast<const Stored*>(m.data);
    const float* held = Scores ? x : y;
    const index_t ldh = Scores ? ldx : ldy;
    fvec r[NQ][D];
    for (int i = 0; i < NQ; ++i)
        for (int c = 0; c < D; ++c) r[i][c] = fvec::load_unaligned(held + i * ldh + c * flanes);
    constexpr index_t row_bytes = static_cast<index_t>(D * flanes * sizeof(Stored)), ahead = 16;  // rows prefetched ahead
    index_t first = 0;
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    if constexpr (Scores && flanes == 16) first = grouped_scores<Stored, NQ, D>(m, nk, r, y, ldy);
#endif
    for (index_t j = first; j < nk; ++j) {
        const Stored* row = K + j * m.ld;
        for (index_t b = 0; b < row_bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(row + ahead * m.ld) + b, _MM_HINT_T0);
        if constexpr (Scores) {
            fvec acc[NQ];
            for (int i = 0; i < NQ; ++i) acc[i] = fvec(0.0f);
            for (int c = 0; c < D; ++c) {
                const fvec k = widen(row + c * flanes);
                for (int i = 0; i < NQ; ++i) acc[i] = xsimd::fma(r[i][c], k, acc[i]);
            }
            // (The scale read after the products: read before them, GCC 12's code for 4 rows over
            // bfloat16 took 7 % longer.)
            const float sc = m.scale ? m.scale[j] : 1.0f;
            for (int i = 0; i < NQ; ++i) y[i * ldy + j] = xsimd::hadd(acc[i]) * sc;
        } else {
            const float sc = m.scale ? m.scale[j] : 1.0f;
            fvec p[NQ];
            for (int i = 0; i < NQ; ++i) p[i] = fvec(x[i * ldx + j] * sc);
            for (int c = 0; c < D; ++c) {
                const fvec v = widen(row + c * flanes);
                for (int i = 0; i < NQ; ++i) r[i][c] = xsimd::fma(p[i], v, r[i][c]);
            }
        }
    }
    if constexpr (!Scores)
        for (int i = 0; i < NQ; ++i)
            for (int c = 0; c < D; ++c) r[i][c].store_unaligned(y + i * ldy + c * flanes);
}

// Whether the fused kernels take this matrix for nq rows of width d (a float computation), and
// they then run. A float32 cache goes through them too: their prefetching reads it at the
// bandwidth, where the general products' two passes over a head's 64 columns did not (a batch of
// 18 short documents decoding together: 22 ms of a 51 ms step in cross-attention).
inline bool fusable(const ops::kv_matrix& /*any precision*/, index_t nq, index_t d) {
    return nq >= 1 && nq <= 4 && (d == 4 * flanes || d == 2 * flanes || d == 8 * flanes) && (d / flanes) * nq <= 16;
}

template <bool Scores, int NQ = 1, class... A>
void fused_dispatch(const ops::kv_matrix& m, index_t nq, index_t d, A... a) {
    if constexpr (NQ < 4) {
        if (nq != NQ) return fused_dispatch<Scores, NQ + 1>(m, nq, d, a...);
    }
    auto go = [&]<int D>() {
        if constexpr (NQ * D <= 16) {
            if (m.precision == ops::kv_precision::i8) fused_products<Scores, std::int8_t, NQ, D>(m, a...);
            else if (m.precision == ops::kv_precision::bf16) fused_products<Scores, std::uint16_t, NQ, D>(m, a...);
            else fused_products<Scores, float, NQ, D>(m, a...);  // f32, or native in a float computation
        }
    };
    const index_t D = d / flanes;
    if (D == 2) go.template operator()<2>();
    else if (D == 4) go.template operator()<4>();
    else go.template operator()<8>();
}

// row = softmax(row + bias) over n entries, vectorised: over a long document's keys the
// exponentials are most of a decoding step's arithmetic (base model, 16K tokens: 2.4 M per
// hypothesis and step). A row whose entries are all −inf becomes zeros.
template <class Scalar>
void softmax_row(Scalar* row, const Scalar* bias, index_t n) {
    using V = xsimd::batch<Scalar>;
    constexpr index_t w = static_cast<index_t>(V::size);
    const index_t nv = n / w * w;
    constexpr Scalar neg_inf = -std::numeric_limits<Scalar>::infinity();
    V vm(neg_inf);
    Scalar m = neg_inf;
    for (index_t j = 0; j < nv; j += w) {
        V x = V::load_unaligned(row + j);
        if (bias) {
            x += V::load_unaligned(bias + j);
            x.store_unaligned(row + j);
        }
        vm = xsimd::max(vm, x);
    }
    for (index_t j = nv; j < n; ++j) {
        if (bias) row[j] += bias[j];
        m = std::max(m, row[j]);
    }
    alignas(64) Scalar lanes[w];
    vm.store_aligned(lanes);
    for (index_t l = 0; l < w; ++l) m = std::max(m, lanes[l]);
    if (m == neg_inf) {
        std::fill_n(row, n, Scalar(0));
        return;
    }
    const Scalar sum = exp_row(row, m, n);
    const V inv(Scalar(1) / sum);
    for (index_t j = 0; j < nv; j += w) (V::load_unaligned(row + j) * inv).store_unaligned(row + j);
    for (index_t j = nv; j < n; ++j) row[j] *= Scalar(1) / sum;
}

// row[0, n) += b[0, n), vectorised.
template <class Scalar>
void add_row(Scalar* row, const Scalar* b, index_t n) {
    using V = xsimd::batch<Scalar>;
    constexpr index_t w = static_cast<index_t>(V::size);
    const index_t nv = n / w * w;
    for (index_t j = 0; j < nv; j += w) (V::load_unaligned(row + j) + V::load_unaligned(b + j)).store_unaligned(row + j);
    for (index_t j = nv; j < n; ++j) row[j] += b[j];
}

// Bias row i of a term stored with row stride ld (ops::dense_bias: n per row).
template <class Scalar>
const Scalar* bias_row(const Scalar* b, index_t ld, index_t n, index_t i) {
    return b + i * (ld == ops::dense_bias ? n : ld);
}

// Whether kv_rows hands out m's rows where they lie (no widening into the buffer): then all keys
// go into one product: fewer calls, and the values' product runs over the whole key range at
// once instead of re-reading and re-writing its output per block of keys.
template <class Scalar>
bool read_in_place(const ops::kv_matrix& m) {
    return m.precision == ops::kv_precision::native || (std::is_same_v<Scalar, float> && m.precision == ops::kv_precision::f32);
}

// Rows [j0, …) of m: the same matrix, starting j0 rows down.
inline ops::kv_matrix rows_from(const ops::kv_matrix& m, index_t j0) {
    const std::size_t width = m.precision == ops::kv_precision::i8 ? 1 : m.precision == ops::kv_precision::bf16 ? 2 : sizeof(float);
    ops::kv_matrix r = m;
    r.data = static_cast<const char*>(m.data) + static_cast<std::size_t>(j0 * m.ld) * width;
    if (m.scale) r.scale = m.scale + j0;
    return r;
}

// Keys per block of the online softmax below: four queries' scores of a block are 16 KB, so they
// stay in the first-level cache between the products that write and read them.
inline constexpr index_t online_block = 1024;

// A few query rows (a decoding step's hypotheses, at most 4: fusable() or cache_i8::accepts())
// over a long cache, or over an int8 cache with int8 products (cache_i8), by blocks of keys with
// an online softmax (running max m, sum l, unnormalised output o per query row), as
// shared_kv_attention does:
//
//     s = q·K_bᵀ + bias_b;  m' = max(m, max s);  o = o·e^(m − m') + e^(s − m')·V_b;  l = l·e^(m − m') + Σ e^(s − m');  out = o / l
//
// Keeping all scores instead (nq × nk floats) writes and re-reads them in four passes (scores,
// maximum, exponentials, normalisation, values): for beam 4 at 697K tokens 11 MB a head, out of
// every cache level, 80 % of the bytes the keys and values themselves are. Here a block's scores
// are written and read where they lie, and the keys and values are each read once. The products
// are the fused float kernels' (exact) or cache_i8's (int8).
inline void online_fused(const ops::attention_problem<float>& p, index_t d, std::vector<float>& scores) {
    constexpr float neg_inf = -std::numeric_limits<float>::infinity();
    const index_t B = online_block, nq = p.nq;
    scores.resize(static_cast<std::size_t>(nq * B));
    float m[4], l[4], rescale[4];
    for (index_t i = 0; i < nq; ++i) {
        m[i] = neg_inf;
        l[i] = 0.0f;
        std::fill_n(p.out + i * p.ldo, d, 0.0f);
    }
    cache_i8 i8(p, d);
    std::vector<float> acc;  // int8 products: o, columns permuted (cache_i8::values)
    if (i8.takes()) acc.assign(static_cast<std::size_t>(nq * d), 0.0f);
    for (index_t j0 = 0; j0 < p.nk; j0 += B) {
        const index_t n = std::min(B, p.nk - j0);
        float* S = scores.data();
        if (i8.takes()) i8.scores(j0, n, S);
        else fused_dispatch<true>(rows_from(p.k, j0), nq, d, n, p.q, p.ldq, S, n);
        for (index_t i = 0; i < nq; ++i) {
            float* s = S + i * n;
            rescale[i] = 1.0f;
            if (p.bias) add_row(s, bias_row(p.bias, p.ldb, p.nk, i) + j0, n);
            if (p.key_bias) add_row(s, p.key_bias + j0, n);
            const float m_new = std::max(m[i], max_row(s, n));
            if (m_new == neg_inf) {  // every key so far masked: the block adds nothing
                std::fill_n(s, n, 0.0f);
                continue;
            }
            if (m_new != m[i]) {
                rescale[i] = m[i] == neg_inf ? 0.0f : std::exp(m[i] - m_new);
                l[i] *= rescale[i];
                m[i] = m_new;
            }
            l[i] += exp_row(s, m_new, n);
        }
        if (i8.takes()) {
            i8.values(j0, n, S, rescale, acc.data());
            continue;
        }
        for (index_t i = 0; i < nq; ++i)
            if (rescale[i] != 1.0f)
                for (index_t c = 0; c < d; ++c) p.out[i * p.ldo + c] *= rescale[i];
        fused_dispatch<false>(rows_from(p.v, j0), nq, d, n, S, n, p.out, p.ldo);
    }
    if (i8.takes()) i8.finish(acc.data(), p.out, p.ldo);
    for (index_t i = 0; i < nq; ++i) {
        if (l[i] == 0.0f) continue;  // every key masked: zeros, as the full softmax gives
        const float inv = 1.0f / l[i];
        for (index_t c = 0; c < d; ++c) p.out[i * p.ldo + c] *= inv;
    }
}

// Many queries over float32 keys and values in bfloat16 products (the dense encoders'
// self-attention under compute = bf16 or int8, ops/attention.hpp):
//
//     S = bf16(Q)·bf16(K)ᵀ + biases,  E = e^(S − max per row),  O = (bf16(E)·bf16(V)) / Σ E
//                                                                        (float32 sums)
//
// through oneDNN's bfloat16 matmul, which runs on AMX tiles where the CPU has them (an AMX Xeon:
// several times its float32 rate at these shapes). Queries and keys are padded with zero rows to
// multiples of onednn_row_multiple (the shapes oneDNN runs at speed, bf16_products.hpp); the
// padded keys are left out of the softmax and multiply zero probabilities. One task (the
// operator's run) solves a head's query blocks one after another, rounding its keys and values
// once for them all. False where oneDNN
// has no bfloat16 matmul: the caller then computes exactly. (Splitting q and k into a bfloat16
// head and remainder, three products instead of one, left the reference models' logit error
// where it is: 2.1e-2 under bf16, 5.3e-2 against 4.8e-2 under int8.)
inline constexpr index_t bf16_attention_min_rows = 16;
// Query rows at a time: their scores (rows × keys floats: 590 KB at 1,100 keys) stay in L2
// between the product that writes them and the passes that read them (a T5 query block of 512
// rows did not: the softmax's passes then read L3).
inline constexpr index_t bf16_attention_rows = 128;

inline bool bf16_attention_accepts(const ops::attention_problem<float>& p) {
#ifdef LOCOST_USE_ONEDNN
    return p.products != ops::attention_products::exact && p.nq >= bf16_attention_min_rows && p.nk > 0 && p.nk2 == 0 &&
           read_in_place<float>(p.k) && read_in_place<float>(p.v);
#else
    (void)p;
    return false;
#endif
}

#if defined(__AVX512F__)
// e^x for x ≤ 0 (the softmax's x − max; −∞ gives 0, NaN stays NaN), within ~2 ulp: x = n·ln 2 + r
// with |r| ≤ ln 2 / 2 (ln 2 in two parts, so r is exact), e^r by its Taylor polynomial to r^6
// (truncation < 1.3e-7 relative), and 2^n applied by scalef, which underflows to 0 without a
// separate test. Half the instructions of xsimd's exp, whose range checks a softmax never needs.
inline __m512 exp_nonpositive(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // e^-104 is below float's least subnormal
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.4286068202862268e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}
#endif

#ifdef LOCOST_USE_ONEDNN
struct bf16_attention_scratch {
    growing_buffer<std::uint16_t> q, k, p, v;  // bf16(Q), bf16(K), bf16(P), bf16(V)
    growing_buffer<float> s, o;                // S, O
    growing_buffer<float> inv;                 // 1 / (each row's sum of exponentials)
};

// One row of the bfloat16 attention's probabilities, left unnormalized: with x = s + bias +
// key_bias (either may be absent) and m = max x, e[j] = bf16(e^(x[j] − m)) for j < n and 0 up
// to `padded`; returns 1 / Σ e^(x[j] − m) (float sums), by which the row's output is scaled
// (0 for a row whose keys are all masked: its output is zeros). One pass adds the biases and
// finds the maximum, one takes the exponentials, sums and rounds them: the rounding of P·V is
// then bf16(e)·bf16(v) scaled once, as good as rounding e/Σ.
inline float bf16_exponentials(float* s, const float* bias, const float* key_bias, index_t n, index_t padded, std::uint16_t* e) {
    using V = xsimd::batch<float>;
    constexpr index_t w = static_cast<index_t>(V::size);
    const index_t nv = n / w * w;
    constexpr float neg_inf = -std::numeric_limits<float>::infinity();
    V vm(neg_inf);
    for (index_t j = 0; j < nv; j += w) {
        V x = V::load_unaligned(s + j);
        if (bias) x += V::load_unaligned(bias + j);
        if (key_bias) x += V::load_unaligned(key_bias + j);
        if (bias || key_bias) x.store_unaligned(s + j);
        vm = xsimd::max(vm, x);
    }
    alignas(64) float lanes[w];
    vm.store_aligned(lanes);
    float m = neg_inf;
    for (index_t l = 0; l < w; ++l) m = std::max(m, lanes[l]);
    for (index_t j = nv; j < n; ++j) {
        if (bias) s[j] += bias[j];
        if (key_bias) s[j] += key_bias[j];
        m = std::max(m, s[j]);
    }
    if (m == neg_inf) {
        std::fill(e, e + padded, std::uint16_t{0});
        return 0.0f;
    }
    index_t j = 0;
    float sum = 0.0f;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    if constexpr (w == 16) {
        V vs(0.0f);
        for (; j < nv; j += w) {
            const V x(exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(s + j), _mm512_set1_ps(m))));
            vs += x;
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(e + j), bf16_bits(x));
        }
        sum = xsimd::hadd(vs);
    }
#endif
    for (; j < n; ++j) {
        const float x = std::exp(s[j] - m);
        sum += x;
        e[j] = float_to_bf16(x);
    }
    std::fill(e + n, e + padded, std::uint16_t{0});
    return 1.0f / sum;
}

// kv_rounded: the thread's previous call had the same keys and values, still rounded in its
// scratch (a task of one head's query blocks).
inline bool bf16_attention(const ops::attention_problem<float>& p, index_t d, bool kv_rounded) {
    thread_local bf16_attention_scratch b;
    const index_t mk = onednn_rows(p.nk), rows = std::min(onednn_rows(p.nq), bf16_attention_rows);
    std::uint16_t* const qb = b.q.at_least(static_cast<std::size_t>(rows * d));
    std::uint16_t* const kb = b.k.at_least(static_cast<std::size_t>(mk * d));
    std::uint16_t* const pb = b.p.at_least(static_cast<std::size_t>(rows * mk));
    std::uint16_t* const vb = b.v.at_least(static_cast<std::size_t>(mk * d));
    float* const S = b.s.at_least(static_cast<std::size_t>(rows * mk));
    float* const O = b.o.at_least(static_cast<std::size_t>(rows * d));
    float* const inv = b.inv.at_least(static_cast<std::size_t>(rows));
    auto round = [d](const float* src, index_t ld, index_t n, index_t padded, std::uint16_t* dst) {
        for (index_t r = 0; r < n; ++r) round_to_bf16(src + r * ld, d, dst + r * d);
        std::fill(dst + n * d, dst + padded * d, std::uint16_t{0});
    };
    if (!kv_rounded) {
        round(static_cast<const float*>(p.k.data), p.k.ld, p.nk, mk, kb);
        round(static_cast<const float*>(p.v.data), p.v.ld, p.nk, mk, vb);
    }
    auto& products = onednn_products::instance();
    using V = xsimd::batch<float>;
    constexpr index_t w = static_cast<index_t>(V::size);
    for (index_t r0 = 0; r0 < p.nq; r0 += rows) {
        const index_t n = std::min(rows, p.nq - r0), mq = onednn_rows(n);
        round(p.q + r0 * p.ldq, p.ldq, n, mq, qb);
        if (!products.run(qb, mq, ops::weight_view{ops::weight_precision::bf16, kb, nullptr, mk, d}, S, mk, 1.0f, false)) return false;
        for (index_t i = 0; i < n; ++i)
            inv[i] = bf16_exponentials(S + i * mk, p.bias ? bias_row(p.bias, p.ldb, p.nk, r0 + i) : nullptr, p.key_bias, p.nk, mk, pb + i * mk);
        std::fill(pb + n * mk, pb + mq * mk, std::uint16_t{0});
        if (!products.run_in_rows(pb, mq, ops::weight_view{ops::weight_precision::bf16, vb, nullptr, d, mk}, O, d)) return false;
        for (index_t i = 0; i < n; ++i) {
            const float* o = O + i * d;
            float* out = p.out + (r0 + i) * p.ldo;
            const V f(inv[i]);
            index_t j = 0;
            for (; j + w <= d; j += w) (V::load_unaligned(o + j) * f).store_unaligned(out + j);
            for (; j < d; ++j) out[j] = o[j] * inv[i];
        }
    }
    return true;
}
#endif

} // namespace cpu_detail

template <class Scalar>
struct kernel<ops::attention_op, cpu, Scalar> {
    static constexpr index_t block = 256;  // rows of reduced-precision keys/values widened at a time
    struct scratch {
        std::vector<Scalar> scores;
        aligned_ptr<Scalar> rows = aligned_alloc_n<Scalar>(static_cast<std::size_t>(block * 512));
        index_t rows_cap = block * 512;
    };

    static void run(const std::vector<ops::attention_problem<Scalar>>& problems, index_t d) {
        std::vector<scratch> per_thread(static_cast<std::size_t>(num_threads()));
        // Tasks: a problem each, except that the bfloat16 path's problems over the same keys and
        // values (one head's query blocks) make one task, which rounds them once.
        std::vector<std::size_t> order(problems.size());
        std::vector<std::size_t> task_begin;
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
        if constexpr (std::is_same_v<Scalar, float>) {
            std::vector<char> shared(problems.size(), 0);
            for (std::size_t i = 0; i < problems.size(); ++i) shared[i] = cpu_detail::bf16_attention_accepts(problems[i]);
            auto key = [&](std::size_t i) {
                const auto& p = problems[i];
                return std::make_tuple(!shared[i], p.k.data, p.v.data, p.k.ld, p.v.ld, p.nk);
            };
            std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return shared[a] && shared[b] ? key(a) < key(b) : shared[a] > shared[b]; });
            for (std::size_t n = 0; n < order.size(); ++n)
                if (n == 0 || !shared[order[n]] || key(order[n]) != key(order[n - 1])) task_begin.push_back(n);
        } else {
            for (std::size_t n = 0; n < order.size(); ++n) task_begin.push_back(n);
        }
        task_begin.push_back(order.size());
        cpu_detail::parallel_for_dynamic(static_cast<index_t>(task_begin.size()) - 1, [&](index_t task, int t) {
            const auto first = task_begin[static_cast<std::size_t>(task)], last = task_begin[static_cast<std::size_t>(task) + 1];
            for (std::size_t n = first; n < last; ++n) solve(problems[order[n]], d, per_thread[static_cast<std::size_t>(t)], n > first);
        });
    }

    // kv_rounded: the previous problem this thread solved had the same keys and values (a task's).
    static void solve(const ops::attention_problem<Scalar>& p, index_t d, scratch& s, [[maybe_unused]] bool kv_rounded) {
        if (block * d > s.rows_cap) {
            s.rows = aligned_alloc_n<Scalar>(static_cast<std::size_t>(block * d));
            s.rows_cap = block * d;
        }
        if constexpr (std::is_same_v<Scalar, float>) {
            const bool long_fused = p.nk2 == 0 && p.nk > cpu_detail::online_block && cpu_detail::fusable(p.k, p.nq, d) && cpu_detail::fusable(p.v, p.nq, d);
            if (long_fused || cpu_detail::cache_i8::accepts(p, d)) {
                cpu_detail::online_fused(p, d, s.scores);
                return;
            }
#ifdef LOCOST_USE_ONEDNN
            if (cpu_detail::bf16_attention_accepts(p) && cpu_detail::bf16_attention(p, d, kv_rounded)) return;
#endif
        }
        const index_t n_all = p.nk + p.nk2;  // scores of both segments side by side
        s.scores.resize(static_cast<std::size_t>(p.nq * n_all));
        Scalar* S = s.scores.data();
        // S = Q·[K | K2]ᵀ
        for (int seg = 0; seg < 2; ++seg) {
            const index_t nk = seg == 0 ? p.nk : p.nk2, off = seg == 0 ? 0 : p.nk;
            const ops::kv_matrix& km = seg == 0 ? p.k : p.k2;
            if constexpr (std::is_same_v<Scalar, float>) {
                if (nk > 0 && cpu_detail::fusable(km, p.nq, d)) {
                    cpu_detail::fused_dispatch<true>(km, p.nq, d, nk, p.q, p.ldq, S + off, n_all);
                    continue;
                }
            }
            const index_t step = cpu_detail::read_in_place<Scalar>(km) ? std::max<index_t>(nk, 1) : block;
            for (index_t j0 = 0; j0 < nk; j0 += step) {
                const index_t n = std::min(step, nk - j0);
                index_t ldk = 0;
                const Scalar* K = cpu_detail::kv_rows(km, j0, n, d, s.rows.get(), ldk);
                ops::gemm<cpu, Scalar>({false, true, p.nq, n, d, p.ldq, ldk, n_all}, Scalar(1), p.q, K, Scalar(0), S + off + j0);
            }
        }
        // + biases, softmax per query row
        const bool single_bias = !p.bias2 && !p.key_bias && p.nk2 == 0;
        for (index_t i = 0; i < p.nq; ++i) {
            Scalar* row = S + i * n_all;
            if (single_bias) {
                cpu_detail::softmax_row(row, p.bias ? cpu_detail::bias_row(p.bias, p.ldb, p.nk, i) : nullptr, p.nk);
                continue;
            }
            if (p.bias) cpu_detail::add_row(row, cpu_detail::bias_row(p.bias, p.ldb, p.nk, i), p.nk);
            if (p.key_bias) cpu_detail::add_row(row, p.key_bias, p.nk);
            if (p.bias2) cpu_detail::add_row(row + p.nk, cpu_detail::bias_row(p.bias2, p.ldb2, p.nk2, i), p.nk2);
            cpu_detail::softmax_row(row, static_cast<const Scalar*>(nullptr), n_all);
        }
        // O = S·[V | V2]
        for (index_t i = 0; i < p.nq; ++i) std::fill_n(p.out + i * p.ldo, d, Scalar(0));
        for (int seg = 0; seg < 2; ++seg) {
            const index_t nk = seg == 0 ? p.nk : p.nk2, off = seg == 0 ? 0 : p.nk;
            const ops::kv_matrix& vm = seg == 0 ? p.v : p.v2;
            if constexpr (std::is_same_v<Scalar, float>) {
                if (nk > 0 && cpu_detail::fusable(vm, p.nq, d)) {
                    cpu_detail::fused_dispatch<false>(vm, p.nq, d, nk, S + off, n_all, p.out, p.ldo);
                    continue;
                }
            }
            const index_t step = cpu_detail::read_in_place<Scalar>(vm) ? std::max<index_t>(nk, 1) : block;
            for (index_t j0 = 0; j0 < nk; j0 += step) {
                const index_t n = std::min(step, nk - j0);
                index_t ldv = 0;
                const Scalar* V = cpu_detail::kv_rows(vm, j0, n, d, s.rows.get(), ldv);
                ops::gemm<cpu, Scalar>({false, false, p.nq, d, n, n_all, ldv, p.ldo}, Scalar(1), S + off + j0, V, Scalar(1), p.out);
            }
        }
    }
};

} // namespace locost
