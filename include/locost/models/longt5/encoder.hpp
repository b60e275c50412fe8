// The LongT5 encoder stack — LongT5Stack with is_decoder false (Guo et al. 2022):
//
//     x = shared[ids]
//     for each block i:  x = x + LocalAttention_i(RMSNorm(x))     (layers/longt5_attention.hpp)
//                        x = FeedForward_i(x)
//     h = RMSNorm(x)                                               encoder.final_layer_norm
//
// Block 0 owns the relative bias (and, transient-global, the global relative bias); every block
// reuses them. Attention is local (radius local_radius, plus one transient global token per
// global_block_size positions), so time and memory grow as L·(local_radius + L/global_block_size)
// — linearly for "local". No absolute positions: any length.
//
// Memory for B rows of L tokens (float): x B·L·H + attention scratch B·L·(H + 4·inner + 1)
// (transient-global: + B·L·(H + 2·inner) for the block sums and their keys and values) + per
// query group a few blocks of scores, plus the weights.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../../core/tensor.hpp"
#include "../../io/checkpoint.hpp"
#include "../../layers/feed_forward.hpp"
#include "../../layers/longt5_attention.hpp"
#include "../../layers/parameter.hpp"
#include "../../layers/relative_position_bias.hpp"
#include "../../layers/rms_norm.hpp"
#include "../../ops/embedding.hpp"
#include "../concepts.hpp"
#include "../feed_forward_weights.hpp"
#include "../options.hpp"
#include "../seq2seq.hpp"
#include "../t5/encoder.hpp"
#include "config.hpp"
#include "parameters.hpp"

namespace locost::models {

template <class Scalar, class Backend, activation Act, bool GatedFF, bool TransientGlobal>
class longt5_encoder {
public:
    using scalar = Scalar;
    using backend = Backend;
    using attention_layer = layers::longt5_self_attention<Scalar, Backend, TransientGlobal>;
    using ff_layer = layers::feed_forward<Scalar, Backend, Act, GatedFF>;

    // Reads the encoder of checkpoint `ck` whose config is `c` (names: longt5/parameters.hpp).
    longt5_encoder(const io::checkpoint& ck, const longt5_config& c, const encoder_options& o)
        : d_model_(c.d_model), vocab_(c.vocab_size), global_block_(c.global_block_size), opt_(o) {
        using namespace t5_names;
        const index_t H = c.d_model, F = c.d_ff, I = c.num_heads * c.d_kv;
        const std::string module = longt5_attention_module(c);
        auto w = std::make_shared<weights>();
        w->shared = layers::to_backend<Scalar, Backend>(ck.load_f32(shared, {c.vocab_size, H}));
        for (index_t i = 0; i < c.num_layers; ++i) {
            const std::string sub = layer("encoder", i, 0), m = sub + module + ".";
            const layers::attention_weights a = detail::load_t5_attention(ck, sub, m, H, I);
            tensor<float> global_norm;
            if constexpr (TransientGlobal) global_norm = ck.load_f32(m + global_input_norm, {H});
            w->attention.emplace_back(a, c.layer_norm_epsilon, c.num_heads, c.local_radius, global_norm, large_products(o.compute));
            w->ff.emplace_back(load_feed_forward<GatedFF, typename ff_layer::weights>(ck, layer("encoder", i, 1), H, F), c.layer_norm_epsilon,
                               large_products(o.compute));
        }
        const std::string block0 = layer("encoder", 0, 0) + module + ".";
        const index_t nb = c.relative_attention_num_buckets;
        w->bias = layers::relative_position_bias<Scalar, Backend>(ck.load_f32(block0 + relative_bias, {nb, c.num_heads}),
                                                                  /*bidirectional=*/true, c.relative_attention_max_distance);
        if constexpr (TransientGlobal)
            w->global_bias = layers::relative_position_bias<Scalar, Backend>(
                ck.load_f32(block0 + global_relative_bias, {nb, c.num_heads}), /*bidirectional=*/true, c.relative_attention_max_distance);
        w->final_norm = layers::rms_norm<Scalar, Backend>(ck.load_f32(encoder_final_norm, {H}), c.layer_norm_epsilon);
        weights_ = std::move(w);
    }

    // The encoder concept (models/concepts.hpp).
    index_t d_model() const noexcept { return d_model_; }
    index_t vocab_size() const noexcept { return vocab_; }
    output_positions output_span(index_t L) const noexcept { return {0, L}; }
    std::optional<index_t> max_context() const noexcept { return std::nullopt; }

    // ids (B, L), mask (B, L) of 0/1 or nullptr (checked by the caller) → (B, L, H).
    tensor<Scalar, Backend> forward(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& progress) {
        const weights& w = *weights_;
        const index_t H = d_model_, rows = B * L;
        tensor<Scalar, Backend> x({B, L, H});
        const layers::backend_array<std::int64_t, Backend> ids_on_backend(ids, rows);  // a device reads its own copy
        ops::embedding<Backend>(w.shared.data(), H, ids_on_backend.data(), rows, x.data());
        std::optional<layers::transient_blocks> blocks;
        if constexpr (TransientGlobal) blocks.emplace(mask, B, L, global_block_);
        run_encoder_layers(x.data(), B, L, H, w.attention, w.ff, opt_, scratch_, progress, [&](std::size_t i, Scalar* scratch) {
            w.attention[i].forward(x.data(), B, L, mask, w.bias, blocks ? &*blocks : nullptr, &w.global_bias, scratch);
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
        layers::relative_position_bias<Scalar, Backend> bias, global_bias;
        layers::rms_norm<Scalar, Backend> final_norm;
    };
    std::shared_ptr<const weights> weights_;  // shared by copies of the handle
    index_t d_model_ = 0, vocab_ = 0, global_block_ = 16;
    encoder_options opt_;
    layers::scratch_buffer<Scalar, Backend> scratch_;
};

} // namespace locost::models
