// Attention over an int8 cross-attention cache with int8 products (ops::attention_products::i8,
// --compute int8) for the few query rows of a decoding step (1–4: a document's hypotheses under
// beam search), compiled for AVX512-VNNI in any build (isa.hpp's target region); what
// kernel<attention_op, cpu> calls per block of keys in its online softmax
// (backend/cpu/attention_online.hpp). Below the avx512-vnni level cache_i8 takes no call.
//
// With keys k_j = s_j·κ_j and values v_j = t_j·ν_j (κ, ν int8, one scale per row), each query
// quantized per row, q_i ≈ σ_i·θ_i (θ int8, σ_i = max|q_i|/127), and a block's probabilities times
// the value rows' scales quantized per query, p_ij·t_j ≈ a_i·u_ij (u in 0..255), exactly as the
// folded form's int8 products (fold_tiles_i8.hpp):
//
//     score_ij = σ_i·s_j · Σ_c θ_ic κ_jc          o_i += a_i · Σ_j u_ij ν_j          (int32 sums, exact)
//
// Unlike the folded form, whose dozens of queries share each row, a few queries cannot pay for
// reducing a row's sixteen partial sums across lanes per query. Scores therefore transpose
// sixteen rows at once so that each lane is one key (per 64 columns: two rounds of unpacks, 32
// instructions for sixteen rows), and every query's products then land in the key's own lane;
// values interleave four rows so that each lane is one column (8 unpacks per four rows). For four
// queries a key row costs about 11 instructions for its scores and 8 for its values, where the
// exact float kernels widen it to float32 and spend 37 and 32: the step is bound by reading the
// cache again, not by arithmetic.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "../../core/aligned.hpp"
#include "../../ops/attention.hpp"
#include "fold_tiles_i8.hpp"
#include "isa.hpp"

namespace locost {

namespace cpu_detail {

#if LOCOST_ISA_REGIONS
LOCOST_BEGIN_ISA_AVX512_VNNI
// S (NQ × n, stride lds) = the scores of rows [0, n) of K (int8, stride ld, scales ks) for NQ
// quantized queries: the 64 bytes at qv + ((i·chunks + g)·4 + e)·64 hold query i's chunk g with,
// in each 128-bit lane L, its dword 4L + e in all four slots.
template <int NQ>
void cache_scores_i8(const std::int8_t* K, index_t ld, const float* ks, index_t n, index_t chunks, const std::int8_t* qv,
                     const float* sigma, const std::int32_t* correction, float* S, index_t lds) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (index_t j0 = 0; j0 < n; j0 += 16) {
        const index_t rows = std::min<index_t>(16, n - j0);
        const __mmask16 valid = rows == 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << rows) - 1);
        __m512i total[NQ];
#pragma GCC unroll 4
        for (int i = 0; i < NQ; ++i) total[i] = _mm512_setzero_si512();
        for (index_t g = 0; g < chunks; ++g) {
            // y[Q][e], 128-bit lane L, slot r: dword 4L + e of row 4Q + r (sign bits flipped)
            __m512i x[16], y[4][4];
#pragma GCC unroll 16
            for (int r = 0; r < 16; ++r) {
                const std::int8_t* row = K + (j0 + (r < rows ? r : 0)) * ld + 64 * g;
                LOCOST_PREFETCH_T0(row + 32 * ld);
                x[r] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(r < rows ? ~__mmask64(0) : __mmask64(0), row), flip);
            }
#pragma GCC unroll 4
            for (int Q = 0; Q < 4; ++Q) {
                const __m512i a0 = _mm512_unpacklo_epi32(x[4 * Q], x[4 * Q + 1]), b0 = _mm512_unpackhi_epi32(x[4 * Q], x[4 * Q + 1]);
                const __m512i a1 = _mm512_unpacklo_epi32(x[4 * Q + 2], x[4 * Q + 3]),
                              b1 = _mm512_unpackhi_epi32(x[4 * Q + 2], x[4 * Q + 3]);
                y[Q][0] = _mm512_unpacklo_epi64(a0, a1);
                y[Q][1] = _mm512_unpackhi_epi64(a0, a1);
                y[Q][2] = _mm512_unpacklo_epi64(b0, b1);
                y[Q][3] = _mm512_unpackhi_epi64(b0, b1);
            }
#pragma GCC unroll 4
            for (int i = 0; i < NQ; ++i) {
                const std::int8_t* q = qv + (i * chunks + g) * 256;
                __m512i acc[4];
#pragma GCC unroll 4
                for (int Q = 0; Q < 4; ++Q) {
                    acc[Q] = _mm512_setzero_si512();
#pragma GCC unroll 4
                    for (int e = 0; e < 4; ++e) dpbusd(acc[Q], y[Q][e], _mm512_load_si512(q + 64 * e));
                }
                // lane 4Q + r: the sum over acc[Q]'s four 128-bit lanes, slot r (row 4Q + r)
                const __m512i u0 = _mm512_add_epi32(_mm512_maskz_shuffle_i32x4(all, acc[0], acc[1], 0x88),
                                                    _mm512_maskz_shuffle_i32x4(all, acc[0], acc[1], 0xDD));
                const __m512i u1 = _mm512_add_epi32(_mm512_maskz_shuffle_i32x4(all, acc[2], acc[3], 0x88),
                                                    _mm512_maskz_shuffle_i32x4(all, acc[2], acc[3], 0xDD));
                total[i] = _mm512_add_epi32(
                    total[i],
                    _mm512_add_epi32(_mm512_maskz_shuffle_i32x4(all, u0, u1, 0x88), _mm512_maskz_shuffle_i32x4(all, u0, u1, 0xDD)));
            }
        }
        const __m512 scale = _mm512_maskz_loadu_ps(valid, ks + j0);
