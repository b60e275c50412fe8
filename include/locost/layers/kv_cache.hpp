// Attention state shared by every encoder-decoder family's decoder, and the attention steps
// over it that do not depend on how q, k, v were projected (T5: pre-RMSNorm, no biases; BART:
// biases, post-LayerNorm):
//
//   self_cache            keys/values of past decoder positions per row, grown by one step
//   cross_kv              one document's cross-attention keys/values for one layer, computed once
//   cached_self_attention append this step's k, v to the cache; ctx = softmax(q·kᵀ + bias)·v, the
//                         position bias and causal mask from a position_band
//   document_attention    rows of each document attend to that document's cross_kv
//   folded_cross_attention    the same over a document's encoder states, with the key and
//                         value projections folded into the query and the output (below)
//
// No 1/√d scaling happens here: T5 has none, BART folds it into its query projection.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "../core/dtype.hpp"
#include "../ops/attention.hpp"
#include "../ops/copy.hpp"
#include "../ops/elementwise.hpp"
#include "../ops/gemm.hpp"
#include "../ops/linear.hpp"
#include "cross_kv.hpp"
#include "parameter.hpp"
#include "position_band.hpp"

namespace locost::layers {

// Keys and values of past positions for R rows: (R, heads, capacity, d_kv) each. Row r's own
// positions start at first[r] (empty: every row at 0): a row that joined a running batch later
// than the others keeps its first token there, and attends from it on, as in its own run.
template <class Scalar, class Backend>
struct self_cache {
    tensor<Scalar, Backend> k, v;
    index_t rows = 0, heads = 0, capacity = 0, d = 0;
    std::vector<index_t> first;

    index_t first_of(index_t r) const { return first.empty() ? 0 : first[static_cast<std::size_t>(r)]; }

    void allocate(index_t R, index_t n_heads, index_t cap, index_t d_kv) {
        rows = R, heads = n_heads, capacity = cap, d = d_kv;
        k = tensor<Scalar, Backend>({R, n_heads, cap, d_kv});
        v = tensor<Scalar, Backend>({R, n_heads, cap, d_kv});
    }
    Scalar* k_at(index_t r, index_t h) { return k.data() + ((r * heads + h) * capacity) * d; }
    Scalar* v_at(index_t r, index_t h) { return v.data() + ((r * heads + h) * capacity) * d; }

    // Row r takes the cache of row src[r] (beam search), for the first `len` positions; with
    // fewer entries than rows, the rows not named are dropped (a batch whose documents finished).
    void reorder(const std::vector<index_t>& src, index_t len) {
        const index_t per_row = heads * capacity * d;
        rows = static_cast<index_t>(src.size());
        tensor<Scalar, Backend> nk({rows, heads, capacity, d}), nv({rows, heads, capacity, d});
        ops::copy_layout l;  // every head's first len·d values of one row
        l.n0 = heads, l.width = len * d, l.dst0 = l.src0 = capacity * d;
        for (index_t r = 0; r < rows; ++r) {
            const index_t from = src[static_cast<std::size_t>(r)] * per_row;
            ops::strided_copy<Backend>(nk.data() + r * per_row, k.data() + from, l);
            ops::strided_copy<Backend>(nv.data() + r * per_row, v.data() + from, l);
        }
        k = std::move(nk);
        v = std::move(nv);
        if (!first.empty()) {
            std::vector<index_t> f;
            for (index_t r : src) f.push_back(first[static_cast<std::size_t>(r)]);
            first = std::move(f);
        }
    }

