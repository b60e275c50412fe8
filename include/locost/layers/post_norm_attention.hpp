// Attention sub-layers with biased projections and a LayerNorm after the residual — BartAttention
// inside BartEncoderLayer / BartDecoderLayer (BART, and LED's decoder):
//
//   encoder self:  q, k, v = s·(x·Wqᵀ + bq), x·Wkᵀ + bk, x·Wvᵀ + bv          s = d_head^−½
//                  x = LayerNorm(x + softmax(q·kᵀ + padding mask)·v·Woᵀ + bo)
//   decoder self:  the same with the causal mask; past keys/values in a self_cache
//   cross:         q = s·(x·Wqᵀ + bq);  k, v = h·Wkᵀ + bk, h·Wvᵀ + bv      (h: encoder states)
//                  x = LayerNorm(x + softmax(q·kᵀ)·v·Woᵀ + bo)             padding left out of cross_kv
//
// The scale s is folded into Wq and bq at load (s·(x·Wqᵀ + bq) = x·(s·Wq)ᵀ + s·bq), so the
// attention op stays unscaled as T5's. q, k, v are one GEMM over the stacked (3I, H) matrix.
// The encoder attends in query blocks (layers/local_attention.hpp with a window as wide as the
// input): memory O(B·L·inner), never L × L.
//
// Names: the module's q_proj, k_proj, v_proj, out_proj (.weight and .bias) and, under the prefix
// the family gives (self_attn_layer_norm, encoder_attn_layer_norm), the LayerNorm's.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../ops/elementwise.hpp"
#include "../ops/gemm.hpp"
#include "kv_cache.hpp"
#include "layer_norm.hpp"
#include "local_attention.hpp"
#include "parameter.hpp"
#include "position_band.hpp"
#include "tensor_source.hpp"
#include "weight_matrix.hpp"

namespace locost::layers {

struct biased_attention_weights {
    tensor<float> q, k, v, o;      // (I, H) ×3, (H, I)
    tensor<float> bq, bk, bv, bo;  // (I) ×3, (H)
    tensor<float> norm_w, norm_b;  // (H): the LayerNorm after the residual

    // The projections of `module` and the LayerNorm at `norm`; `qo`, `kv`: how the runtime keeps the
    // query/output and the key/value projections.
    static biased_attention_weights read(const tensor_source& module, const tensor_source& norm, index_t H, param_storage qo,
                                         param_storage kv) {
        biased_attention_weights w;
        w.q = module.get("q_proj.weight", {H, H}, {param_kind::query, qo});
        w.k = module.get("k_proj.weight", {H, H}, {param_kind::key, kv});
        w.v = module.get("v_proj.weight", {H, H}, {param_kind::value, kv});
        w.o = module.get("out_proj.weight", {H, H}, {param_kind::attention_out, qo});
        w.bq = module.get("q_proj.bias", {H}, {param_kind::bias});
        w.bk = module.get("k_proj.bias", {H}, {param_kind::bias});
        w.bv = module.get("v_proj.bias", {H}, {param_kind::bias});
        w.bo = module.get("out_proj.bias", {H}, {param_kind::bias});
        auto n = layer_norm<float, cpu>::read(norm, H);
        w.norm_w = std::move(n.w);
        w.norm_b = std::move(n.b);
        return w;
    }
};

// What every such attention has: output projection with bias, the post-LayerNorm, sizes.
template <class Scalar, class Backend>
class biased_attention_base {
public:
    using weights = biased_attention_weights;

    biased_attention_base() = default;
    // p: storage of the projections that run per step (layers/weight_matrix.hpp; decoders only).
    biased_attention_base(const biased_attention_weights& w, double eps, index_t heads, weight_precision p = weight_precision::native)
        : wo_(w.o, p),
          bo_(to_backend<Scalar, Backend>(w.bo)),
          norm_(w.norm_w, w.norm_b, eps),
          H_(w.o.dim(0)),
          inner_(w.o.dim(1)),
          heads_(heads),
          d_(inner_ / heads),
          scale_(1.0 / std::sqrt(static_cast<double>(inner_ / heads))) {}

