// The Pegasus-X encoder — PegasusXEncoder (Phang et al. 2022; pre-LayerNorm):
//
//     x = s·shared[ids] + PE(t)                 s = √d_model with scale_embedding; PE sinusoidal
//     g = embed_global                          G learned global tokens, the same for every row
//     for each layer i:  x, g += GlobalLocalAttention_i(x, g)     (layers/global_local_attention.hpp;
//                                                                   odd layers staggered)
//                        x += FF_i(LayerNorm_i(x));  g += FF_i(LayerNorm_i(g))   (one FF, one norm)
//     h = LayerNorm(x)                          encoder.layer_norm; the global tokens are dropped
//
// Attention is block-local plus G global tokens, so time and memory grow as L·(block + G) —
// linearly. Positions are sinusoidal: any length (max_position_embeddings is not a limit).
// Names: models/bart/layout.hpp's under "model" (the config's weights_root), the global tokens at
// model.encoder.embed_global.weight, the final norm at model.encoder.layer_norm.
#pragma once
#include <cmath>
#include <optional>

#include "../../backend/transfer.hpp"
#include "../../layers/biased_feed_forward.hpp"
#include "../../layers/global_local_attention.hpp"
#include "../../layers/layer_norm.hpp"
#include "../../layers/sinusoidal_positions.hpp"
#include "../../ops/copy.hpp"
#include "../../layers/token_embedding.hpp"
#include "../encoder_stack.hpp"
#include "../bart/layout.hpp"
#include "config.hpp"

namespace locost::models {

namespace pegasus_x_layout {

// A stack's final LayerNorm, "<root>.<stack>.layer_norm".
template <layers::model_stack S>
struct final_norm_at {
    static layers::tensor_source at(const layers::tensor_source& root, const pegasus_x_config& c) {
        return bart_style_layout::stack(root, c.weights_root, S) / "layer_norm";
    }
};

}  // namespace pegasus_x_layout

template <class Scalar, class Backend, layers::model_stack Stack>
using pegasus_x_final_norm = stack_norm<layers::layer_norm<Scalar, Backend>, pegasus_x_layout::final_norm_at<Stack>>;

// s·shared[ids] + PE(position) for either stack: the timing signal's frequencies, the tokens
// scaled by √d_model with scale_embedding.
template <class Scalar, class Backend>
class pegasus_x_embedding : public layers::sinusoidal_embedding<Scalar, Backend> {
public:
    pegasus_x_embedding() = default;
    pegasus_x_embedding(tensor<float>&& shared, const pegasus_x_config& c)
        : layers::sinusoidal_embedding<Scalar, Backend>(std::move(shared),
                                                        c.scale_embedding ? std::sqrt(static_cast<double>(c.d_model)) : 1.0, c.d_model,
                                                        layers::frequency_rule::timing_signal) {}
};

// The embedding; for each input, the padding and the global tokens' starting states.
template <class Scalar, class Backend>
class pegasus_x_encoder_input {
public:
    using inputs = layers::global_local_inputs<Scalar, Backend>;
    struct weights {
        tensor<float> shared, global_tokens;
    };
    static weights read(const layers::tensor_source& root, const pegasus_x_config& c) {
        constexpr auto s = layers::model_stack::encoder;
        return {bart_style_layout::shared(root, c.weights_root, s, c),
                bart_style_layout::stack(root, c.weights_root, s)
                    .get("embed_global.weight", {c.num_global_tokens, c.d_model}, {layers::param_kind::global_tokens})};
    }

    pegasus_x_encoder_input(weights&& w, const pegasus_x_config& c, const encoder_options& o)
        : tokens_(std::move(w.shared), c), global_tokens_(to_backend<Scalar, Backend>(std::move(w.global_tokens))),
          query_block_(o.attention_query_block) {}

    std::optional<index_t> max_context() const noexcept { return std::nullopt; }

    void embed(const std::int64_t* ids, const float* mask, index_t B, index_t L, Scalar* x, inputs& in) const {
        tokens_.embed(ids, B, L, 0, x);
        in.padding.prepare(mask, B * L);
        // g (B·G, H): every row starts from the same learned tokens.
        const index_t G = global_tokens_.dim(0), H = global_tokens_.dim(1);
        in.globals = tensor<Scalar, Backend>({B * G, H});
        ops::copy_layout l;
        l.n0 = B, l.width = G * H, l.dst0 = G * H, l.src0 = 0;
        ops::strided_copy<Backend>(in.globals.data(), global_tokens_.data(), l);
        in.query_block = query_block_;
    }

private:
    pegasus_x_embedding<Scalar, Backend> tokens_;
    tensor<Scalar, Backend> global_tokens_;
    index_t query_block_ = 512;
};

template <class Scalar, class Backend, activation Act>
struct pegasus_x_encoder_layout
    : bart_style_encoder<encoder_layout<Scalar, Backend, pegasus_x_config, pegasus_x_encoder_input<Scalar, Backend>,
                                        layers::global_local_attention<Scalar, Backend>,
                                        layers::biased_feed_forward<Scalar, Backend, Act, /*PreNorm=*/true>,
                                        pegasus_x_final_norm<Scalar, Backend, layers::model_stack::encoder>>> {
    using mixer = layers::global_local_attention<Scalar, Backend>;
    static layers::global_local_attention_weights read_mixer(const layers::tensor_source& root, const pegasus_x_config& c, index_t i) {
        return layers::global_local_attention_weights::read(bart_style_layout::layer(root, c.weights_root, layers::model_stack::encoder, i),
                                                            c.d_model);
    }
    // G global tokens, blocks of block_size, odd layers staggered.
    static mixer make_mixer(layers::global_local_attention_weights&& w, const pegasus_x_config& c, index_t i, const encoder_options& o,
                            const pegasus_x_encoder_input<Scalar, Backend>&) {
        return mixer(w, c.layer_norm_epsilon, c.num_heads, c.num_global_tokens, c.block_size, c.staggered(i), large_products(o.compute));
    }
};

template <class Scalar, class Backend, activation Act>
using pegasus_x_encoder = encoder_stack<pegasus_x_encoder_layout<Scalar, Backend, Act>>;

}  // namespace locost::models