    // Rows keep positions [drop, len) at [0, len − drop) of a cache of `cap` positions, and
    // `more` empty rows follow, whose first position is len − drop: what a running batch does when
    // documents join it (the positions before every row's first are dropped).
    void regrow(index_t drop, index_t len, index_t cap, index_t more) {
        const index_t kept = len - drop, R = rows + more;
        LOCOST_ASSERT(drop >= 0 && kept >= 0 && kept <= cap);
        tensor<Scalar, Backend> nk({R, heads, cap, d}), nv({R, heads, cap, d});
        ops::copy_layout l;  // every head's positions [drop, len) of one row
        l.n0 = rows * heads, l.width = kept * d, l.dst0 = cap * d, l.src0 = capacity * d;
        if (rows > 0 && kept > 0) {
            ops::strided_copy<Backend>(nk.data(), k.data() + drop * d, l);
            ops::strided_copy<Backend>(nv.data(), v.data() + drop * d, l);
        }
        std::vector<index_t> f;
        for (index_t r = 0; r < rows; ++r) f.push_back(first_of(r) - drop);
        f.resize(static_cast<std::size_t>(R), kept);
        k = std::move(nk);
        v = std::move(nv);
        rows = R, capacity = cap, first = std::move(f);
    }
};

// backend_bytes and cross_kv are declared in layers/cross_kv.hpp; their member templates:

template <class Backend>
backend_bytes backend_bytes::allocate(std::size_t n) {
    using owned = typename memory<Backend>::template pointer<std::byte>;
    auto p = std::make_shared<owned>(memory<Backend>::template allocate<std::byte>(n));
    backend_bytes b;
    b.data_ = p->get();
    b.owner_ = std::move(p);
    return b;
}

template <class Backend>
void cross_kv::allocate(ops::kv_precision p, index_t n_heads, index_t L, index_t d_kv) {
    precision = p, heads = n_heads, length = L, d = d_kv;
    const std::size_t n = static_cast<std::size_t>(n_heads * L * d_kv) * element_size(p);
    k = backend_bytes::allocate<Backend>(n);
    v = backend_bytes::allocate<Backend>(n);
    if (p == ops::kv_precision::i8) {
        k_scale = backend_bytes::allocate<Backend>(static_cast<std::size_t>(n_heads * L) * sizeof(float));
        v_scale = backend_bytes::allocate<Backend>(static_cast<std::size_t>(n_heads * L) * sizeof(float));
    }
}

template <class Backend>
void cross_kv::allocate_states(ops::kv_precision p, index_t L, index_t H) {
    precision = p, heads = 1, length = L, d = H, states = true;
    k = backend_bytes::allocate<Backend>(static_cast<std::size_t>(L * H) * element_size(p));
    if (p == ops::kv_precision::i8) k_scale = backend_bytes::allocate<Backend>(static_cast<std::size_t>(L) * sizeof(float));
}

template <class Backend, class Scalar>
void cross_kv::store(int which, index_t j0, index_t n, const Scalar* src, index_t ld) {
    std::byte* base = which == 0 ? k.get() : v.get();
    float* scale = scales(which == 0 ? k_scale : v_scale);
    for (index_t h = 0; h < heads; ++h)
        ops::store_rows<Backend>(precision, src + h * d, ld, n, d,
                                 base + static_cast<std::size_t>((h * length + j0) * d) * element_size(precision),
                                 scale ? scale + h * length + j0 : nullptr);
}

// Keys/values in the computation's own scalar type with row stride ld.
inline ops::kv_matrix native_rows(const void* p, index_t ld) {
    ops::kv_matrix m;
    m.precision = ops::kv_precision::native;
    m.data = p;
    m.ld = ld;
    return m;
}

// qkv (R·T, 3I): q | k | v of T new positions P … P+T−1 for each of R rows. Appends k, v to
// `cache` and writes ctx (R·T, I) = softmax(q·kᵀ + bias)·v per head, the bias and the causal mask
// read from `band` (layers/position_band.hpp: −∞ for a key after its query, covering the cache's
// capacity).
template <class Scalar, class Backend>
void cached_self_attention(const Scalar* qkv, index_t R, index_t T, index_t P, self_cache<Scalar, Backend>& cache,
                           const position_band<Scalar, Backend>& band, Scalar* ctx) {
    const index_t heads = cache.heads, d = cache.d, I = heads * d;
    ops::copy_layout l;  // (row r, head h, position t) of qkv's k (v) part → the cache at P + t
    l.n0 = R, l.n1 = heads, l.n2 = T, l.width = d;
    l.dst0 = heads * cache.capacity * d, l.dst1 = cache.capacity * d, l.dst2 = d;
    l.src0 = T * 3 * I, l.src1 = d, l.src2 = 3 * I;
    ops::strided_copy<Backend>(cache.k.data() + P * d, qkv + I, l);
    ops::strided_copy<Backend>(cache.v.data() + P * d, qkv + 2 * I, l);
    std::vector<ops::attention_problem<Scalar>> problems;
    problems.reserve(static_cast<std::size_t>(R * heads));
    for (index_t r = 0; r < R; ++r)
        for (index_t h = 0; h < heads; ++h) {
            ops::attention_problem<Scalar> p;
            p.q = qkv + r * T * 3 * I + h * d;
            p.nq = T;
            p.ldq = 3 * I;
            // The row's own positions only: keys from its first, the band seen from there.
            const index_t f = cache.first_of(r);
            p.k = native_rows(cache.k_at(r, h) + f * d, d);
            p.v = native_rows(cache.v_at(r, h) + f * d, d);
            p.nk = P + T - f;
            p.bias = band.at(h, f - P);
            p.ldb = -1;
            p.out = ctx + r * T * I + h * d;
            p.ldo = I;
            problems.push_back(p);
        }
    ops::attention<Backend>(problems, d);
}

// q (R·T, I) for R rows of T positions → ctx (R·T, I); rows [row_begin[d], row_begin[d+1])
// attend to document d's keys/values docs[d].
template <class Scalar, class Backend>
void document_attention(const Scalar* q, index_t T, index_t heads, index_t d, const std::vector<const cross_kv*>& docs,
                        const std::vector<index_t>& row_begin, Scalar* ctx,
                        ops::attention_products products = ops::attention_products::exact) {
    const index_t I = heads * d;
    std::vector<ops::attention_problem<Scalar>> problems;
    for (std::size_t k = 0; k < docs.size(); ++k) {
        const index_t r0 = row_begin[k], r1 = row_begin[k + 1];
        if (r0 == r1) continue;
        for (index_t h = 0; h < heads; ++h) {
            ops::attention_problem<Scalar> p;
            p.q = q + r0 * T * I + h * d;
            p.nq = (r1 - r0) * T;
            p.ldq = I;
            p.k = docs[k]->key(h);
            p.v = docs[k]->value(h);
            p.nk = docs[k]->length;
            p.out = ctx + r0 * T * I + h * d;
            p.ldo = I;
            p.products = products;
            problems.push_back(p);
        }
    }
    ops::attention<Backend>(problems, d);
}

// How a cross-attention multiplies under its key/value projection's precision kv_p: with bfloat16
// products when compute = bf16 (kv_p = bf16_products; the folded form), int8 products when
// compute = int8 (i8_products: over int8 states or an int8 cache; folded over bfloat16 states
// these are bfloat16 products), else exactly.
inline ops::attention_products document_products(ops::weight_precision kv_p) {
    return kv_p == ops::weight_precision::bf16_products ? ops::attention_products::bf16
        : kv_p == ops::weight_precision::i8_products    ? ops::attention_products::i8
                                                        : ops::attention_products::exact;
}

// Cross-attention over encoder states s_j (d_model wide) instead of projected keys and values.
// For head h with query q_h (d_kv), key and value projections Wk_h, Wv_h (d_kv × d_model rows
// of Wk, Wv) and key/value biases bk_h, bv_h:
//
//     q_h · (Wk_h s_j + bk_h) = (q_h·Wk_h) · s_j + q_h·bk_h      the last term is the same for
//                                                                 every j: softmax ignores it
//     Σ_j p_j (Wv_h s_j + bv_h) = Wv_h (Σ_j p_j s_j) + bv_h      as Σ_j p_j = 1
//
// so the step computes q̃_h = q_h·Wk_h (d_model values), attends with q̃_h over the states
// themselves (keys = values = S), and maps the d_model-wide result back through Wv_h. Why: a
// document's cache is then its L × d_model states, stored once for all layers — for the base
// model 1/24 of the per-layer keys and values (War and Peace: 1.07 GB in bfloat16 instead of
// 13.6 GB in int8) — and no per-layer projection of the whole input is needed. The price is
// arithmetic per step: layers × heads × L × 2·d_model multiply-adds per row instead of
// layers × L × 2·heads·d_kv, i.e. heads times more (bench/RESULTS.md, "Folded cross-attention").
template <class Scalar, class Backend>
class folded_cross_attention {
public:
    folded_cross_attention() = default;
    // wk, wv: (I, H) as the checkpoint stores them; bv: (I) or empty (no bias).
    // products: how the attention over the states multiplies (bf16 under compute = bf16).
    folded_cross_attention(const tensor<float>& wk, const tensor<float>& wv, const tensor<float>& bv, index_t heads,
                           ops::attention_products products = ops::attention_products::exact)
        : wk_(to_backend<Scalar, Backend>(wk)), wv_(to_backend<Scalar, Backend>(wv)), heads_(heads), I_(wk.dim(0)), H_(wk.dim(1)),
          products_(products) {
        if (!bv.shape().empty()) bv_ = to_backend<Scalar, Backend>(bv);
    }

