// The shared-kv attention's register tiles with int8 products (ops::attention_products::i8 over
// int8 states, folded cross-attention under --compute int8), compiled for AVX512-VNNI in any
// build (isa.hpp's target region), and fold_i8: what kernel<shared_kv_attention_op, cpu> calls to
// run them. Below the avx512-vnni level (the CPU's, or LOCOST_ISA's) fold_i8 takes no call (the
// states are then widened and multiplied in float32).
//
// With states stored as k_j = s_j·κ_j (κ_j int8, one scale s_j per row), a query quantized per row,
// q_i ≈ σ_i·θ_i (θ_i int8, σ_i = max|q_i|/127), and a block's probabilities times the row scales
// quantized per query, p_ij·s_j ≈ a_i·u_ij (u_ij in 0..255, a_i = max_j p_ij·s_j / 255):
//
//     score_ij = σ_i·s_j · Σ_c θ_ic κ_jc                  (an int32 sum, exact)
//     acc_i   += a_i · Σ_j u_ij κ_j                       (an int32 sum per column, exact)
//
// VNNI multiplies unsigned by signed bytes, four pairs into each int32 lane (vpdpbusd). Scores use
// κ_j + 128 (a sign-bit flip) as the unsigned side and subtract 128·Σ_c θ_ic, a constant per query;
// values use u (non-negative) as the unsigned side and need four rows' bytes of one column in each
// lane, so a block's rows are interleaved by four once (written by the first scores tile, read from
// L2 by the values tiles of every query). The two
// quantizations are coarser than bfloat16's rounding only in proportion to the largest element of
// their row, the same rule the states themselves are stored by, so they add an error of the size
// the int8 states already carry (tests/backend/cpu/test_attention.cpp bounds both against a double softmax).
// Four times the multiply-adds of a float32 FMA per instruction over a quarter of the bytes; a
// step stays bound by this arithmetic, not by reading the states (at 697K tokens on two Zen 5
// cores: 0.46 s against 0.11 s to read them; bench/RESULTS.md, "Decoding a book at memory speed").
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../../core/aligned.hpp"
#include "../../ops/attention.hpp"
#include "fold_tiles.hpp"
#include "isa.hpp"

namespace locost {

namespace cpu_detail {

#if LOCOST_ISA_REGIONS
LOCOST_BEGIN_ISA_AVX512_VNNI
// (The masked forms of the shuffles: GCC 12's unmasked ones start from an undefined vector and warn.)
inline constexpr __mmask16 all = 0xFFFF;
inline constexpr __mmask8 all8 = 0xFF;

// Lane t of the result is the sum of the 16 lanes of v[t]: a transposing tree of 45 instructions
// instead of 16 horizontal sums of ~8 each.
inline __m512i sum_lanes16(const __m512i v[16]) {
    __m512i s2[8], s4[4];
#pragma GCC unroll 16
    for (int k = 0; k < 8; ++k)  // lanes of 128 bits: [v2k x0+x2, v2k+1 x0+x2, v2k x1+x3, v2k+1 x1+x3]
        s2[k] = _mm512_add_epi32(_mm512_maskz_unpacklo_epi32(all, v[2 * k], v[2 * k + 1]),
                                 _mm512_maskz_unpackhi_epi32(all, v[2 * k], v[2 * k + 1]));
#pragma GCC unroll 16
    for (int k = 0; k < 4; ++k)  // each 128-bit lane L: the sums over lane L of v4k … v4k+3
        s4[k] = _mm512_add_epi32(_mm512_maskz_unpacklo_epi64(all8, s2[2 * k], s2[2 * k + 1]),
                                 _mm512_maskz_unpackhi_epi64(all8, s2[2 * k], s2[2 * k + 1]));
    const __m512i u0 =
        _mm512_add_epi32(_mm512_maskz_shuffle_i32x4(all, s4[0], s4[1], 0x88), _mm512_maskz_shuffle_i32x4(all, s4[0], s4[1], 0xDD));
    const __m512i u1 =
        _mm512_add_epi32(_mm512_maskz_shuffle_i32x4(all, s4[2], s4[3], 0x88), _mm512_maskz_shuffle_i32x4(all, s4[2], s4[3], 0xDD));
    return _mm512_add_epi32(_mm512_maskz_shuffle_i32x4(all, u0, u1, 0x88), _mm512_maskz_shuffle_i32x4(all, u0, u1, 0xDD));
}

// acc + the four-byte dot products of a (unsigned) and b (signed) in each int32 lane. In assembly:
// GCC 12 on a CPU with both AVX-VNNI and AVX512-VNNI allocates the intrinsic's accumulator as if
// only zmm0–15 could hold it, and moves every accumulator in and out of one register around each
// product (measured: a third of the tile's instructions, 100 of a core's ~400 GMAC/s).
inline void dpbusd(__m512i& acc, __m512i a, __m512i b) { asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b)); }

