// The tensor names and shapes of a LOCOST checkpoint, as the original
// LOCOSTForConditionalGeneration.state_dict() spells them (docs/models.md §1–2), written once:
// the encoder loader reads these names and the checkpoint validator checks this list. The
// decoder, the embedding and the head are the T5 family's (t5/parameters.hpp).
#pragma once
#include <string>
#include <vector>

#include "../t5/parameters.hpp"
#include "config.hpp"

namespace locost::models::locost_names {

// "encoder.block.3.layer.0.ssm_layer." — the S4D module of block i.
inline std::string ssm(index_t i) { return t5_names::layer("encoder", i, 0) + "ssm_layer."; }
// "encoder.block.3.layer.0.layer_prenorm.weight"
inline std::string prenorm(index_t i) { return t5_names::layer("encoder", i, 0) + "layer_prenorm.weight"; }

} // namespace locost::models::locost_names

namespace locost::models {

// The encoder blocks' S4D layers and feed-forwards, and its final norm.
inline std::vector<parameter_spec> locost_encoder_parameters(const locost_config& c) {
    std::vector<parameter_spec> p;
    const index_t H = c.d_model, Hk = H / (c.num_ssm_heads > 0 ? c.num_ssm_heads : 1), N2 = c.d_state / 2;
    for (index_t i = 0; i < c.num_layers; ++i) {
        const std::string s = locost_names::ssm(i);
        p.push_back({locost_names::prenorm(i), {H}});
        p.push_back({s + "kernel.log_dt", {Hk}});
        p.push_back({s + "kernel.inv_A_real", {Hk, N2}});
        p.push_back({s + "kernel.A_imag", {Hk, N2}});
        p.push_back({s + "kernel.B", {Hk, N2, 2}});
        p.push_back({s + "kernel.C", {c.bidirectional ? 2 : 1, Hk, N2, 2}});
        p.push_back({s + "D", {Hk}});
        if (c.gating) {
            p.push_back({s + "q_proj.weight", {H, H}});
            p.push_back({s + "q_proj.bias", {H}});
        }
        p.push_back({s + "k_proj.weight", {H, H}});
        p.push_back({s + "k_proj.bias", {H}});
        p.push_back({s + "output_linear.weight", {H, H}});
        p.push_back({s + "output_linear.bias", {H}});
        add_feed_forward_parameters(p, t5_names::layer("encoder", i, 1), H, c.d_ff, c.is_gated_act);
    }
    p.push_back({t5_names::encoder_final_norm, {H}});
    return p;
}

// Every tensor a LOCOST encoder-decoder reads: shared, encoder, decoder, head.
inline std::vector<parameter_spec> locost_parameters(const locost_config& c) {
    auto p = t5_decoder_parameters(c);
    auto e = locost_encoder_parameters(c);
    p.insert(p.begin() + 1, e.begin(), e.end());
    return p;
}

} // namespace locost::models
