// Attention on the CPU: problems split over OpenMP threads (one head of one sequence each).
// Keys/values are processed in blocks of 256 rows, widened to the scalar type in a per-thread
// buffer (no copy for float32 storage of the same type), so a long int8 or bfloat16 cache is
// read once per query batch and never expanded in memory. For up to 4 query rows (decoding
// steps) over a bfloat16 or int8 cache, fused kernels widen each row in registers instead. Scores for all keys are kept
// (nq × nk per thread) so the softmax is exact, not online.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>
#include <xsimd/xsimd.hpp>

#include "../../core/aligned.hpp"
#include "../../core/dtype.hpp"
#include "../../ops/attention.hpp"
#include "../../ops/gemm.hpp"
#include "linear.hpp"
#include "threads.hpp"

namespace locost {

namespace cpu_detail {

// Rows [j0, j0 + n) of a stored K/V matrix as Scalar, (n, d) dense; returns a pointer to them
// (into buf, or straight into the storage when no conversion is needed) and its row stride.
template <class Scalar>
const Scalar* kv_rows(const ops::kv_matrix& m, index_t j0, index_t n, index_t d, Scalar* buf, index_t& ld) {
    if (m.precision == ops::kv_precision::native) {
        ld = m.ld;
        return static_cast<const Scalar*>(m.data) + j0 * m.ld;
    }
    if (m.precision == ops::kv_precision::f32) {
        const float* src = static_cast<const float*>(m.data) + j0 * m.ld;
        if constexpr (std::is_same_v<Scalar, float>) {
            ld = m.ld;
            return src;
        } else {
            for (index_t r = 0; r < n; ++r)
                for (index_t c = 0; c < d; ++c) buf[r * d + c] = static_cast<Scalar>(src[r * m.ld + c]);
        }
    } else if (m.precision == ops::kv_precision::bf16) {
        const auto* src = static_cast<const std::uint16_t*>(m.data) + j0 * m.ld;
        for (index_t r = 0; r < n; ++r) {
            index_t c = 0;
            if constexpr (std::is_same_v<Scalar, float>)
                for (; c + flanes <= d; c += flanes) widen(src + r * m.ld + c).store_unaligned(buf + r * d + c);
            for (; c < d; ++c) buf[r * d + c] = static_cast<Scalar>(bf16_to_float(src[r * m.ld + c]));
        }
    } else {
        const auto* src = static_cast<const std::int8_t*>(m.data) + j0 * m.ld;
        for (index_t r = 0; r < n; ++r) {
            const Scalar s = static_cast<Scalar>(m.scale[j0 + r]);
            index_t c = 0;
            if constexpr (std::is_same_v<Scalar, float>)
                for (; c + flanes <= d; c += flanes) (widen(src + r * m.ld + c) * fvec(s)).store_unaligned(buf + r * d + c);
            for (; c < d; ++c) buf[r * d + c] = static_cast<Scalar>(src[r * m.ld + c]) * s;
        }
    }
    ld = d;
    return buf;
}

// Fused products with a reduced-precision cache for a few query rows (a decoding step's
// hypotheses of one document): each stored key or value row is loaded once in its stored width,
// widened in registers (exact) and used by every query row, and int8's per-row scale is applied
// to the score, resp. to the probability, so the cache is read once and never expanded. Widening
// blocks into a float buffer and multiplying those by GEMM (the general path above) writes and
// reads four times the int8 bytes again; at 697K tokens that made a step 2.9x the time to read
// the cache once.
//
// A query row's d values are D vectors (d = D·flanes); NQ·D accumulators stay in registers.
// Rows are prefetched 16 ahead: one step consumes one or two cache lines, and prefetching keeps
// enough of them in flight to read the cache at the machine's bandwidth.
template <class Stored, int NQ, int D>
void fused_scores(const ops::kv_matrix& m, index_t nk, const float* q, index_t ldq, float* S, index_t lds) {
    const auto* K = static_cast<const Stored*>(m.data);
    fvec qv[NQ][D];
    for (int i = 0; i < NQ; ++i)
        for (int c = 0; c < D; ++c) qv[i][c] = fvec::load_unaligned(q + i * ldq + c * flanes);
    constexpr index_t row_bytes = static_cast<index_t>(D * flanes * sizeof(Stored)), ahead = 16;  // rows prefetched ahead
    for (index_t j = 0; j < nk; ++j) {
        const Stored* row = K + j * m.ld;
        for (index_t b = 0; b < row_bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(row + ahead * m.ld) + b, _MM_HINT_T0);
        fvec acc[NQ];
        for (int i = 0; i < NQ; ++i) acc[i] = fvec(0.0f);
        for (int c = 0; c < D; ++c) {
            const fvec k = widen(row + c * flanes);
            for (int i = 0; i < NQ; ++i) acc[i] = xsimd::fma(qv[i][c], k, acc[i]);
        }
        const float sc = m.scale ? m.scale[j] : 1.0f;
        for (int i = 0; i < NQ; ++i) S[i * lds + j] = xsimd::hadd(acc[i]) * sc;
    }
}

// out (NQ rows, stride ldo) += P (NQ × nk, stride lds) · V.
template <class Stored, int NQ, int D>
void fused_values(const ops::kv_matrix& m, index_t nk, const float* P, index_t lds, float* out, index_t ldo) {
    const auto* V = static_cast<const Stored*>(m.data);
    fvec acc[NQ][D];
    for (int i = 0; i < NQ; ++i)
        for (int c = 0; c < D; ++c) acc[i][c] = fvec::load_unaligned(out + i * ldo + c * flanes);
    constexpr index_t row_bytes = static_cast<index_t>(D * flanes * sizeof(Stored)), ahead = 16;
    for (index_t j = 0; j < nk; ++j) {
        const Stored* row = V + j * m.ld;
        for (index_t b = 0; b < row_bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(row + ahead * m.ld) + b, _MM_HINT_T0);
        const float sc = m.scale ? m.scale[j] : 1.0f;
        fvec p[NQ];
        for (int i = 0; i < NQ; ++i) p[i] = fvec(P[i * lds + j] * sc);
        for (int c = 0; c < D; ++c) {
            const fvec v = widen(row + c * flanes);
            for (int i = 0; i < NQ; ++i) acc[i][c] = xsimd::fma(p[i], v, acc[i][c]);
        }
    }
    for (int i = 0; i < NQ; ++i)
        for (int c = 0; c < D; ++c) acc[i][c].store_unaligned(out + i * ldo + c * flanes);
}

// Whether the fused kernels take this matrix for nq rows of width d, and they then run.
inline bool fusable(const ops::kv_matrix& m, index_t nq, index_t d) {
    return (m.precision == ops::kv_precision::bf16 || m.precision == ops::kv_precision::i8) && nq >= 1 && nq <= 4 &&
           (d == 4 * flanes || d == 2 * flanes || d == 8 * flanes) && (d / flanes) * nq <= 16;
}

template <bool Scores, int NQ = 1, class... A>
void fused_dispatch(const ops::kv_matrix& m, index_t nq, index_t d, A... a) {
    if constexpr (NQ < 4) {
        if (nq != NQ) return fused_dispatch<Scores, NQ + 1>(m, nq, d, a...);
    }
    const bool i8 = m.precision == ops::kv_precision::i8;
    auto go = [&]<int D>() {
        if constexpr (NQ * D <= 16) {
            if constexpr (Scores) i8 ? fused_scores<std::int8_t, NQ, D>(m, a...) : fused_scores<std::uint16_t, NQ, D>(m, a...);
            else i8 ? fused_values<std::int8_t, NQ, D>(m, a...) : fused_values<std::uint16_t, NQ, D>(m, a...);
        }
    };
    const index_t D = d / flanes;
    if (D == 2) go.template operator()<2>();
    else if (D == 4) go.template operator()<4>();
    else go.template operator()<8>();
}

// Register tiles for one block of a shared key/value matrix (folded cross-attention), float
// computation over rows stored as float, bfloat16 or int8. Each stored row is widened in
// registers, exactly, as it is loaded, so a block is read in its stored width (from L2, where
// it stays for both products) and never written out widened; the GEMM path it replaces widened
// every block into a float buffer that OpenBLAS then packed again for each of the two products.
//
// Scores of QG queries against KG rows: P[i·ldp + j] = (q_i · k_j)·scale_j, the QG·KG dot
// products vectorised along d and summed across lanes at the end (d = D·flanes).
template <class Stored, int QG, int KG>
void fold_scores_tile(const float* q, index_t ldq, const Stored* K, index_t ldk, const float* scale, index_t D, float* P, index_t ldp,
                      const Stored* next) {
    fvec acc[QG][KG];
    for (int i = 0; i < QG; ++i)
        for (int j = 0; j < KG; ++j) acc[i][j] = fvec(0.0f);
    // Prefetch the next rows once per cache line: every U-th step (U vectors of stored values).
    constexpr index_t line = std::max<index_t>(1, 64 / static_cast<index_t>(fvec::size * sizeof(Stored))) * flanes;
    for (index_t c = 0; c < D * flanes; c += flanes) {
        fvec k[KG];
        const bool fetch = next && c % line == 0;
        for (int j = 0; j < KG; ++j) {
            if (fetch) _mm_prefetch(reinterpret_cast<const char*>(next + j * ldk + c), _MM_HINT_T0);
            k[j] = widen(K + j * ldk + c);
            asm("" : "+v"(k[j].data));
        }
        for (int i = 0; i < QG; ++i) {
            fvec qi = fvec::load_unaligned(q + i * ldq + c);
            // Keep q_i and k_j in registers: folded into each FMA as memory operands (GCC's choice)
            // they are loaded again for every product, and 512-bit loads, not FMAs, then bound the
            // loop on Zen 4 (measured: 55 GFLOP/s of a core's 117 with, 100 without).
            asm("" : "+v"(qi.data));
            for (int j = 0; j < KG; ++j) acc[i][j] = xsimd::fma(qi, k[j], acc[i][j]);
        }
    }
    // (xsimd 8.1's haddp, all sums in one vector, returns the AVX-512 lanes out of order.)
    for (int i = 0; i < QG; ++i)
        for (int j = 0; j < KG; ++j) P[i * ldp + j] = xsimd::hadd(acc[i][j]) * (scale ? scale[j] : 1.0f);
}

// acc (QG rows from column 0, CG vectors wide) = acc_i·rescale_i + Σ_j P[i·ldp + j]·k_j over n
// rows: the online softmax's correction of the running sums is applied as they are loaded.
template <class Stored, int QG, int CG>
void fold_values_tile(const float* P, index_t ldp, index_t n, const Stored* K, index_t ldk, const float* rescale, float* acc, index_t lda) {
    fvec a[QG][CG];
    for (int i = 0; i < QG; ++i) {
        const fvec r(rescale[i]);
        for (int c = 0; c < CG; ++c) a[i][c] = fvec::load_unaligned(acc + i * lda + c * flanes) * r;
    }
    for (index_t j = 0; j < n; ++j) {
        fvec k[CG];
        for (int c = 0; c < CG; ++c) k[c] = widen(K + j * ldk + c * flanes);
        for (int i = 0; i < QG; ++i) {
            const fvec p(P[i * ldp + j]);
            for (int c = 0; c < CG; ++c) a[i][c] = xsimd::fma(p, k[c], a[i][c]);
        }
    }
    for (int i = 0; i < QG; ++i)
        for (int c = 0; c < CG; ++c) a[i][c].store_unaligned(acc + i * lda + c * flanes);
}

#if defined(__AVX512BF16__)
// The same products with bfloat16 inputs and float32 sums (AVX512-BF16's dot product of pairs,
// twice the multiply-adds of a float32 FMA per instruction), for bfloat16 states under
// --compute bf16: the queries and the block's probabilities are rounded to bfloat16, the states
// are used as stored. Scores pair neighbouring d; values pair neighbouring keys, so two rows are
// interleaved in registers (one permute per 16 outputs, shared by every query of the tile).
template <int QG, int KG>
void fold_scores_tile_bf16(const std::uint16_t* q, index_t ldq, const std::uint16_t* K, index_t ldk, index_t d, float* P, index_t ldp,
                           const std::uint16_t* next) {
    __m512 acc[QG][KG];
    for (int i = 0; i < QG; ++i)
        for (int j = 0; j < KG; ++j) acc[i][j] = _mm512_setzero_ps();
    for (index_t c = 0; c < d; c += 32) {  // 32 values: one cache line of each row
        __m512bh k[KG];
        for (int j = 0; j < KG; ++j) {
            if (next) _mm_prefetch(reinterpret_cast<const char*>(next + j * ldk + c), _MM_HINT_T0);
            k[j] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(K + j * ldk + c));
        }
        for (int i = 0; i < QG; ++i) {
            __m512i qv = _mm512_loadu_si512(q + i * ldq + c);
            asm("" : "+v"(qv));
            for (int j = 0; j < KG; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], reinterpret_cast<__m512bh>(qv), k[j]);
        }
    }
    for (int i = 0; i < QG; ++i)
        for (int j = 0; j < KG; ++j) P[i * ldp + j] = xsimd::hadd(fvec(acc[i][j]));  // (GCC 12 warns inside _mm512_reduce_add_ps)
}

