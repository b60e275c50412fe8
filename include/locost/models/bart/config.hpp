// The BART family's config.json: transformers' BartConfig ("bart"), with its own field names.
// The fields the shared machinery reads (models/config.hpp: sizes, token ids, the tie) are
// filled from BART's names, so the generic decoder glue, generation defaults and the tool see
// one model_config:
//
//   d_model                      d_model
//   num_layers / num_decoder_layers   encoder_layers / decoder_layers
//   num_heads, d_kv, d_ff        encoder_attention_heads, d_model / heads, encoder_ffn_dim
//   dense_act_fn                 activation_function ("gelu" is erf GELU)
//
// Rules: the sizes Hugging Face always writes (vocab_size, d_model, the layer, head and ffn
// counts) are required; the rest take BartConfig's defaults (pad 1, bos 0, eos 2, decoder start
// 2, forced_eos 2, max_position_embeddings 1024, scale_embedding false, LayerNorm eps 1e-5 — not
// a config field). d_model must divide by both head counts. The LM head is the tied embedding,
// unscaled, plus final_logits_bias.
#pragma once
#include <optional>
#include <string>

#include "../config.hpp"

namespace locost::models {

struct bart_config : model_config {
    index_t decoder_attention_heads = 16;
    index_t decoder_ffn_dim = 4096;
    index_t max_position_embeddings = 1024;
    bool scale_embedding = false;
    std::string activation_function = "gelu";
    std::optional<index_t> forced_bos_token_id;
    std::optional<index_t> forced_eos_token_id;
    // Where the weights live and how the position tables are indexed: BART's ("model.", row
    // p + 2, one table size for both stacks); LED (models/led/) sets its own.
    std::string weights_root = "model.";
    index_t position_offset = 2;
    index_t max_encoder_positions = 1024;  // BART: max_position_embeddings
    std::string encoder_positions_field = "max_position_embeddings", decoder_positions_field = "max_position_embeddings";

    index_t decoder_d_head() const { return d_model / decoder_attention_heads; }
};

// Parses a BART config.json object (model_type already known to be "bart").
inline bart_config parse_bart_config(const io::json& j, const std::string& source) {
    const io::detail::field_reader f(j, source, "config");
    constexpr index_t M = io::max_config_dim;
    bart_config c;
    c.model_type = "bart";
    c.source = source;
    c.vocab_size = f.integer("vocab_size", std::nullopt, 1, M);
    c.d_model = f.integer("d_model", std::nullopt, 1, M);
    c.num_layers = f.integer("encoder_layers", std::nullopt, 1, M);
    c.num_decoder_layers = f.integer("decoder_layers", std::nullopt, 1, M);
    c.num_heads = f.integer("encoder_attention_heads", std::nullopt, 1, M);
    c.decoder_attention_heads = f.integer("decoder_attention_heads", std::nullopt, 1, M);
    c.d_ff = f.integer("encoder_ffn_dim", std::nullopt, 1, M);
    c.decoder_ffn_dim = f.integer("decoder_ffn_dim", std::nullopt, 1, M);
    for (auto [name, heads] : {std::pair{"encoder_attention_heads", c.num_heads}, std::pair{"decoder_attention_heads", c.decoder_attention_heads}})
        if (c.d_model % heads != 0)
            f.invalid(name, std::to_string(heads), "a divisor of d_model (" + std::to_string(c.d_model) + ")");
    c.d_kv = c.d_model / c.num_heads;
    // Fields of older (fairseq-converted) configs for other architectures: transformers' BartModel
    // ignores them, but a config that sets them describes a model BART's code does not compute
    // (pre-LayerNorm as mBART, sinusoidal positions), so it is refused rather than misread.
    for (auto [name, want] : {std::pair{"normalize_before", false}, std::pair{"add_final_layer_norm", false},
                              std::pair{"static_position_embeddings", false}, std::pair{"normalize_embedding", true}})
        if (f.boolean(name, want) != want)
            f.invalid(name, want ? "false" : "true", std::string(want ? "true" : "false") + " (BART; this setting describes another architecture)");
    c.max_position_embeddings = f.integer("max_position_embeddings", 1024, 1, M);
    c.max_encoder_positions = c.max_position_embeddings;
    c.scale_embedding = f.boolean("scale_embedding", false);
    c.layer_norm_epsilon = 1e-5;  // nn.LayerNorm's default; BartConfig has no field for it
    c.dropout_rate = f.number("dropout", 0.1);

    c.activation_function = f.string("activation_function", std::string("gelu"));
    const std::string& a = c.activation_function;
    if (a == "gelu" || a == "gelu_new" || a == "relu" || a == "silu") c.dense_act_fn = a;
    else if (a == "swish") c.dense_act_fn = "silu";
    else f.invalid("activation_function", j["activation_function"].dump(), "one of \"gelu\", \"gelu_new\", \"relu\", \"silu\", \"swish\"");
    c.feed_forward_proj = a;
    c.is_gated_act = false;

    c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
    if (!c.tie_word_embeddings)
        f.invalid("tie_word_embeddings", "false", "true (BART's LM head is the shared embedding)");
    c.scale_decoder_outputs = false;
    c.is_encoder_decoder = f.boolean("is_encoder_decoder", true);
    if (!c.is_encoder_decoder) f.invalid("is_encoder_decoder", "false", "true (locost runs encoder-decoder models)");
    c.use_cache = f.boolean("use_cache", true);

    const index_t last_id = c.vocab_size - 1;
    c.pad_token_id = f.integer("pad_token_id", 1, 0, last_id);
    c.bos_token_id = f.integer("bos_token_id", 0, 0, last_id);
    c.eos_token_ids = {2};
    if (auto eos = f.int_or_list("eos_token_id", 0, last_id)) {
        if (eos->empty()) f.invalid("eos_token_id", "[]", "an integer or a non-empty list of integers");
        c.eos_token_ids = std::move(*eos);
    }
    c.eos_token_id = c.eos_token_ids.front();
    c.decoder_start_token_id = f.integer("decoder_start_token_id", 2, 0, last_id);
    c.forced_bos_token_id = f.opt_integer("forced_bos_token_id", 0, last_id);
    c.forced_eos_token_id = f.opt_integer("forced_eos_token_id", 0, last_id);
    return c;
}

} // namespace locost::models
