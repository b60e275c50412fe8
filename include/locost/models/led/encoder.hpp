// The LED encoder — LEDEncoder (post-LayerNorm, as BART's):
//
//     x = LayerNorm_emb(shared[ids] + P[t])              learned positions, no offset
//     for each layer i:  x = LayerNorm(x + LongformerSelfAttention_i(x))   window w_i, global tokens
//                        x = LayerNorm(x + FF_i(x))
//
// Global tokens are encoder_options::global_tokens (default: the first token), the same positions
// in every row; attention costs O(L·(w + |G|)) (layers/sliding_window_global_attention.hpp), so a
// 16K-token input needs no L × L matrix. Hugging Face pads the input to a multiple of the window
// with masked tokens; here windows are clipped instead, which gives the same states on the real
// tokens. At most max_encoder_position_embeddings tokens (encode.too_long beyond). The tensors are
// BART's under "led" (models/bart/encoder.hpp), each layer's attention Longformer's.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "../../layers/sliding_window_global_attention.hpp"
#include "../bart/encoder.hpp"
#include "config.hpp"

namespace locost::models {

// The embedding; for each input, the global tokens of every row and the key biases they imply.
template <class Scalar, class Backend>
class led_encoder_input : public learned_position_embedding<Scalar, Backend, layers::model_stack::encoder> {
    using base = learned_position_embedding<Scalar, Backend, layers::model_stack::encoder>;

public:
    using inputs = layers::global_token_inputs<Scalar, Backend>;

    led_encoder_input(typename base::weights&& w, const bart_config& c, const encoder_options& o)
        : base(std::move(w), c), source_(c.source) {
        globals_ = o.global_tokens;
        std::sort(globals_.begin(), globals_.end());
        globals_.erase(std::unique(globals_.begin(), globals_.end()), globals_.end());
    }

    std::optional<index_t> max_context() const { return this->max_positions(); }

    // Error: encode.bad_global_token for a global position past the input.
    void embed(const std::int64_t* ids, const float* mask, index_t B, index_t L, Scalar* x, inputs& in) const {
        this->check(L);
        std::vector<std::vector<index_t>> rows(static_cast<std::size_t>(B));
        for (index_t b = 0; b < B; ++b)
            for (index_t p : globals_) {
                if (p < 0 || p >= L)
                    throw error("encode.bad_global_token",
                                source_ + ": global token position " + std::to_string(p) + " is outside the input's " + std::to_string(L) +
                                    " positions");
                if (!mask || mask[b * L + p] != 0.0f) rows[static_cast<std::size_t>(b)].push_back(p);
            }
        base::embed(ids, B, L, 0, x);
        in.prepare(mask, B, L, std::move(rows));
    }

private:
    std::string source_;
    std::vector<index_t> globals_;  // sorted, distinct
};

template <class Scalar, class Backend, activation Act>
struct led_encoder_layout
    : bart_style_encoder<encoder_layout<Scalar, Backend, led_config, led_encoder_input<Scalar, Backend>,
                                        layers::sliding_window_global_attention<Scalar, Backend>,
                                        layers::biased_feed_forward<Scalar, Backend, Act>, no_final<Scalar, Backend>>> {
    using mixer = layers::sliding_window_global_attention<Scalar, Backend>;
    static layers::sliding_window_global_weights read_mixer(const layers::tensor_source& root, const led_config& c, index_t i) {
        return layers::sliding_window_global_weights::read(bart_style_layout::layer(root, c.weights_root, layers::model_stack::encoder, i),
                                                           c.d_model);
    }
    // Each layer's window: attention_window[i].
    static mixer make_mixer(layers::sliding_window_global_weights&& w, const led_config& c, index_t i, const encoder_options& o,
                            const led_encoder_input<Scalar, Backend>&) {
        return mixer(w, c.layer_norm_epsilon, c.num_heads, c.attention_window[static_cast<std::size_t>(i)], large_products(o.compute));
    }
};

template <class Scalar, class Backend, activation Act>
using led_encoder = encoder_stack<led_encoder_layout<Scalar, Backend, Act>>;

}  // namespace locost::models
