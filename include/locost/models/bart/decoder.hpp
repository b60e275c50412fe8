// The BART decoder with its LM head — BartDecoder + BartForConditionalGeneration.lm_head (also
// LED's, under "led"):
//
//     x = LayerNorm_emb(s·shared[tokens] + P[position + 2])     s as the encoder's
//     for each layer i:  x = LayerNorm(x + SelfAttention_i(x, causal))
//                        x = LayerNorm(x + CrossAttention_i(x, encoder states))
//                        x = LayerNorm(x + FF_i(x))
//     logits = x · sharedᵀ + final_logits_bias                  (tied, unscaled)
//
// Positions are learned: start() refuses a capacity beyond the table (decode.too_long) rather
// than read past it. Names: bart_layout's (models/bart/encoder.hpp), each layer's self_attn,
// encoder_attn and their *_layer_norm, and the feed-forward's.
#pragma once
#include "../../layers/biased_feed_forward.hpp"
#include "../../layers/post_norm_attention.hpp"
#include "../decoder_stack.hpp"
#include "encoder.hpp"

namespace locost::models {

// The embedding; β is the causal mask alone.
template <class Scalar, class Backend>
class bart_decoder_input : public learned_position_embedding<Scalar, Backend, layers::model_stack::decoder> {
    using base = learned_position_embedding<Scalar, Backend, layers::model_stack::decoder>;

public:
    static constexpr bool has_logits_bias = true;
    using base::base;

    void embed(const std::int64_t* tokens, index_t R, index_t T, index_t P, index_t, Scalar* x) const { base::embed(tokens, R, T, P, x); }
    void check_capacity(index_t capacity) const { this->check(capacity); }
    index_t band_heads() const noexcept { return 0; }
    float band_value(index_t, index_t) const noexcept { return 0.0f; }
};

template <class Scalar, class Backend, activation Act>
struct bart_decoder_layout {
    using scalar = Scalar;
    using backend = Backend;
    using config = bart_config;
    using input = bart_decoder_input<Scalar, Backend>;
    using self_attention = layers::post_norm_self_attention<Scalar, Backend>;
    using cross_attention = layers::post_norm_cross_attention<Scalar, Backend>;
    using feed_forward = layers::biased_feed_forward<Scalar, Backend, Act>;
    using final = no_final<Scalar, Backend>;

    struct block_weights {
        layers::biased_attention_weights self, cross;
        typename feed_forward::weights ff;
    };
    static block_weights read_block(const layers::tensor_source& root, const config& c, index_t i) {
        constexpr auto per_step = layers::param_storage::per_step, large = layers::param_storage::large_product;
        const auto l = bart_layout::layer(root, c, layers::model_stack::decoder, i);
        return {layers::biased_attention_weights::read(l / "self_attn", l / "self_attn_layer_norm", c.d_model, per_step, per_step),
                layers::biased_attention_weights::read(l / "encoder_attn", l / "encoder_attn_layer_norm", c.d_model, per_step, large),
                feed_forward::read(l, c.d_model, c.decoder_d_ff, per_step)};
    }
};

template <class Scalar, class Backend, activation Act>
using bart_decoder = decoder_stack<bart_decoder_layout<Scalar, Backend, Act>>;

} // namespace locost::models