#pragma GCC unroll 4
        for (int i = 0; i < NQ; ++i) {
            const __m512 dot = _mm512_maskz_cvtepi32_ps(all, _mm512_sub_epi32(total[i], _mm512_set1_epi32(correction[i])));
            _mm512_mask_storeu_ps(S + i * lds + j0, valid, _mm512_mul_ps(_mm512_mul_ps(dot, _mm512_set1_ps(sigma[i])), scale));
        }
    }
}

// acc (NQ × 64·chunks floats, columns permuted as interleave4 leaves them, stride lda) =
// acc_i·rescale_i + a_i · Σ_j u_ij ν_j over rows [0, n) of V (int8, stride ld); u: each query's
// bytes, stride ldu (zero from n to a multiple of four).
template <int NQ>
void cache_values_i8(const std::int8_t* V, index_t ld, index_t n, index_t chunks, const std::uint8_t* u, index_t ldu, const float* a,
                     const float* rescale, float* acc, index_t lda) {
    const index_t groups = (n + 3) / 4;
    for (index_t g = 0; g < chunks; ++g) {
        __m512i s[NQ][4];
#pragma GCC unroll 4
        for (int i = 0; i < NQ; ++i)
#pragma GCC unroll 4
            for (int m = 0; m < 4; ++m) s[i][m] = _mm512_setzero_si512();
        for (index_t t = 0; t < groups; ++t) {
            __m512i x[4], k[4];
#pragma GCC unroll 4
            for (int r = 0; r < 4; ++r) {
                const bool here = 4 * t + r < n;
                const std::int8_t* row = V + (4 * t + (here ? r : 0)) * ld + 64 * g;
                LOCOST_PREFETCH_T0(row + 32 * ld);
                x[r] = _mm512_maskz_loadu_epi8(here ? ~__mmask64(0) : __mmask64(0), row);
            }
            // k[m], int32 lane 4L + p: the four rows' bytes of column 16L + 4m + p (interleave4)
            const __m512i a0 = _mm512_unpacklo_epi8(x[0], x[1]), b0 = _mm512_unpackhi_epi8(x[0], x[1]);
            const __m512i a1 = _mm512_unpacklo_epi8(x[2], x[3]), b1 = _mm512_unpackhi_epi8(x[2], x[3]);
            k[0] = _mm512_unpacklo_epi16(a0, a1);
            k[1] = _mm512_unpackhi_epi16(a0, a1);
            k[2] = _mm512_unpacklo_epi16(b0, b1);
            k[3] = _mm512_unpackhi_epi16(b0, b1);
            accumulate_values_i8<NQ>(s, u, ldu, t, k);
        }
        store_values_i8<NQ>(s, a, rescale, acc + g * 64, lda);
    }
}

LOCOST_END_ISA
#endif

// One attention problem's int8 products over an int8 cache: whether it takes the problem (int8
// products asked, int8 keys and values with scales, 1–4 queries, d a multiple of 64), the queries
// quantized once, and the two products of a block of rows.
class cache_i8 {
public:
    static bool accepts(const ops::attention_problem<float>& p, index_t d) noexcept {
        return p.products == ops::attention_products::i8 && p.k.precision == ops::kv_precision::i8 &&
            p.v.precision == ops::kv_precision::i8 && p.k.scale && p.v.scale && p.nq >= 1 && p.nq <= 4 && d > 0 && d % 64 == 0 &&
            p.nk2 == 0 && LOCOST_ISA_REGIONS && isa_at_least(isa_level::avx512_vnni);
    }

