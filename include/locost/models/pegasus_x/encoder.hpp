// The Pegasus-X encoder stack — PegasusXEncoder (Phang et al. 2022; pre-LayerNorm):
//
//     x = s·shared[ids] + PE(t)                 s = √d_model with scale_embedding; PE sinusoidal
//     g = embed_global                          G learned global tokens, the same for every row
//     for each layer i:  x, g += GlobalLocalAttention_i(x, g)     (layers/global_local_attention.hpp;
//                                                                   odd layers staggered)
//                        x += FF_i(LayerNorm_i(x));  g += FF_i(LayerNorm_i(g))   (one FF, one norm)
//     h = LayerNorm(x)                          encoder.layer_norm; the global tokens are dropped
//
// Attention is block-local plus G global tokens, so time and memory grow as L·(block + G) —
// linearly. Positions are sinusoidal: any length (max_position_embeddings is not a limit).
// Memory for B rows of L tokens (float): x B·L·H + attention scratch (B·L + B·G)·(2H + 4H) +
// one query group's scores per problem, plus the weights.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../../core/tensor.hpp"
#include "../../io/checkpoint.hpp"
#include "../../layers/bart_feed_forward.hpp"
#include "../../layers/global_local_attention.hpp"
#include "../../layers/layer_norm.hpp"
#include "../../layers/parameter.hpp"
#include "../../layers/sinusoidal_positions.hpp"
#include "../../ops/embedding.hpp"
#include "../bart/encoder.hpp"
#include "../concepts.hpp"
#include "../options.hpp"
#include "../seq2seq.hpp"
#include "config.hpp"
#include "parameters.hpp"

namespace locost::models {

namespace detail {

inline double pegasus_x_embed_scale(const pegasus_x_config& c) { return c.scale_embedding ? std::sqrt(static_cast<double>(c.d_model)) : 1.0; }

} // namespace detail

template <class Scalar, class Backend, activation Act>
class pegasus_x_encoder {
public:
    using scalar = Scalar;
    using backend = Backend;
    using attention_layer = layers::global_local_attention<Scalar, Backend>;
    using ff_layer = layers::bart_feed_forward<Scalar, Backend, Act, /*PreNorm=*/true>;

    // Reads the encoder of checkpoint `ck` whose config is `c` (names: pegasus_x/parameters.hpp).
    pegasus_x_encoder(const io::checkpoint& ck, const pegasus_x_config& c, const encoder_options& o)
        : d_model_(c.d_model), vocab_(c.vocab_size), globals_(c.num_global_tokens), opt_(o) {
        using namespace pegasus_x_names;
        const index_t H = c.d_model, F = c.d_ff, G = c.num_global_tokens;
        const double eps = c.layer_norm_epsilon;
        auto w = std::make_shared<weights>();
        w->shared = layers::to_backend<Scalar, Backend>(ck.load_f32(shared, {c.vocab_size, H}));
        w->embed_scale = static_cast<Scalar>(detail::pegasus_x_embed_scale(c));
        w->global_tokens = layers::to_backend<Scalar, Backend>(ck.load_f32(global_tokens, {G, H}));
        w->positions = layers::sinusoidal_positions<Scalar, Backend>(H);
        for (index_t i = 0; i < c.num_layers; ++i) {
            const std::string l = layer("encoder", i), m = l + "self_attn.";
            layers::global_local_attention_weights a;
            a.norm_w = ck.load_f32(l + "self_attn_layer_norm.weight", {H});
            a.norm_b = ck.load_f32(l + "self_attn_layer_norm.bias", {H});
            a.global_norm_w = ck.load_f32(l + "global_self_attn_layer_norm.weight", {H});
            a.global_norm_b = ck.load_f32(l + "global_self_attn_layer_norm.bias", {H});
            a.q = ck.load_f32(m + "q_proj.weight", {H, H});
            a.k = ck.load_f32(m + "k_proj.weight", {H, H});
            a.v = ck.load_f32(m + "v_proj.weight", {H, H});
            a.o = ck.load_f32(m + "out_proj.weight", {H, H});
            w->attention.emplace_back(a, eps, c.num_heads, G, c.block_size, c.staggered(i), large_products(o.compute));
            w->ff.emplace_back(detail::load_bart_feed_forward<typename ff_layer::weights>(ck, l, H, F), eps, large_products(o.compute));
        }
        w->final_norm = detail::load_layer_norm<Scalar, Backend>(ck, final_norm("encoder"), H, eps);
        weights_ = std::move(w);
    }

