// What the families whose configs have BartConfig's names (BART, LED, Pegasus-X) show and
// initialise alike: inspect's account of such a config, and transformers' BART-style weight
// initialisation for demo checkpoints.
#pragma once
#include <optional>

#include "../family.hpp"
#include "config.hpp"

namespace locost::models {

// A config read with BartConfig's names as inspect shows it (BART, LED, Pegasus-X): the sizes,
// the family's `own` values, then the token ids.
inline described describe_bart_style(const model_config& c, const bart_style_fields& b, const described& own, shown_ids ids) {
    described v = {{"vocab_size", c.vocab_size},
                   {"d_model", c.d_model},
                   {"encoder_layers", c.num_layers},
                   {"decoder_layers", c.num_decoder_layers},
                   {"encoder_attention_heads", c.num_heads},
                   {"decoder_attention_heads", c.decoder_heads},
                   {"encoder_ffn_dim", c.d_ff},
                   {"decoder_ffn_dim", c.decoder_d_ff},
                   {"activation_function", b.activation_function}};
    v.insert(v.end(), own.begin(), own.end());
    v.push_back({"pad_token_id", c.pad_token_id});
    if (ids.bos) v.push_back({"bos_token_id", optional_id(c.bos_token_id)});
    v.push_back({"eos_token_id", c.eos_token_id});
    v.push_back({"decoder_start_token_id", c.decoder_start_token_id});
    if (ids.forced_bos) v.push_back({"forced_bos_token_id", optional_id(b.forced_bos_token_id)});
    if (ids.forced_eos) v.push_back({"forced_eos_token_id", optional_id(b.forced_eos_token_id)});
    return v;
}

// The initialisation of transformers' BART-style models (_init_weights with init_std 0.02):
// LayerNorms weight 1 and bias 0, every other bias 0, Linear weights and embeddings N(0, 0.02);
// the token table's padding row (BART's padding_idx) 0 when given.
inline init_rule bart_style_init(const layers::param_record& r, std::optional<index_t> padding_row) {
    using layers::param_kind;
    switch (r.info.kind) {
    case param_kind::norm_scale: return init_rule::constant(1.0);
    case param_kind::norm_shift:
    case param_kind::bias:
    case param_kind::logits_bias: return init_rule::constant(0.0);
    case param_kind::embedding: {
        init_rule rule = init_rule::normal(0.02);
        rule.zero_row = padding_row;
        return rule;
    }
    default: return init_rule::normal(0.02);
    }
}

}  // namespace locost::models