// acc (QG rows, CG·16 columns) = acc_i·rescale_i + Σ_pairs (p_i,2t k_2t + p_i,2t+1 k_2t+1): Pp holds
// each query's probabilities as bfloat16 pairs (npairs per row); row 2t+1 of the last pair is
// `odd_row` when the block has an odd count (zeros, with probability 0).
template <int QG, int CG>
void fold_values_tile_bf16(const std::uint32_t* Pp, index_t ldpp, index_t npairs, const std::uint16_t* K, index_t ldk,
                           const std::uint16_t* odd_row, const float* rescale, float* acc, index_t lda) {
    static_assert(CG % 2 == 0, "fold_values_tile_bf16: columns come 32 at a time");
    // word 2t of a pair vector is word t of the first row, word 2t + 1 word t of the second
    alignas(64) static constexpr std::uint16_t interleave[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                                 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    const __m512i lo = _mm512_load_si512(interleave);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    __m512 a[QG][CG];
    for (int i = 0; i < QG; ++i) {
        const __m512 r = _mm512_set1_ps(rescale[i]);
        for (int c = 0; c < CG; ++c) a[i][c] = _mm512_mul_ps(_mm512_loadu_ps(acc + i * lda + c * 16), r);
    }
    for (index_t t = 0; t < npairs; ++t) {
        const std::uint16_t* r0 = K + 2 * t * ldk;
        const std::uint16_t* r1 = odd_row && t + 1 == npairs ? odd_row : r0 + ldk;
        __m512bh k[CG];
        for (int c = 0; c < CG; c += 2) {
            const __m512i x0 = _mm512_loadu_si512(r0 + c * 16), x1 = _mm512_loadu_si512(r1 + c * 16);
            k[c] = reinterpret_cast<__m512bh>(_mm512_permutex2var_epi16(x0, lo, x1));
            k[c + 1] = reinterpret_cast<__m512bh>(_mm512_permutex2var_epi16(x0, hi, x1));
        }
        for (int i = 0; i < QG; ++i) {
            const __m512bh p = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(Pp[i * ldpp + t])));
            for (int c = 0; c < CG; ++c) a[i][c] = _mm512_dpbf16_ps(a[i][c], p, k[c]);
        }
    }
    for (int i = 0; i < QG; ++i)
        for (int c = 0; c < CG; ++c) _mm512_storeu_ps(acc + i * lda + c * 16, a[i][c]);
}
#endif

