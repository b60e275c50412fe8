// The T5 family's tensor names and shapes (Hugging Face T5ForConditionalGeneration.state_dict(),
// docs/models.md §2), written once: the name functions below are what the loaders read and what
// the parameter lists that validate a checkpoint are made of. The decoder's list is shared by
// every family with a T5 decoder (LOCOST, LongT5).
//
// The embedding appears once, as `shared.weight`; the tied aliases (encoder/decoder.embed_tokens,
// lm_head when tied) are resolved by io::checkpoint.
#pragma once
#include <string>
#include <vector>

#include "../../io/checkpoint.hpp"
#include "../config.hpp"

namespace locost::models::t5_names {

inline constexpr const char* shared = "shared.weight";
inline constexpr const char* lm_head = "lm_head.weight";
inline constexpr const char* encoder_final_norm = "encoder.final_layer_norm.weight";
inline constexpr const char* decoder_final_norm = "decoder.final_layer_norm.weight";
inline constexpr const char* relative_bias = "relative_attention_bias.weight";
// LongT5's transient-global attention module adds these two.
inline constexpr const char* global_relative_bias = "global_relative_attention_bias.weight";
inline constexpr const char* global_input_norm = "global_input_layer_norm.weight";

// "encoder.block.3.layer.1." — sub-layer `sub` of block `i` of `stack` ("encoder"/"decoder").
inline std::string layer(const char* stack, index_t i, int sub) {
    return std::string(stack) + ".block." + std::to_string(i) + ".layer." + std::to_string(sub) + ".";
}
// An attention module's projections under `module` ("…layer.0.SelfAttention."): q, k, v, o.
inline std::string proj(const std::string& module, const char* which) { return module + which + ".weight"; }
inline std::string norm(const std::string& sublayer) { return sublayer + "layer_norm.weight"; }

} // namespace locost::models::t5_names

namespace locost::models {

using io::parameter_spec;

// layer_norm + DenseReluDense of a feed-forward sub-layer (gated: wi_0, wi_1; plain: wi).
inline void add_feed_forward_parameters(std::vector<parameter_spec>& p, const std::string& sub, index_t H, index_t F, bool gated) {
    if (gated) {
        p.push_back({sub + "DenseReluDense.wi_0.weight", {F, H}});
        p.push_back({sub + "DenseReluDense.wi_1.weight", {F, H}});
    } else {
        p.push_back({sub + "DenseReluDense.wi.weight", {F, H}});
    }
    p.push_back({sub + "DenseReluDense.wo.weight", {H, F}});
    p.push_back({t5_names::norm(sub), {H}});
}

// q, k, v, o of an attention module with `inner` = heads × d_kv.
inline void add_attention_parameters(std::vector<parameter_spec>& p, const std::string& module, index_t H, index_t inner) {
    for (const char* m : {"q", "k", "v"}) p.push_back({t5_names::proj(module, m), {inner, H}});
    p.push_back({t5_names::proj(module, "o"), {H, inner}});
}

// shared, the decoder stack, its final norm and the head (when untied).
inline std::vector<parameter_spec> t5_decoder_parameters(const model_config& c) {
    using namespace t5_names;
    std::vector<parameter_spec> p;
    const index_t H = c.d_model, inner = c.num_heads * c.d_kv;
    p.push_back({shared, {c.vocab_size, H}});
    for (index_t i = 0; i < c.num_decoder_layers; ++i) {
        const std::string self = layer("decoder", i, 0), cross = layer("decoder", i, 1);
        add_attention_parameters(p, self + "SelfAttention.", H, inner);
        if (i == 0) p.push_back({self + "SelfAttention." + relative_bias, {c.relative_attention_num_buckets, c.num_heads}});
        p.push_back({norm(self), {H}});
        add_attention_parameters(p, cross + "EncDecAttention.", H, inner);
        p.push_back({norm(cross), {H}});
        add_feed_forward_parameters(p, layer("decoder", i, 2), H, c.d_ff, c.is_gated_act);
    }
    p.push_back({decoder_final_norm, {H}});
    if (!c.tie_word_embeddings) p.push_back({lm_head, {c.vocab_size, H}});
    return p;
}

// The encoder stack of T5 (self-attention with block 0's relative bias, feed-forward) and its
// final norm; `attention` names the module (LongT5: LocalSelfAttention, TransientGlobalSelfAttention).
inline std::vector<parameter_spec> t5_encoder_parameters(const model_config& c, const std::string& attention = "SelfAttention",
                                                         bool transient_global = false) {
    using namespace t5_names;
    std::vector<parameter_spec> p;
    const index_t H = c.d_model, inner = c.num_heads * c.d_kv, nb = c.relative_attention_num_buckets;
    for (index_t i = 0; i < c.num_layers; ++i) {
        const std::string a = layer("encoder", i, 0) + attention + ".";
        add_attention_parameters(p, a, H, inner);
        if (i == 0) p.push_back({a + relative_bias, {nb, c.num_heads}});
        if (transient_global) {
            if (i == 0) p.push_back({a + global_relative_bias, {nb, c.num_heads}});
            p.push_back({a + global_input_norm, {H}});
        }
        p.push_back({norm(layer("encoder", i, 0)), {H}});
        add_feed_forward_parameters(p, layer("encoder", i, 1), H, c.d_ff, c.is_gated_act);
    }
    p.push_back({encoder_final_norm, {H}});
    return p;
}

// Every tensor a T5 encoder-decoder reads.
inline std::vector<parameter_spec> t5_parameters(const model_config& c) {
    auto p = t5_decoder_parameters(c);
    auto e = t5_encoder_parameters(c);
    p.insert(p.begin() + 1, e.begin(), e.end());  // shared, encoder, decoder, head: save_pretrained's order
    return p;
}

} // namespace locost::models
