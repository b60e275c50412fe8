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
// than read past it. Names: bart_style_layout's (layout.hpp), each layer's self_attn,
// encoder_attn and their *_layer_norm, and the feed-forward's.
#pragma once
#include "../../layers/biased_feed_forward.hpp"
#include "../../layers/normed_attention.hpp"
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
struct bart_decoder_layout
    : bart_style_decoder<decoder_layout<Scalar, Backend, bart_config, bart_decoder_input<Scalar, Backend>,
                                        layers::normed_self_attention<Scalar, Backend, layers::layer_norm_after>,
                                        layers::normed_cross_attention<Scalar, Backend, layers::layer_norm_after>,
                                        layers::biased_feed_forward<Scalar, Backend, Act>, no_final<Scalar, Backend>>> {};

template <class Scalar, class Backend, activation Act>
using bart_decoder = decoder_stack<bart_decoder_layout<Scalar, Backend, Act>>;

}  // namespace locost::models