// Calls f.template operator()<N>() for n in 1..4 (the tiles' remainders).
template <class F>
void with_count(index_t n, F&& f) {
    switch (n) {
    case 1: f.template operator()<1>(); break;
    case 2: f.template operator()<2>(); break;
    case 3: f.template operator()<3>(); break;
    default: f.template operator()<4>(); break;
    }
}

// Scores for nq queries against rows [0, n) of K into P (nq × n, stride ldp).
template <class Stored>
void fold_scores(const float* q, index_t nq, index_t ldq, const Stored* K, index_t ldk, const float* scale, index_t n, index_t d, float* P,
                 index_t ldp) {
    const index_t D = d / flanes;
    // Keys outer: a group's rows come from memory once and stay in L1 for every query group; the
    // first query group's tile prefetches the next group's rows (the rows are read here first,
    // from memory, and the hardware prefetcher alone left this loop at half its in-cache rate).
    auto tiles_for = [&]<int KG>(index_t j) {
        for (index_t i0 = 0; i0 < nq; i0 += 4)
            with_count(std::min<index_t>(4, nq - i0), [&]<int QG>() {
                const Stored* next = i0 == 0 && j + 2 * KG <= n ? K + (j + KG) * ldk : nullptr;
                fold_scores_tile<Stored, QG, KG>(q + i0 * ldq, ldq, K + j * ldk, ldk, scale ? scale + j : nullptr, D, P + i0 * ldp + j, ldp,
                                                 next);
            });
    };
    index_t j = 0;
    for (; j + 4 <= n; j += 4) tiles_for.template operator()<4>(j);
    for (; j < n; ++j) tiles_for.template operator()<1>(j);
}