// The sum of v's lanes (GCC 12 warns inside _mm512_reduce_add_epi32).
inline std::int32_t sum_lanes(__m512i v) {
    v = _mm512_add_epi32(v, _mm512_maskz_shuffle_i32x4(all, v, v, 0x4E));
    v = _mm512_add_epi32(v, _mm512_maskz_shuffle_i32x4(all, v, v, 0xB1));
    v = _mm512_add_epi32(v, _mm512_maskz_shuffle_epi32(all, v, _MM_PERM_BADC));
    v = _mm512_add_epi32(v, _mm512_maskz_shuffle_epi32(all, v, _MM_PERM_CDAB));
    return _mm512_cvtsi512_si32(v);
}
// The largest of v's lanes.
inline float max_lanes(__m512 v) {
    v = _mm512_maskz_max_ps(all, v, _mm512_maskz_shuffle_f32x4(all, v, v, 0x4E));
    v = _mm512_maskz_max_ps(all, v, _mm512_maskz_shuffle_f32x4(all, v, v, 0xB1));
    v = _mm512_maskz_max_ps(all, v, _mm512_maskz_permute_ps(all, v, 0x4E));
    v = _mm512_maskz_max_ps(all, v, _mm512_maskz_permute_ps(all, v, 0xB1));
    return _mm512_cvtss_f32(v);
}

// Four rows' 64 bytes x[0..3] interleaved for the values' products: four vectors m = 0..3 whose
// int32 lane 4L + p holds the rows' bytes at column 16L + 4m + p (the unpack instructions' order;
// the accumulators keep it, and fold_i8::finish() puts the columns back in place).
inline void interleave4(const __m512i x[4], std::int8_t* out) {
    const __m512i a = _mm512_unpacklo_epi8(x[0], x[1]), b = _mm512_unpackhi_epi8(x[0], x[1]);
    const __m512i c = _mm512_unpacklo_epi8(x[2], x[3]), e = _mm512_unpackhi_epi8(x[2], x[3]);
    _mm512_storeu_si512(out, _mm512_unpacklo_epi16(a, c));
    _mm512_storeu_si512(out + 64, _mm512_unpackhi_epi16(a, c));
    _mm512_storeu_si512(out + 128, _mm512_unpacklo_epi16(b, e));
    _mm512_storeu_si512(out + 192, _mm512_unpackhi_epi16(b, e));
}

// θ (d bytes) = a query row quantized, q ≈ σ·θ with σ = max|q|/127, and the correction 128·Σ_c θ_c
// that products with the rows' sign bit flipped (κ + 128, vpdpbusd's unsigned side) subtract.
template <class Scalar>
void quantize_query(const Scalar* q, index_t d, std::int8_t* theta, float& sigma, std::int32_t& correction) {
    float mx = 0;
    for (index_t c = 0; c < d; ++c) mx = std::max(mx, std::abs(static_cast<float>(q[c])));
    const float inv = mx > 0 ? 127.0f / mx : 0.0f;
    std::int32_t sum = 0;
    for (index_t c = 0; c < d; ++c) {
        theta[c] = static_cast<std::int8_t>(round_half_even(static_cast<float>(q[c]) * inv));
        sum += theta[c];
    }
    sigma = mx / 127.0f;
    correction = 128 * sum;
}