    // The encoder concept (models/concepts.hpp).
    index_t d_model() const noexcept { return d_model_; }
    index_t vocab_size() const noexcept { return vocab_; }
    output_positions output_span(index_t L) const noexcept { return {0, L}; }
    std::optional<index_t> max_context() const noexcept { return std::nullopt; }

    // ids (B, L), mask (B, L) of 0/1 or nullptr (checked by the caller) → (B, L, H).
    tensor<Scalar, Backend> forward(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& progress) {
        const weights& w = *weights_;
        const index_t H = d_model_, G = globals_, rows = B * L;
        tensor<Scalar, Backend> x({B, L, H});
        const layers::backend_array<std::int64_t, Backend> ids_on_backend(ids, rows);  // a device reads its own copy
        ops::embedding<Backend>(w.shared.data(), H, ids_on_backend.data(), rows, x.data(), w.embed_scale);
        w.positions.add(x.data(), B, L, 0);
        // g (B·G, H): every row starts from the same learned tokens.
        tensor<Scalar, Backend> g({B * G, H});
        std::vector<std::int64_t> token(static_cast<std::size_t>(B * G));
        for (index_t i = 0; i < B * G; ++i) token[static_cast<std::size_t>(i)] = i % G;
        const layers::backend_array<std::int64_t, Backend> token_on_backend(token.data(), B * G);
        ops::embedding<Backend>(w.global_tokens.data(), H, token_on_backend.data(), B * G, g.data());
        const index_t tile = std::max<index_t>(1, std::min(opt_.tile_rows, rows));
        run_encoder_layers(x.data(), B, L, H, w.attention, w.ff, opt_, scratch_, progress, [&](std::size_t i, Scalar* scratch) {
            w.attention[i].forward(x.data(), g.data(), B, L, mask, opt_.attention_query_block, scratch);
            for (index_t r0 = 0; r0 < B * G; r0 += tile) w.ff[i].forward(g.data() + r0 * H, std::min(tile, B * G - r0), scratch);
        });
        w.final_norm.forward(x.data(), x.data(), rows);
        return x;
    }

    void encode(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& p, const state_sink<Scalar>& sink) {
        tensor<Scalar, Backend> x = forward(ids, mask, B, L, p);
        // The layers' scratch (LongT5 local: B·L·(H + 4·inner + 1) values, 10.7 GB for the base
        // model at 700K tokens) is not kept while the cross-attention cache fills.
        scratch_.release();
        stream_dense_states(x, B, L, opt_.tile_rows, sink);
    }

    // Gives back the layers' scratch, which forward() keeps for the next call.
    void release_scratch() { scratch_.release(); }

private:
    struct weights {
        tensor<Scalar, Backend> shared, global_tokens;
        Scalar embed_scale = Scalar(1);
        layers::sinusoidal_positions<Scalar, Backend> positions;
        std::vector<attention_layer> attention;
        std::vector<ff_layer> ff;
        layers::layer_norm<Scalar, Backend> final_norm;
    };
    std::shared_ptr<const weights> weights_;  // shared by copies of the handle
    index_t d_model_ = 0, vocab_ = 0, globals_ = 0;
    encoder_options opt_;
    layers::scratch_buffer<Scalar, Backend> scratch_;
};

} // namespace locost::models