    index_t heads() const noexcept { return heads_; }
    index_t d_head() const noexcept { return d_; }

protected:
    // x (n, H) = LayerNorm(x + ctx·Woᵀ + bo).
    void output(Scalar* x, const Scalar* ctx, index_t n) const {
        wo_.apply(ctx, x, n, /*accumulate=*/true);
        ops::add_rows<Backend>(x, bo_.data(), n, H_);
        norm_.forward(x, x, n);
    }

    weight_matrix<Scalar, Backend> wo_;
    tensor<Scalar, Backend> bo_;
    layer_norm<Scalar, Backend> norm_;
    index_t H_ = 0, inner_ = 0, heads_ = 0, d_ = 0;
    double scale_ = 1;
};

// Self-attention (encoder or decoder): q, k, v in one GEMM with the scale folded into q.
template <class Scalar, class Backend>
class biased_self_attention_base : public biased_attention_base<Scalar, Backend> {
    using base = biased_attention_base<Scalar, Backend>;

public:
    biased_self_attention_base() = default;
    biased_self_attention_base(const biased_attention_weights& w, double eps, index_t heads,
                               weight_precision p = weight_precision::native)
        : base(w, eps, heads, p),
          wqkv_(stack_rows(stack_rows(scaled(w.q, this->scale_), w.k), w.v), p),
          bqkv_(to_backend<Scalar, Backend>(qkv_bias(w, this->scale_))) {}

protected:
    // qkv (n, 3I) = x·Wqkvᵀ + bqkv.
    void project(const Scalar* x, Scalar* qkv, index_t n) const {
        wqkv_.apply(x, qkv, n);
        ops::add_rows<Backend>(qkv, bqkv_.data(), n, 3 * this->inner_);
    }

private:
    static tensor<float> qkv_bias(const biased_attention_weights& w, double s) {
        const tensor<float> bq = scaled(w.bq, s);
        return concat({&bq, &w.bk, &w.bv});
    }
    weight_matrix<Scalar, Backend> wqkv_;
    tensor<Scalar, Backend> bqkv_;
};

// The encoder's bidirectional self-attention, queries in blocks; padded keys masked.
template <class Scalar, class Backend>
class post_norm_encoder_attention : public biased_self_attention_base<Scalar, Backend> {
    using base = biased_self_attention_base<Scalar, Backend>;

public:
    using base::base;
    using inputs = dense_attention_inputs<Scalar, Backend>;  // the band stays empty: no position bias

    index_t scratch_size(index_t B, index_t L) const noexcept { return scratch_elements(this->inner_, B, L); }
    // The same from the dimensions alone (the memory estimate, before any layer exists).
    static constexpr index_t scratch_elements(index_t inner, index_t B, index_t L) noexcept { return B * L * 4 * inner; }

    // x (B·L, H) = LayerNorm(x + SelfAttention(x)); in: the padding.
    void forward(Scalar* x, index_t B, index_t L, const inputs& in, Scalar* scratch) const {
        const index_t n = B * L, I = this->inner_;
        Scalar* qkv = scratch;          // (n, 3I)
        Scalar* ctx = qkv + n * 3 * I;  // (n, I)
        this->project(x, qkv, n);
        const local_qkv<Scalar> q{qkv, qkv + I, qkv + 2 * I, 3 * I, 3 * I, 3 * I};
        local_attention<Scalar, Backend>(q, B, L, this->heads_, this->d_, sliding_window{L}, in.query_block, in.padding.data(), nullptr, {}, {},
                                         ctx, I);
        this->output(x, ctx, n);
    }
};

// The decoder's causal self-attention over a cache of past positions.
template <class Scalar, class Backend>
class post_norm_self_attention : public biased_self_attention_base<Scalar, Backend> {
    using base = biased_self_attention_base<Scalar, Backend>;

public:
    using base::base;

    index_t scratch_per_row() const noexcept { return 4 * this->inner_; }

