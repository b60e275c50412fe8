// The decoder every family runs, written once: an input, N blocks of self-attention,
// cross-attention and feed-forward, a final step and the LM head.
//
//     x = Input(tokens, positions P … P+T−1)      token embedding, and the family's positions and norm
//     for each block i:  x = Self_i(x, past keys/values, β)       causal; β the position band
//                        x = Cross_i(x, the document's keys/values)
//                        x = FF_i(x)
//     logits = Head(Final(x))
//
// Decoding state (models/decoder_state.hpp). A document's cross-attention keys/values are
// computed once, for all layers (`document`), in the precision the caller chooses, and shared by
// every row decoding it (beams are rows; they are never copied per beam); or, folded, only its
// encoder states are kept (layers/kv_cache.hpp, folded_cross_attention). Rows keep their
// self-attention keys/values in a cache that grows by one position per step and is reordered
// when beams are; documents may join rows already decoding (join()), each row at its own
// positions. β — T5's relative position bias, or only the causal mask — is one position_band
// for every position the state can reach, made once per capacity.
//
// A family describes its decoder as a layout (models/<family>/decoder.hpp), derived from
// decoder_layout, which names its types:
//   input     static weights read(root, config); input(weights&&, config)
//             void embed(tokens, R, T, P, capacity, x) const     tokens: the caller's host array
//             void check_capacity(capacity) const                 a learned table's limit (decode.too_long)
//             index_t band_heads() const; float band_value(r, h) const   β for r ≤ 0 (0 heads: the mask alone)
//             std::shared_ptr<tensor<scalar, backend>> embedding() const  the table a tied head reads
//             static constexpr bool has_logits_bias              final_logits_bias (BART, LED)
//   self_attention, cross_attention, feed_forward    layers/*_attention.hpp, *_feed_forward.hpp
//   final     as the encoder's (models/encoder_stack.hpp)
//   static read_self(root, config, i), read_cross(…), read_feed_forward(…): block i's weights
// and the head is layers::logits_head, read at the checkpoint's root.
#pragma once
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../core/tensor.hpp"
#include "../layers/lm_head.hpp"
#include "../layers/parameter.hpp"
#include "../layers/position_band.hpp"
#include "../layers/tensor_source.hpp"
#include "config.hpp"
#include "decoder_state.hpp"
#include "encoder_stack.hpp"
#include "options.hpp"

namespace locost::models {

// How a decoder's layers store what they read: the per-step projections and the LM head in
// `weights` (model_options::weights), the cross-attention key/value projection — once per document
// over every encoder position — in `large` (large_products of encoder_options::compute), and
// whether cross-attention is folded.
struct decoder_settings {
    weight_precision weights = weight_precision::native;
    weight_precision large = weight_precision::native;
    bool folded = false;
};

inline decoder_settings decoder_settings_of(const model_options& o) {
    return {o.weights, large_products(o.encoder.compute), o.cross_attention == cross_attention_form::folded};
}

template <class Scalar, class Backend, class Config, class Input, class SelfAttention, class CrossAttention, class FeedForward, class Final>
struct decoder_layout {
    static_assert(locost::scalar<Scalar>, "locost: Scalar must be float or double");
    using scalar = Scalar;
    using backend = Backend;
    using config = Config;
    using input = Input;
    using self_attention = SelfAttention;
    using cross_attention = CrossAttention;
    using feed_forward = FeedForward;
    using final = Final;
};

template <class Layout>
class decoder_stack {
public:
    using scalar = typename Layout::scalar;
    using backend = typename Layout::backend;
    using config = typename Layout::config;
    using input = typename Layout::input;
    using self_attention = typename Layout::self_attention;
    using cross_attention = typename Layout::cross_attention;
    using feed_forward = typename Layout::feed_forward;
    using final = typename Layout::final;
    using head = layers::logits_head<scalar, backend>;
    using document = cross_states;
    using state = decoder_state<scalar, backend>;

    decoder_stack(const layers::tensor_source& root, const config& c, const decoder_settings& s)
        : in_(input::read(root, c), c), folded_(s.folded), d_model_(c.d_model), vocab_(c.vocab_size), heads_(c.decoder_heads),
          d_kv_(c.decoder_d_kv) {
        const double eps = c.layer_norm_epsilon;
        for (index_t i = 0; i < c.num_decoder_layers; ++i) {
            self_.emplace_back(Layout::read_self(root, c, i), eps, heads_, s.weights);
            cross_.emplace_back(Layout::read_cross(root, c, i), eps, heads_, s.weights, s.large, s.folded);
            ff_.emplace_back(Layout::read_feed_forward(root, c, i), eps, s.weights);
        }
        out_ = final(final::read(root, c), c);
        const double alpha = c.scale_decoder_outputs ? std::pow(static_cast<double>(c.d_model), -0.5) : 1.0;
        head_ = head(read_head(root, c), in_.embedding(), s.weights, static_cast<scalar>(static_cast<float>(alpha)));
    }

    // The tensors the stack reads, recorded (nothing is built).
    static void record(const layers::tensor_source& root, const config& c) {
        input::read(root, c);
        for (index_t i = 0; i < c.num_decoder_layers; ++i) {
            Layout::read_self(root, c, i);
            Layout::read_cross(root, c, i);
            Layout::read_feed_forward(root, c, i);
        }
        final::read(root, c);
        read_head(root, c);
    }

