// CPU attention by blocks of keys with an online softmax: the path online of
// kernel<attention_op, cpu>'s table (attention.hpp), taken first, for a float computation over
// more than online_block keys (no second segment) whose query rows and width fusable() takes,
// and for the problems cache_i8::accepts() (int8 products over an int8 cache; builds with
// AVX512-VNNI and -BW).
//
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
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "../../ops/attention.hpp"
#include "attention_few_rows.hpp"
#include "attention_rows.hpp"
#include "cache_tiles_i8.hpp"

namespace locost {

namespace cpu_detail {

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

}  // namespace cpu_detail

}  // namespace locost