// u (ldu bytes, zero past n) = round(p_j·s_j / a), a = max_j p_j·s_j / 255 (0 and zeros when all
// are 0): a block's probabilities times its rows' scales, as the unsigned side of the values'
// products.
inline void quantize_probabilities(const float* p, const float* sc, index_t n, index_t ldu, std::uint8_t* u, float& a) {
    __m512 mx = _mm512_setzero_ps();
    index_t j = 0;
    for (; j + 16 <= n; j += 16) mx = _mm512_maskz_max_ps(all, mx, _mm512_mul_ps(_mm512_loadu_ps(p + j), _mm512_loadu_ps(sc + j)));
    float top = max_lanes(mx);
    for (index_t k = j; k < n; ++k) top = std::max(top, p[k] * sc[k]);
    std::memset(u, 0, static_cast<std::size_t>(ldu));
    a = top / 255.0f;
    if (!(top > 0)) return;
    const __m512 inv = _mm512_set1_ps(255.0f / top);
    for (j = 0; j + 16 <= n; j += 16) {
        const __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(p + j), _mm512_loadu_ps(sc + j)), inv));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(u + j), _mm512_cvtusepi32_epi8(v));
    }
    for (; j < n; ++j) u[j] = static_cast<std::uint8_t>(std::min(255.0f, round_half_even(p[j] * sc[j] * (255.0f / top))));
}

// acc[i][j] = Σ_c (κ_jc + 128)·θ_ic, four bytes per lane, for QG quantized queries θ (stride ldq,
// zero past d) and KG int8 rows; `tail`: the byte mask of the last 64-byte step (all ones when
// d % 64 == 0). With KG = 4 and Kt, the rows are also written interleaved by four (Kt + 256 per
// step), as the values' products need them: they are in registers here anyway.
template <int QG, int KG>
[[gnu::always_inline]] inline void accumulate_scores_i8(__m512i (&acc)[QG][KG], const std::int8_t* q, index_t ldq, const std::int8_t* K,
                                                        index_t ldk, index_t d, __mmask64 tail, const std::int8_t* next, std::int8_t* Kt) {
#pragma GCC unroll 16
    for (int i = 0; i < QG; ++i)
#pragma GCC unroll 16
        for (int j = 0; j < KG; ++j) acc[i][j] = _mm512_setzero_si512();
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (index_t c = 0; c < d; c += 64) {  // one cache line of each row
        const __mmask64 m = c + 64 <= d ? ~__mmask64(0) : tail;
        __m512i k[KG];
#pragma GCC unroll 16
        for (int j = 0; j < KG; ++j) {
            if (next) LOCOST_PREFETCH_T0(next + j * ldk + c);
            k[j] = _mm512_maskz_loadu_epi8(m, K + j * ldk + c);
        }
        if constexpr (KG == 4)
            if (Kt) interleave4(k, Kt + c * 4);
#pragma GCC unroll 16
        for (int j = 0; j < KG; ++j) k[j] = _mm512_xor_si512(k[j], flip);
#pragma GCC unroll 16
        for (int i = 0; i < QG; ++i) {
            __m512i qv = _mm512_loadu_si512(q + i * ldq + c);
            asm("" : "+v"(qv));  // in a register, not a memory operand of each product (fold_tiles.hpp)
#pragma GCC unroll 16
            for (int j = 0; j < KG; ++j) dpbusd(acc[i][j], k[j], qv);
        }
    }
}

// The 16 sums of four queries by four rows, lane 4i + j. (The tiles are functions of their own:
// inlined into their caller, GCC keeps the accumulators on the stack.)
[[gnu::noinline]] inline __m512i fold_scores_tile_i8_4x4(const std::int8_t* q, index_t ldq, const std::int8_t* K, index_t ldk, index_t d,
                                                         __mmask64 tail, const std::int8_t* next, std::int8_t* Kt) {
    __m512i acc[4][4];
    accumulate_scores_i8<4, 4>(acc, q, ldq, K, ldk, d, tail, next, Kt);
    __m512i v[16];
#pragma GCC unroll 16
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 16
        for (int j = 0; j < 4; ++j) v[i * 4 + j] = acc[i][j];
    return sum_lanes16(v);
}

// dot[i·KG + j]: the sums of any tile.
template <int QG, int KG>
[[gnu::noinline]] void fold_scores_tile_i8(const std::int8_t* q, index_t ldq, const std::int8_t* K, index_t ldk, index_t d, __mmask64 tail,
                                           std::int32_t* dot, const std::int8_t* next, std::int8_t* Kt) {
    __m512i acc[QG][KG];
    accumulate_scores_i8<QG, KG>(acc, q, ldq, K, ldk, d, tail, next, Kt);
#pragma GCC unroll 16
    for (int i = 0; i < QG; ++i)
#pragma GCC unroll 16
        for (int j = 0; j < KG; ++j) dot[i * KG + j] = sum_lanes(acc[i][j]);
}

