// CPU attention for a few query rows: the path few_rows of kernel<attention_op, cpu>'s table
// (attention.hpp), taken for a float computation whose query rows and width fusable() takes
// (1–4 rows: a decoding step's hypotheses) unless the online path takes the problem; that path
// (attention_online.hpp) runs its exact products through these kernels too.
//
// Fused products with a reduced-precision cache for a few query rows (a decoding step's
// hypotheses of one document): each stored key or value row is loaded once in its stored width,
// widened in registers (exact) and used by every query row, and int8's per-row scale is applied
// to the score, resp. to the probability, so the cache is read once and never expanded. Widening
// blocks into a float buffer and multiplying those by GEMM (the general path, attention.hpp)
// writes and reads four times the int8 bytes again; at 697K tokens that made a step 2.9x the
// time to read the cache once.
//
// Scores: y (NQ × nk, stride ldy) = x (the queries, NQ rows, stride ldx) · Kᵀ;
// values: y (NQ rows, stride ldy) += x (the probabilities, NQ × nk, stride ldx) · V.
// A query row's d values are D vectors (d = D·flanes); the NQ·D vectors of the queries (scores),
// resp. of the outputs (values), stay in registers; with AVX-512 the scores go by groups of keys
// (grouped_scores) and only the last few keys one by one. Rows are prefetched 16 ahead: one step
// consumes one or two cache lines, and prefetching keeps enough of them in flight to read the
// cache at the machine's bandwidth.
#pragma once
#include <cstdint>
#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include "../../ops/attention.hpp"
#include "linear.hpp"

namespace locost {

namespace cpu_detail {

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
    const __m512 u0 =
        _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, s4[0], s4[1], 0x88), _mm512_maskz_shuffle_f32x4(all, s4[0], s4[1], 0xDD));
    const __m512 u1 =
        _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, s4[2], s4[3], 0x88), _mm512_maskz_shuffle_f32x4(all, s4[2], s4[3], 0xDD));
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

}  // namespace cpu_detail

}  // namespace locost
