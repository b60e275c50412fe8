// The T5 encoder stack — docs/models.md §2 (T5Stack with is_decoder false):
//
//     x = shared[ids]                          (no scaling)
//     for each block i:  x = x + SelfAttention_i(RMSNorm(x), position_bias of block 0 + padding mask)
//                        x = FeedForward_i(x)
//     h = RMSNorm(x)                           encoder.final_layer_norm
//
// Block 0 owns the bidirectional relative position bias; every block reuses it. Attention is
// computed in query blocks (encoder_options::attention_query_block), so memory is
// O(B·L·(H + inner) + heads·block·L), never heads·L²; time is still O(L²) — long inputs are what
// SLED (models/sled.hpp) is for. T5 has no absolute positions, so no length limit of its own.
//
// Memory for B rows of L tokens (float): x B·L·H + attention scratch B·L·(H + 4·inner) +
// heads·block·L + feed-forward tiles tile_rows·(H + 2F), plus the weights.
#pragma once
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../../core/tensor.hpp"
#include "../../io/checkpoint.hpp"
#include "../../layers/feed_forward.hpp"
#include "../../layers/parameter.hpp"
#include "../../layers/relative_position_bias.hpp"
#include "../../layers/rms_norm.hpp"
#include "../../layers/t5_attention.hpp"
#include "../../ops/embedding.hpp"
#include "../concepts.hpp"
#include "../feed_forward_weights.hpp"
#include "../options.hpp"
#include "../seq2seq.hpp"
#include "parameters.hpp"

namespace locost::models {

namespace detail {

// The norm and q, k, v, o of the attention module `module` ("…SelfAttention.") of sub-layer `sub`.
inline layers::attention_weights load_t5_attention(const io::checkpoint& ck, const std::string& sub, const std::string& module, index_t H,
                                                   index_t I) {
    using namespace t5_names;
    layers::attention_weights w;
    w.norm = ck.load_f32(norm(sub), {H});
    w.q = ck.load_f32(proj(module, "q"), {I, H});
    w.k = ck.load_f32(proj(module, "k"), {I, H});
    w.v = ck.load_f32(proj(module, "v"), {I, H});
    w.o = ck.load_f32(proj(module, "o"), {H, I});
    return w;
}

} // namespace detail

template <class Scalar, class Backend, activation Act, bool GatedFF>
class t5_encoder {
public:
    using scalar = Scalar;
    using backend = Backend;
    using attention_layer = layers::t5_encoder_self_attention<Scalar, Backend>;
    using ff_layer = layers::feed_forward<Scalar, Backend, Act, GatedFF>;

    // Reads the encoder of checkpoint `ck` whose config is `c` (names: t5/parameters.hpp).
    t5_encoder(const io::checkpoint& ck, const model_config& c, const encoder_options& o)
        : d_model_(c.d_model), vocab_(c.vocab_size), layers_(c.num_layers), opt_(o) {
        using namespace t5_names;
        const index_t H = c.d_model, F = c.d_ff, I = c.num_heads * c.d_kv;
        auto w_ = std::make_shared<weights>();
        w_->shared = layers::to_backend<Scalar, Backend>(ck.load_f32(shared, {c.vocab_size, H}));
        for (index_t i = 0; i < c.num_layers; ++i) {
            const std::string sub = layer("encoder", i, 0);
            w_->attention.emplace_back(detail::load_t5_attention(ck, sub, sub + "SelfAttention.", H, I), c.layer_norm_epsilon, c.num_heads,
                                       large_products(o.compute));
            w_->ff.emplace_back(load_feed_forward<GatedFF, typename ff_layer::weights>(ck, layer("encoder", i, 1), H, F),
                                c.layer_norm_epsilon, large_products(o.compute));
        }
        w_->bias = layers::relative_position_bias<Scalar, Backend>(
            ck.load_f32(layer("encoder", 0, 0) + "SelfAttention." + relative_bias, {c.relative_attention_num_buckets, c.num_heads}),
            /*bidirectional=*/true, c.relative_attention_max_distance);
        w_->final_norm = layers::rms_norm<Scalar, Backend>(ck.load_f32(encoder_final_norm, {H}), c.layer_norm_epsilon);
        weights_ = std::move(w_);
    }

    // The encoder concept (models/concepts.hpp).
    index_t d_model() const noexcept { return d_model_; }
    index_t vocab_size() const noexcept { return vocab_; }
    output_positions output_span(index_t L) const noexcept { return {0, L}; }
    std::optional<index_t> max_context() const noexcept { return std::nullopt; }

    // ids (B, L), mask (B, L) of 0/1 or nullptr (all valid; checked by the caller) → (B, L, H).
    tensor<Scalar, Backend> forward(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& progress) {
        const weights& w = *weights_;
        const index_t H = d_model_, rows = B * L;
        tensor<Scalar, Backend> x({B, L, H});
        const layers::backend_array<std::int64_t, Backend> ids_on_backend(ids, rows);  // a device reads its own copy
        ops::embedding<Backend>(w.shared.data(), H, ids_on_backend.data(), rows, x.data());
        run_encoder_layers(x.data(), B, L, H, w.attention, w.ff, opt_, scratch_, progress, [&](std::size_t i, Scalar* scratch) {
            w.attention[i].forward(x.data(), B, L, mask, w.bias, opt_.attention_query_block, scratch);
        });
        w.final_norm.forward(x.data(), x.data(), rows);
        return x;
    }

    void encode(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& p, const state_sink<Scalar>& sink) {
        tensor<Scalar, Backend> x = forward(ids, mask, B, L, p);
        // The layers' scratch (LongT5 local: B·L·(H + 4·inner + 1) values, 10.7 GB for the base
        // model at 700K tokens) is not kept while the cross-attention cache fills.
        scratch_.release();
        stream_dense_states(x, B, L, opt_.tile_rows, sink);
    }

    // Gives back the layers' scratch, which forward() keeps for the next call.
    void release_scratch() { scratch_.release(); }

private:
    struct weights {
        tensor<Scalar, Backend> shared;
        std::vector<attention_layer> attention;
        std::vector<ff_layer> ff;
        layers::relative_position_bias<Scalar, Backend> bias;
        layers::rms_norm<Scalar, Backend> final_norm;
    };
    std::shared_ptr<const weights> weights_;  // shared by copies of the handle
    index_t d_model_ = 0, vocab_ = 0, layers_ = 0;
    encoder_options opt_;
    layers::scratch_buffer<Scalar, Backend> scratch_;
};

} // namespace locost::models