    bool active() const noexcept { return heads_ > 0; }
    // Scratch per decoder row: q̃ and the state-space context, heads × d_model each.
    index_t scratch_per_row() const noexcept { return scratch_per_row(heads_, H_); }
    static constexpr index_t scratch_per_row(index_t heads, index_t H) noexcept { return 2 * heads * H; }

    // q (R·T, I) → ctx (R·T, I); rows [row_begin[k], row_begin[k+1]) attend to docs[k], whose
    // `states` hold the encoder states. scratch: R·T · scratch_per_row() elements.
    void attend(const Scalar* q, index_t T, const std::vector<const cross_kv*>& docs, const std::vector<index_t>& row_begin, Scalar* ctx,
                Scalar* scratch) const {
        const index_t n = row_begin.back() * T, heads = heads_, d = I_ / heads_, H = H_, I = I_;
        Scalar* qt = scratch;                  // (n, heads, H): q̃ per row and head
        Scalar* st = scratch + n * heads * H;  // (n, heads, H): Σ_j p_j s_j per row and head
        for (index_t h = 0; h < heads; ++h)    // q̃_h = q_h · Wk_h
            ops::gemm<Backend>({false, false, n, H, d, I, H, heads * H}, Scalar(1), q + h * d, wk_.data() + h * d * H, Scalar(0),
                               qt + h * H);
        // Every (row, head) of a document is a query over the same states: one call per document
        // reads them once for all its queries.
        for (std::size_t k = 0; k < docs.size(); ++k) {
            LOCOST_ASSERT(docs[k]->states && docs[k]->d == H);
            const index_t q0 = row_begin[k] * T * heads, nq = (row_begin[k + 1] - row_begin[k]) * T * heads;
            ops::shared_kv_attention<Backend>(qt + q0 * H, nq, H, docs[k]->key(0), docs[k]->length, H, st + q0 * H, H, products_);
        }
        for (index_t h = 0; h < heads; ++h)  // ctx_h = (Σ_j p_j s_j) · Wv_hᵀ
            ops::gemm<Backend>({false, true, n, d, H, heads * H, H, I}, Scalar(1), st + h * H, wv_.data() + h * d * H, Scalar(0),
                               ctx + h * d);
        if (!bv_.shape().empty()) ops::add_rows<Backend>(ctx, bv_.data(), n, I);
    }

private:
    tensor<Scalar, Backend> wk_, wv_, bv_;
    index_t heads_ = 0, I_ = 0, H_ = 0;
    ops::attention_products products_ = ops::attention_products::exact;
};

}  // namespace locost::layers
