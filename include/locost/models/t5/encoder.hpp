// The T5 encoder — T5Stack with is_decoder false (docs/models.md §2):
//
//     x = shared[ids]                          (no scaling)
//     for each block i:  x = x + SelfAttention_i(RMSNorm(x), β of block 0 + padding mask)
//                        x = FeedForward_i(x)
//     h = RMSNorm(x)                           encoder.final_layer_norm
//
// Block 0 owns the bidirectional relative position bias β; every block reuses it. Attention runs
// in query blocks (encoder_options::attention_query_block), so memory is O(B·L·(H + inner)),
// never L²; time is still O(L²) — long inputs are what SLED (models/sled.hpp) is for. T5 has no
// absolute positions, so no length limit of its own.
//
// Where T5's stacks keep their tensors (t5_layout, shared with LongT5 and LOCOST, whose configs
// derive from T5's): shared.weight at the root, "<stack>.block.<i>.layer.<k>." per sub-layer,
// "<stack>.final_layer_norm.", each attention sub-layer's module beside its "layer_norm". The layers
// name what is inside (layers/normed_attention.hpp, ...).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "../../core/tensor.hpp"
#include "../../layers/relative_position_bias.hpp"
#include "../../layers/normed_attention.hpp"
#include "../../layers/rms_feed_forward.hpp"
#include "../../layers/rms_norm.hpp"
#include "../../layers/tensor_source.hpp"
#include "../../layers/token_embedding.hpp"
#include "config.hpp"
#include "../encoder_stack.hpp"
#include "../options.hpp"

namespace locost::models {

namespace t5_layout {

using layers::model_stack;

inline const char* stack_name(model_stack s) { return s == model_stack::encoder ? "encoder" : "decoder"; }

// Sub-layer k of block i of a stack: "encoder.block.3.layer.1.".
inline layers::tensor_source layer(const layers::tensor_source& root, model_stack s, index_t i, int k) {
    return root.for_stack(s) / stack_name(s) / "block" / i / "layer" / k;
}

// Attention sub-layer k of block i: its module (SelfAttention, EncDecAttention, ...) and the
// sub-layer's norm, as the layer type `Attention` reads them.
template <class Attention, class... Storage>
auto attention(const layers::tensor_source& root, model_stack s, index_t i, int k, const char* module, index_t H, index_t inner,
               Storage... storage) {
    const auto sub = layer(root, s, i, k);
    return Attention::weights::read(sub / module, sub / "layer_norm", H, inner, storage...);
}

// The token table, one for both stacks (io::checkpoint resolves its tied aliases).
inline tensor<float> shared(const layers::tensor_source& root, model_stack s, const t5_style_config& c) {
    return root.for_stack(s).get("shared.weight", {c.vocab_size, c.d_model}, {layers::param_kind::embedding});
}

// What a T5 stack's input reads: the token table and block 0's relative bias (heads of them),
// which every block of the stack adds.
struct input_weights {
    tensor<float> shared, relative_bias;
};
inline input_weights input(const layers::tensor_source& root, model_stack s, const t5_style_config& c, index_t heads) {
    const auto block0 = layer(root, s, 0, 0) / "SelfAttention";
    return {shared(root, s, c), layers::relative_position_bias::read(block0, c.relative_attention_num_buckets, heads)};
}

// A stack's final norm, "<stack>.final_layer_norm".
template <model_stack S>
struct final_norm_at {
    static layers::tensor_source at(const layers::tensor_source& root, const t5_style_config&) {
        return root.for_stack(S) / stack_name(S) / "final_layer_norm";
    }
};

}  // namespace t5_layout

template <class Scalar, class Backend, layers::model_stack Stack>
using t5_final_norm = stack_norm<layers::rms_norm<Scalar, Backend>, t5_layout::final_norm_at<Stack>>;

// The encoder blocks of T5's shape (T5, LongT5, LOCOST): the feed-forward is sub-layer 1.
template <class Base>
struct t5_style_encoder : Base {
    static auto read_feed_forward(const layers::tensor_source& root, const typename Base::config& c, index_t i) {
        return Base::feed_forward::read(t5_layout::layer(root, layers::model_stack::encoder, i, 1), c.d_model, c.d_ff,
                                        layers::param_storage::large_product);
    }
};

// shared[ids]; for each input, the padding and β over its distances.
template <class Scalar, class Backend>
class t5_encoder_input {
public:
    using weights = t5_layout::input_weights;
    static weights read(const layers::tensor_source& root, const t5_style_config& c) {
        return t5_layout::input(root, layers::model_stack::encoder, c, c.num_heads);
    }

    t5_encoder_input(weights&& w, const t5_style_config& c, const encoder_options& o)
        : tokens_(std::move(w.shared), 1.0), bias_(w.relative_bias, /*bidirectional=*/true, c.relative_attention_max_distance),
          heads_(c.num_heads), query_block_(o.attention_query_block) {}

    std::optional<index_t> max_context() const noexcept { return std::nullopt; }

    void embed(const std::int64_t* ids, const float* mask, index_t B, index_t L, Scalar* x,
               layers::dense_attention_inputs<Scalar, Backend>& in) const {
        tokens_.embed(ids, B * L, x);
        in.padding.prepare(mask, B * L);
        in.band.ensure(L, heads_, [&](index_t r, index_t h) { return bias_.value(r, h); });
        in.query_block = query_block_;
    }

private:
    layers::token_embedding<Scalar, Backend> tokens_;
    layers::relative_position_bias bias_;
    index_t heads_ = 0, query_block_ = 512;
};

template <class Scalar, class Backend, activation Act, bool Gated>
struct t5_encoder_layout : t5_style_encoder<encoder_layout<Scalar, Backend, t5_style_config, t5_encoder_input<Scalar, Backend>,
                                                           layers::normed_encoder_attention<Scalar, Backend, layers::rms_before>,
                                                           layers::rms_feed_forward<Scalar, Backend, Act, Gated>,
                                                           t5_final_norm<Scalar, Backend, layers::model_stack::encoder>>> {
    static auto read_mixer(const layers::tensor_source& root, const t5_style_config& c, index_t i) {
        constexpr auto large = layers::param_storage::large_product;
        return t5_layout::attention<typename t5_encoder_layout::mixer>(root, layers::model_stack::encoder, i, 0, "SelfAttention", c.d_model,
                                                                       c.num_heads * c.d_kv, large, large);
    }
};

template <class Scalar, class Backend, activation Act, bool Gated>
using t5_encoder = encoder_stack<t5_encoder_layout<Scalar, Backend, Act, Gated>>;

}  // namespace locost::models
