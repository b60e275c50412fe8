// The Pegasus-X decoder stack with its LM head — PegasusXDecoder + lm_head (pre-LayerNorm):
//
//     x = s·shared[tokens] + PE(position)        s as the encoder's; PE sinusoidal, positions
//                                                 counted from the first decoder token
//     for each layer i:  x += SelfAttention_i(LayerNorm(x), causal)       (layers/pre_norm_attention.hpp)
//                        x += CrossAttention_i(LayerNorm(x), encoder states)
//                        x += FF_i(LayerNorm(x))
//     logits = LayerNorm(x) · sharedᵀ            decoder.layer_norm; tied head, unscaled, no bias
//
// Decoding state is the shared cross_states / decoder_state (models/decoder_state.hpp). Positions
// are sinusoidal, so the decoder has no length limit of its own.
#pragma once
#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "../../io/checkpoint.hpp"
#include "../../layers/bart_feed_forward.hpp"
#include "../../layers/layer_norm.hpp"
#include "../../layers/parameter.hpp"
#include "../../layers/pre_norm_attention.hpp"
#include "../../layers/sinusoidal_positions.hpp"
#include "../../ops/embedding.hpp"
#include "../../ops/gemm.hpp"
#include "../decoder_state.hpp"
#include "../lm_head.hpp"
#include "config.hpp"
#include "encoder.hpp"
#include "parameters.hpp"

namespace locost::models {

namespace detail {

inline layers::pre_norm_attention_weights load_pre_norm_attention(const io::checkpoint& ck, const std::string& module,
                                                                  const std::string& norm, index_t H) {
    layers::pre_norm_attention_weights w;
    w.norm_w = ck.load_f32(norm + "weight", {H});
    w.norm_b = ck.load_f32(norm + "bias", {H});
    w.q = ck.load_f32(module + "q_proj.weight", {H, H});
    w.k = ck.load_f32(module + "k_proj.weight", {H, H});
    w.v = ck.load_f32(module + "v_proj.weight", {H, H});
    w.o = ck.load_f32(module + "out_proj.weight", {H, H});
    return w;
}

} // namespace detail

template <class Scalar, class Backend, activation Act>
class pegasus_x_decoder {
public:
    using scalar = Scalar;
    using backend = Backend;
    using ff_layer = layers::bart_feed_forward<Scalar, Backend, Act, /*PreNorm=*/true>;
    using document = cross_states;
    using state = decoder_state<Scalar, Backend>;

    // Reads the decoder of checkpoint `ck` whose config is `c` (names: pegasus_x/parameters.hpp).
    // p: storage of the per-step projections and the LM head (model_options::weights).
    pegasus_x_decoder(const io::checkpoint& ck, const pegasus_x_config& c, ops::weight_precision p = ops::weight_precision::native,
                      ops::weight_precision kv_p = ops::weight_precision::native,
               bool folded_cross = false)
        : folded_(folded_cross), d_model_(c.d_model), vocab_(c.vocab_size), heads_(c.decoder_attention_heads), d_head_(c.decoder_d_head()) {
        using namespace pegasus_x_names;
        const index_t H = c.d_model, F = c.decoder_ffn_dim, V = c.vocab_size;
        const double eps = c.layer_norm_epsilon;
        embedding_ = std::make_shared<tensor<Scalar, Backend>>(layers::to_backend<Scalar, Backend>(ck.load_f32(shared, {V, H})));
        head_ = logits_head<Scalar, Backend>(embedding_, p);
        embed_scale_ = static_cast<Scalar>(detail::pegasus_x_embed_scale(c));
        positions_ = layers::sinusoidal_positions<Scalar, Backend>(H);
        for (index_t i = 0; i < c.num_decoder_layers; ++i) {
            const std::string l = layer("decoder", i);
            self_.emplace_back(detail::load_pre_norm_attention(ck, l + "self_attn.", l + "self_attn_layer_norm.", H), eps, heads_, p);
            cross_.emplace_back(detail::load_pre_norm_attention(ck, l + "encoder_attn.", l + "encoder_attn_layer_norm.", H), eps, heads_, p, kv_p, folded_cross);
            ff_.emplace_back(detail::load_bart_feed_forward<typename ff_layer::weights>(ck, l, H, F), eps, p);
        }
        final_norm_ = detail::load_layer_norm<Scalar, Backend>(ck, final_norm("decoder"), H, eps);
    }

