// Attention sub-layers with an RMSNorm first, no biases and no 1/√d scaling (it is folded into
// Wq at training), with the residual — T5LayerSelfAttention and T5LayerCrossAttention of T5,
// LongT5 and LOCOST's decoder:
//
//   encoder:  u = RMSNorm(x);  q, k, v = u·Wqᵀ, u·Wkᵀ, u·Wvᵀ
//             x = x + softmax(q·kᵀ + β(j − i) + padding mask) · v · Woᵀ
//   self:     the same, causal (β with −∞ for a key after its query), past k, v in a self_cache
//   cross:    u = RMSNorm(x);  q = u·Wqᵀ;  k, v = h·Wkᵀ, h·Wvᵀ  (h: encoder states)
//             x = x + softmax(q·kᵀ) · v · Woᵀ                   padding left out of cross_kv
//
// β is the stack's relative position bias as a position_band (layers/position_band.hpp), the
// padding mask a key bias; heads × d_kv = inner need not be d_model. The encoder attends in query
// blocks (layers/local_attention.hpp with a window as wide as the input), so no L × L matrix is
// formed: memory O(B·L·(H + inner)), time O(L²) — long inputs are what SLED is for.
//
// Names, under the sub-layer's prefix: layer_norm.weight, then the attention module's (its name
// is the family's: SelfAttention, EncDecAttention, LocalSelfAttention, …) q, k, v, o .weight.
#pragma once
#include <algorithm>
#include <string_view>
#include <vector>

#include "../ops/attention.hpp"
#include "../ops/gemm.hpp"
#include "kv_cache.hpp"
#include "local_attention.hpp"
#include "parameter.hpp"
#include "position_band.hpp"
#include "rms_norm.hpp"
#include "tensor_source.hpp"
#include "weight_matrix.hpp"

namespace locost::layers {

struct rms_attention_weights {
    tensor<float> norm;        // (H)
    tensor<float> q, k, v, o;  // (inner, H) ×3, (H, inner)

    // The sub-layer at `sub`, its attention module `module`; `qo`, `kv`: how the runtime keeps the
    // query/output and the key/value projections (they differ in a decoder's cross-attention).
    static rms_attention_weights read(const tensor_source& sub, std::string_view module, index_t H, index_t inner, param_storage qo,
                                      param_storage kv) {
        const tensor_source m = sub / module;
        rms_attention_weights w;
        w.norm = rms_norm<float, cpu>::read(sub / "layer_norm", H);
        w.q = m.get("q.weight", {inner, H}, {param_kind::query, qo});
        w.k = m.get("k.weight", {inner, H}, {param_kind::key, kv});
        w.v = m.get("v.weight", {inner, H}, {param_kind::value, kv});
        w.o = m.get("o.weight", {H, inner}, {param_kind::attention_out, qo});
        return w;
    }
};

// What the self-attentions share: the RMSNorm, q/k/v stacked into one (3I, H) matrix so that all
// three projections are one GEMM, the output projection, the sizes. p: the projections' storage
// (layers/weight_matrix.hpp).
template <class Scalar, class Backend>
class rms_qkv_attention {
public:
    using weights = rms_attention_weights;

    rms_qkv_attention() = default;
    rms_qkv_attention(const rms_attention_weights& w, double eps, index_t heads, weight_precision p = weight_precision::native)
        : norm_(w.norm, eps),
          wqkv_(stack_rows(stack_rows(w.q, w.k), w.v), p),
          wo_(w.o, p),
          H_(w.o.dim(0)),
          inner_(w.o.dim(1)),
          heads_(heads),
          d_(inner_ / heads) {}

    index_t heads() const noexcept { return heads_; }
    index_t d_kv() const noexcept { return d_; }
    index_t inner() const noexcept { return inner_; }

protected:
    rms_norm<Scalar, Backend> norm_;
    weight_matrix<Scalar, Backend> wqkv_;  // (3I, H)
    weight_matrix<Scalar, Backend> wo_;    // (H, I)
    index_t H_ = 0, inner_ = 0, heads_ = 0, d_ = 0;
};

// The decoder's causal self-attention over a cache of past positions.
template <class Scalar, class Backend>
class rms_self_attention : public rms_qkv_attention<Scalar, Backend> {
    using base = rms_qkv_attention<Scalar, Backend>;

public:
    using base::base;

    index_t scratch_per_row() const noexcept { return this->H_ + 4 * this->inner_; }

    // x (R·T, H): T new positions P … P+T−1 of each of R rows. Appends their keys/values to
    // `cache`; `band` holds the position bias and the causal mask.
    void forward(Scalar* x, index_t R, index_t T, index_t P, self_cache<Scalar, Backend>& cache, const position_band<Scalar, Backend>& band,
                 Scalar* scratch) const {
        const index_t n = R * T, I = this->inner_;
        Scalar* u = scratch;                 // (n, H)
        Scalar* qkv = u + n * this->H_;      // (n, 3I)
        Scalar* ctx = qkv + n * 3 * I;       // (n, I)
        this->norm_.forward(x, u, n);
        this->wqkv_.apply(u, qkv, n);
        cached_self_attention<Scalar, Backend>(qkv, R, T, P, cache, band, ctx);
        this->wo_.apply(ctx, x, n, /*accumulate=*/true);
    }
};

// The encoder's bidirectional self-attention over whole sequences (no cache).
template <class Scalar, class Backend>
class rms_encoder_attention : public rms_qkv_attention<Scalar, Backend> {
    using base = rms_qkv_attention<Scalar, Backend>;

public:
    using base::base;
    using inputs = dense_attention_inputs<Scalar, Backend>;

