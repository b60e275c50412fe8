// The T5 / LongT5 decoder stack with its LM head — docs/models.md §2; shared by every
// encoder-decoder model of the library (LOCOST here; T5, LongT5 and SLED reuse it):
//
//     x = shared[tokens]                          (no scaling)
//     for each block i:  x = SelfAttention_i(x, position_bias of block 0)
//                        x = CrossAttention_i(x, encoder states)
//                        x = FeedForward_i(x)
//     h = RMSNorm(x)                              decoder.final_layer_norm
//     logits = (h · d_model^−½) · sharedᵀ         tied (tie_word_embeddings true), scaled
//            = h · lm_headᵀ                       untied
//   The d_model^−½ scale is applied when scale_decoder_outputs (transformers 5's key; absent,
//   it is tie_word_embeddings, transformers 4's rule): models/config.hpp.
//
// Decoding state. A document's cross-attention keys/values are computed once, for all layers
// (`document`), in the precision the caller chooses, and shared by every row decoding it (beams
// are rows; they are never copied per beam). Rows keep their self-attention keys/values in a
// cache that grows by one position per step and is reordered when beams are.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "../../config/error.hpp"
#include "../../io/checkpoint.hpp"
#include "../../layers/feed_forward.hpp"
#include "../../layers/parameter.hpp"
#include "../../layers/relative_position_bias.hpp"
#include "../../layers/rms_norm.hpp"
#include "../../layers/t5_attention.hpp"
#include "../../ops/embedding.hpp"
#include "../../ops/gemm.hpp"
#include "../config.hpp"
#include "../decoder_state.hpp"
#include "../feed_forward_weights.hpp"
#include "../lm_head.hpp"
#include "parameters.hpp"

namespace locost::models {

template <class Scalar, class Backend, activation Act, bool GatedFF>
class t5_decoder {
public:
    using scalar = Scalar;
    using backend = Backend;
    using ff_layer = layers::feed_forward<Scalar, Backend, Act, GatedFF>;
    using document = cross_states;
    using state = decoder_state<Scalar, Backend>;

    // Reads the decoder of checkpoint `ck` whose config is `c` (names: t5/parameters.hpp); its
    // per-step projections and LM head stored in precision p (model_options::weights), the
    // cross-attention key/value projection in kv_p (large_products of encoder_options::compute).
    t5_decoder(const io::checkpoint& ck, const model_config& c, ops::weight_precision p = ops::weight_precision::native,
               ops::weight_precision kv_p = ops::weight_precision::native,
               bool folded_cross = false)
        : folded_(folded_cross), d_model_(c.d_model), vocab_(c.vocab_size), heads_(c.num_heads), d_kv_(c.d_kv) {
        using namespace t5_names;
        const index_t H = c.d_model, F = c.d_ff, I = c.num_heads * c.d_kv, V = c.vocab_size;
        embedding_ = std::make_shared<tensor<Scalar, Backend>>(layers::to_backend<Scalar, Backend>(ck.load_f32(shared, {V, H})));
        head_ = models::logits_head<Scalar, Backend>(
            c.tie_word_embeddings ? embedding_
                                  : std::make_shared<tensor<Scalar, Backend>>(layers::to_backend<Scalar, Backend>(ck.load_f32(lm_head, {V, H}))),
            p);
        if (c.scale_decoder_outputs) head_scale_ = static_cast<Scalar>(static_cast<float>(std::pow(static_cast<double>(H), -0.5)));
        for (index_t i = 0; i < c.num_decoder_layers; ++i) {
            auto attn = [&](const std::string& sub, const char* module) {
                layers::attention_weights w;
                w.norm = ck.load_f32(norm(sub), {H});
                const std::string m = sub + module;
                w.q = ck.load_f32(proj(m, "q"), {I, H});
                w.k = ck.load_f32(proj(m, "k"), {I, H});
                w.v = ck.load_f32(proj(m, "v"), {I, H});
                w.o = ck.load_f32(proj(m, "o"), {H, I});
                return w;
            };
            self_.emplace_back(attn(layer("decoder", i, 0), "SelfAttention."), c.layer_norm_epsilon, c.num_heads, p);
            cross_.emplace_back(attn(layer("decoder", i, 1), "EncDecAttention."), c.layer_norm_epsilon, c.num_heads, p, kv_p, folded_cross);
            ff_.emplace_back(load_feed_forward<GatedFF, typename ff_layer::weights>(ck, layer("decoder", i, 2), H, F), c.layer_norm_epsilon, p);
        }
        bias_ = layers::relative_position_bias<Scalar, Backend>(
            ck.load_f32(layer("decoder", 0, 0) + "SelfAttention." + relative_bias, {c.relative_attention_num_buckets, c.num_heads}),
            /*bidirectional=*/false, c.relative_attention_max_distance);
        final_norm_ = layers::rms_norm<Scalar, Backend>(ck.load_f32(decoder_final_norm, {H}), c.layer_norm_epsilon);
    }