    // x (R·T, H): T new positions P … P+T−1 of each of R rows; `causal`: the causal mask.
    void forward(Scalar* x, index_t R, index_t T, index_t P, self_cache<Scalar, Backend>& cache, const position_band<Scalar, Backend>& causal,
                 Scalar* scratch) const {
        const index_t n = R * T, I = this->inner_;
        Scalar* qkv = scratch;          // (n, 3I)
        Scalar* ctx = qkv + n * 3 * I;  // (n, I)
        this->project(x, qkv, n);
        cached_self_attention<Scalar, Backend>(qkv, R, T, P, cache, causal, ctx);
        this->output(x, ctx, n);
    }
};

template <class Scalar, class Backend>
class post_norm_cross_attention : public biased_attention_base<Scalar, Backend> {
    using base = biased_attention_base<Scalar, Backend>;

public:
    post_norm_cross_attention() = default;
    // p: storage of q and o; kv_p: that of the key/value projection (once per document, a
    // large GEMM: native, or bf16_products under compute = bf16).
    // folded: attend over the encoder states with the key/value projections folded in
    // (folded_cross_attention; the key bias drops out, the value bias is added after).
    post_norm_cross_attention(const biased_attention_weights& w, double eps, index_t heads, weight_precision p = weight_precision::native,
                         weight_precision kv_p = weight_precision::native, bool folded = false)
        : base(w, eps, heads, p),
          wq_(scaled(w.q, this->scale_), p),
          bq_(to_backend<Scalar, Backend>(scaled(w.bq, this->scale_))) {
        if (folded) {
            folded_ = folded_cross_attention<Scalar, Backend>(w.k, w.v, w.bv, heads, folded_products(kv_p));
        } else {
            wkv_ = weight_matrix<Scalar, Backend>(stack_rows(w.k, w.v), kv_p);
            bkv_ = to_backend<Scalar, Backend>(concat({&w.bk, &w.bv}));
        }
    }

    index_t scratch_per_row() const noexcept { return 2 * this->inner_ + (folded_.active() ? folded_.scratch_per_row() : 0); }

    // k, v = h·Wkᵀ + bk, h·Wvᵀ + bv for encoder rows [j0, j0 + n) of one document, into `kv`.
    // scratch: n · 2·inner elements.
    void project(const Scalar* h, index_t j0, index_t n, cross_kv& kv, Scalar* scratch) const {
        LOCOST_ASSERT(!folded_.active());
        const index_t I = this->inner_;
        wkv_.apply(h, scratch, n);
        ops::add_rows<Backend>(scratch, bkv_.data(), n, 2 * I);
        kv.store<Backend>(0, j0, n, scratch, 2 * I);
        kv.store<Backend>(1, j0, n, scratch + I, 2 * I);
    }

    // x (R·T, H); rows [row_begin[d], row_begin[d+1]) attend to document d's keys/values.
    void forward(Scalar* x, index_t R, index_t T, const std::vector<const cross_kv*>& docs, const std::vector<index_t>& row_begin,
                 Scalar* scratch) const {
        const index_t n = R * T, I = this->inner_;
        Scalar* q = scratch;       // (n, I)
        Scalar* ctx = q + n * I;   // (n, I)
        wq_.apply(x, q, n);
        ops::add_rows<Backend>(q, bq_.data(), n, I);
        if (folded_.active()) folded_.attend(q, T, docs, row_begin, ctx, ctx + n * I);
        else document_attention<Scalar, Backend>(q, T, this->heads_, this->d_, docs, row_begin, ctx);
        this->output(x, ctx, n);
    }

private:
    weight_matrix<Scalar, Backend> wq_;
    tensor<Scalar, Backend> bq_;
    weight_matrix<Scalar, Backend> wkv_;  // (2I, H): k | v (cached form)
    tensor<Scalar, Backend> bkv_;
    folded_cross_attention<Scalar, Backend> folded_;  // (folded form)
};

} // namespace locost::layers
