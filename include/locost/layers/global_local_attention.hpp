// Pegasus-X's encoder self-attention: staggered block-local attention with learned global tokens
// (Phang et al. 2022, §3; PegasusXGlobalLocalAttention inside PegasusXEncoderLayer, pre-LayerNorm):
//
//     u = LayerNorm(x),  ū = LayerNorm_g(g)                 x: (B, L, H) tokens; g: (B, G, H) globals
//     q, k, v = s·u·Wqᵀ, u·Wkᵀ, u·Wvᵀ;   q̄, k̄, v̄ = s·ū·Wqᵀ, ū·Wkᵀ, ū·Wvᵀ      (one set of weights, s = d_head^−½)
//     x_i += Wo · Σ_{j ∈ block(i) ∪ G} softmax_j(q_i·k_jᵀ + padding mask) · v_j
//     g_c += Wo · Σ_{j ∈ [0, L) ∪ G}   softmax_j(q̄_c·k_jᵀ + padding mask) · v_j
//
// block(i): disjoint blocks of b = block_size tokens; on staggered layers (odd layers with
// stagger_local_blocks) the blocks start half a block earlier, s = ⌊b/2⌋ (Hugging Face pads ⌊b/2⌋
// masked tokens on both sides). Hugging Face also pads L to a multiple of b with masked tokens;
// clipping the blocks to [0, L) is the same on the real tokens (layers/local_attention.hpp).
// Every token sees every global token; a global token sees every valid token and every global.
//
// The tokens' attention is local_attention (disjoint_blocks, the globals as its second key/value
// segment); the globals' is one more attention call, G queries per row and head over the L token
// keys (padding masked through the key bias) and the G global keys. Memory: the scores of one
// query group (≤ b queries × (b + G) keys) per problem and G × (L + G) for the globals; never L × L.
#pragma once
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "../ops/attention.hpp"
#include "../ops/gemm.hpp"
#include "kv_cache.hpp"
#include "layer_norm.hpp"
#include "local_attention.hpp"
#include "parameter.hpp"
#include "tensor_source.hpp"

namespace locost::layers {

struct global_local_attention_weights {
    tensor<float> norm_w, norm_b;                // (H): self_attn_layer_norm (tokens)
    tensor<float> global_norm_w, global_norm_b;  // (H): global_self_attn_layer_norm (global tokens)
    tensor<float> q, k, v, o;                    // (H, H) ×4, no biases

    // Under an encoder layer's prefix: self_attn_layer_norm, global_self_attn_layer_norm, and
    // self_attn's q_proj, k_proj, v_proj, out_proj.
    static global_local_attention_weights read(const tensor_source& layer, index_t H) {
        global_local_attention_weights w;
        auto n = layer_norm<float, cpu>::read(layer / "self_attn_layer_norm", H);
        auto g = layer_norm<float, cpu>::read(layer / "global_self_attn_layer_norm", H);
        w.norm_w = std::move(n.w), w.norm_b = std::move(n.b), w.global_norm_w = std::move(g.w), w.global_norm_b = std::move(g.b);
        const tensor_source m = layer / "self_attn";
        constexpr auto large = param_storage::large_product;
        w.q = m.get("q_proj.weight", {H, H}, {param_kind::query, large});
        w.k = m.get("k_proj.weight", {H, H}, {param_kind::key, large});
        w.v = m.get("v_proj.weight", {H, H}, {param_kind::value, large});
        w.o = m.get("out_proj.weight", {H, H}, {param_kind::attention_out, large});
        return w;
    }
};

// What every layer reads for one input: the padding, and the global tokens' states (B·G, H),
// which every layer updates and its feed-forward runs over too (extra_rows()).
template <class Scalar, class Backend>
struct global_local_inputs {
    padding_bias<Scalar, Backend> padding;
    tensor<Scalar, Backend> globals;
    index_t query_block = 512;
    std::pair<Scalar*, index_t> extra_rows() noexcept { return {globals.data(), globals.empty() ? 0 : globals.dim(0)}; }
};

template <class Scalar, class Backend>
class global_local_attention {
public:
    using inputs = global_local_inputs<Scalar, Backend>;
    using weights = global_local_attention_weights;