// Rows [0, n) of K interleaved by four (interleave4) for the values' products, n rounded up to
// four with zero rows: row group t, 64-column step g at Kt + (t·steps + g)·256.
// Groups before t_begin are left as they are.
inline void interleave_rows4(const std::int8_t* K, index_t ldk, index_t n, index_t d, index_t steps, std::int8_t* Kt, index_t t_begin = 0) {
    const __mmask64 tail = d % 64 ? (__mmask64(1) << (d % 64)) - 1 : ~__mmask64(0);
    for (index_t t = t_begin; t * 4 < n; ++t) {
        const std::int8_t* r[4];
        bool here[4];
#pragma GCC unroll 16
        for (int k = 0; k < 4; ++k) {
            here[k] = 4 * t + k < n;
            r[k] = K + (4 * t + (here[k] ? k : 0)) * ldk;
        }
        for (index_t g = 0; g < steps; ++g) {
            const __mmask64 m = g + 1 < steps ? ~__mmask64(0) : tail;
            __m512i x[4];
#pragma GCC unroll 16
            for (int k = 0; k < 4; ++k) x[k] = _mm512_maskz_loadu_epi8(here[k] ? m : 0, r[k] + g * 64);
            interleave4(x, Kt + (t * steps + g) * 256);
        }
    }
}

// s[i][m] += the four bytes u_i,4t..4t+3 (in every lane) · k[m]: one row group of the values'
// products for QG queries, u each query's bytes (stride ldu), k the group's rows interleaved.
template <int QG>
[[gnu::always_inline]] inline void accumulate_values_i8(__m512i (&s)[QG][4], const std::uint8_t* u, index_t ldu, index_t t,
                                                        const __m512i (&k)[4]) {
#pragma GCC unroll 16
    for (int i = 0; i < QG; ++i) {
        std::int32_t w;
        std::memcpy(&w, u + i * ldu + 4 * t, 4);
        const __m512i p = _mm512_set1_epi32(w);
#pragma GCC unroll 16
        for (int m = 0; m < 4; ++m) dpbusd(s[i][m], p, k[m]);
    }
}

// 64 permuted columns of each query's output (at acc + i·lda) = acc_i·rescale_i + a_i·s[i].
template <int QG>
[[gnu::always_inline]] inline void store_values_i8(const __m512i (&s)[QG][4], const float* a, const float* rescale, float* acc,
                                                   index_t lda) {
#pragma GCC unroll 16
    for (int i = 0; i < QG; ++i) {
        const __m512 r = _mm512_set1_ps(rescale[i]), ai = _mm512_set1_ps(a[i]);
        float* o = acc + i * lda;
#pragma GCC unroll 16
        for (int m = 0; m < 4; ++m)
            _mm512_storeu_ps(o + 16 * m,
                             _mm512_fmadd_ps(ai, _mm512_maskz_cvtepi32_ps(all, s[i][m]), _mm512_mul_ps(_mm512_loadu_ps(o + 16 * m), r)));
    }
}

// acc (QG queries, the 64 permuted columns of step g, row stride lda) = acc_i·rescale_i +
// a_i · Σ_t Σ_k u_i,4t+k · κ_4t+k over the block's `groups` row groups; u: each query's bytes,
// stride ldu (a multiple of four, zero past n).
template <int QG>
void fold_values_tile_i8(const std::uint8_t* u, index_t ldu, const float* a, index_t groups, const std::int8_t* Kt, index_t steps,
                         index_t g, const float* rescale, float* acc, index_t lda) {
    __m512i s[QG][4];
#pragma GCC unroll 16
    for (int i = 0; i < QG; ++i)
#pragma GCC unroll 16
        for (int m = 0; m < 4; ++m) s[i][m] = _mm512_setzero_si512();
    const std::int8_t* col = Kt + g * 256;
    for (index_t t = 0; t < groups; ++t) {
        const std::int8_t* kt = col + t * steps * 256;
        __m512i k[4];
#pragma GCC unroll 16
        for (int m = 0; m < 4; ++m) k[m] = _mm512_loadu_si512(kt + 64 * m);
        accumulate_values_i8<QG>(s, u, ldu, t, k);
    }
    store_values_i8<QG>(s, a, rescale, acc + g * 64, lda);
}

LOCOST_END_ISA
#endif

