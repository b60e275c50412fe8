// The T5 decoder with its LM head — docs/models.md §2; the decoder of every family whose config is
// a T5Config (T5, LongT5, LOCOST):
//
//     x = shared[tokens]                          (no scaling)
//     for each block i:  x = SelfAttention_i(x, β of block 0, causal)
//                        x = CrossAttention_i(x, encoder states)
//                        x = FeedForward_i(x)
//     h = RMSNorm(x)                              decoder.final_layer_norm
//     logits = (h · d_model^−½) · sharedᵀ         tied (tie_word_embeddings true), scaled
//            = h · lm_headᵀ                       untied
//   The d_model^−½ scale is applied when scale_decoder_outputs (transformers 5's key; absent, it
//   is tie_word_embeddings, transformers 4's rule): models/config.hpp.
//
// Names: decoder.block.<i>.layer.0 (SelfAttention; block 0's relative_attention_bias), layer.1
// (EncDecAttention), layer.2 (the feed-forward), decoder.final_layer_norm; shared.weight and
// lm_head.weight at the root.
#pragma once
#include <memory>

#include "../../layers/relative_position_bias.hpp"
#include "../../layers/normed_attention.hpp"
#include "../../layers/rms_feed_forward.hpp"
#include "../../layers/token_embedding.hpp"
#include "../decoder_stack.hpp"
#include "encoder.hpp"

namespace locost::models {

// shared[tokens]; β is block 0's relative bias, unidirectional.
template <class Scalar, class Backend>
class t5_decoder_input {
public:
    static constexpr bool has_logits_bias = false;
    using weights = t5_layout::input_weights;
    static weights read(const layers::tensor_source& root, const t5_style_config& c) {
        return t5_layout::input(root, layers::model_stack::decoder, c, c.decoder_heads);
    }

    t5_decoder_input(weights&& w, const t5_style_config& c)
        : tokens_(std::move(w.shared), 1.0), bias_(w.relative_bias, /*bidirectional=*/false, c.relative_attention_max_distance),
          heads_(c.decoder_heads) {}

    void embed(const std::int64_t* tokens, index_t R, index_t T, index_t, index_t, Scalar* x) const { tokens_.embed(tokens, R * T, x); }
    void check_capacity(index_t) const {}
    index_t band_heads() const noexcept { return heads_; }
    float band_value(index_t r, index_t h) const { return bias_.value(r, h); }
    std::shared_ptr<tensor<Scalar, Backend>> embedding() const { return tokens_.table(); }

private:
    layers::token_embedding<Scalar, Backend> tokens_;
    layers::relative_position_bias bias_;
    index_t heads_ = 0;
};

template <class Scalar, class Backend, activation Act, bool Gated>
struct t5_decoder_layout
    : decoder_layout<Scalar, Backend, t5_style_config, t5_decoder_input<Scalar, Backend>,
                     layers::normed_self_attention<Scalar, Backend, layers::rms_before>,
                     layers::normed_cross_attention<Scalar, Backend, layers::rms_before>,
                     layers::rms_feed_forward<Scalar, Backend, Act, Gated>, t5_final_norm<Scalar, Backend, layers::model_stack::decoder>> {
    static auto read_self(const layers::tensor_source& root, const t5_style_config& c, index_t i) {
        constexpr auto per_step = layers::param_storage::per_step;
        return t5_layout::attention<typename t5_decoder_layout::self_attention>(root, layers::model_stack::decoder, i, 0, "SelfAttention",
                                                                                c.d_model, inner(c), per_step, per_step);
    }
    static auto read_cross(const layers::tensor_source& root, const t5_style_config& c, index_t i) {
        return t5_layout::attention<typename t5_decoder_layout::cross_attention>(
            root, layers::model_stack::decoder, i, 1, "EncDecAttention", c.d_model, inner(c), layers::param_storage::per_step,
            layers::param_storage::large_product);
    }
    static auto read_feed_forward(const layers::tensor_source& root, const t5_style_config& c, index_t i) {
        return layers::rms_feed_forward<Scalar, Backend, Act, Gated>::read(sub(root, i, 2), c.d_model, c.decoder_d_ff,
                                                                           layers::param_storage::per_step);
    }

private:
    static layers::tensor_source sub(const layers::tensor_source& root, index_t i, int k) {
        return t5_layout::layer(root, layers::model_stack::decoder, i, k);
    }
    static index_t inner(const t5_style_config& c) { return c.decoder_heads * c.decoder_d_kv; }
};

template <class Scalar, class Backend, activation Act, bool Gated>
using t5_decoder = decoder_stack<t5_decoder_layout<Scalar, Backend, Act, Gated>>;

}  // namespace locost::models
