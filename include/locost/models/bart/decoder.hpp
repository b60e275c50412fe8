// The BART decoder stack with its LM head — BartDecoder + BartForConditionalGeneration.lm_head:
//
//     x = LayerNorm_emb(s·shared[tokens] + P[position + 2])     s as the encoder's
//     for each layer i:  x = LayerNorm(x + SelfAttention_i(x, causal))
//                        x = LayerNorm(x + CrossAttention_i(x, encoder states))
//                        x = LayerNorm(x + FF_i(x))
//     logits = x · sharedᵀ + final_logits_bias                  (tied, unscaled)
//
// Decoding state is the shared cross_states / decoder_state (models/decoder_state.hpp): a
// document's cross-attention keys/values computed once, rows' self-attention caches growing by
// one step. Positions are learned: start() refuses a capacity beyond max_position_embeddings
// (decode.too_long) rather than read past the table.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "../../config/error.hpp"
#include "../../io/checkpoint.hpp"
#include "../../layers/bart_attention.hpp"
#include "../../layers/bart_feed_forward.hpp"
#include "../../layers/layer_norm.hpp"
#include "../../layers/learned_positions.hpp"
#include "../../layers/parameter.hpp"
#include "../../ops/elementwise.hpp"
#include "../../ops/embedding.hpp"
#include "../../ops/gemm.hpp"
#include "../decoder_state.hpp"
#include "../lm_head.hpp"
#include "config.hpp"
#include "encoder.hpp"
#include "parameters.hpp"

namespace locost::models {

template <class Scalar, class Backend, activation Act>
class bart_decoder {
public:
    using scalar = Scalar;
    using backend = Backend;
    using ff_layer = layers::bart_feed_forward<Scalar, Backend, Act>;
    using document = cross_states;
    using state = decoder_state<Scalar, Backend>;

    // Reads the decoder of checkpoint `ck` whose config is `c` (names: bart/parameters.hpp).
    // p: storage of the per-step projections and the LM head (model_options::weights).
    bart_decoder(const io::checkpoint& ck, const bart_config& c, ops::weight_precision p = ops::weight_precision::native,
                 ops::weight_precision kv_p = ops::weight_precision::native,
               bool folded_cross = false)
        : folded_(folded_cross), d_model_(c.d_model), vocab_(c.vocab_size), heads_(c.decoder_attention_heads), d_head_(c.decoder_d_head()), source_(c.source),
          positions_field_(c.decoder_positions_field) {
        using namespace bart_names;
        const index_t H = c.d_model, F = c.decoder_ffn_dim, V = c.vocab_size;
        const double eps = c.layer_norm_epsilon;
        embedding_ = std::make_shared<tensor<Scalar, Backend>>(layers::to_backend<Scalar, Backend>(ck.load_f32(shared_of(c.weights_root), {V, H})));
        head_ = logits_head<Scalar, Backend>(embedding_, p);
        embed_scale_ = static_cast<Scalar>(detail::bart_embed_scale(c));
        tensor<float> bias({V});
        if (ck.has(final_logits_bias)) {
            const tensor<float> b = ck.load_f32(final_logits_bias, {1, V});
            std::copy_n(b.data(), V, bias.data());
        } else {
            std::fill_n(bias.data(), V, 0.0f);
        }
        logits_bias_ = layers::to_backend<Scalar, Backend>(bias);
        positions_ = {ck.load_f32(positions("decoder", c.weights_root), {c.max_position_embeddings + c.position_offset, H}), c.position_offset};
        embedding_norm_ = detail::load_layer_norm<Scalar, Backend>(ck, embedding_norm("decoder", c.weights_root), H, eps);
        for (index_t i = 0; i < c.num_decoder_layers; ++i) {
            const std::string l = layer("decoder", i, c.weights_root);
            self_.emplace_back(detail::load_bart_attention(ck, l + "self_attn.", l + "self_attn_layer_norm.", H), eps, heads_, p);
            cross_.emplace_back(detail::load_bart_attention(ck, l + "encoder_attn.", l + "encoder_attn_layer_norm.", H), eps, heads_, p, kv_p, folded_cross);
            ff_.emplace_back(detail::load_bart_feed_forward<typename ff_layer::weights>(ck, l, H, F), eps, p);
        }
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

    // Error: decode.too_long when `capacity` positions exceed the learned positions.
    state start(const std::vector<const document*>& docs, const std::vector<index_t>& rows_per_doc, index_t capacity) const {
        if (capacity > positions_.max_positions())
            throw error("decode.too_long", source_ + ": " + std::to_string(capacity) + " decoder positions exceed " + positions_field_ + " (" +
                                               std::to_string(positions_.max_positions()) + ")");
        return start_decoder_state<Scalar, Backend>(docs, rows_per_doc, capacity, layers(), heads_, d_head_);
    }

    // Runs T new positions for every row (tokens: (rows, T)) and writes logits (rows, T, vocab).
    void step(state& s, const std::int64_t* tokens, index_t T, Scalar* logits) const {
        check_capacity(s, T);
        const index_t R = s.rows, n = R * T, H = d_model_, P = s.length;
        tensor<Scalar, Backend> x({n, H});
        const layers::backend_array<std::int64_t, Backend> ids(tokens, n);  // a device reads its own copy
        ops::embedding<Backend>(embedding_->data(), H, ids.data(), n, x.data(), embed_scale_);
        positions_.add(x.data(), R, T, P);
        embedding_norm_.forward(x.data(), x.data(), n);
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
        head_.apply(x.data(), n, H, vocab_, Scalar(1), logits, logits_bias_.data());
        s.length += T;
    }

    void reorder(state& s, const std::vector<index_t>& src) const { reorder_rows(s, src); }

private:
    // Folded cross-attention (layers::folded_cross_attention): documents hold the encoder states.
    bool folded_ = false;
    index_t d_model_ = 0, vocab_ = 0, heads_ = 0, d_head_ = 0;
    std::string source_, positions_field_;
    std::shared_ptr<tensor<Scalar, Backend>> embedding_;
    logits_head<Scalar, Backend> head_;
    Scalar embed_scale_ = Scalar(1);
    tensor<Scalar, Backend> logits_bias_;
    layers::learned_positions<Scalar, Backend> positions_;
    layers::layer_norm<Scalar, Backend> embedding_norm_;
    std::vector<layers::bart_self_attention<Scalar, Backend>> self_;
    std::vector<layers::bart_cross_attention<Scalar, Backend>> cross_;
    std::vector<ff_layer> ff_;
    mutable layers::scratch_buffer<Scalar, Backend> work_, scratch_;
    mutable layers::causal_band<Scalar, Backend> band_;
};

} // namespace locost::models