// The int8-product path of one shared-kv attention call over int8 states S: whether it takes the
// call (float computation asking for int8 products over int8 states, d a multiple of 16), the
// queries quantized once, and the two products of a block of rows.
class fold_i8 {
public:
    // What one thread needs for blocks of up to `block` rows.
    struct scratch {
        std::vector<std::int32_t> dot;  // a tile's 16 sums
        aligned_ptr<std::int8_t> Kt;    // the block interleaved by four rows
        std::vector<std::uint8_t> u;    // the block's probabilities, per query
        std::vector<float> a;           // their scales
    };

    template <class Scalar>
    fold_i8(const Scalar* q, index_t nq, index_t ldq, const ops::kv_matrix& S, index_t d, ops::attention_products products)
        : S_(S), nq_(nq), d_(d), steps_((d + 63) / 64),
          takes_(std::is_same_v<Scalar, float> && products == ops::attention_products::i8 && S.precision == ops::kv_precision::i8 &&
                 S.scale != nullptr && d % 16 == 0 && d > 0 && LOCOST_ISA_REGIONS && isa_at_least(isa_level::avx512_vnni)) {
        if (!takes_) return;
#if LOCOST_ISA_REGIONS
        const index_t w = steps_ * 64;
        q8_.assign(static_cast<std::size_t>(nq * w), 0);
        sigma_.resize(static_cast<std::size_t>(nq));
        correction_.resize(static_cast<std::size_t>(nq));
        for (index_t i = 0; i < nq; ++i)
            quantize_query(q + i * ldq, d, q8_.data() + i * w, sigma_[static_cast<std::size_t>(i)],
                           correction_[static_cast<std::size_t>(i)]);
        // The same, four times each, in the order of a 4 × 4 tile's sums.
        sigma4_.resize(static_cast<std::size_t>(nq * 4));
        correction4_.resize(static_cast<std::size_t>(nq * 4));
        for (index_t i = 0; i < nq * 4; ++i) {
            sigma4_[static_cast<std::size_t>(i)] = sigma_[static_cast<std::size_t>(i / 4)];
            correction4_[static_cast<std::size_t>(i)] = correction_[static_cast<std::size_t>(i / 4)];
        }
#else
        (void)q, (void)ldq;
#endif
    }
    bool takes() const noexcept { return takes_; }
    // The width of the accumulators values() works on: d rounded up to 64, columns permuted.
    index_t width() const noexcept { return steps_ * 64; }
    scratch make_scratch(index_t block) const {
        scratch s;
        s.dot.resize(16);
        s.Kt = aligned_alloc_n<std::int8_t>(static_cast<std::size_t>((block + 3) / 4 * 4 * width()));
        s.u.resize(static_cast<std::size_t>(nq_ * ((block + 3) / 4 * 4)));
        s.a.resize(static_cast<std::size_t>(nq_));
        return s;
    }

    // P (nq × n) = the scores of every query against rows [j0, j0 + n); the rows' full groups of
    // four are also interleaved into the scratch for values().
    void scores(index_t j0, index_t n, float* P, scratch& s) const;
    // accp (nq × width(), permuted columns) = accp_i·rescale_i + P·rows [j0, j0 + n), after
    // scores() of the same rows.
    void values(index_t j0, index_t n, const float* P, const float* rescale, float* accp, scratch& s) const;

    // acc (nq × d) = accp with its columns in place.
    void finish(const float* accp, float* acc) const {
        const index_t w = width();
        for (index_t i = 0; i < nq_; ++i)
            for (index_t g = 0; g < steps_; ++g)
                for (index_t m = 0; m < 4; ++m)
                    for (index_t L = 0; L < 4; ++L) {
                        const index_t c = g * 64 + 16 * L + 4 * m;
                        if (c >= d_) continue;
                        for (index_t p = 0; p < 4; ++p) acc[i * d_ + c + p] = accp[i * w + g * 64 + 16 * m + 4 * L + p];
                    }
    }

private:
    const std::int8_t* rows(index_t j0) const { return static_cast<const std::int8_t*>(S_.data) + j0 * S_.ld; }