    // Scratch forward() needs for B rows of L positions.
    index_t scratch_size(index_t B, index_t L) const noexcept { return scratch_elements(this->H_, this->inner_, B, L); }
    // The same from the dimensions alone (the memory estimate, before any layer exists).
    static constexpr index_t scratch_elements(index_t H, index_t inner, index_t B, index_t L) noexcept { return B * L * (H + 4 * inner); }

    // x (B·L, H) += SelfAttention(x). in: the padding, and the stack's relative position bias as
    // a band covering distances up to L − 1.
    void forward(Scalar* x, index_t B, index_t L, const inputs& in, Scalar* scratch) const {
        const index_t n = B * L, I = this->inner_;
        Scalar* u = scratch;             // (n, H)
        Scalar* qkv = u + n * this->H_;  // (n, 3I): q | k | v
        Scalar* ctx = qkv + n * 3 * I;   // (n, I)
        this->norm_.forward(x, u, n);
        this->wqkv_.apply(u, qkv, n);
        const local_qkv<Scalar> q{qkv, qkv + I, qkv + 2 * I, 3 * I, 3 * I, 3 * I};
        local_attention<Scalar, Backend>(q, B, L, this->heads_, this->d_, sliding_window{L}, in.query_block, in.padding.data(), &in.band, {}, {},
                                         ctx, I);
        this->wo_.apply(ctx, x, n, /*accumulate=*/true);
    }
};

template <class Scalar, class Backend>
class rms_cross_attention {
public:
    using weights = rms_attention_weights;

    rms_cross_attention() = default;
    // p: the precision of the per-step projections (q, o). kv_p: that of the key/value
    // projection, which runs once per document over every encoder position (a large product:
    // native, or bf16/int8 products under compute = bf16/int8). folded: attend over the encoder
    // states with the key/value projections folded in (folded_cross_attention); no projection then.
    rms_cross_attention(const rms_attention_weights& w, double eps, index_t heads, weight_precision p = weight_precision::native,
                        weight_precision kv_p = weight_precision::native, bool folded = false)
        : norm_(w.norm, eps),
          wq_(w.q, p),
          wo_(w.o, p),
          H_(w.o.dim(0)),
          inner_(w.o.dim(1)),
          heads_(heads),
          d_(inner_ / heads) {
        if (folded) folded_ = folded_cross_attention<Scalar, Backend>(w.k, w.v, {}, heads, folded_products(kv_p));
        else wkv_ = weight_matrix<Scalar, Backend>(stack_rows(w.k, w.v), kv_p);
    }

    index_t inner() const noexcept { return inner_; }
    index_t scratch_per_row() const noexcept { return H_ + 2 * inner_ + (folded_.active() ? folded_.scratch_per_row() : 0); }

    // k, v = h·Wkᵀ, h·Wvᵀ for encoder rows [j0, j0 + n) of one document, into `kv` (cached
    // form only). scratch: n · 2·inner elements.
    void project(const Scalar* h, index_t j0, index_t n, cross_kv& kv, Scalar* scratch) const {
        LOCOST_ASSERT(!folded_.active());
        wkv_.apply(h, scratch, n);
        kv.store<Backend>(0, j0, n, scratch, 2 * inner_);
        kv.store<Backend>(1, j0, n, scratch + inner_, 2 * inner_);
    }

    // x (R·T, H) for R rows of T positions; rows [row_begin[d], row_begin[d+1]) attend to
    // document d's keys/values docs[d].
    void forward(Scalar* x, index_t R, index_t T, const std::vector<const cross_kv*>& docs, const std::vector<index_t>& row_begin,
                 Scalar* scratch) const {
        const index_t n = R * T, I = inner_;
        Scalar* u = scratch;      // (n, H)
        Scalar* q = u + n * H_;   // (n, I)
        Scalar* ctx = q + n * I;  // (n, I)
        norm_.forward(x, u, n);
        wq_.apply(u, q, n);
        if (folded_.active()) folded_.attend(q, T, docs, row_begin, ctx, ctx + n * I);
        else document_attention<Scalar, Backend>(q, T, heads_, d_, docs, row_begin, ctx);
        wo_.apply(ctx, x, n, /*accumulate=*/true);
    }

private:
    rms_norm<Scalar, Backend> norm_;
    weight_matrix<Scalar, Backend> wq_;
    weight_matrix<Scalar, Backend> wkv_;              // (2I, H): k | v (cached form)
    folded_cross_attention<Scalar, Backend> folded_;  // (folded form)
    weight_matrix<Scalar, Backend> wo_;
    index_t H_ = 0, inner_ = 0, heads_ = 0, d_ = 0;
};

} // namespace locost::layers
