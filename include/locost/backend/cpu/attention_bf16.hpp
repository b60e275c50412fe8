// CPU attention in bfloat16 products through oneDNN: the path bf16 of kernel<attention_op,
// cpu>'s table (attention.hpp), taken for a float computation whose problem
// bf16_attention_accepts() (products other than exact, bf16_attention_min_rows query rows or
// more, keys and values read where they lie, no second segment) in a build with
// LOCOST_USE_ONEDNN.
//
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
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <xsimd/xsimd.hpp>

#include "../../core/aligned.hpp"
#include "../../ops/attention.hpp"
#include "attention_rows.hpp"
#include "bf16_products.hpp"
#include "isa.hpp"

namespace locost {

namespace cpu_detail {

// Query rows a problem needs at least (bf16_attention_accepts).
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

#if LOCOST_ISA_REGIONS
LOCOST_BEGIN_ISA_AVX512
// e^x for x ≤ 0 (the softmax's x − max; −∞ gives 0, NaN stays NaN), within ~2 ulp: x = n·ln 2 + r
// with |r| ≤ ln 2 / 2 (ln 2 in two parts, so r is exact), e^r by its Taylor polynomial to r^6
// (truncation < 1.3e-7 relative), and 2^n applied by scalef, which underflows to 0 without a
// separate test. Half the instructions of xsimd's exp, whose range checks a softmax never needs.
inline __m512 exp_nonpositive(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // e^-104 is below float's least subnormal
    const __m512 n =
        _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
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

// e[j] = bf16(e^(s[j] − m)) for j < n rounded down to 16, their sum into `sum`; returns the
// count done.
inline index_t bf16_exponentials_avx512(const float* s, index_t n, float m, std::uint16_t* e, float& sum) {
    __m512 vs = _mm512_setzero_ps();
    index_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 x = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(s + j), _mm512_set1_ps(m)));
        vs = _mm512_add_ps(vs, x);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(e + j), bf16_bits(x));
    }
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, vs);
    sum = 0.0f;
    for (float v : lanes) sum += v;
    return j;
}
LOCOST_END_ISA
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
#if LOCOST_ISA_REGIONS
    if (isa_at_least(isa_level::avx512)) j = bf16_exponentials_avx512(s, n, m, e, sum);
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
            inv[i] =
                bf16_exponentials(S + i * mk, p.bias ? bias_row(p.bias, p.ldb, p.nk, r0 + i) : nullptr, p.key_bias, p.nk, mk, pb + i * mk);
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

}  // namespace cpu_detail

}  // namespace locost
