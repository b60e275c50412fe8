// The Pegasus-X decoder with its LM head — PegasusXDecoder + lm_head (pre-LayerNorm):
//
//     x = s·shared[tokens] + PE(position)        s as the encoder's; PE sinusoidal, positions
//                                                 counted from the first decoder token
//     for each layer i:  x += SelfAttention_i(LayerNorm(x), causal)       (layers/normed_attention.hpp)
//                        x += CrossAttention_i(LayerNorm(x), encoder states)
//                        x += FF_i(LayerNorm(x))
//     logits = LayerNorm(x) · sharedᵀ            decoder.layer_norm; tied head, unscaled, no bias
//
// Positions are sinusoidal, so the decoder has no length limit of its own. Names: each layer's
// self_attn, encoder_attn, their *_layer_norm, and the feed-forward's.
#pragma once
#include "../../layers/biased_feed_forward.hpp"
#include "../../layers/normed_attention.hpp"
#include "../decoder_stack.hpp"
#include "encoder.hpp"

namespace locost::models {

// The embedding; β is the causal mask alone.
template <class Scalar, class Backend>
class pegasus_x_decoder_input : public pegasus_x_embedding<Scalar, Backend> {
    using base = pegasus_x_embedding<Scalar, Backend>;

public:
    static constexpr bool has_logits_bias = false;
    using weights = tensor<float>;
    static weights read(const layers::tensor_source& root, const pegasus_x_config& c) {
        return bart_style_layout::shared(root, c.weights_root, layers::model_stack::decoder, c);
    }
    pegasus_x_decoder_input(weights&& w, const pegasus_x_config& c) : base(std::move(w), c) {}

    void embed(const std::int64_t* tokens, index_t R, index_t T, index_t P, index_t, Scalar* x) const { base::embed(tokens, R, T, P, x); }
    void check_capacity(index_t) const {}
    index_t band_heads() const noexcept { return 0; }
    float band_value(index_t, index_t) const noexcept { return 0.0f; }
};

template <class Scalar, class Backend, activation Act>
struct pegasus_x_decoder_layout
    : bart_style_decoder<decoder_layout<Scalar, Backend, pegasus_x_config, pegasus_x_decoder_input<Scalar, Backend>,
                                        layers::normed_self_attention<Scalar, Backend, layers::layer_norm_before>,
                                        layers::normed_cross_attention<Scalar, Backend, layers::layer_norm_before>,
                                        layers::biased_feed_forward<Scalar, Backend, Act, /*PreNorm=*/true>,
                                        pegasus_x_final_norm<Scalar, Backend, layers::model_stack::decoder>>> {};

template <class Scalar, class Backend, activation Act>
using pegasus_x_decoder = decoder_stack<pegasus_x_decoder_layout<Scalar, Backend, Act>>;

}  // namespace locost::models
