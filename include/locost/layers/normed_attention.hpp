// Attention sub-layers with a residual and a norm, before or after:
//
//   norm before:  u = Norm(x);  x = x + Attention(u)
//   norm after:   x = Norm(x + Attention(x))
//
//   encoder:  [q | k | v] = u·[s·Wq ; Wk ; Wv]ᵀ + b;  Attention = softmax(q·kᵀ + β(j − i) + padding)·v·Woᵀ + bo
//   self:     the same, causal (β with −∞ for a key after its query), past k, v in a self_cache
//   cross:    q = u·(s·Wq)ᵀ + s·bq;  k, v from the encoder states h (per document, or folded)
//             Attention = softmax(q·kᵀ)·v·Woᵀ + bo                  padding left out of cross_kv
//
// (layers/attention_projections.hpp has the projections.) The checkpoints' three arrangements:
//
//   rms_before         RMSNorm before; s = 1 (learnt into Wq), no biases; β: the relative position
//                      bias — T5LayerSelfAttention / T5LayerCrossAttention (T5, LongT5, LOCOST's
//                      decoder); modules' projections q, k, v, o
//   layer_norm_before  LayerNorm before; s = d_head^−½, no biases; β: the causal mask alone —
//                      PegasusXAttention (bias=False) in PegasusXDecoderLayer; q_proj, k_proj,
//                      v_proj, out_proj
//   layer_norm_after   LayerNorm after; s = d_head^−½, biases; no β but the causal mask — BartAttention
//                      in BartEncoderLayer / BartDecoderLayer (BART, LED's decoder); the same names
//
// The encoder attends in query blocks (layers/local_attention.hpp with a window as wide as the
// input), so no L × L matrix is formed: memory O(B·L·(H + inner)), time O(L²) — long inputs are
// what SLED and the local-attention families are for. heads × d = inner need not be d_model.
//
// Names: the module's projections (attention_projections.hpp) and the norm, where the family says.
#pragma once
#include <vector>

#include "attention_projections.hpp"
#include "kv_cache.hpp"
#include "layer_norm.hpp"
#include "local_attention.hpp"
#include "position_band.hpp"
#include "rms_norm.hpp"
#include "tensor_source.hpp"

namespace locost::layers {

struct rms_before {
    template <class Scalar, class Backend>
    using norm = rms_norm<Scalar, Backend>;
    static constexpr bool norm_first = true, scale_scores = false, biased = false;
    static constexpr projection_names names{"q", "k", "v", "o"};
};
struct layer_norm_before {
    template <class Scalar, class Backend>
    using norm = layer_norm<Scalar, Backend>;
    static constexpr bool norm_first = true, scale_scores = true, biased = false;
    static constexpr projection_names names{"q_proj", "k_proj", "v_proj", "out_proj"};
};
struct layer_norm_after {
    template <class Scalar, class Backend>
    using norm = layer_norm<Scalar, Backend>;
    static constexpr bool norm_first = false, scale_scores = true, biased = true;
    static constexpr projection_names names = layer_norm_before::names;
};

template <class Arrangement>
struct normed_attention_weights {
    typename Arrangement::template norm<float, cpu>::weights norm;
    projection_weights p;

    // The attention `module` and its norm at `norm_at` (in the order the checkpoints list them);
    // `qo`, `kv`: how the runtime keeps the query/output and the key/value projections.
    static normed_attention_weights read(const tensor_source& module, const tensor_source& norm_at, index_t H, index_t inner,
                                         param_storage qo, param_storage kv) {
        using norm_t = typename Arrangement::template norm<float, cpu>;
        normed_attention_weights w;
        if constexpr (Arrangement::norm_first) w.norm = norm_t::read(norm_at, H);
        w.p = projection_weights::read(module, Arrangement::names, H, inner, Arrangement::biased, qo, kv);
        if constexpr (!Arrangement::norm_first) w.norm = norm_t::read(norm_at, H);
        return w;
    }
};

// The norm, the sizes and the output projection; enter() and leave() put the norm where the
// arrangement has it.
template <class Scalar, class Backend, class Arrangement>
class normed_attention_base {
public:
    using weights = normed_attention_weights<Arrangement>;

