// The Pegasus-X family's tensor names and shapes (PegasusXForConditionalGeneration.state_dict(),
// as save_pretrained writes it), written once: the loaders read these names and validation lists
// them. `model.shared.weight` is stored once; the embed_tokens aliases and lm_head.weight resolve
// to it (io::checkpoint). Attention projections have no biases; fc1/fc2 have. No position table
// (sinusoidal) and no final_logits_bias.
#pragma once
#include <string>
#include <vector>

#include "../../io/checkpoint.hpp"
#include "../bart/parameters.hpp"
#include "config.hpp"

namespace locost::models::pegasus_x_names {

inline constexpr const char* shared = "model.shared.weight";
inline constexpr const char* global_tokens = "model.encoder.embed_global.weight";

// "model.encoder." or "model.decoder."
inline std::string stack(const char* which) { return std::string("model.") + which + "."; }
// The stack's final LayerNorm ("model.encoder.layer_norm.").
inline std::string final_norm(const char* which) { return stack(which) + "layer_norm."; }
// "model.encoder.layers.3."
inline std::string layer(const char* which, index_t i) { return stack(which) + "layers." + std::to_string(i) + "."; }

} // namespace locost::models::pegasus_x_names

namespace locost::models {

namespace detail {

// q_proj, k_proj, v_proj, out_proj of `module` ("…self_attn."), weights only.
inline void add_unbiased_attention_parameters(std::vector<io::parameter_spec>& p, const std::string& module, index_t H) {
    for (const char* m : {"q_proj", "k_proj", "v_proj", "out_proj"}) p.push_back({module + m + ".weight", {H, H}});
}

inline void add_pegasus_x_stack_parameters(std::vector<io::parameter_spec>& p, const pegasus_x_config& c, const char* which) {
    using namespace pegasus_x_names;
    const bool dec = std::string(which) == "decoder";
    const index_t H = c.d_model, F = dec ? c.decoder_ffn_dim : c.d_ff, layers = dec ? c.num_decoder_layers : c.num_layers;
    if (!dec) p.push_back({global_tokens, {c.num_global_tokens, H}});
    for (index_t i = 0; i < layers; ++i) {
        const std::string l = layer(which, i);
        add_layer_norm_parameters(p, l + "self_attn_layer_norm.", H);
        if (!dec) add_layer_norm_parameters(p, l + "global_self_attn_layer_norm.", H);
        add_unbiased_attention_parameters(p, l + "self_attn.", H);
        if (dec) {
            add_layer_norm_parameters(p, l + "encoder_attn_layer_norm.", H);
            add_unbiased_attention_parameters(p, l + "encoder_attn.", H);
        }
        add_layer_norm_parameters(p, l + "final_layer_norm.", H);
        p.push_back({l + "fc1.weight", {F, H}});
        p.push_back({l + "fc1.bias", {F}});
        p.push_back({l + "fc2.weight", {H, F}});
        p.push_back({l + "fc2.bias", {H}});
    }
    add_layer_norm_parameters(p, final_norm(which), H);
}

} // namespace detail

// Every tensor a Pegasus-X encoder-decoder reads.
inline std::vector<io::parameter_spec> pegasus_x_parameters(const pegasus_x_config& c) {
    std::vector<io::parameter_spec> p;
    p.push_back({pegasus_x_names::shared, {c.vocab_size, c.d_model}});
    detail::add_pegasus_x_stack_parameters(p, c, "encoder");
    detail::add_pegasus_x_stack_parameters(p, c, "decoder");
    return p;
}

} // namespace locost::models
