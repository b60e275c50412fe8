// The LED family's tensor names and shapes (LEDForConditionalGeneration.state_dict()), written
// once: BART's layout under `led.` (models/bart/parameters.hpp), except the encoder's
// self-attention, a Longformer module with separate projections for global attention:
//
//   led.encoder.layers.i.self_attn.longformer_self_attn.{query,key,value}            local q, k, v
//   led.encoder.layers.i.self_attn.longformer_self_attn.{query,key,value}_global     global q, k, v
//   led.encoder.layers.i.self_attn.output                                             out projection
//
// each with weight and bias; `led.shared.weight` is stored once (io::checkpoint resolves the
// embed_tokens aliases); final_logits_bias as BART's.
#pragma once
#include <string>
#include <vector>

#include "../bart/parameters.hpp"
#include "config.hpp"

namespace locost::models::led_names {

// "led.encoder.layers.3.self_attn.longformer_self_attn."
inline std::string longformer(const std::string& layer) { return layer + "self_attn.longformer_self_attn."; }
inline std::string output(const std::string& layer) { return layer + "self_attn.output."; }
inline std::string self_norm(const std::string& layer) { return layer + "self_attn_layer_norm."; }
inline constexpr const char* projections[] = {"query", "key", "value", "query_global", "key_global", "value_global"};

} // namespace locost::models::led_names

namespace locost::models {

inline std::vector<io::parameter_spec> led_parameters(const led_config& c) {
    const index_t H = c.d_model;
    std::vector<io::parameter_spec> p;
    p.push_back({bart_names::final_logits_bias, {1, c.vocab_size}, /*optional=*/true});
    p.push_back({bart_names::shared_of(c.weights_root), {c.vocab_size, H}});
    detail::add_bart_stack_parameters(p, c, "encoder", [&](std::vector<io::parameter_spec>& q, const std::string& l) {
        for (const char* m : led_names::projections) {
            q.push_back({led_names::longformer(l) + m + ".weight", {H, H}});
            q.push_back({led_names::longformer(l) + m + ".bias", {H}});
        }
        q.push_back({led_names::output(l) + "weight", {H, H}});
        q.push_back({led_names::output(l) + "bias", {H}});
        detail::add_layer_norm_parameters(q, led_names::self_norm(l), H);
    });
    detail::add_bart_stack_parameters(p, c, "decoder");
    return p;
}

} // namespace locost::models
