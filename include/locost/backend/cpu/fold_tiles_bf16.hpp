// The shared-kv attention's register tiles with bfloat16 products (ops::attention_products::bf16
// over bfloat16 states), compiled for AVX512-BF16 in any build (isa.hpp's target region), and
// fold_bf16: what kernel<shared_kv_attention_op, cpu> calls to run them, so that its run() holds
// no ISA test. On a CPU without AVX512-BF16 (or LOCOST_ISA below avx512-vnni) fold_bf16 takes no
// call: the products are then exact, as ops/attention.hpp allows.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "../../core/dtype.hpp"
#include "../../ops/attention.hpp"
#include "fold_tiles.hpp"
#include "isa.hpp"

namespace locost {

namespace cpu_detail {

#if LOCOST_ISA_REGIONS
LOCOST_BEGIN_ISA_AVX512_BF16
// The sum of v's lanes (masked shuffles: GCC 12 warns inside _mm512_reduce_add_ps).
inline float sum_lanes_ps(__m512 v) {
    constexpr __mmask16 every = 0xFFFF;
    v = _mm512_add_ps(v, _mm512_maskz_shuffle_f32x4(every, v, v, 0x4E));
    v = _mm512_add_ps(v, _mm512_maskz_shuffle_f32x4(every, v, v, 0xB1));
    v = _mm512_add_ps(v, _mm512_maskz_permute_ps(every, v, 0x4E));
    v = _mm512_add_ps(v, _mm512_maskz_permute_ps(every, v, 0xB1));
    return _mm512_cvtss_f32(v);
}

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
            if (next) LOCOST_PREFETCH_T0(next + j * ldk + c);
            k[j] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(K + j * ldk + c));
        }
        for (int i = 0; i < QG; ++i) {
            __m512i qv = _mm512_loadu_si512(q + i * ldq + c);
            asm("" : "+v"(qv));
            for (int j = 0; j < KG; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], reinterpret_cast<__m512bh>(qv), k[j]);
        }
    }
    for (int i = 0; i < QG; ++i)
        for (int j = 0; j < KG; ++j) P[i * ldp + j] = sum_lanes_ps(acc[i][j]);
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

LOCOST_END_ISA
#endif

// The bfloat16-product path of one shared-kv attention call over states S: whether it takes the
// call (float computation asking for bfloat16 or int8 products over bfloat16 states, d a multiple
// of 32: int8 products over bfloat16 states are bfloat16 ones, the states' own precision),
// the queries rounded to bfloat16 once, and the two products of a block of rows.
class fold_bf16 {
public:
    template <class Scalar>
    fold_bf16(const Scalar* q, index_t nq, index_t ldq, const ops::kv_matrix& S, index_t d, ops::attention_products products)
        : S_(S), nq_(nq), d_(d),
          takes_(std::is_same_v<Scalar, float> && products != ops::attention_products::exact && S.precision == ops::kv_precision::bf16 &&
                 d % 32 == 0 && LOCOST_ISA_REGIONS && bf16_dot_products()) {
        if (!takes_) return;
        qb_.resize(static_cast<std::size_t>(nq * d));
        zero_row_.resize(static_cast<std::size_t>(d));
        for (index_t i = 0; i < nq; ++i)
            for (index_t c = 0; c < d; ++c) qb_[static_cast<std::size_t>(i * d + c)] = float_to_bf16(static_cast<float>(q[i * ldq + c]));
    }
    bool takes() const noexcept { return takes_; }
    // P (nq × n) = the scores of every query against rows [j0, j0 + n).
    void scores(index_t j0, index_t n, float* P) const {
#if LOCOST_ISA_REGIONS
        fold_scores_bf16(qb_.data(), nq_, rows(j0), S_.ld, n, d_, P, n);
#else
        (void)j0, (void)n, (void)P;
#endif
    }
    // acc (nq × d) = acc_i·rescale_i + P·rows [j0, j0 + n); pairs: room for nq·⌈n/2⌉ probability pairs.
    void values(index_t j0, index_t n, const float* P, std::uint32_t* pairs, const float* rescale, float* acc) const {
#if LOCOST_ISA_REGIONS
        fold_values_bf16(P, nq_, n, pairs, rows(j0), S_.ld, zero_row_.data(), rescale, d_, acc, d_);
#else
        (void)j0, (void)n, (void)P, (void)pairs, (void)rescale, (void)acc;
#endif
    }

private:
    const std::uint16_t* rows(index_t j0) const { return static_cast<const std::uint16_t*>(S_.data) + j0 * S_.ld; }
    ops::kv_matrix S_;
    index_t nq_, d_;
    bool takes_;
    std::vector<std::uint16_t> qb_, zero_row_;
};

}  // namespace cpu_detail

}  // namespace locost