    ops::kv_matrix S_;
    index_t nq_, d_, steps_;
    bool takes_;
    std::vector<std::int8_t> q8_;
    std::vector<float> sigma_;
    std::vector<std::int32_t> correction_;
    std::vector<float> sigma4_;
    std::vector<std::int32_t> correction4_;
};
#if LOCOST_ISA_REGIONS
LOCOST_BEGIN_ISA_AVX512_VNNI
inline void fold_i8::scores(index_t j0, index_t n, float* P, scratch& s) const {
    const std::int8_t* K = rows(j0);
    const float* sc = S_.scale + j0;
    const index_t w = width(), full = nq_ / 4 * 4;
    const __mmask64 tail = d_ % 64 ? (__mmask64(1) << (d_ % 64)) - 1 : ~__mmask64(0);
    // Any tile: its sums converted one by one.
    auto tile = [&]<int QG, int KG>(index_t i0, index_t j, const std::int8_t* next, std::int8_t* Kt) {
        fold_scores_tile_i8<QG, KG>(q8_.data() + i0 * w, w, K + j * S_.ld, S_.ld, d_, tail, s.dot.data(), next, Kt);
        for (int i = 0; i < QG; ++i) {
            const auto qi = static_cast<std::size_t>(i0 + i);
            for (int k = 0; k < KG; ++k)
                P[(i0 + i) * n + j + k] =
                    sigma_[qi] * sc[j + k] * static_cast<float>(s.dot[static_cast<std::size_t>(i * KG + k)] - correction_[qi]);
        }
    };
    index_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const std::int8_t* next = j + 8 <= n ? K + (j + 4) * S_.ld : nullptr;
        std::int8_t* Kt = s.Kt.get() + j / 4 * steps_ * 256;  // the first query group writes the rows interleaved
        // Four queries by four rows: the 16 sums in one vector (lane 4i + k), converted at once.
        const __m512 rows_scale = _mm512_broadcast_f32x4(_mm_loadu_ps(sc + j));
        for (index_t i0 = 0; i0 < full; i0 += 4) {
            const __m512i dot = fold_scores_tile_i8_4x4(q8_.data() + i0 * w, w, K + j * S_.ld, S_.ld, d_, tail, i0 == 0 ? next : nullptr,
                                                        i0 == 0 ? Kt : nullptr);
            const __m512i centred = _mm512_sub_epi32(dot, _mm512_loadu_si512(correction4_.data() + i0 * 4));
            const __m512 v =
                _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_cvtepi32_ps(all, centred), _mm512_loadu_ps(sigma4_.data() + i0 * 4)), rows_scale);
            alignas(64) float out[16];
            _mm512_store_ps(out, v);
            for (int i = 0; i < 4; ++i) std::memcpy(P + (i0 + i) * n + j, out + 4 * i, 4 * sizeof(float));
        }
        if (full < nq_)
            with_count(nq_ - full,
                       [&]<int QG>() { tile.template operator()<QG, 4>(full, j, full == 0 ? next : nullptr, full == 0 ? Kt : nullptr); });
    }
    for (; j < n; ++j)
        for (index_t i0 = 0; i0 < nq_; i0 += 4)
            with_count(std::min<index_t>(4, nq_ - i0), [&]<int QG>() { tile.template operator()<QG, 1>(i0, j, nullptr, nullptr); });
}

// accp (nq × width(), permuted columns) = accp_i·rescale_i + P·rows [j0, j0 + n), after
// scores() of the same rows.
inline void fold_i8::values(index_t j0, index_t n, const float* P, const float* rescale, float* accp, scratch& s) const {
    const index_t groups = (n + 3) / 4, ldu = groups * 4, w = width();
    const float* sc = S_.scale + j0;
    for (index_t i = 0; i < nq_; ++i) quantize_probabilities(P + i * n, sc, n, ldu, s.u.data() + i * ldu, s.a[static_cast<std::size_t>(i)]);
    interleave_rows4(rows(j0), S_.ld, n, d_, steps_, s.Kt.get(), n / 4);  // a last group of fewer than four rows
    for (index_t i0 = 0; i0 < nq_; i0 += 4)
        with_count(std::min<index_t>(4, nq_ - i0), [&]<int QG>() {
            for (index_t g = 0; g < steps_; ++g)
                fold_values_tile_i8<QG>(s.u.data() + i0 * ldu, ldu, s.a.data() + i0, groups, s.Kt.get(), steps_, g, rescale + i0,
                                        accp + i0 * w, w);
        });
}

LOCOST_END_ISA
#else
inline void fold_i8::scores(index_t, index_t, float*, scratch&) const {}
inline void fold_i8::values(index_t, index_t, const float*, const float*, float*, scratch&) const {}
#endif

}  // namespace cpu_detail

}  // namespace locost
