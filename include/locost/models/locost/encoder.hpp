// The LOCOST encoder — LOCOST §4.2, docs/models.md §1.6:
//
//     x = shared[ids]                         (no scaling)
//     for each block:  x = GatedS4D(x)  then  x = FeedForward(x)      (pre-norm, residual)
//     h = RMSNorm(x)                          encoder.final_layer_norm
//
// The structure config.json chooses — a bidirectional or causal convolution, with or without the
// gate, the feed-forward's activation and gating — is a type (with_stacks in family.hpp).
// The tensors are T5's for the embedding, the feed-forwards and the final norm
// (models/t5/encoder.hpp); sub-layer 0 of each block is the S4D layer (layers/gated_s4d.hpp).
//
// Memory for B documents of L tokens (Scalar = float, base model H = 768, F = 2048):
//     output x            B·L·H floats
//   + convolution buffer  B·L·H floats                           (the S4D layer's scratch)
//   + tiles               tile_rows·(H + 2F) floats              (1024 rows: 19 MB)
//   + conv groups         threads·4·min(16·M, 2^22) floats       (M ≈ 2L; ≤ 64 MB per thread)
//   + kernel cache        ≤ kernel_cache_bytes                   (default 1 GiB)
//   + the weights.
// So peak ≈ 8·B·L·H bytes + a constant: 6.1 KB per token for the base model (4.3 GB at 700K).
#pragma once
#include <memory>
#include <optional>

#include "../../layers/gated_s4d.hpp"
#include "../../layers/token_embedding.hpp"
#include "../t5/encoder.hpp"
#include "config.hpp"

namespace locost::models {

// shared[ids]; for each input, the padding mask. It also holds the budget of kernel cache the
// model's S4D layers share (encoder_options::kernel_cache_bytes).
template <class Scalar, class Backend, class Mixer>
class locost_encoder_input {
public:
    using inputs = typename Mixer::inputs;
    using weights = tensor<float>;
    static weights read(const layers::tensor_source& root, const locost_config& c) {
        return t5_layout::shared(root, layers::model_stack::encoder, c);
    }

    locost_encoder_input(weights&& w, const locost_config&, const encoder_options& o)
        : tokens_(std::move(w), 1.0), budget_(std::make_unique<layers::kernel_cache_budget>(o.kernel_cache_bytes)) {}

    std::optional<index_t> max_context() const noexcept { return std::nullopt; }  // O(L log L) at any length
    layers::kernel_cache_budget* budget() const noexcept { return budget_.get(); }

    void embed(const std::int64_t* ids, const float* mask, index_t B, index_t L, Scalar* x, inputs& in) const {
        tokens_.embed(ids, B * L, x);
        in.prepare(mask, B * L);
    }

private:
    layers::token_embedding<Scalar, Backend> tokens_;
    std::unique_ptr<layers::kernel_cache_budget> budget_;  // stable address: the layers point to it
};

template <class Scalar, class Backend, bool Bidirectional, bool Gating, activation Act, bool GatedFF>
struct locost_encoder_layout
    : t5_style_encoder<encoder_layout<
          Scalar, Backend, locost_config, locost_encoder_input<Scalar, Backend, layers::gated_s4d<Scalar, Backend, Bidirectional, Gating>>,
          layers::gated_s4d<Scalar, Backend, Bidirectional, Gating>, layers::rms_feed_forward<Scalar, Backend, Act, GatedFF>,
          t5_final_norm<Scalar, Backend, layers::model_stack::encoder>>> {
    using s4d = layers::gated_s4d<Scalar, Backend, Bidirectional, Gating>;
    static typename s4d::weights read_mixer(const layers::tensor_source& root, const locost_config& c, index_t i) {
        return s4d::read(t5_layout::layer(root, layers::model_stack::encoder, i, 0), c.d_model, c.d_state / 2, c.d_model / c.num_ssm_heads);
    }
    static s4d make_mixer(typename s4d::weights&& w, const locost_config& c, index_t, const encoder_options& o,
                          const locost_encoder_input<Scalar, Backend, s4d>& in) {
        return s4d(w, c.layer_norm_epsilon, in.budget(), large_products(o.compute), o.tile_rows, ops::conv_options{o.conv});
    }
};

template <class Scalar, class Backend, bool Bidirectional, bool Gating, activation Act, bool GatedFF>
using locost_encoder = encoder_stack<locost_encoder_layout<Scalar, Backend, Bidirectional, Gating, Act, GatedFF>>;

}  // namespace locost::models
