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
#include "normed_attention.hpp"
#include "tensor_source.hpp"

namespace locost::layers {

struct global_local_attention_weights {
    normed_attention_weights<layer_norm_before> local;  // self_attn (no biases), self_attn_layer_norm
    layer_norm<float, cpu>::weights global_norm;        // (H): global_self_attn_layer_norm

    // Under an encoder layer's prefix: self_attn_layer_norm, self_attn's projections and
    // global_self_attn_layer_norm.
    static global_local_attention_weights read(const tensor_source& layer, index_t H) {
        constexpr auto large = param_storage::large_product;
        auto local =
            normed_attention_weights<layer_norm_before>::read(layer / "self_attn", layer / "self_attn_layer_norm", H, H, large, large);
        return {std::move(local), layer_norm<float, cpu>::read(layer / "global_self_attn_layer_norm", H)};
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
class global_local_attention : public normed_qkv_attention<Scalar, Backend, layer_norm_before> {
    using base = normed_qkv_attention<Scalar, Backend, layer_norm_before>;

public:
    using inputs = global_local_inputs<Scalar, Backend>;
    using weights = global_local_attention_weights;

    global_local_attention() = default;
    // G global tokens per row; block: block_size; staggered: this layer's blocks start half a
    // block earlier.
    // p: the projections' precision (bf16_products under compute = bf16).
    global_local_attention(const global_local_attention_weights& w, double eps, index_t heads, index_t G, index_t block, bool staggered,
                           weight_precision p = weight_precision::native)
        : base(w.local, eps, heads, p), global_norm_(w.global_norm, eps), G_(G), blocks_{block, staggered ? block / 2 : 0} {}

    index_t globals() const noexcept { return G_; }
    disjoint_blocks blocks() const noexcept { return blocks_; }

    // Scratch forward() needs for B rows of L tokens (and their G global tokens each).
    index_t scratch_size(index_t B, index_t L) const noexcept { return scratch_elements(this->dims_.H, this->dims_.inner, G_, B, L); }
    // The same from the dimensions alone (the memory estimate, before any layer exists).
    static constexpr index_t scratch_elements(index_t H, index_t inner, index_t G, index_t B, index_t L) noexcept {
        return (B * L + B * G) * (H + 4 * inner);
    }

    // x (B·L, H) and the global tokens' states in.globals (B·G, H) += their attention outputs;
    // in.query_block bounds a query group (groups never cross a block).
    void forward(Scalar* x, index_t B, index_t L, inputs& in, Scalar* scratch) const {
        const index_t G = G_, n = B * L, m = B * G, I = this->dims_.inner, H = this->dims_.H, heads = this->dims_.heads, d = this->dims_.d;
        Scalar* g = in.globals.data();
        const Scalar* key_bias = in.padding.data();
        Scalar* u = scratch;                  // (n + m, H): u | ū
        Scalar* qkv = u + (n + m) * H;        // (n + m, 3I): tokens' q | k | v, then the globals'
        Scalar* ctx = qkv + (n + m) * 3 * I;  // (n + m, I)
        Scalar* ug = u + n * H;
        Scalar* gqkv = qkv + n * 3 * I;
        Scalar* gctx = ctx + n * I;
        this->norm_.forward(x, u, n);
        global_norm_.forward(g, ug, m);
        this->qkv_.apply(u, qkv, n + m);

        const local_qkv<Scalar> tokens{qkv, qkv + I, qkv + 2 * I, 3 * I, 3 * I, 3 * I};
        global_segment<Scalar> globals{gqkv + I, gqkv + 2 * I, 3 * I, G * 3 * I, std::vector<index_t>(static_cast<std::size_t>(B), G)};
        local_attention<Scalar, Backend>(tokens, B, L, heads, d, blocks_, std::min(in.query_block, blocks_.block), key_bias, nullptr,
                                         globals, {}, ctx, I);
        attend_globals(qkv, gqkv, B, L, G, key_bias, gctx);
        this->o_.apply(ctx, x, n, /*accumulate=*/true);
        this->o_.apply(gctx, g, m, /*accumulate=*/true);
    }

private:
    // gctx (B·G, I): every global token of row b over the row's L token keys (padding masked)
    // and its G global keys.
    void attend_globals(const Scalar* qkv, const Scalar* gqkv, index_t B, index_t L, index_t G, const Scalar* key_bias,
                        Scalar* gctx) const {
        const index_t I = this->dims_.inner, heads = this->dims_.heads, d = this->dims_.d;
        std::vector<ops::attention_problem<Scalar>> problems;
        problems.reserve(static_cast<std::size_t>(B * heads));
        for (index_t b = 0; b < B; ++b)
            for (index_t h = 0; h < heads; ++h) {
                ops::attention_problem<Scalar> p;
                p.q = gqkv + b * G * 3 * I + h * d;
                p.nq = G;
                p.ldq = 3 * I;
                p.k = native_rows(qkv + b * L * 3 * I + I + h * d, 3 * I);
                p.v = native_rows(qkv + b * L * 3 * I + 2 * I + h * d, 3 * I);
                p.nk = L;
                if (key_bias) p.key_bias = key_bias + b * L;
                p.k2 = native_rows(gqkv + b * G * 3 * I + I + h * d, 3 * I);
                p.v2 = native_rows(gqkv + b * G * 3 * I + 2 * I + h * d, 3 * I);
                p.nk2 = G;
                p.out = gctx + b * G * I + h * d;
                p.ldo = I;
                problems.push_back(p);
            }
        ops::attention<Backend>(problems, d);
    }

    layer_norm<Scalar, Backend> global_norm_;
    index_t G_ = 0;
    disjoint_blocks blocks_;
};

}  // namespace locost::layers