    index_t layers() const noexcept { return static_cast<index_t>(self_.size()); }
    index_t d_model() const noexcept { return d_model_; }
    index_t vocab_size() const noexcept { return vocab_; }
    // Bytes one encoder position takes in a float32 cross-attention cache (all layers).
    std::size_t cross_bytes_per_position() const noexcept {
        if (folded_) return static_cast<std::size_t>(d_model_) * sizeof(float);  // the states, once for every layer
        return static_cast<std::size_t>(layers() * 2 * heads_ * d_kv_) * sizeof(float);
    }

    // An empty document of L positions whose keys/values fill_document() then writes.
    document make_document(index_t L, ops::kv_precision p) const {
        return folded_ ? make_folded_states<backend>(p, L, d_model_) : make_cross_states<backend>(layers(), p, heads_, L, d_kv_);
    }

    // Keys/values of encoder rows [j0, j0 + n) (h: (n, H), the encoder's final states) for every
    // layer. Callers feed a document's rows in tiles and may free each tile afterwards.
    void fill_document(document& doc, const scalar* h, index_t j0, index_t n) const {
        if (doc.folded) {
            doc.states.store<backend>(0, j0, n, h, d_model_);
            return;
        }
        scalar* scratch = fill_scratch_.get(n * 2 * heads_ * d_kv_);
        for (std::size_t l = 0; l < cross_.size(); ++l) cross_[l].project(h, j0, n, doc.layers[l], scratch);
    }

    // Starts decoding: rows_per_doc[d] rows decode docs[d]; `capacity` positions per row.
    // Errors: the input's (decode.too_long past a learned position table).
    state start(const std::vector<const document*>& docs, const std::vector<index_t>& rows_per_doc, index_t capacity) const {
        in_.check_capacity(capacity);
        return start_decoder_state<scalar, backend>(docs, rows_per_doc, capacity, layers(), heads_, d_kv_);
    }

    // Runs T new positions for every row (tokens: (rows, T), host) and writes logits (rows, T,
    // vocab), host. Errors: decode.capacity when the rows would outgrow the capacity given to start().
    void step(state& s, const std::int64_t* tokens, index_t T, scalar* logits) const {
        check_capacity(s, T);
        const index_t R = s.rows, n = R * T, H = d_model_, P = s.length;
        tensor<scalar, backend> x({n, H});
        // Each row's tokens at its own positions: rows that joined later (join()) are behind.
        for (index_t r0 = 0; r0 < R;) {
            index_t r1 = r0 + 1;
            while (r1 < R && s.first(r1) == s.first(r0)) ++r1;
            in_.embed(tokens + r0 * T, r1 - r0, T, P - s.first(r0), s.capacity, x.data() + r0 * T * H);
            r0 = r1;
        }
        index_t per_row = 0;
        for (std::size_t l = 0; l < self_.size(); ++l)
            per_row = std::max({per_row, self_[l].scratch_per_row(), cross_[l].scratch_per_row(), ff_[l].scratch_per_row()});
        scalar* scratch = work_.get(n * per_row);
        // β and the causal mask for every position the state can reach, made once.
        band_.ensure(s.capacity, in_.band_heads(),
                     [&](index_t r, index_t h) { return r > 0 ? layers::position_band<scalar, backend>::masked : in_.band_value(r, h); });
        for (std::size_t l = 0; l < self_.size(); ++l) {
            self_[l].forward(x.data(), R, T, P, s.cache[l], band_, scratch);
            cross_[l].forward(x.data(), R, T, s.documents_of_layer(l), s.row_begin, scratch);
            ff_[l].forward(x.data(), n, scratch);
        }
        out_.forward(x.data(), n);
        head_.apply(x.data(), n, H, logits);
        s.length += T;
    }

    // Documents join the rows decoding in `s` between two steps (continuous batching):
    // rows_per_doc[d] new rows decode docs[d] from their own first position, `capacity` positions
    // each; the rows already there go on as before. Errors: as start()'s.
    void join(state& s, const std::vector<const document*>& docs, const std::vector<index_t>& rows_per_doc, index_t capacity) const {
        in_.check_capacity(capacity);
        join_documents(s, docs, rows_per_doc, capacity);
    }

    // Row r continues from row src[r] (beam search).
    void reorder(state& s, const std::vector<index_t>& src) const { reorder_rows(s, src); }
    // Only the documents at positions `keep` decode on (a batch drops its finished documents).
    void retain(state& s, const std::vector<index_t>& keep) const { retain_documents(s, keep); }

private:
    static typename head::weights read_head(const layers::tensor_source& root, const config& c) {
        return head::read(root.for_stack(layers::model_stack::decoder), c.vocab_size, c.d_model, c.tie_word_embeddings,
                          input::has_logits_bias);
    }

    input in_;
    std::vector<self_attention> self_;
    std::vector<cross_attention> cross_;
    std::vector<feed_forward> ff_;
    final out_;
    head head_;
    bool folded_ = false;
    index_t d_model_ = 0, vocab_ = 0, heads_ = 0, d_kv_ = 0;
    mutable layers::scratch_buffer<scalar, backend> work_, fill_scratch_;
    mutable layers::position_band<scalar, backend> band_;
};

}  // namespace locost::models
