// The BART encoder stack — BartEncoder (post-LayerNorm):
//
//     x = LayerNorm_emb(s·shared[ids] + P[t + 2])     s = √d_model with scale_embedding, else 1
//     for each layer i:  x = LayerNorm(x + SelfAttention_i(x, padding mask))
//                        x = LayerNorm(x + FF_i(x))
//
// No final norm (BART's stack ends with the last layer's). Positions are learned, so the
// encoder reads at most max_position_embeddings tokens at once (max_context()); longer inputs
// are refused with encode.too_long, and SLED (models/sled.hpp) runs them chunk by chunk.
// Attention runs in query blocks as T5's (encoder_options::attention_query_block): memory
// O(B·L·(H + 4·inner) + block·L) beside the weights.
#pragma once
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../../config/error.hpp"
#include "../../core/tensor.hpp"
#include "../../io/checkpoint.hpp"
#include "../../layers/bart_attention.hpp"
#include "../../layers/bart_feed_forward.hpp"
#include "../../layers/layer_norm.hpp"
#include "../../layers/learned_positions.hpp"
#include "../../layers/parameter.hpp"
#include "../../ops/embedding.hpp"
#include "../concepts.hpp"
#include "../options.hpp"
#include "../seq2seq.hpp"
#include "config.hpp"
#include "parameters.hpp"

namespace locost::models {

namespace detail {

inline layers::biased_attention_weights load_bart_attention(const io::checkpoint& ck, const std::string& module, const std::string& norm,
                                                            index_t H) {
    layers::biased_attention_weights w;
    w.q = ck.load_f32(module + "q_proj.weight", {H, H});
    w.k = ck.load_f32(module + "k_proj.weight", {H, H});
    w.v = ck.load_f32(module + "v_proj.weight", {H, H});
    w.o = ck.load_f32(module + "out_proj.weight", {H, H});
    w.bq = ck.load_f32(module + "q_proj.bias", {H});
    w.bk = ck.load_f32(module + "k_proj.bias", {H});
    w.bv = ck.load_f32(module + "v_proj.bias", {H});
    w.bo = ck.load_f32(module + "out_proj.bias", {H});
    w.norm_w = ck.load_f32(norm + "weight", {H});
    w.norm_b = ck.load_f32(norm + "bias", {H});
    return w;
}

template <class Weights>
Weights load_bart_feed_forward(const io::checkpoint& ck, const std::string& l, index_t H, index_t F) {
    Weights w;
    w.w1 = ck.load_f32(l + "fc1.weight", {F, H});
    w.b1 = ck.load_f32(l + "fc1.bias", {F});
    w.w2 = ck.load_f32(l + "fc2.weight", {H, F});
    w.b2 = ck.load_f32(l + "fc2.bias", {H});
    w.norm_w = ck.load_f32(l + "final_layer_norm.weight", {H});
    w.norm_b = ck.load_f32(l + "final_layer_norm.bias", {H});
    return w;
}

template <class Scalar, class Backend>
layers::layer_norm<Scalar, Backend> load_layer_norm(const io::checkpoint& ck, const std::string& prefix, index_t H, double eps) {
    return {ck.load_f32(prefix + "weight", {H}), ck.load_f32(prefix + "bias", {H}), eps};
}

inline double bart_embed_scale(const bart_config& c) { return c.scale_embedding ? std::sqrt(static_cast<double>(c.d_model)) : 1.0; }

} // namespace detail

template <class Scalar, class Backend, activation Act>
class bart_encoder {
public:
    using scalar = Scalar;
    using backend = Backend;
    using attention_layer = layers::bart_encoder_self_attention<Scalar, Backend>;
    using ff_layer = layers::bart_feed_forward<Scalar, Backend, Act>;

    // Reads the encoder of checkpoint `ck` whose config is `c` (names: bart/parameters.hpp).
    bart_encoder(const io::checkpoint& ck, const bart_config& c, const encoder_options& o)
        : d_model_(c.d_model), vocab_(c.vocab_size), layers_(c.num_layers), source_(c.source), opt_(o) {
        using namespace bart_names;
        const index_t H = c.d_model, F = c.d_ff;
        const double eps = c.layer_norm_epsilon;
        auto w = std::make_shared<weights>();
        w->shared = layers::to_backend<Scalar, Backend>(ck.load_f32(shared_of(c.weights_root), {c.vocab_size, H}));
        w->embed_scale = static_cast<Scalar>(detail::bart_embed_scale(c));
        w->positions = {ck.load_f32(positions("encoder", c.weights_root), {c.max_encoder_positions + c.position_offset, H}), c.position_offset};
        w->embedding_norm = detail::load_layer_norm<Scalar, Backend>(ck, embedding_norm("encoder", c.weights_root), H, eps);
        for (index_t i = 0; i < c.num_layers; ++i) {
            const std::string l = layer("encoder", i);
            w->attention.emplace_back(detail::load_bart_attention(ck, l + "self_attn.", l + "self_attn_layer_norm.", H), eps, c.num_heads,
                                      large_products(o.compute));
            w->ff.emplace_back(detail::load_bart_feed_forward<typename ff_layer::weights>(ck, l, H, F), eps, large_products(o.compute));
        }
        weights_ = std::move(w);
    }

    // The encoder concept (models/concepts.hpp).
    index_t d_model() const noexcept { return d_model_; }
    index_t vocab_size() const noexcept { return vocab_; }
    output_positions output_span(index_t L) const noexcept { return {0, L}; }
    std::optional<index_t> max_context() const noexcept { return weights_->positions.max_positions(); }

    // ids (B, L), mask (B, L) of 0/1 or nullptr (checked by the caller) → (B, L, H). Error:
    // encode.too_long when L exceeds the learned positions.
    tensor<Scalar, Backend> forward(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& progress) {
        const weights& w = *weights_;
        const index_t max = w.positions.max_positions();
        if (L > max)
            throw error("encode.too_long", source_ + ": " + std::to_string(L) + " tokens exceed max_position_embeddings (" +
                                               std::to_string(max) +
                                               ", BART's learned positions); run longer inputs through SLED (--sled-context " +
                                               std::to_string(max) + ")");
        const index_t H = d_model_, rows = B * L;
        tensor<Scalar, Backend> x({B, L, H});
        const layers::backend_array<std::int64_t, Backend> ids_on_backend(ids, rows);  // a device reads its own copy
        ops::embedding<Backend>(w.shared.data(), H, ids_on_backend.data(), rows, x.data(), w.embed_scale);
        w.positions.add(x.data(), B, L, 0);
        w.embedding_norm.forward(x.data(), x.data(), rows);
        run_encoder_layers(x.data(), B, L, H, w.attention, w.ff, opt_, scratch_, progress, [&](std::size_t i, Scalar* scratch) {
            w.attention[i].forward(x.data(), B, L, mask, opt_.attention_query_block, scratch);
        });
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
        tensor<Scalar, Backend> shared;
        Scalar embed_scale = Scalar(1);
        layers::learned_positions<Scalar, Backend> positions;
        layers::layer_norm<Scalar, Backend> embedding_norm;
        std::vector<attention_layer> attention;
        std::vector<ff_layer> ff;
    };
    std::shared_ptr<const weights> weights_;  // shared by copies of the handle
    index_t d_model_ = 0, vocab_ = 0, layers_ = 0;
    std::string source_;
    encoder_options opt_;
    layers::scratch_buffer<Scalar, Backend> scratch_;
};

} // namespace locost::models
