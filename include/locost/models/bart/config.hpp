// The BART family's config.json: transformers' BartConfig ("bart"). Its fields are read by the
// table BART, LED and Pegasus-X share (parse_bart_style_fields, below), with BART's
// defaults: pad 1, bos 0, eos 2, decoder start 2, max_position_embeddings 1024, scale_embedding
// false. The LM head is the tied embedding, unscaled, plus final_logits_bias.
//
// Fields of older (fairseq-converted) configs for other architectures — normalize_before,
// add_final_layer_norm, static_position_embeddings, normalize_embedding — are ignored by
// transformers' BartModel, but a config that sets them describes a model BART's code does not
// compute (pre-LayerNorm as mBART, sinusoidal positions), so it is refused rather than misread.
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "../config.hpp"

namespace locost::models {

// BartConfig's own fields, which BART, LED and Pegasus-X read alike.
struct bart_style_fields {
    std::string activation_function = "gelu";
    bool scale_embedding = false;
    index_t max_position_embeddings = 1024;
    std::optional<index_t> forced_bos_token_id;
    std::optional<index_t> forced_eos_token_id;
    // The module the task model keeps its base model in ("model"; LED's "led"): the tensors' root.
    std::string weights_root = "model";
};

// Where the three families' defaults differ.
struct bart_style_defaults {
    const char* family;  // for messages: "BART", "Pegasus-X"
    token_defaults ids = {1, 2, 2, 0};
    bool scale_embedding = false;
    index_t max_position_embeddings = 1024;
};

// The sizes as BartConfig names them.
inline constexpr size_field bart_size_fields[] = {{"vocab_size", &model_config::vocab_size},
                                                  {"d_model", &model_config::d_model},
                                                  {"encoder_layers", &model_config::num_layers},
                                                  {"decoder_layers", &model_config::num_decoder_layers},
                                                  {"encoder_attention_heads", &model_config::num_heads},
                                                  {"decoder_attention_heads", &model_config::decoder_heads},
                                                  {"encoder_ffn_dim", &model_config::d_ff},
                                                  {"decoder_ffn_dim", &model_config::decoder_d_ff}};

// Reads the shared fields under BartConfig's names into c (model_type aside) and BartConfig's
// own into b:
//
//   d_model                           d_model
//   num_layers / num_decoder_layers   encoder_layers / decoder_layers
//   num_heads, d_kv, d_ff             encoder_attention_heads, d_model / heads, encoder_ffn_dim
//   decoder_heads, d_kv, d_ff         decoder_attention_heads, d_model / heads, decoder_ffn_dim
//   dense_act_fn                      activation_function ("gelu" is erf GELU, "swish" is silu)
//
// The sizes Hugging Face always writes are required; d_model must divide by both head counts.
// LayerNorm's eps is 1e-5 (nn.LayerNorm's: BartConfig has no field for it). The LM head is the
// tied embedding, unscaled: tie_word_embeddings false is refused. Errors: config.* naming the field.
inline void parse_bart_style_fields(const io::detail::field_reader& f, const io::json& j, model_config& c, bart_style_fields& b,
                                    const bart_style_defaults& d) {
    c.source = f.source();
    detail::read_sizes(f, c, bart_size_fields);
    for (auto [name, heads] : {std::pair{"encoder_attention_heads", c.num_heads}, std::pair{"decoder_attention_heads", c.decoder_heads}})
        if (c.d_model % heads != 0) f.invalid(name, std::to_string(heads), "a divisor of d_model (" + std::to_string(c.d_model) + ")");
    c.d_kv = c.d_model / c.num_heads;
    c.decoder_d_kv = c.d_model / c.decoder_heads;
    b.max_position_embeddings = f.integer("max_position_embeddings", d.max_position_embeddings, 1, io::max_config_dim);
    b.scale_embedding = f.boolean("scale_embedding", d.scale_embedding);
    c.layer_norm_epsilon = 1e-5;
    c.dropout_rate = f.number("dropout", 0.1);

    b.activation_function = f.string("activation_function", std::string("gelu"));
    const std::string& a = b.activation_function;
    if (a == "gelu" || a == "gelu_new" || a == "relu" || a == "silu") c.dense_act_fn = a;
    else if (a == "swish") c.dense_act_fn = "silu";
    else f.invalid("activation_function", j["activation_function"].dump(), "one of \"gelu\", \"gelu_new\", \"relu\", \"silu\", \"swish\"");

    c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
    if (!c.tie_word_embeddings)
        f.invalid("tie_word_embeddings", "false", std::string("true (") + d.family + "'s LM head is the shared embedding)");
    c.scale_decoder_outputs = false;
    detail::read_structure_flags(f, c);
    detail::read_token_ids(f, c, d.ids);
    b.forced_bos_token_id = f.opt_integer("forced_bos_token_id", 0, c.vocab_size - 1);
    b.forced_eos_token_id = f.opt_integer("forced_eos_token_id", 0, c.vocab_size - 1);
}

struct bart_config : model_config, bart_style_fields {
    // How the position tables are indexed: BART reads row p + 2 for position p; LED (models/led/)
    // sets its own, and its root.
    index_t position_offset = 2;
    index_t max_encoder_positions = 1024;  // BART: max_position_embeddings
    std::string encoder_positions_field = "max_position_embeddings", decoder_positions_field = "max_position_embeddings";
    std::string label = "BART";  // whose learned positions a length error names

    // Errors: config.* naming the field.
    void read(const io::detail::field_reader& f, const io::json& j);
};

inline void bart_config::read(const io::detail::field_reader& f, const io::json& j) {
    parse_bart_style_fields(f, j, *this, *this, {"BART"});
    for (auto [name, want] : {std::pair{"normalize_before", false}, std::pair{"add_final_layer_norm", false},
                              std::pair{"static_position_embeddings", false}, std::pair{"normalize_embedding", true}})
        if (f.boolean(name, want) != want)
            f.invalid(name, want ? "false" : "true",
                      std::string(want ? "true" : "false") + " (BART; this setting describes another architecture)");
    max_encoder_positions = max_position_embeddings;
}

}  // namespace locost::models
