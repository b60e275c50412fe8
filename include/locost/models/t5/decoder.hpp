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
#include "../../layers/rms_attention.hpp"
#include "../../layers/rms_feed_forward.hpp"
#include "../decoder_stack.hpp"
#include "encoder.hpp"

namespace locost::models {

// shared[tokens]; β is block 0's relative bias, unidirectional.
template <class Scalar, class Backend>
class t5_decoder_input {
public:
    static constexpr bool has_logits_bias = false;
    struct weights {
        tensor<float> shared, relative_bias;
    };
    static weights read(const layers::tensor_source& root, const model_config& c) {
        const auto block0 = t5_layout::layer(root, layers::model_stack::decoder, 0, 0) / "SelfAttention";
        return {t5_layout::shared(root, layers::model_stack::decoder, c),
                layers::relative_position_bias::read(block0, c.relative_attention_num_buckets, c.decoder_heads)};
    }

    t5_decoder_input(weights&& w, const model_config& c)
        : shared_(std::make_shared<tensor<Scalar, Backend>>(to_backend<Scalar, Backend>(std::move(w.shared)))),
          bias_(w.relative_bias, /*bidirectional=*/false, c.relative_attention_max_distance), heads_(c.decoder_heads) {}

    void embed(const std::int64_t* tokens, index_t R, index_t T, index_t, index_t, Scalar* x) const { t5_layout::embed(*shared_, tokens, R * T, x); }
    void check_capacity(index_t) const {}
    index_t band_heads() const noexcept { return heads_; }
    float band_value(index_t r, index_t h) const { return bias_.value(r, h); }
    std::shared_ptr<tensor<Scalar, Backend>> embedding() const { return shared_; }

private:
    std::shared_ptr<tensor<Scalar, Backend>> shared_;
    layers::relative_position_bias bias_;
    index_t heads_ = 0;
};

template <class Scalar, class Backend, activation Act, bool Gated>
struct t5_decoder_layout {
    using scalar = Scalar;
    using backend = Backend;
    using config = model_config;
    using input = t5_decoder_input<Scalar, Backend>;
    using self_attention = layers::rms_self_attention<Scalar, Backend>;
    using cross_attention = layers::rms_cross_attention<Scalar, Backend>;
    using feed_forward = layers::rms_feed_forward<Scalar, Backend, Act, Gated>;
    using final = t5_final_norm<Scalar, Backend, layers::model_stack::decoder>;

    struct block_weights {
        layers::rms_attention_weights self, cross;
        typename feed_forward::weights ff;
    };
    static block_weights read_block(const layers::tensor_source& root, const config& c, index_t i) {
        constexpr auto per_step = layers::param_storage::per_step, large = layers::param_storage::large_product;
        const index_t H = c.d_model, I = c.decoder_heads * c.decoder_d_kv;
        auto sub = [&](int k) { return t5_layout::layer(root, layers::model_stack::decoder, i, k); };
        return {layers::rms_attention_weights::read(sub(0), "SelfAttention", H, I, per_step, per_step),
                layers::rms_attention_weights::read(sub(1), "EncDecAttention", H, I, per_step, large),
                feed_forward::read(sub(2), H, c.decoder_d_ff, per_step)};
    }
};

template <class Scalar, class Backend, activation Act, bool Gated>
using t5_decoder = decoder_stack<t5_decoder_layout<Scalar, Backend, Act, Gated>>;

} // namespace locost::models
