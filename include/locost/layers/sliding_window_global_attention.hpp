// Sliding-window self-attention with chosen global tokens that have projections of their own —
// Longformer's (Beltagy et al. 2020, §3.1), as LED's encoder uses it (LEDEncoderSelfAttention
// inside LEDEncoderLayer, post-LayerNorm as BART's):
//
//   local token i:   q, k, v = s·(x·Wqᵀ + bq), x·Wkᵀ + bk, x·Wvᵀ + bv              s = d_head^−½
//                    ctx_i = softmax_{j ∈ W(i) ∪ G}(q_i·k_jᵀ) · v     W(i) = {|i − j| ≤ w/2, j valid, j ∉ G}
//   global token g:  q̃, k̃, ṽ = s·(x·W̃qᵀ + b̃q), x·W̃kᵀ + b̃k, x·W̃vᵀ + b̃v          (the *_global projections)
//                    ctx_g = softmax_{j valid}(q̃_g·k̃_jᵀ) · ṽ
//   x = LayerNorm(x + ctx·Woᵀ + bo)
//
// G: the row's global positions. Global tokens are left out of every window (their keys masked
// in the key bias) and reach each query through the second key/value segment (their local keys
// and values k, v), so none is counted twice; a global token's own row is then replaced by its
// global attention over the whole row. The local part is layers/local_attention's sliding window
// (the window's mask a position_band made once per layer); the global rows are |G| queries over L
// keys, one more call of the attention op: O(L·(w + |G|)) in all. What every layer reads for one
// input — the global positions, the key bias with them masked, the padding — is made once per
// input by global_token_inputs.
//
// Names, under the encoder layer's prefix: self_attn.longformer_self_attn.{query, key, value,
// query_global, key_global, value_global}, self_attn.output (each .weight and .bias), and
// self_attn_layer_norm.
#pragma once
#include <algorithm>
#include <limits>
#include <vector>

#include "../ops/copy.hpp"
#include "../ops/rows.hpp"
#include "local_attention.hpp"
#include "position_band.hpp"
#include "normed_attention.hpp"

namespace locost::layers {

struct sliding_window_global_weights {
    normed_attention_weights<layer_norm_after> local;  // query/key/value/output with biases, self_attn_layer_norm
    projection_weights global;                         // query_global, key_global, value_global (no output)

    static sliding_window_global_weights read(const tensor_source& layer, index_t H) {
        constexpr auto large = param_storage::large_product;
        const tensor_source m = layer / "self_attn" / "longformer_self_attn", out = layer / "self_attn" / "output";
        sliding_window_global_weights w;
        auto projection = [&](const char* name, param_kind kind, tensor<float>& weight, tensor<float>& bias) {
            const tensor_source p = m / name;
            weight = p.get("weight", {H, H}, {kind, large});
            bias = p.get("bias", {H}, {param_kind::bias});
        };
        projection("query", param_kind::query, w.local.p.q, w.local.p.bq);
        projection("key", param_kind::key, w.local.p.k, w.local.p.bk);
        projection("value", param_kind::value, w.local.p.v, w.local.p.bv);
        projection("query_global", param_kind::query, w.global.q, w.global.bq);
        projection("key_global", param_kind::key, w.global.k, w.global.bk);
        projection("value_global", param_kind::value, w.global.v, w.global.bv);
        w.local.p.o = out.get("weight", {H, H}, {param_kind::attention_out, large});
        w.local.p.bo = out.get("bias", {H}, {param_kind::bias});
        w.local.norm = layer_norm<float, cpu>::read(layer / "self_attn_layer_norm", H);
        return w;
    }
};

// The global positions of one input and what every layer derives from them, made once per input.
template <class Scalar, class Backend>
class global_token_inputs {
public:
    // rows[b]: row b's global positions, increasing, valid positions only (the model chooses them).
    // mask (B, L) of 0/1 or nullptr.
    void prepare(const float* mask, index_t B, index_t L, std::vector<std::vector<index_t>> rows) {
        G_ = 0;
        count_.clear();
        for (const auto& r : rows) {
            G_ = std::max<index_t>(G_, static_cast<index_t>(r.size()));
            count_.push_back(static_cast<index_t>(r.size()));
        }
        // Row index b·L + position of each global token, B·G slots (−1: none).
        at_.assign(static_cast<std::size_t>(B * G_), -1);
        for (index_t b = 0; b < B; ++b)
            for (std::size_t g = 0; g < rows[static_cast<std::size_t>(b)].size(); ++g)
                at_[static_cast<std::size_t>(b * G_) + g] = b * L + rows[static_cast<std::size_t>(b)][g];
        at_on_backend_ = backend_array<std::int64_t, Backend>(at_);
        // Keys: padding masked; the global positions too (they enter through the second segment).
        local_.prepare(mask, B * L, /*always=*/G_ > 0);
        if (G_ > 0) ops::fill_at<Backend>(local_.data(), at_on_backend_.data(), B * G_, -std::numeric_limits<Scalar>::infinity());
        padding_.prepare(mask, B * L);  // the global rows see every valid key
    }

    index_t max_count() const noexcept { return G_; }
    const std::vector<index_t>& count() const noexcept { return count_; }
    // (B·G): row index of each global slot, −1 where a row has fewer.
    const std::int64_t* rows() const noexcept { return at_on_backend_.data(); }
    const Scalar* local_key_bias() const noexcept { return local_.data(); }
    const Scalar* padding() const noexcept { return padding_.data(); }

private:
    index_t G_ = 0;
    std::vector<index_t> count_;
    std::vector<std::int64_t> at_;
    backend_array<std::int64_t, Backend> at_on_backend_;
    padding_bias<Scalar, Backend> local_, padding_;
};

template <class Scalar, class Backend>
class sliding_window_global_attention : public normed_qkv_attention<Scalar, Backend, layer_norm_after> {
    using base = normed_qkv_attention<Scalar, Backend, layer_norm_after>;

public:
    using inputs = global_token_inputs<Scalar, Backend>;
    using weights = sliding_window_global_weights;