    normed_attention_base() = default;
    // p: storage of the projections that run per row (layers/weight_matrix.hpp).
    normed_attention_base(const weights& w, double eps, index_t heads, weight_precision p)
        : norm_(w.norm, eps), dims_(w.p, heads), o_(w.p.o, w.p.bo, p) {}

    // Scratch columns per row that enter() needs: a normed copy, or none.
    static constexpr index_t entry_width(index_t H) noexcept { return Arrangement::norm_first ? H : 0; }

protected:
    double score_scale() const noexcept { return Arrangement::scale_scores ? dims_.scale() : 1.0; }
    // The rows the projections read: Norm(x) in u (norm before) or x itself.
    const Scalar* enter(const Scalar* x, Scalar* u, index_t n) const {
        if constexpr (Arrangement::norm_first) {
            norm_.forward(x, u, n);
            return u;
        } else {
            return x;
        }
    }
    // x += ctx·Woᵀ + bo, then the norm when it comes after.
    void leave(Scalar* x, const Scalar* ctx, index_t n) const {
        o_.apply(ctx, x, n, /*accumulate=*/true);
        if constexpr (!Arrangement::norm_first) norm_.forward(x, x, n);
    }

    typename Arrangement::template norm<Scalar, Backend> norm_;
    attention_dims dims_;
    linear_projection<Scalar, Backend> o_;  // (H, I)
};

// Self-attention's q, k, v as one GEMM over the stacked (3I, H) matrix.
template <class Scalar, class Backend, class Arrangement>
class normed_qkv_attention : public normed_attention_base<Scalar, Backend, Arrangement> {
    using base = normed_attention_base<Scalar, Backend, Arrangement>;

public:
    normed_qkv_attention() = default;
    normed_qkv_attention(const typename base::weights& w, double eps, index_t heads, weight_precision p = weight_precision::native)
        : base(w, eps, heads, p), qkv_(w.p.qkv(this->score_scale()), w.p.qkv_bias(this->score_scale()), p),
          products_(document_products(p)) {}

protected:
    linear_projection<Scalar, Backend> qkv_;  // (3I, H)
    // How the attention over every position multiplies: bfloat16 products under compute = bf16
    // or int8 (p = bf16_products, i8_products: the encoder's), else exactly.
    ops::attention_products products_ = ops::attention_products::exact;
};

// The encoder's bidirectional self-attention over whole sequences.
template <class Scalar, class Backend, class Arrangement>
class normed_encoder_attention : public normed_qkv_attention<Scalar, Backend, Arrangement> {
    using base = normed_qkv_attention<Scalar, Backend, Arrangement>;

public:
    using base::base;
    // The padding, and the stack's position bias as a band covering distances up to L − 1 (empty:
    // none).
    using inputs = dense_attention_inputs<Scalar, Backend>;

    index_t scratch_size(index_t B, index_t L) const noexcept { return scratch_elements(this->dims_.H, this->dims_.inner, B, L); }
    // The same from the dimensions alone (the memory estimate, before any layer exists).
    static constexpr index_t scratch_elements(index_t H, index_t inner, index_t B, index_t L) noexcept {
        return B * L * (base::entry_width(H) + 4 * inner);
    }

