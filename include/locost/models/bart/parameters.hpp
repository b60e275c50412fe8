// The BART family's tensor names and shapes (BartForConditionalGeneration.state_dict(), as
// save_pretrained writes it), written once: the loaders read these names and validation lists
// them. `model.shared.weight` is stored once; the embed_tokens aliases and lm_head.weight resolve
// to it (io::checkpoint). A checkpoint of the bare BartModel (names without `model.`) resolves
// too, and final_logits_bias, a buffer such checkpoints lack, then counts as zeros.
#pragma once
#include <string>
#include <vector>

#include "../../io/checkpoint.hpp"
#include "config.hpp"

namespace locost::models::bart_names {

inline constexpr const char* shared = "model.shared.weight";
inline constexpr const char* final_logits_bias = "final_logits_bias";

// Names under `root` (BART "model.", LED "led."): "model.shared.weight", "model.encoder." …
inline std::string shared_of(const std::string& root) { return root + "shared.weight"; }
inline std::string stack(const char* which, const std::string& root = "model.") { return root + which + "."; }
inline std::string positions(const char* which, const std::string& root = "model.") { return stack(which, root) + "embed_positions.weight"; }
inline std::string embedding_norm(const char* which, const std::string& root = "model.") { return stack(which, root) + "layernorm_embedding."; }
// "model.encoder.layers.3."
inline std::string layer(const char* which, index_t i, const std::string& root = "model.") {
    return stack(which, root) + "layers." + std::to_string(i) + ".";
}

} // namespace locost::models::bart_names

namespace locost::models {

// Offset of BART's learned position table: position p is row p + 2.
inline constexpr index_t bart_position_offset = 2;

namespace detail {

inline void add_layer_norm_parameters(std::vector<io::parameter_spec>& p, const std::string& prefix, index_t H) {
    p.push_back({prefix + "weight", {H}});
    p.push_back({prefix + "bias", {H}});
}

// q_proj, k_proj, v_proj, out_proj (weights and biases) of `module` ("…self_attn.") and its
// post-LayerNorm `norm` ("…self_attn_layer_norm.").
inline void add_bart_attention_parameters(std::vector<io::parameter_spec>& p, const std::string& module, const std::string& norm, index_t H) {
    for (const char* m : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
        p.push_back({module + m + ".weight", {H, H}});
        p.push_back({module + m + ".bias", {H}});
    }
    add_layer_norm_parameters(p, norm, H);
}

// One stack; `self_attention` adds a layer's self-attention tensors (LED's encoder has its own).
template <class SelfAttention>
void add_bart_stack_parameters(std::vector<io::parameter_spec>& p, const bart_config& c, const char* which, const SelfAttention& self_attention) {
    using namespace bart_names;
    const bool dec = std::string(which) == "decoder";
    const index_t H = c.d_model, F = dec ? c.decoder_ffn_dim : c.d_ff, layers = dec ? c.num_decoder_layers : c.num_layers;
    const index_t table = (dec ? c.max_position_embeddings : c.max_encoder_positions) + c.position_offset;
    p.push_back({positions(which, c.weights_root), {table, H}});
    for (index_t i = 0; i < layers; ++i) {
        const std::string l = layer(which, i, c.weights_root);
        self_attention(p, l);
        if (dec) add_bart_attention_parameters(p, l + "encoder_attn.", l + "encoder_attn_layer_norm.", H);
        p.push_back({l + "fc1.weight", {F, H}});
        p.push_back({l + "fc1.bias", {F}});
        p.push_back({l + "fc2.weight", {H, F}});
        p.push_back({l + "fc2.bias", {H}});
        add_layer_norm_parameters(p, l + "final_layer_norm.", H);
    }
    add_layer_norm_parameters(p, embedding_norm(which, c.weights_root), H);
}

inline void add_bart_stack_parameters(std::vector<io::parameter_spec>& p, const bart_config& c, const char* which) {
    add_bart_stack_parameters(p, c, which, [&](std::vector<io::parameter_spec>& q, const std::string& l) {
        add_bart_attention_parameters(q, l + "self_attn.", l + "self_attn_layer_norm.", c.d_model);
    });
}

} // namespace detail

// Every tensor a BART encoder-decoder reads (final_logits_bias optional: see above).
inline std::vector<io::parameter_spec> bart_parameters(const bart_config& c) {
    std::vector<io::parameter_spec> p;
    p.push_back({bart_names::final_logits_bias, {1, c.vocab_size}, /*optional=*/true});
    p.push_back({bart_names::shared_of(c.weights_root), {c.vocab_size, c.d_model}});
    detail::add_bart_stack_parameters(p, c, "encoder");
    detail::add_bart_stack_parameters(p, c, "decoder");
    return p;
}

} // namespace locost::models