    sliding_window_global_attention() = default;
    // window: the attention_window w (token i sees |i − j| ≤ w/2). p: the projections' precision
    // (bf16/int8 products under compute = bf16/int8).
    sliding_window_global_attention(const sliding_window_global_weights& w, double eps, index_t heads, index_t window,
                                    weight_precision p = weight_precision::native)
        : base(w.local, eps, heads, p), window_{window / 2},
          qg_(w.global.query(this->score_scale()), w.global.query_bias(this->score_scale()), p),
          kvg_(w.global.kv(), w.global.kv_bias(), p) {
        // The window as a mask: 0 within it, −∞ beyond, for every distance a query group meets.
        band_.ensure(band_reach(window), 0,
                     [&](index_t r, index_t) { return window_.within(r) ? 0.0f : position_band<Scalar, Backend>::masked; });
    }

    // The reach of the window's band (one row, held from construction on; the memory estimate's).
    static index_t band_reach(index_t window) {
        const sliding_window w{window / 2};
        return w.max_distance(query_block(w)) + 1;
    }

    index_t window() const noexcept { return 2 * window_.radius; }

    index_t scratch_size(index_t B, index_t L) const noexcept { return scratch_elements(this->dims_.H, this->dims_.inner, B, L); }
    // The same from the dimensions alone (the memory estimate, before any layer exists): the local
    // attention's q, k, v and context; the global keys/values gathered per row; the global rows
    // (at most L of them per row: k̃, ṽ of every token, their states, q̃ and context).
    static constexpr index_t scratch_elements(index_t H, index_t I, index_t B, index_t L) noexcept {
        const index_t n = B * L;
        return n * 4 * I + n * 2 * I + n * (H + 4 * I);
    }

    // x (B·L, H) = LayerNorm(x + LongformerSelfAttention(x)) for the input `in` describes.
    void forward(Scalar* x, index_t B, index_t L, const inputs& in, Scalar* scratch) const {
        const index_t n = B * L, I = this->dims_.inner, G = in.max_count();
        Scalar* qkv = scratch;          // (n, 3I)
        Scalar* ctx = qkv + n * 3 * I;  // (n, I)
        Scalar* gkv = ctx + n * I;      // (B·G, 2I): the global tokens' own keys/values, the second segment
        this->qkv_.apply(x, qkv, n);
        ops::gather_rows<Backend>(qkv + I, 3 * I, 2 * I, in.rows(), B * G, gkv, 2 * I);
        global_segment<Scalar> seg;
        if (G > 0) seg = {gkv, gkv + I, 2 * I, G * 2 * I, in.count()};
        const local_qkv<Scalar> q{qkv, qkv + I, qkv + 2 * I, 3 * I, 3 * I, 3 * I};
        local_attention<Scalar, Backend>(q, B, L, this->dims_.heads, this->dims_.d, window_, query_block(), in.local_key_bias(), &band_,
                                         seg, {}, ctx, I);
        if (G > 0) global_rows(x, B, L, in, ctx, gkv + B * G * 2 * I);
        this->leave(x, ctx, n);
    }

private:
    static index_t query_block(const sliding_window& w) noexcept { return std::max<index_t>(16, w.radius); }
    index_t query_block() const noexcept { return query_block(window_); }

    // ctx rows of the global tokens = their global attention over every valid key of their row.
    void global_rows(const Scalar* x, index_t B, index_t L, const inputs& in, Scalar* ctx, Scalar* scratch) const {
        const index_t n = B * L, I = this->dims_.inner, H = this->dims_.H, G = in.max_count(), heads = this->dims_.heads, d = this->dims_.d;
        Scalar* kvg = scratch;         // (n, 2I): k̃ | ṽ of every token
        Scalar* xg = kvg + n * 2 * I;  // (B·G, H): the global tokens' states
        Scalar* qg = xg + B * G * H;   // (B·G, I)
        Scalar* cg = qg + B * G * I;   // (B·G, I)
        kvg_.apply(x, kvg, n);
        ops::gather_rows<Backend>(x, H, H, in.rows(), B * G, xg, H);
        qg_.apply(xg, qg, B * G);
        std::vector<ops::attention_problem<Scalar>> problems;
        for (index_t b = 0; b < B; ++b) {
            const index_t count = in.count()[static_cast<std::size_t>(b)];
            if (count == 0) continue;
            for (index_t h = 0; h < heads; ++h) {
                ops::attention_problem<Scalar> p;
                p.q = qg + b * G * I + h * d;
                p.nq = count;
                p.ldq = I;
                p.k = native_rows(kvg + b * L * 2 * I + h * d, 2 * I);
                p.v = native_rows(kvg + b * L * 2 * I + I + h * d, 2 * I);
                p.nk = L;
                if (in.padding()) p.key_bias = in.padding() + b * L;
                p.out = cg + b * G * I + h * d;
                p.ldo = I;
                problems.push_back(p);
            }
        }
        ops::attention<Backend>(problems, d);
        ops::scatter_rows<Backend>(cg, I, I, in.rows(), B * G, ctx, I);
    }

    sliding_window window_;
    position_band<Scalar, Backend> band_;
    linear_projection<Scalar, Backend> qg_;   // s·Wq_global, s·bq_global
    linear_projection<Scalar, Backend> kvg_;  // (2I, H): k_global | v_global
};

}  // namespace locost::layers