    // x (B·L, H) ← x with the sub-layer applied.
    void forward(Scalar* x, index_t B, index_t L, const inputs& in, Scalar* scratch) const {
        const index_t n = B * L, I = this->dims_.inner;
        Scalar* u = scratch;                                     // (n, H) with the norm before
        Scalar* qkv = u + n * base::entry_width(this->dims_.H);  // (n, 3I): q | k | v
        Scalar* ctx = qkv + n * 3 * I;                           // (n, I)
        this->qkv_.apply(this->enter(x, u, n), qkv, n);
        const local_qkv<Scalar> q{qkv, qkv + I, qkv + 2 * I, 3 * I, 3 * I, 3 * I};
        local_attention<Scalar, Backend>(q, B, L, this->dims_.heads, this->dims_.d, sliding_window{L}, in.query_block, in.padding.data(),
                                         in.band.reach() > 0 ? &in.band : nullptr, {}, {}, ctx, I, this->products_);
        this->leave(x, ctx, n);
    }
};

// The decoder's causal self-attention over a cache of past positions.
template <class Scalar, class Backend, class Arrangement>
class normed_self_attention : public normed_qkv_attention<Scalar, Backend, Arrangement> {
    using base = normed_qkv_attention<Scalar, Backend, Arrangement>;

public:
    using base::base;

    index_t scratch_per_row() const noexcept { return base::entry_width(this->dims_.H) + 4 * this->dims_.inner; }

    // x (R·T, H): T new positions P … P+T−1 of each of R rows. Appends their keys/values to
    // `cache`; `band` holds the position bias (if any) and the causal mask.
    void forward(Scalar* x, index_t R, index_t T, index_t P, self_cache<Scalar, Backend>& cache, const position_band<Scalar, Backend>& band,
                 Scalar* scratch) const {
        const index_t n = R * T, I = this->dims_.inner;
        Scalar* u = scratch;                                     // (n, H) with the norm before
        Scalar* qkv = u + n * base::entry_width(this->dims_.H);  // (n, 3I)
        Scalar* ctx = qkv + n * 3 * I;                           // (n, I)
        this->qkv_.apply(this->enter(x, u, n), qkv, n);
        cached_self_attention<Scalar, Backend>(qkv, R, T, P, cache, band, ctx);
        this->leave(x, ctx, n);
    }
};

template <class Scalar, class Backend, class Arrangement>
class normed_cross_attention : public normed_attention_base<Scalar, Backend, Arrangement> {
    using base = normed_attention_base<Scalar, Backend, Arrangement>;

public:
    normed_cross_attention() = default;
    // p: storage of q and o; kv_p: that of the key/value projection, which runs once per document
    // over every encoder position (native, or bf16/int8 products under compute = bf16/int8).
    // folded: attend over the encoder states with the key/value projections folded in.
    normed_cross_attention(const typename base::weights& w, double eps, index_t heads, weight_precision p = weight_precision::native,
                           weight_precision kv_p = weight_precision::native, bool folded = false)
        : base(w, eps, heads, p), q_(w.p.query(this->score_scale()), w.p.query_bias(this->score_scale()), p),
          kv_(w.p, this->dims_, kv_p, folded) {}

    index_t scratch_per_row() const noexcept { return base::entry_width(this->dims_.H) + 2 * this->dims_.inner + kv_.scratch_per_row(); }

    // k, v for encoder rows [j0, j0 + n) of one document, into `kv` (projected form only).
    // scratch: n · 2·inner elements.
    void project(const Scalar* h, index_t j0, index_t n, cross_kv& kv, Scalar* scratch) const { kv_.project(h, j0, n, kv, scratch); }

    // x (R·T, H) for R rows of T positions; rows [row_begin[d], row_begin[d+1]) attend to
    // document d's keys/values docs[d].
    void forward(Scalar* x, index_t R, index_t T, const std::vector<const cross_kv*>& docs, const std::vector<index_t>& row_begin,
                 Scalar* scratch) const {
        const index_t n = R * T, I = this->dims_.inner;
        Scalar* u = scratch;                                   // (n, H) with the norm before
        Scalar* q = u + n * base::entry_width(this->dims_.H);  // (n, I)
        Scalar* ctx = q + n * I;                               // (n, I), then attend()'s scratch
        q_.apply(this->enter(x, u, n), q, n);
        kv_.attend(q, T, docs, row_begin, ctx, ctx + n * I);
        this->leave(x, ctx, n);
    }

private:
    linear_projection<Scalar, Backend> q_;
    document_projection<Scalar, Backend> kv_;
};

}  // namespace locost::layers