    global_local_attention() = default;
    // G global tokens per row; block: block_size; staggered: this layer's blocks start half a
    // block earlier.
    // p: the projections' precision (bf16_products under compute = bf16).
    global_local_attention(const global_local_attention_weights& w, double eps, index_t heads, index_t G, index_t block, bool staggered,
                           weight_precision p = weight_precision::native)
        : norm_(w.norm_w, w.norm_b, eps),
          global_norm_(w.global_norm_w, w.global_norm_b, eps),
          H_(w.o.dim(0)),
          inner_(w.o.dim(1)),
          heads_(heads),
          d_(inner_ / heads),
          G_(G),
          blocks_{block, staggered ? block / 2 : 0} {
        const double s = 1.0 / std::sqrt(static_cast<double>(d_));
        wqkv_ = weight_matrix<Scalar, Backend>(stack_rows(stack_rows(scaled(w.q, s), w.k), w.v), p);
        wo_ = weight_matrix<Scalar, Backend>(w.o, p);
    }

    index_t globals() const noexcept { return G_; }
    disjoint_blocks blocks() const noexcept { return blocks_; }

    // Scratch forward() needs for B rows of L tokens (and their G global tokens each).
    index_t scratch_size(index_t B, index_t L) const noexcept { return scratch_elements(H_, inner_, G_, B, L); }
    // The same from the dimensions alone (the memory estimate, before any layer exists).
    static constexpr index_t scratch_elements(index_t H, index_t inner, index_t G, index_t B, index_t L) noexcept {
        return (B * L + B * G) * (H + 4 * inner);
    }

    // x (B·L, H) and the global tokens' states in.globals (B·G, H) += their attention outputs;
    // in.query_block bounds a query group (groups never cross a block).
    void forward(Scalar* x, index_t B, index_t L, inputs& in, Scalar* scratch) const {
        const index_t G = G_, n = B * L, m = B * G, I = inner_;
        Scalar* g = in.globals.data();
        const Scalar* key_bias = in.padding.data();
        Scalar* u = scratch;               // (n + m, H): u | ū
        Scalar* qkv = u + (n + m) * H_;    // (n + m, 3I): tokens' q | k | v, then the globals'
        Scalar* ctx = qkv + (n + m) * 3 * I;  // (n + m, I)
        Scalar* ug = u + n * H_;
        Scalar* gqkv = qkv + n * 3 * I;
        Scalar* gctx = ctx + n * I;
        norm_.forward(x, u, n);
        global_norm_.forward(g, ug, m);
        wqkv_.apply(u, qkv, n + m);

        const local_qkv<Scalar> tokens{qkv, qkv + I, qkv + 2 * I, 3 * I, 3 * I, 3 * I};
        global_segment<Scalar> globals{gqkv + I, gqkv + 2 * I, 3 * I, G * 3 * I, std::vector<index_t>(static_cast<std::size_t>(B), G)};
        local_attention<Scalar, Backend>(tokens, B, L, heads_, d_, blocks_, std::min(in.query_block, blocks_.block), key_bias, nullptr,
                                         globals, {}, ctx, I);
        attend_globals(qkv, gqkv, B, L, G, key_bias, gctx);
        wo_.apply(ctx, x, n, /*accumulate=*/true);
        wo_.apply(gctx, g, m, /*accumulate=*/true);
    }

private:
    // gctx (B·G, I): every global token of row b over the row's L token keys (padding masked)
    // and its G global keys.
    void attend_globals(const Scalar* qkv, const Scalar* gqkv, index_t B, index_t L, index_t G, const Scalar* key_bias,
                        Scalar* gctx) const {
        const index_t I = inner_;
        std::vector<ops::attention_problem<Scalar>> problems;
        problems.reserve(static_cast<std::size_t>(B * heads_));
        for (index_t b = 0; b < B; ++b)
            for (index_t h = 0; h < heads_; ++h) {
                ops::attention_problem<Scalar> p;
                p.q = gqkv + b * G * 3 * I + h * d_;
                p.nq = G;
                p.ldq = 3 * I;
                p.k = native_rows(qkv + b * L * 3 * I + I + h * d_, 3 * I);
                p.v = native_rows(qkv + b * L * 3 * I + 2 * I + h * d_, 3 * I);
                p.nk = L;
                if (key_bias) p.key_bias = key_bias + b * L;
                p.k2 = native_rows(gqkv + b * G * 3 * I + I + h * d_, 3 * I);
                p.v2 = native_rows(gqkv + b * G * 3 * I + 2 * I + h * d_, 3 * I);
                p.nk2 = G;
                p.out = gctx + b * G * I + h * d_;
                p.ldo = I;
                problems.push_back(p);
            }
        ops::attention<Backend>(problems, d_);
    }

    layer_norm<Scalar, Backend> norm_, global_norm_;
    weight_matrix<Scalar, Backend> wqkv_;  // (3I, H), Wq scaled
    weight_matrix<Scalar, Backend> wo_;    // (H, I)
    index_t H_ = 0, inner_ = 0, heads_ = 0, d_ = 0, G_ = 0;
    disjoint_blocks blocks_;
};

} // namespace locost::layers
