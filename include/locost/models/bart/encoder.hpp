// The BART encoder — BartEncoder (post-LayerNorm):
//
//     x = LayerNorm_emb(s·shared[ids] + P[t + 2])     s = √d_model with scale_embedding, else 1
//     for each layer i:  x = LayerNorm(x + SelfAttention_i(x, padding mask))
//                        x = LayerNorm(x + FF_i(x))
//
// No final norm (BART's stack ends with the last layer's). Positions are learned, so the encoder
// reads at most max_position_embeddings tokens at once (max_context()); longer inputs are refused
// with encode.too_long, and SLED (models/sled.hpp) runs them chunk by chunk. Attention runs in
// query blocks as T5's (encoder_options::attention_query_block): memory O(B·L·inner) beside the
// weights.
//
// Where BART's stacks keep their tensors: bart_style_layout (layout.hpp) under the config's root
// "model" (LED: "led"), and "<root>.<stack>.embed_positions", "<root>.<stack>.layernorm_embedding".
#pragma once
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "../../layers/biased_feed_forward.hpp"
#include "../../layers/layer_norm.hpp"
#include "../../layers/learned_positions.hpp"
#include "../../layers/normed_attention.hpp"
#include "../../layers/tensor_source.hpp"
#include "../../layers/token_embedding.hpp"
#include "../encoder_stack.hpp"
#include "../options.hpp"
#include "config.hpp"
#include "layout.hpp"

namespace locost::models {

// LayerNorm(s·shared[ids] + P[offset + position]): the embedding of BART's and LED's stacks.
template <class Scalar, class Backend, layers::model_stack Stack>
class learned_position_embedding {
public:
    struct weights {
        tensor<float> shared, positions;
        typename layers::layer_norm<Scalar, Backend>::weights norm;
    };
    static weights read(const layers::tensor_source& root, const bart_config& c) {
        const index_t H = c.d_model;
        const auto at = bart_style_layout::stack(root, c.weights_root, Stack);
        return {bart_style_layout::shared(root, c.weights_root, Stack, c),
                layers::learned_positions<Scalar, Backend>::read(at, max_of(c) + c.position_offset, H),
                layers::layer_norm<Scalar, Backend>::read(at / "layernorm_embedding", H)};
    }

    learned_position_embedding(weights&& w, const bart_config& c)
        : tokens_(std::move(w.shared), c.scale_embedding ? std::sqrt(static_cast<double>(c.d_model)) : 1.0),
          positions_(w.positions, c.position_offset), norm_(w.norm, c.layer_norm_epsilon), source_(c.source),
          field_(Stack == layers::model_stack::encoder ? c.encoder_positions_field : c.decoder_positions_field), label_(c.label) {}

    index_t max_positions() const noexcept { return positions_.max_positions(); }
    std::shared_ptr<tensor<Scalar, Backend>> embedding() const { return tokens_.table(); }

    // x (rows·T, H) = LayerNorm(s·shared[ids] + P[first + t]) for row r's t-th id.
    void embed(const std::int64_t* ids, index_t rows, index_t T, index_t first, Scalar* x) const {
        tokens_.embed(ids, rows * T, x);
        positions_.add(x, rows, T, first);
        norm_.forward(x, x, rows * T);
    }

    // Error: encode.too_long (the encoder) or decode.too_long (the decoder) when `positions`
    // exceed the table.
    void check(index_t positions) const {
        const index_t max = max_positions();
        if (positions <= max) return;
        if constexpr (Stack == layers::model_stack::encoder)
            throw error("encode.too_long",
                        source_ + ": " + std::to_string(positions) + " tokens exceed " + field_ + " (" + std::to_string(max) + ", " +
                            label_ + "'s learned positions); run longer inputs through SLED (--sled-context " + std::to_string(max) + ")");
        else
            throw error("decode.too_long",
                        source_ + ": " + std::to_string(positions) + " decoder positions exceed " + field_ + " (" + std::to_string(max) +
                            ")");
    }

private:
    static index_t max_of(const bart_config& c) {
        return Stack == layers::model_stack::encoder ? c.max_encoder_positions : c.max_position_embeddings;
    }

    layers::token_embedding<Scalar, Backend> tokens_;
    layers::learned_positions<Scalar, Backend> positions_;
    layers::layer_norm<Scalar, Backend> norm_;
    std::string source_, field_, label_;
};

// The embedding; for each input, the padding (BART's attention has no position bias).
template <class Scalar, class Backend>
class bart_encoder_input : public learned_position_embedding<Scalar, Backend, layers::model_stack::encoder> {
    using base = learned_position_embedding<Scalar, Backend, layers::model_stack::encoder>;

public:
    bart_encoder_input(typename base::weights&& w, const bart_config& c, const encoder_options& o)
        : base(std::move(w), c), query_block_(o.attention_query_block) {}

    std::optional<index_t> max_context() const { return this->max_positions(); }

    void embed(const std::int64_t* ids, const float* mask, index_t B, index_t L, Scalar* x,
               layers::dense_attention_inputs<Scalar, Backend>& in) const {
        this->check(L);
        base::embed(ids, B, L, 0, x);
        in.padding.prepare(mask, B * L);
        in.query_block = query_block_;
    }

private:
    index_t query_block_ = 512;
};

template <class Scalar, class Backend, activation Act>
struct bart_encoder_layout
    : bart_style_encoder<encoder_layout<Scalar, Backend, bart_config, bart_encoder_input<Scalar, Backend>,
                                        layers::normed_encoder_attention<Scalar, Backend, layers::layer_norm_after>,
                                        layers::biased_feed_forward<Scalar, Backend, Act>, no_final<Scalar, Backend>>> {
    static auto read_mixer(const layers::tensor_source& root, const bart_config& c, index_t i) {
        constexpr auto large = layers::param_storage::large_product;
        const auto l = bart_style_layout::layer(root, c.weights_root, layers::model_stack::encoder, i);
        return bart_encoder_layout::mixer::weights::read(l / "self_attn", l / "self_attn_layer_norm", c.d_model, c.d_model, large, large);
    }
};

template <class Scalar, class Backend, activation Act>
using bart_encoder = encoder_stack<bart_encoder_layout<Scalar, Backend, Act>>;

}  // namespace locost::models
