// The feed-forward sublayer's weights under a block's sublayer prefix (for example
// "encoder.block.3.layer.1."), named as T5's T5LayerFF names them: layer_norm.weight, then
// DenseReluDense.wi_0 and wi_1 (gated) or wi, and wo. Shared by the LOCOST encoder and the T5
// decoder.
#pragma once
#include <string>

#include "../io/checkpoint.hpp"

namespace locost::models {

template <bool Gated, class Weights>
Weights load_feed_forward(const io::checkpoint& ck, const std::string& p, index_t H, index_t F) {
    Weights f;
    f.norm = ck.load_f32(p + "layer_norm.weight", {H});
    if constexpr (Gated) {
        f.wi_0 = ck.load_f32(p + "DenseReluDense.wi_0.weight", {F, H});
        f.wi_1 = ck.load_f32(p + "DenseReluDense.wi_1.weight", {F, H});
    } else {
        f.wi_0 = ck.load_f32(p + "DenseReluDense.wi.weight", {F, H});
    }
    f.wo = ck.load_f32(p + "DenseReluDense.wo.weight", {H, F});
    return f;
}

} // namespace locost::models