    index_t layers() const noexcept { return static_cast<index_t>(self_.size()); }
    index_t d_model() const noexcept { return d_model_; }
    index_t vocab_size() const noexcept { return vocab_; }
    // Keys and values of every layer for one encoder position, in float32.
    std::size_t cross_bytes_per_position() const noexcept {
        if (folded_) return static_cast<std::size_t>(d_model_) * sizeof(float);  // the states, once for every layer
        return static_cast<std::size_t>(layers() * 2 * heads_ * d_kv_) * sizeof(float);
    }

    // An empty document of L positions whose keys/values fill_document() then writes.
    document make_document(index_t L, ops::kv_precision p) const {
        return folded_ ? make_folded_states<Backend>(p, L, d_model_) : make_cross_states<Backend>(layers(), p, heads_, L, d_kv_);
    }

    // Keys/values of encoder rows [j0, j0 + n) (h: (n, H), final-normed encoder states) for
    // every layer. Callers feed a document's rows in tiles and may free each tile afterwards.
    void fill_document(document& doc, const Scalar* h, index_t j0, index_t n) const {
        if (doc.folded) {
            doc.states.store<Backend>(0, j0, n, h, d_model_);
            return;
        }
        Scalar* scratch = scratch_.get(n * 2 * heads_ * d_kv_);
        for (std::size_t l = 0; l < cross_.size(); ++l) cross_[l].project(h, j0, n, doc.layers[l], scratch);
    }

    // Starts decoding: rows_per_doc[d] rows decode docs[d]; `capacity` positions per row.
    state start(const std::vector<const document*>& docs, const std::vector<index_t>& rows_per_doc, index_t capacity) const {
        return start_decoder_state<Scalar, Backend>(docs, rows_per_doc, capacity, layers(), heads_, d_kv_);
    }

    // Runs T new positions for every row (tokens: (rows, T)) and writes logits (rows, T, vocab).
    // Errors: decode.capacity when the rows would outgrow the capacity given to start().
    void step(state& s, const std::int64_t* tokens, index_t T, Scalar* logits) const {
        check_capacity(s, T);
        const index_t R = s.rows, n = R * T, H = d_model_, P = s.length, heads = heads_;
        tensor<Scalar, Backend> x({n, H});
        const layers::backend_array<std::int64_t, Backend> ids(tokens, n);  // a device reads its own copy
        ops::embedding<Backend>(embedding_->data(), H, ids.data(), n, x.data());
        index_t per_row = 0;
        for (std::size_t l = 0; l < self_.size(); ++l)
            per_row = std::max({per_row, self_[l].scratch_per_row(), cross_[l].scratch_per_row(), ff_[l].scratch_per_row()});
        Scalar* scratch = work_.get(n * per_row);
        // The position bias and causal mask for every position the state can reach, made once.
        band_.ensure(s.capacity, heads, [&](index_t r, index_t h) { return bias_.value(r, h); });
        for (std::size_t l = 0; l < self_.size(); ++l) {
            self_[l].forward(x.data(), R, T, P, s.cache[l], band_, scratch);
            cross_[l].forward(x.data(), R, T, s.documents_of_layer(l), s.row_begin, scratch);
            ff_[l].forward(x.data(), n, scratch);
        }
        final_norm_.forward(x.data(), x.data(), n);
        head_.apply(x.data(), n, H, vocab_, head_scale_, logits);
        s.length += T;
    }

    // Row r continues from row src[r] (beam search).
    void reorder(state& s, const std::vector<index_t>& src) const { reorder_rows(s, src); }

private:
    // Folded cross-attention (layers::folded_cross_attention): documents hold the encoder states.
    bool folded_ = false;
    index_t d_model_ = 0, vocab_ = 0, heads_ = 0, d_kv_ = 0;
    std::shared_ptr<tensor<Scalar, Backend>> embedding_;
    models::logits_head<Scalar, Backend> head_;
    Scalar head_scale_ = Scalar(1);
    std::vector<layers::t5_self_attention<Scalar, Backend>> self_;
    std::vector<layers::t5_cross_attention<Scalar, Backend>> cross_;
    std::vector<ff_layer> ff_;
    layers::relative_position_bias<Scalar, Backend> bias_;
    layers::rms_norm<Scalar, Backend> final_norm_;
    mutable layers::scratch_buffer<Scalar, Backend> work_, scratch_;
    mutable layers::causal_band<Scalar, Backend> band_;
};

} // namespace locost::models