    index_t layers() const noexcept { return static_cast<index_t>(self_.size()); }
    index_t d_model() const noexcept { return d_model_; }
    index_t vocab_size() const noexcept { return vocab_; }
    std::size_t cross_bytes_per_position() const noexcept {
        if (folded_) return static_cast<std::size_t>(d_model_) * sizeof(float);  // the states, once for every layer
        return static_cast<std::size_t>(layers() * 2 * heads_ * d_head_) * sizeof(float);
    }

    document make_document(index_t L, ops::kv_precision p) const {
        return folded_ ? make_folded_states<Backend>(p, L, d_model_) : make_cross_states<Backend>(layers(), p, heads_, L, d_head_);
    }

    // Keys/values of encoder rows [j0, j0 + n) (h: (n, H)) for every layer.
    void fill_document(document& doc, const Scalar* h, index_t j0, index_t n) const {
        if (doc.folded) {
            doc.states.store<Backend>(0, j0, n, h, d_model_);
            return;
        }
        Scalar* scratch = scratch_.get(n * 2 * heads_ * d_head_);
        for (std::size_t l = 0; l < cross_.size(); ++l) cross_[l].project(h, j0, n, doc.layers[l], scratch);
    }

    state start(const std::vector<const document*>& docs, const std::vector<index_t>& rows_per_doc, index_t capacity) const {
        return start_decoder_state<Scalar, Backend>(docs, rows_per_doc, capacity, layers(), heads_, d_head_);
    }

    // Runs T new positions for every row (tokens: (rows, T)) and writes logits (rows, T, vocab).
    // Errors: decode.capacity when the rows would outgrow the capacity given to start().
    void step(state& s, const std::int64_t* tokens, index_t T, Scalar* logits) const {
        check_capacity(s, T);
        const index_t R = s.rows, n = R * T, H = d_model_, P = s.length;
        tensor<Scalar, Backend> x({n, H});
        const layers::backend_array<std::int64_t, Backend> ids(tokens, n);  // a device reads its own copy
        ops::embedding<Backend>(embedding_->data(), H, ids.data(), n, x.data(), embed_scale_);
        positions_.add_within(x.data(), R, T, P, s.capacity);
        index_t per_row = 0;
        for (std::size_t l = 0; l < self_.size(); ++l)
            per_row = std::max({per_row, self_[l].scratch_per_row(), cross_[l].scratch_per_row(), ff_[l].scratch_per_row()});
        Scalar* scratch = work_.get(n * per_row);
        // The causal mask for every position the state can reach, made once (no heads: shared).
        band_.ensure(s.capacity, 0, [](index_t, index_t) { return 0.0f; });
        for (std::size_t l = 0; l < self_.size(); ++l) {
            self_[l].forward(x.data(), R, T, P, s.cache[l], band_, scratch);
            cross_[l].forward(x.data(), R, T, s.documents_of_layer(l), s.row_begin, scratch);
            ff_[l].forward(x.data(), n, scratch);
        }
        final_norm_.forward(x.data(), x.data(), n);
        head_.apply(x.data(), n, H, vocab_, Scalar(1), logits);
        s.length += T;
    }

    void reorder(state& s, const std::vector<index_t>& src) const { reorder_rows(s, src); }

private:
    // Folded cross-attention (layers::folded_cross_attention): documents hold the encoder states.
    bool folded_ = false;
    index_t d_model_ = 0, vocab_ = 0, heads_ = 0, d_head_ = 0;
    std::shared_ptr<tensor<Scalar, Backend>> embedding_;
    logits_head<Scalar, Backend> head_;
    Scalar embed_scale_ = Scalar(1);
    layers::sinusoidal_positions<Scalar, Backend> positions_;
    std::vector<layers::pre_norm_self_attention<Scalar, Backend>> self_;
    std::vector<layers::pre_norm_cross_attention<Scalar, Backend>> cross_;
    std::vector<ff_layer> ff_;
    layers::layer_norm<Scalar, Backend> final_norm_;
    mutable layers::scratch_buffer<Scalar, Backend> work_, scratch_;
    mutable layers::causal_band<Scalar, Backend> band_;
};

} // namespace locost::models
