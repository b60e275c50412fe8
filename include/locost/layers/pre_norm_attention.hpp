// Pre-LayerNorm attention sub-layers without projection biases — Pegasus-X's decoder
// (PegasusXAttention with bias=False inside PegasusXDecoderLayer):
//
//   self:   u = LayerNorm(x);  q, k, v = s·u·Wqᵀ, u·Wkᵀ, u·Wvᵀ            s = d_head^−½
//           x = x + softmax(q·kᵀ + causal mask)·v·Woᵀ                    past k, v in a self_cache
//   cross:  u = LayerNorm(x);  q = s·u·Wqᵀ;  k, v = h·Wkᵀ, h·Wvᵀ          h: encoder states
//           x = x + softmax(q·kᵀ)·v·Woᵀ                                   padding left out of cross_kv
//
// The scale s is folded into Wq at load, so the attention op stays unscaled; q, k, v of the
// self-attention are one GEMM over the stacked (3I, H) matrix. The attention steps themselves
// are the shared ones of kv_cache.hpp (T5 and BART use the same).
//
// Names: the module's q_proj, k_proj, v_proj, out_proj (.weight) and the LayerNorm's under the
// prefix the family gives (self_attn_layer_norm, encoder_attn_layer_norm).
#pragma once
#include <cmath>
#include <vector>

#include "../ops/gemm.hpp"
#include "kv_cache.hpp"
#include "layer_norm.hpp"
#include "parameter.hpp"
#include "position_band.hpp"
#include "tensor_source.hpp"
#include "weight_matrix.hpp"

namespace locost::layers {

struct pre_norm_attention_weights {
    tensor<float> norm_w, norm_b;  // (H): the LayerNorm before the attention
    tensor<float> q, k, v, o;      // (I, H) ×3, (H, I)

    // The projections of `module` and the LayerNorm at `norm`; `qo`, `kv`: how the runtime keeps the
    // query/output and the key/value projections.
    static pre_norm_attention_weights read(const tensor_source& module, const tensor_source& norm, index_t H, param_storage qo,
                                           param_storage kv) {
        pre_norm_attention_weights w;
        auto n = layer_norm<float, cpu>::read(norm, H);
        w.norm_w = std::move(n.w);
        w.norm_b = std::move(n.b);
        w.q = module.get("q_proj.weight", {H, H}, {param_kind::query, qo});
        w.k = module.get("k_proj.weight", {H, H}, {param_kind::key, kv});
        w.v = module.get("v_proj.weight", {H, H}, {param_kind::value, kv});
        w.o = module.get("out_proj.weight", {H, H}, {param_kind::attention_out, qo});
        return w;
    }
};

template <class Scalar, class Backend>
class pre_norm_attention_base {
public:
    using weights = pre_norm_attention_weights;

    pre_norm_attention_base() = default;
    // p: storage of the per-step projections (layers/weight_matrix.hpp).
    pre_norm_attention_base(const pre_norm_attention_weights& w, double eps, index_t heads, weight_precision p = weight_precision::native)
        : norm_(w.norm_w, w.norm_b, eps),
          wo_(w.o, p),
          H_(w.o.dim(0)),
          inner_(w.o.dim(1)),
          heads_(heads),
          d_(inner_ / heads),
          scale_(1.0 / std::sqrt(static_cast<double>(inner_ / heads))) {}

protected:
    // x (n, H) += ctx·Woᵀ.
    void output(Scalar* x, const Scalar* ctx, index_t n) const { wo_.apply(ctx, x, n, /*accumulate=*/true); }

    layer_norm<Scalar, Backend> norm_;
    weight_matrix<Scalar, Backend> wo_;  // (H, I)
    index_t H_ = 0, inner_ = 0, heads_ = 0, d_ = 0;
    double scale_ = 1;
};

// The decoder's causal self-attention over a cache of past positions.
template <class Scalar, class Backend>
class pre_norm_self_attention : public pre_norm_attention_base<Scalar, Backend> {
    using base = pre_norm_attention_base<Scalar, Backend>;

public:
    pre_norm_self_attention() = default;
    pre_norm_self_attention(const pre_norm_attention_weights& w, double eps, index_t heads, weight_precision p = weight_precision::native)
        : base(w, eps, heads, p), wqkv_(stack_rows(stack_rows(scaled(w.q, this->scale_), w.k), w.v), p) {}

