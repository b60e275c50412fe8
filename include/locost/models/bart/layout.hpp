// Where BART-style checkpoints keep their tensors — BART's, and LED's and Pegasus-X's, which
// transformers derived from it: the task model's base model under a root module (the config's
// weights_root: "model"; LED's "led"), "<root>.shared.weight", each stack at "<root>.<stack>." and
// its layers at "<root>.<stack>.layers.<i>.". Each layer keeps its feed-forward as fc1, fc2 and
// final_layer_norm (layers/biased_feed_forward.hpp) and, in a decoder, its self_attn and
// encoder_attn with their *_layer_norm beside them. The layers name what is inside.
#pragma once
#include <string_view>

#include "../../layers/tensor_source.hpp"
#include "../config.hpp"

namespace locost::models {

namespace bart_style_layout {

inline layers::tensor_source stack(const layers::tensor_source& root, std::string_view module, layers::model_stack s) {
    return root.for_stack(s) / module / (s == layers::model_stack::encoder ? "encoder" : "decoder");
}
inline layers::tensor_source layer(const layers::tensor_source& root, std::string_view module, layers::model_stack s, index_t i) {
    return stack(root, module, s) / "layers" / i;
}
inline tensor<float> shared(const layers::tensor_source& root, std::string_view module, layers::model_stack s, const model_config& c) {
    return (root.for_stack(s) / module).get("shared.weight", {c.vocab_size, c.d_model}, {layers::param_kind::embedding});
}

}  // namespace bart_style_layout

// The encoder blocks of a BART-style stack (Base: an encoder_layout): the feed-forward of layer i.
template <class Base>
struct bart_style_encoder : Base {
    static auto read_feed_forward(const layers::tensor_source& root, const typename Base::config& c, index_t i) {
        return Base::feed_forward::read(bart_style_layout::layer(root, c.weights_root, layers::model_stack::encoder, i), c.d_model, c.d_ff,
                                        layers::param_storage::large_product);
    }
};

// The decoder blocks of a BART-style stack (Base: a decoder_layout): layer i's self_attn,
// encoder_attn and feed-forward.
template <class Base>
struct bart_style_decoder : Base {
    using config = typename Base::config;
    static auto read_self(const layers::tensor_source& root, const config& c, index_t i) {
        return attention<typename Base::self_attention>(root, c, i, "self_attn", false);
    }
    static auto read_cross(const layers::tensor_source& root, const config& c, index_t i) {
        return attention<typename Base::cross_attention>(root, c, i, "encoder_attn", true);
    }
    static auto read_feed_forward(const layers::tensor_source& root, const config& c, index_t i) {
        return Base::feed_forward::read(layer(root, c, i), c.d_model, c.decoder_d_ff, layers::param_storage::per_step);
    }

private:
    static layers::tensor_source layer(const layers::tensor_source& root, const config& c, index_t i) {
        return bart_style_layout::layer(root, c.weights_root, layers::model_stack::decoder, i);
    }
    // The module `name` and its LayerNorm `name`_layer_norm; a cross-attention's keys and values are
    // projected once per document (a large product), everything else once per step.
    template <class Attention>
    static typename Attention::weights attention(const layers::tensor_source& root, const config& c, index_t i, const std::string& name,
                                                 bool cross) {
        const auto l = layer(root, c, i);
        return Attention::weights::read(l / name, l / (name + "_layer_norm"), c.d_model, c.d_model, layers::param_storage::per_step,
                                        cross ? layers::param_storage::large_product : layers::param_storage::per_step);
    }
};

}  // namespace locost::models