// acc (nq × d, stride lda) = acc_i·rescale_i + P·K over rows [0, n).
template <class Stored>
void fold_values(const float* P, index_t nq, index_t ldp, index_t n, const Stored* K, index_t ldk, const float* rescale, index_t d,
                 float* acc, index_t lda) {
    const index_t D = d / flanes;
    for (index_t i0 = 0; i0 < nq; i0 += 4)
        with_count(std::min<index_t>(4, nq - i0), [&]<int QG>() {
            for (index_t c0 = 0; c0 < D; c0 += 4)
                with_count(std::min<index_t>(4, D - c0), [&]<int CG>() {
                    fold_values_tile<Stored, QG, CG>(P + i0 * ldp, ldp, n, K + c0 * flanes, ldk, rescale + i0, acc + i0 * lda + c0 * flanes,
                                                     lda);
                });
        });
}

#if defined(__AVX512BF16__)
// fold_scores with bfloat16 queries qb (nq × d) over bfloat16 rows; d a multiple of 32.
inline void fold_scores_bf16(const std::uint16_t* qb, index_t nq, const std::uint16_t* K, index_t ldk, index_t n, index_t d, float* P,
                             index_t ldp) {
    auto tiles_for = [&]<int KG>(index_t j) {
        for (index_t i0 = 0; i0 < nq; i0 += 4)
            with_count(std::min<index_t>(4, nq - i0), [&]<int QG>() {
                const std::uint16_t* next = i0 == 0 && j + 2 * KG <= n ? K + (j + KG) * ldk : nullptr;
                fold_scores_tile_bf16<QG, KG>(qb + i0 * d, d, K + j * ldk, ldk, d, P + i0 * ldp + j, ldp, next);
            });
    };
    index_t j = 0;
    for (; j + 4 <= n; j += 4) tiles_for.template operator()<4>(j);
    for (; j < n; ++j) tiles_for.template operator()<1>(j);
}