    index_t scratch_per_row() const noexcept { return this->H_ + 4 * this->inner_; }

    // x (R·T, H): T new positions P … P+T−1 of each of R rows; `causal`: the causal mask, one
    // band for every head.
    void forward(Scalar* x, index_t R, index_t T, index_t P, self_cache<Scalar, Backend>& cache, const position_band<Scalar, Backend>& causal,
                 Scalar* scratch) const {
        const index_t n = R * T, I = this->inner_;
        Scalar* u = scratch;                // (n, H)
        Scalar* qkv = u + n * this->H_;     // (n, 3I)
        Scalar* ctx = qkv + n * 3 * I;      // (n, I)
        this->norm_.forward(x, u, n);
        wqkv_.apply(u, qkv, n);
        cached_self_attention<Scalar, Backend>(qkv, R, T, P, cache, causal, ctx);
        this->output(x, ctx, n);
    }

private:
    weight_matrix<Scalar, Backend> wqkv_;  // (3I, H)
};

template <class Scalar, class Backend>
class pre_norm_cross_attention : public pre_norm_attention_base<Scalar, Backend> {
    using base = pre_norm_attention_base<Scalar, Backend>;

public:
    pre_norm_cross_attention() = default;
    // p: storage of q and o; kv_p: that of the key/value projection (once per document: native,
    // or bf16_products under compute = bf16).
    // folded: attend over the encoder states with the key/value projections folded in.
    pre_norm_cross_attention(const pre_norm_attention_weights& w, double eps, index_t heads, weight_precision p = weight_precision::native,
                             weight_precision kv_p = weight_precision::native, bool folded = false)
        : base(w, eps, heads, p),
          wq_(scaled(w.q, this->scale_), p) {
        if (folded) folded_ = folded_cross_attention<Scalar, Backend>(w.k, w.v, {}, heads, folded_products(kv_p));
        else wkv_ = weight_matrix<Scalar, Backend>(stack_rows(w.k, w.v), kv_p);
    }

    index_t scratch_per_row() const noexcept {
        return this->H_ + 2 * this->inner_ + (folded_.active() ? folded_.scratch_per_row() : 0);
    }

    // k, v = h·Wkᵀ, h·Wvᵀ for encoder rows [j0, j0 + n) of one document, into `kv`.
    // scratch: n · 2·inner elements.
    void project(const Scalar* h, index_t j0, index_t n, cross_kv& kv, Scalar* scratch) const {
        LOCOST_ASSERT(!folded_.active());
        const index_t I = this->inner_;
        wkv_.apply(h, scratch, n);
        kv.store<Backend>(0, j0, n, scratch, 2 * I);
        kv.store<Backend>(1, j0, n, scratch + I, 2 * I);
    }

    // x (R·T, H); rows [row_begin[d], row_begin[d+1]) attend to document d's keys/values.
    void forward(Scalar* x, index_t R, index_t T, const std::vector<const cross_kv*>& docs, const std::vector<index_t>& row_begin,
                 Scalar* scratch) const {
        const index_t n = R * T, I = this->inner_;
        Scalar* u = scratch;              // (n, H)
        Scalar* q = u + n * this->H_;     // (n, I)
        Scalar* ctx = q + n * I;          // (n, I)
        this->norm_.forward(x, u, n);
        wq_.apply(u, q, n);
        if (folded_.active()) folded_.attend(q, T, docs, row_begin, ctx, ctx + n * I);
        else document_attention<Scalar, Backend>(q, T, this->heads_, this->d_, docs, row_begin, ctx);
        this->output(x, ctx, n);
    }

private:
    weight_matrix<Scalar, Backend> wq_;  // (I, H)
    weight_matrix<Scalar, Backend> wkv_;  // (2I, H) (cached form)
    folded_cross_attention<Scalar, Backend> folded_;  // (folded form)
};

} // namespace locost::layers
