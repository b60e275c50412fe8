// The LongT5 encoder — LongT5Stack with is_decoder false (Guo et al. 2022):
//
//     x = shared[ids]
//     for each block i:  x = x + LocalAttention_i(RMSNorm(x))     (layers/sliding_window_attention.hpp)
//                        x = FeedForward_i(x)
//     h = RMSNorm(x)                                               encoder.final_layer_norm
//
// Block 0 owns the relative bias (and, transient-global, the global relative bias); every block
// reuses them. Attention is local (radius local_radius, plus one transient global token per
// global_block_size positions), so time and memory grow as L·(local_radius + L/global_block_size)
// — linearly for "local". No absolute positions: any length. The tensors are T5's
// (models/t5/encoder.hpp), the attention module named LocalSelfAttention or
// TransientGlobalSelfAttention.
#pragma once
#include <optional>

#include "../../layers/sliding_window_attention.hpp"
#include "../t5/encoder.hpp"
#include "config.hpp"

namespace locost::models {

namespace longt5_layout {
inline const char* attention_module(const longt5_config& c) {
    return c.transient_global() ? "TransientGlobalSelfAttention" : "LocalSelfAttention";
}
}  // namespace longt5_layout

// shared[ids]; for each input, the padding, β over the window and the transient blocks.
template <class Scalar, class Backend, bool TransientGlobal>
class longt5_encoder_input {
public:
    using inputs = layers::sliding_window_inputs<Scalar, Backend, TransientGlobal>;
    struct weights {
        tensor<float> shared;
        typename inputs::tables tables;
    };
    static weights read(const layers::tensor_source& root, const longt5_config& c) {
        const auto block0 = t5_layout::layer(root, layers::model_stack::encoder, 0, 0) / longt5_layout::attention_module(c);
        return {t5_layout::shared(root, layers::model_stack::encoder, c),
                inputs::read(block0, c.relative_attention_num_buckets, c.num_heads)};
    }

    longt5_encoder_input(weights&& w, const longt5_config& c, const encoder_options&)
        : tokens_(std::move(w.shared), 1.0), tables_(std::move(w.tables)), heads_(c.num_heads), radius_(c.local_radius),
          global_block_(c.global_block_size), max_distance_(c.relative_attention_max_distance) {}

    std::optional<index_t> max_context() const noexcept { return std::nullopt; }
    inputs make_inputs() const { return inputs(tables_, heads_, radius_, global_block_, max_distance_); }

    void embed(const std::int64_t* ids, const float* mask, index_t B, index_t L, Scalar* x, inputs& in) const {
        tokens_.embed(ids, B * L, x);
        in.prepare(mask, B, L);
    }

private:
    layers::token_embedding<Scalar, Backend> tokens_;
    typename inputs::tables tables_;
    index_t heads_ = 0, radius_ = 0, global_block_ = 16, max_distance_ = 128;
};

template <class Scalar, class Backend, activation Act, bool Gated, bool TransientGlobal>
struct longt5_encoder_layout
    : t5_style_encoder<encoder_layout<Scalar, Backend, longt5_config, longt5_encoder_input<Scalar, Backend, TransientGlobal>,
                                      layers::sliding_window_attention<Scalar, Backend, TransientGlobal>,
                                      layers::rms_feed_forward<Scalar, Backend, Act, Gated>,
                                      t5_final_norm<Scalar, Backend, layers::model_stack::encoder>>> {
    static auto read_mixer(const layers::tensor_source& root, const longt5_config& c, index_t i) {
        return t5_layout::attention<layers::sliding_window_attention<Scalar, Backend, TransientGlobal>>(
            root, layers::model_stack::encoder, i, 0, longt5_layout::attention_module(c), c.d_model, c.num_heads * c.d_kv);
    }
};

template <class Scalar, class Backend, activation Act, bool Gated, bool TransientGlobal>
using longt5_encoder = encoder_stack<longt5_encoder_layout<Scalar, Backend, Act, Gated, TransientGlobal>>;

}  // namespace locost::models