// fold_values with the probabilities P (nq × n, stride n) rounded to bfloat16 pairs in Pp
// (nq × ⌈n/2⌉); zero_row: d zeros, the partner of an odd block's last row.
inline void fold_values_bf16(const float* P, index_t nq, index_t n, std::uint32_t* Pp, const std::uint16_t* K, index_t ldk,
                             const std::uint16_t* zero_row, const float* rescale, index_t d, float* acc, index_t lda) {
    const index_t np = (n + 1) / 2;
    for (index_t i = 0; i < nq; ++i)
        for (index_t t = 0; t < np; ++t) {
            const std::uint32_t a = float_to_bf16(P[i * n + 2 * t]), b = 2 * t + 1 < n ? float_to_bf16(P[i * n + 2 * t + 1]) : 0u;
            Pp[i * np + t] = a | b << 16;
        }
    const std::uint16_t* odd = n % 2 ? zero_row : nullptr;
    const index_t chunks = d / 16;  // even: d is a multiple of 32
    for (index_t i0 = 0; i0 < nq; i0 += 4)
        with_count(std::min<index_t>(4, nq - i0), [&]<int QG>() {
            index_t c0 = 0;
            for (; c0 + 4 <= chunks; c0 += 4)
                fold_values_tile_bf16<QG, 4>(Pp + i0 * np, np, np, K + c0 * 16, ldk, odd, rescale + i0, acc + i0 * lda + c0 * 16, lda);
            if (c0 < chunks)
                fold_values_tile_bf16<QG, 2>(Pp + i0 * np, np, np, K + c0 * 16, ldk, odd, rescale + i0, acc + i0 * lda + c0 * 16, lda);
        });
}
#endif

