// The T5 family's config.json: transformers' T5Config ("t5") and MT5Config ("mt5"), which share
// every field the arithmetic reads. v1.0 checkpoints (t5-small …) use "relu" and a tied head
// scaled by d_model^-0.5; v1.1 / Flan-T5 use "gated-gelu" and an untied head. T5Config's names
// for the shared fields and its own fields are read here (parse_t5_style_fields), for LongT5 and
// LOCOST too, whose configuration classes derive from it.
#pragma once
#include <optional>
#include <string>

#include "../config.hpp"

namespace locost::models {

// The sizes as T5Config names them.
inline constexpr size_field t5_size_fields[] = {{"vocab_size", &model_config::vocab_size},
                                                {"d_model", &model_config::d_model},
                                                {"d_kv", &model_config::d_kv},
                                                {"d_ff", &model_config::d_ff},
                                                {"num_layers", &model_config::num_layers},
                                                {"num_heads", &model_config::num_heads}};

// T5Config's own fields, which T5, LongT5 and LOCOST read alike: the relative position buckets
// of the attention bias, and the feed-forward's form ("ACT" or "gated-ACT"; is_gated_act and the
// shared dense_act_fn are derived from it as Hugging Face does, "gated-gelu" meaning gelu_new;
// values stored in the file are ignored).
struct t5_style_fields {
    index_t relative_attention_num_buckets = 32;
    index_t relative_attention_max_distance = 128;
    double initializer_factor = 1.0;
    std::string feed_forward_proj = "relu";
    bool is_gated_act = false;  // derived from feed_forward_proj
};

// Where the three families' defaults differ.
struct t5_style_defaults {
    const char* feed_forward_proj = "relu";
    bool decoder_start_is_pad = true;  // T5 shifts right with pad; LOCOSTConfig says 0
};

// Reads the shared fields under T5Config's names into c (model_type aside) and T5Config's own
// into t. Absent num_decoder_layers means num_layers. Errors: config.missing_field,
// config.wrong_type, config.invalid_value naming the field.
inline void parse_t5_style_fields(const io::detail::field_reader& f, const io::json& j, model_config& c, t5_style_fields& t,
                                  const t5_style_defaults& d) {
    constexpr index_t M = io::max_config_dim;
    c.source = f.source();
    detail::read_sizes(f, c, t5_size_fields);
    c.num_decoder_layers = f.integer("num_decoder_layers", c.num_layers, 1, M);
    c.decoder_heads = c.num_heads, c.decoder_d_kv = c.d_kv, c.decoder_d_ff = c.d_ff;
    t.relative_attention_num_buckets = f.integer("relative_attention_num_buckets", 32, 1, M);
    t.relative_attention_max_distance = f.integer("relative_attention_max_distance", 128, 1, M);

    c.dropout_rate = f.number("dropout_rate", 0.1);
    if (!(c.dropout_rate >= 0.0 && c.dropout_rate <= 1.0)) f.invalid("dropout_rate", j["dropout_rate"].dump(), "a number in [0, 1]");
    c.layer_norm_epsilon = f.number("layer_norm_epsilon", 1e-6);
    if (!(c.layer_norm_epsilon > 0.0)) f.invalid("layer_norm_epsilon", j["layer_norm_epsilon"].dump(), "a positive number");
    t.initializer_factor = f.number("initializer_factor", 1.0);

    t.feed_forward_proj = f.string("feed_forward_proj", std::string(d.feed_forward_proj));
    {
        const std::string& p = t.feed_forward_proj;
        const bool gated = p.rfind("gated-", 0) == 0;
        const std::string act = gated ? p.substr(6) : p;
        if (act != "relu" && act != "gelu" && act != "gelu_new" && act != "silu")
            f.invalid("feed_forward_proj", j["feed_forward_proj"].dump(),
                      "\"ACT\" or \"gated-ACT\" with ACT one of relu, gelu, gelu_new, silu");
        t.is_gated_act = gated;
        c.dense_act_fn = p == "gated-gelu" ? "gelu_new" : act;
    }

    c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
    c.scale_decoder_outputs = f.boolean("scale_decoder_outputs", c.tie_word_embeddings);
    detail::read_structure_flags(f, c);
    detail::read_token_ids(f, c, {0, 1, d.decoder_start_is_pad ? std::nullopt : std::optional<index_t>(0), std::nullopt});
}

// A config of T5's shape: the shared fields and T5Config's own. T5, LongT5 and LOCOST derive
// from it, and T5's stacks (encoder.hpp, decoder.hpp) read it.
struct t5_style_config : model_config, t5_style_fields {};

// T5Config's defaults: "relu", and the decoder starts from the padding id.
struct t5_config : t5_style_config {
    // Errors: config.* naming the field.
    void read(const io::detail::field_reader& f, const io::json& j) {
        parse_t5_style_fields(f, j, *this, *this, {"relu", /*decoder_start_is_pad=*/true});
    }
};

}  // namespace locost::models
