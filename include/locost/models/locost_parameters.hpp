// The parameter names and shapes of a LOCOST checkpoint, as the original
// LOCOSTForConditionalGeneration.state_dict() spells them (docs/models.md §1–2).
// One list, used by the checkpoint validator and by the demo-checkpoint generator.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "../core/tensor.hpp"

namespace locost::models {

struct locost_dims {
    index_t vocab_size = 32100, d_model = 768, d_state = 512, d_kv = 64, d_ff = 2048;
    index_t num_layers = 12, num_decoder_layers = 12, num_heads = 12, num_ssm_heads = 1;
    index_t relative_attention_num_buckets = 32;
    bool gated_ff = true;        // feed_forward_proj "gated-*": wi_0, wi_1; else wi
    bool bidirectional = true;   // kernel.C carries 2 channels
    bool gating = true;          // q_proj present
    bool tie_word_embeddings = true;  // false: lm_head.weight present
};

struct parameter_spec {
    std::string name;
    shape_t shape;
};

// Every tensor the model reads. The embedding appears once, as `shared.weight`; the tied
// aliases (encoder/decoder.embed_tokens, lm_head when tied) are resolved by the loader.
inline std::vector<parameter_spec> locost_parameters(const locost_dims& d) {
    std::vector<parameter_spec> p;
    const index_t H = d.d_model, F = d.d_ff, inner = d.num_heads * d.d_kv;
    const index_t Hk = H / (d.num_ssm_heads > 0 ? d.num_ssm_heads : 1), N2 = d.d_state / 2;
    auto add = [&](std::string n, shape_t s) { p.push_back({std::move(n), std::move(s)}); };
    auto ff = [&](const std::string& pre) {
        if (d.gated_ff) {
            add(pre + "DenseReluDense.wi_0.weight", {F, H});
            add(pre + "DenseReluDense.wi_1.weight", {F, H});
        } else {
            add(pre + "DenseReluDense.wi.weight", {F, H});
        }
        add(pre + "DenseReluDense.wo.weight", {H, F});
        add(pre + "layer_norm.weight", {H});
    };
    add("shared.weight", {d.vocab_size, H});
    for (index_t i = 0; i < d.num_layers; ++i) {
        const std::string b = "encoder.block." + std::to_string(i) + ".layer.";
        const std::string s = b + "0.ssm_layer.";
        add(b + "0.layer_prenorm.weight", {H});
        add(s + "kernel.log_dt", {Hk});
        add(s + "kernel.inv_A_real", {Hk, N2});
        add(s + "kernel.A_imag", {Hk, N2});
        add(s + "kernel.B", {Hk, N2, 2});
        add(s + "kernel.C", {d.bidirectional ? 2 : 1, Hk, N2, 2});
        add(s + "D", {Hk});
        if (d.gating) {
            add(s + "q_proj.weight", {H, H});
            add(s + "q_proj.bias", {H});
        }
        add(s + "k_proj.weight", {H, H});
        add(s + "k_proj.bias", {H});
        add(s + "output_linear.weight", {H, H});
        add(s + "output_linear.bias", {H});
        ff(b + "1.");
    }
    add("encoder.final_layer_norm.weight", {H});
    for (index_t i = 0; i < d.num_decoder_layers; ++i) {
        const std::string b = "decoder.block." + std::to_string(i) + ".layer.";
        for (const char* m : {"q", "k", "v"}) add(b + "0.SelfAttention." + m + ".weight", {inner, H});
        add(b + "0.SelfAttention.o.weight", {H, inner});
        if (i == 0) add(b + "0.SelfAttention.relative_attention_bias.weight", {d.relative_attention_num_buckets, d.num_heads});
        add(b + "0.layer_norm.weight", {H});
        for (const char* m : {"q", "k", "v"}) add(b + "1.EncDecAttention." + m + ".weight", {inner, H});
        add(b + "1.EncDecAttention.o.weight", {H, inner});
        add(b + "1.layer_norm.weight", {H});
        ff(b + "2.");
    }
    add("decoder.final_layer_norm.weight", {H});
    if (!d.tie_word_embeddings) add("lm_head.weight", {d.vocab_size, H});
    return p;
}

} // namespace locost::models
