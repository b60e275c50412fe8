// The LED encoder stack — LEDEncoder (post-LayerNorm, as BART's):
//
//     x = LayerNorm_emb(shared[ids] + P[t])              learned positions, no offset, no scaling
//     for each layer i:  x = LayerNorm(x + LongformerSelfAttention_i(x))   window w_i, global tokens
//                        x = LayerNorm(x + FF_i(x))
//
// Global tokens are encoder_options::global_tokens (default: the first token), the same positions
// in every row; attention costs O(L·(w + |G|)) (layers/longformer_attention.hpp), so a 16K-token
// input needs no L × L matrix. Hugging Face pads the input to a multiple of the window with masked
// tokens; here windows are clipped instead, which gives the same states on the real tokens. At
// most max_encoder_position_embeddings tokens (encode.too_long beyond).
#pragma once
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../../config/error.hpp"
#include "../../core/tensor.hpp"
#include "../../io/checkpoint.hpp"
#include "../../layers/bart_feed_forward.hpp"
#include "../../layers/layer_norm.hpp"
#include "../../layers/learned_positions.hpp"
#include "../../layers/longformer_attention.hpp"
#include "../../layers/parameter.hpp"
#include "../../ops/embedding.hpp"
#include "../bart/encoder.hpp"
#include "../concepts.hpp"
#include "../options.hpp"
#include "../seq2seq.hpp"
#include "config.hpp"
#include "parameters.hpp"

namespace locost::models {

namespace detail {

inline layers::longformer_weights load_longformer(const io::checkpoint& ck, const std::string& l, index_t H) {
    using namespace led_names;
    layers::longformer_weights w;
    const std::string m = longformer(l);
    auto load = [&](const char* name, tensor<float>& weight, tensor<float>& bias) {
        weight = ck.load_f32(m + name + ".weight", {H, H});
        bias = ck.load_f32(m + name + ".bias", {H});
    };
    load("query", w.local.q, w.local.bq);
    load("key", w.local.k, w.local.bk);
    load("value", w.local.v, w.local.bv);
    load("query_global", w.qg, w.bqg);
    load("key_global", w.kg, w.bkg);
    load("value_global", w.vg, w.bvg);
    w.local.o = ck.load_f32(output(l) + "weight", {H, H});
    w.local.bo = ck.load_f32(output(l) + "bias", {H});
    w.local.norm_w = ck.load_f32(self_norm(l) + "weight", {H});
    w.local.norm_b = ck.load_f32(self_norm(l) + "bias", {H});
    return w;
}

} // namespace detail

template <class Scalar, class Backend, activation Act>
class led_encoder {
public:
    using scalar = Scalar;
    using backend = Backend;
    using attention_layer = layers::longformer_self_attention<Scalar, Backend>;
    using ff_layer = layers::bart_feed_forward<Scalar, Backend, Act>;

    // Reads the encoder of checkpoint `ck` whose config is `c` (names: led/parameters.hpp).
    led_encoder(const io::checkpoint& ck, const led_config& c, const encoder_options& o)
        : d_model_(c.d_model), vocab_(c.vocab_size), source_(c.source), opt_(o) {
        using namespace bart_names;
        const index_t H = c.d_model, F = c.d_ff;
        const double eps = c.layer_norm_epsilon;
        const std::string& root = c.weights_root;
        auto w = std::make_shared<weights>();
        w->shared = layers::to_backend<Scalar, Backend>(ck.load_f32(shared_of(root), {c.vocab_size, H}));
        w->positions = {ck.load_f32(positions("encoder", root), {c.max_encoder_positions + c.position_offset, H}), c.position_offset};
        w->embedding_norm = detail::load_layer_norm<Scalar, Backend>(ck, embedding_norm("encoder", root), H, eps);
        for (index_t i = 0; i < c.num_layers; ++i) {
            const std::string l = layer("encoder", i, root);
            w->attention.emplace_back(detail::load_longformer(ck, l, H), eps, c.num_heads, c.attention_window[static_cast<std::size_t>(i)],
                                      large_products(o.compute));
            w->ff.emplace_back(detail::load_bart_feed_forward<typename ff_layer::weights>(ck, l, H, F), eps, large_products(o.compute));
        }
        weights_ = std::move(w);
    }

    // The encoder concept (models/concepts.hpp).
    index_t d_model() const noexcept { return d_model_; }
    index_t vocab_size() const noexcept { return vocab_; }
    output_positions output_span(index_t L) const noexcept { return {0, L}; }
    std::optional<index_t> max_context() const noexcept { return weights_->positions.max_positions(); }

    // ids (B, L), mask (B, L) of 0/1 or nullptr (checked by the caller) → (B, L, H). Errors:
    // encode.too_long beyond the learned positions; encode.bad_global_token for a global
    // position past the input.
    tensor<Scalar, Backend> forward(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& progress) {
        const weights& w = *weights_;
        const index_t max = w.positions.max_positions();
        if (L > max)
            throw error("encode.too_long", source_ + ": " + std::to_string(L) + " tokens exceed max_encoder_position_embeddings (" +
                                               std::to_string(max) + ", LED's learned positions); run longer inputs through SLED (--sled-context " +
                                               std::to_string(max) + ")");
        const layers::global_positions globals = global_positions_of(mask, B, L);
        const index_t H = d_model_, rows = B * L;
        tensor<Scalar, Backend> x({B, L, H});
        const layers::backend_array<std::int64_t, Backend> ids_on_backend(ids, rows);  // a device reads its own copy
        ops::embedding<Backend>(w.shared.data(), H, ids_on_backend.data(), rows, x.data());
        w.positions.add(x.data(), B, L, 0);
        w.embedding_norm.forward(x.data(), x.data(), rows);
        run_encoder_layers(x.data(), B, L, H, w.attention, w.ff, opt_, scratch_, progress, [&](std::size_t i, Scalar* scratch) {
            w.attention[i].forward(x.data(), B, L, mask, globals, scratch);
        });
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
    layers::global_positions global_positions_of(const float* mask, index_t B, index_t L) const {
        std::vector<index_t> at = opt_.global_tokens;
        std::sort(at.begin(), at.end());
        at.erase(std::unique(at.begin(), at.end()), at.end());
        layers::global_positions g;
        for (index_t b = 0; b < B; ++b) {
            std::vector<index_t> r;
            for (index_t p : at) {
                if (p < 0 || p >= L)
                    throw error("encode.bad_global_token", source_ + ": global token position " + std::to_string(p) + " is outside the input's " +
                                                               std::to_string(L) + " positions");
                if (!mask || mask[b * L + p] != 0.0f) r.push_back(p);
            }
            g.rows.push_back(std::move(r));
        }
        return g;
    }

    struct weights {
        tensor<Scalar, Backend> shared;
        layers::learned_positions<Scalar, Backend> positions;
        layers::layer_norm<Scalar, Backend> embedding_norm;
        std::vector<attention_layer> attention;
        std::vector<ff_layer> ff;
    };
    std::shared_ptr<const weights> weights_;  // shared by copies of the handle
    index_t d_model_ = 0, vocab_ = 0;
    std::string source_;
    encoder_options opt_;
    layers::scratch_buffer<Scalar, Backend> scratch_;
};

} // namespace locost::models