// row = e^(row − m) over n entries, vectorised; returns their sum.
template <class Scalar>
Scalar exp_row(Scalar* row, Scalar m, index_t n) {
    using V = xsimd::batch<Scalar>;
    constexpr index_t w = static_cast<index_t>(V::size);
    const index_t nv = n / w * w;
    V vs(Scalar(0));
    const V vm(m);
    for (index_t j = 0; j < nv; j += w) {
        const V e = xsimd::exp(V::load_unaligned(row + j) - vm);
        e.store_unaligned(row + j);
        vs += e;
    }
    Scalar sum = xsimd::hadd(vs);
    for (index_t j = nv; j < n; ++j) sum += (row[j] = std::exp(row[j] - m));
    return sum;
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

} // namespace cpu_detail

template <class Scalar>
struct kernel<ops::attention_op, cpu, Scalar> {
    static void run(const std::vector<ops::attention_problem<Scalar>>& problems, index_t d) {
        constexpr index_t block = 256;
        struct scratch {
            std::vector<Scalar> scores;
            aligned_ptr<Scalar> rows = aligned_alloc_n<Scalar>(static_cast<std::size_t>(block * 512));
            index_t rows_cap = block * 512;
        };
        std::vector<scratch> per_thread(static_cast<std::size_t>(num_threads()));
        cpu_detail::parallel_for_dynamic(static_cast<index_t>(problems.size()), [&](index_t pi, int t) {
            const auto& p = problems[static_cast<std::size_t>(pi)];
            scratch& s = per_thread[static_cast<std::size_t>(t)];
            if (block * d > s.rows_cap) {
                s.rows = aligned_alloc_n<Scalar>(static_cast<std::size_t>(block * d));
                s.rows_cap = block * d;
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
                for (index_t j0 = 0; j0 < nk; j0 += block) {
                    const index_t n = std::min(block, nk - j0);
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
                for (index_t j0 = 0; j0 < nk; j0 += block) {
                    const index_t n = std::min(block, nk - j0);
                    index_t ldv = 0;
                    const Scalar* V = cpu_detail::kv_rows(vm, j0, n, d, s.rows.get(), ldv);
                    ops::gemm<cpu, Scalar>({false, false, p.nq, d, n, n_all, ldv, p.ldo}, Scalar(1), S + off + j0, V, Scalar(1), p.out);
                }
            }
        });
    }
};

// Keys split over the threads, each walking its range in blocks of 128 rows with an online
// softmax (running max m, sum l, and the unnormalised output acc per query):
//
//     s = q·Kbᵀ;  m' = max(m, max s);  acc = acc·e^(m − m') + e^(s − m')·Kb;  l = l·e^(m − m') + Σ e^(s − m')
//
// then out = Σ_t e^(m_t − M) acc_t / Σ_t e^(m_t − M) l_t over the threads (M = max_t m_t). A block
// stays in cache for both products, so the matrix is read once per call: for the base model's 12
// heads of one greedy row at 697K tokens, 1.07 GB of bfloat16 states per layer. Float computation
// with d a multiple of the vector width runs the register tiles above on the stored rows (the
// bfloat16-product tiles for products = bf16 over bfloat16 states, where the ISA has them); other
// cases widen each block to the scalar type and multiply by GEMM.
template <class Scalar>
struct kernel<ops::shared_kv_attention_op, cpu, Scalar> {
    static void run(const Scalar* q, index_t nq, index_t ldq, const ops::kv_matrix& S, index_t nk, index_t d, Scalar* out, index_t ldo,
                    ops::attention_products products) {
        constexpr index_t block = 128;
        constexpr Scalar neg_inf = -std::numeric_limits<Scalar>::infinity();
        const index_t parts = std::max<index_t>(1, std::min<index_t>(num_threads(), (nk + block - 1) / block));
        struct partial {
            std::vector<Scalar> m, l, acc;
        };
        std::vector<partial> part(static_cast<std::size_t>(parts));
        bool tiles = false, bf16_tiles = false;
        if constexpr (std::is_same_v<Scalar, float>) tiles = d % cpu_detail::flanes == 0;
#if defined(__AVX512BF16__)
        bf16_tiles = std::is_same_v<Scalar, float> && products == ops::attention_products::bf16 && S.precision == ops::kv_precision::bf16 &&
                     d % 32 == 0;
        std::vector<std::uint16_t> qb(bf16_tiles ? static_cast<std::size_t>(nq * d) : 0), zero_row(bf16_tiles ? static_cast<std::size_t>(d) : 0);
        if (bf16_tiles)
            for (index_t i = 0; i < nq; ++i)
                for (index_t c = 0; c < d; ++c) qb[static_cast<std::size_t>(i * d + c)] = float_to_bf16(static_cast<float>(q[i * ldq + c]));
#else
        (void)products;  // no bfloat16 dot products on this build's ISA: exact
#endif
        cpu_detail::parallel_for_dynamic(parts, [&](index_t t, int) {
            const cpu_detail::flush_denormals ftz;
            partial& pt = part[static_cast<std::size_t>(t)];
            pt.m.assign(static_cast<std::size_t>(nq), neg_inf);
            pt.l.assign(static_cast<std::size_t>(nq), Scalar(0));
            pt.acc.assign(static_cast<std::size_t>(nq * d), Scalar(0));
            const index_t j_begin = nk * t / parts, j_end = nk * (t + 1) / parts;
            std::vector<Scalar> P(static_cast<std::size_t>(nq * block)), rescale(static_cast<std::size_t>(nq));
            // Online softmax over a block's scores P (nq × n): P becomes e^(s − m'), and rescale_i
            // the factor e^(m − m') the running sums still need.
            auto softmax_step = [&](index_t n) {
                for (index_t i = 0; i < nq; ++i) {
                    Scalar* p = P.data() + i * n;
                    Scalar bm = neg_inf;
                    for (index_t j = 0; j < n; ++j) bm = std::max(bm, p[j]);
                    const Scalar m_new = std::max(pt.m[i], bm);
                    rescale[static_cast<std::size_t>(i)] = Scalar(1);
                    if (m_new == neg_inf) {  // nothing finite yet: the block adds nothing
                        std::fill_n(p, n, Scalar(0));
                        continue;
                    }
                    if (m_new != pt.m[i]) {
                        const Scalar scale = pt.m[i] == neg_inf ? Scalar(0) : std::exp(pt.m[i] - m_new);
                        pt.l[i] *= scale;
                        rescale[static_cast<std::size_t>(i)] = scale;
                        pt.m[i] = m_new;
                    }
                    pt.l[i] += cpu_detail::exp_row(p, m_new, n);
                }
            };
            if constexpr (std::is_same_v<Scalar, float>) {
#if defined(__AVX512BF16__)
                if (bf16_tiles) {
                    const auto* base = static_cast<const std::uint16_t*>(S.data);
                    std::vector<std::uint32_t> Pp(static_cast<std::size_t>(nq * (block / 2)));
                    for (index_t j0 = j_begin; j0 < j_end; j0 += block) {
                        const index_t n = std::min(block, j_end - j0);
                        const std::uint16_t* K = base + j0 * S.ld;
                        cpu_detail::fold_scores_bf16(qb.data(), nq, K, S.ld, n, d, P.data(), n);
                        softmax_step(n);
                        cpu_detail::fold_values_bf16(P.data(), nq, n, Pp.data(), K, S.ld, zero_row.data(), rescale.data(), d, pt.acc.data(), d);
                    }
                    return;
                }
#endif
                if (tiles) {
                    auto walk = [&]<class Stored>(const Stored* base) {
                        for (index_t j0 = j_begin; j0 < j_end; j0 += block) {
                            const index_t n = std::min(block, j_end - j0);
                            const Stored* K = base + j0 * S.ld;
                            const float* sc = S.scale ? S.scale + j0 : nullptr;
                            cpu_detail::fold_scores(q, nq, ldq, K, S.ld, sc, n, d, P.data(), n);
                            softmax_step(n);
                            if (sc)  // int8: each row's scale multiplies its probability
                                for (index_t i = 0; i < nq; ++i)
                                    for (index_t j = 0; j < n; ++j) P[static_cast<std::size_t>(i * n + j)] *= sc[j];
                            cpu_detail::fold_values(P.data(), nq, n, n, K, S.ld, rescale.data(), d, pt.acc.data(), d);
                        }
                    };
                    if (S.precision == ops::kv_precision::bf16) walk(static_cast<const std::uint16_t*>(S.data));
                    else if (S.precision == ops::kv_precision::i8) walk(static_cast<const std::int8_t*>(S.data));
                    else walk(static_cast<const float*>(S.data));  // f32, or native float
                    return;
                }
            }
            const aligned_ptr<Scalar> rows = aligned_alloc_n<Scalar>(static_cast<std::size_t>(block * d));
            for (index_t j0 = j_begin; j0 < j_end; j0 += block) {
                const index_t n = std::min(block, j_end - j0);
                index_t ld = 0;
                const Scalar* K = cpu_detail::kv_rows(S, j0, n, d, rows.get(), ld);
                ops::gemm<cpu, Scalar>({false, true, nq, n, d, ldq, ld, n}, Scalar(1), q, K, Scalar(0), P.data());
                softmax_step(n);
                for (index_t i = 0; i < nq; ++i)
                    if (rescale[static_cast<std::size_t>(i)] != Scalar(1))
                        for (index_t c = 0; c < d; ++c) pt.acc[static_cast<std::size_t>(i * d + c)] *= rescale[static_cast<std::size_t>(i)];
                ops::gemm<cpu, Scalar>({false, false, nq, d, n, n, ld, d}, Scalar(1), P.data(), K, Scalar(1), pt.acc.data());
            }
        });
        for (index_t i = 0; i < nq; ++i) {
            Scalar M = neg_inf;
            for (const auto& pt : part) M = std::max(M, pt.m[i]);
            Scalar* o = out + i * ldo;
            std::fill_n(o, d, Scalar(0));
            if (M == neg_inf) continue;  // every key masked: zeros, as attention() gives
            Scalar l = 0;
            for (const auto& pt : part) {
                if (pt.m[i] == neg_inf) continue;
                const Scalar w = std::exp(pt.m[i] - M);
                l += w * pt.l[i];
                for (index_t c = 0; c < d; ++c) o[c] += w * pt.acc[i * d + c];
            }
            for (index_t c = 0; c < d; ++c) o[c] /= l;
        }
    }
};

} // namespace locost