    cache_i8(const ops::attention_problem<float>& p, index_t d)
        : K_(p.k), V_(p.v), nq_(p.nq), d_(d), chunks_(d / 64), takes_(accepts(p, d)) {
        if (takes_) quantize_queries(p);
    }
    bool takes() const noexcept { return takes_; }

    // S (nq × n, stride n) = the scores of the rows [j0, j0 + n).
    void scores(index_t j0, index_t n, float* S) const;
    // acc (nq × d, permuted columns) = acc_i·rescale_i + P·V over the rows [j0, j0 + n), P the
    // block's unnormalised probabilities (nq × n, stride n).
    void values(index_t j0, index_t n, const float* P, const float* rescale, float* acc);

    // out (nq rows, stride ldo) = acc with its columns in place.
    void finish(const float* acc, float* out, index_t ldo) const {
        for (index_t i = 0; i < nq_; ++i)
            for (index_t g = 0; g < chunks_; ++g)
                for (index_t m = 0; m < 4; ++m)
                    for (index_t L = 0; L < 4; ++L)
                        for (index_t p = 0; p < 4; ++p)
                            out[i * ldo + g * 64 + 16 * L + 4 * m + p] = acc[i * d_ + g * 64 + 16 * m + 4 * L + p];
    }

private:
    void quantize_queries(const ops::attention_problem<float>& p);

    ops::kv_matrix K_, V_;
    index_t nq_, d_, chunks_;
    bool takes_;
    aligned_ptr<std::int8_t> qv_;  // the queries, as cache_scores_i8 reads them
    float sigma_[4] = {};
    std::int32_t correction_[4] = {};
    std::vector<std::uint8_t> u_;
};
#if LOCOST_ISA_REGIONS
LOCOST_BEGIN_ISA_AVX512_VNNI
inline void cache_i8::quantize_queries(const ops::attention_problem<float>& p) {
    const index_t d = d_;
    std::vector<std::int8_t> theta(static_cast<std::size_t>(d));
    qv_ = aligned_alloc_n<std::int8_t>(static_cast<std::size_t>(nq_ * chunks_ * 256));
    for (index_t i = 0; i < nq_; ++i) {
        quantize_query(p.q + i * p.ldq, d, theta.data(), sigma_[i], correction_[i]);
        for (index_t g = 0; g < chunks_; ++g) {
            const __m512i v = _mm512_loadu_si512(theta.data() + 64 * g);
            std::int8_t* q = qv_.get() + (i * chunks_ + g) * 256;
            _mm512_store_si512(q, _mm512_maskz_shuffle_epi32(all, v, _MM_PERM_AAAA));
            _mm512_store_si512(q + 64, _mm512_maskz_shuffle_epi32(all, v, _MM_PERM_BBBB));
            _mm512_store_si512(q + 128, _mm512_maskz_shuffle_epi32(all, v, _MM_PERM_CCCC));
            _mm512_store_si512(q + 192, _mm512_maskz_shuffle_epi32(all, v, _MM_PERM_DDDD));
        }
    }
}

// S (nq × n, stride n) = the scores of the rows [j0, j0 + n).
inline void cache_i8::scores(index_t j0, index_t n, float* S) const {
    with_count(nq_, [&]<int NQ>() {
        cache_scores_i8<NQ>(static_cast<const std::int8_t*>(K_.data) + j0 * K_.ld, K_.ld, K_.scale + j0, n, chunks_, qv_.get(), sigma_,
                            correction_, S, n);
    });
}

// acc (nq × d, permuted columns) = acc_i·rescale_i + P·V over the rows [j0, j0 + n), P the
// block's unnormalised probabilities (nq × n, stride n).
inline void cache_i8::values(index_t j0, index_t n, const float* P, const float* rescale, float* acc) {
    const index_t ldu = (n + 3) / 4 * 4;
    u_.resize(static_cast<std::size_t>(nq_ * ldu));
    float a[4];
    for (index_t i = 0; i < nq_; ++i) quantize_probabilities(P + i * n, V_.scale + j0, n, ldu, u_.data() + i * ldu, a[i]);
    with_count(nq_, [&]<int NQ>() {
        cache_values_i8<NQ>(static_cast<const std::int8_t*>(V_.data) + j0 * V_.ld, V_.ld, n, chunks_, u_.data(), ldu, a, rescale, acc, d_);
    });
}

LOCOST_END_ISA
#else
inline void cache_i8::quantize_queries(const ops::attention_problem<float>&) {}
inline void cache_i8::scores(index_t, index_t, float*) const {}
inline void cache_i8::values(index_t, index_t, const float*, const float*, float*) {}
#endif

}  // namespace cpu_detail

}  // namespace locost
