// What every encoder-decoder family's config.json shares, and the two tables of fields families
// read it with.
//
// model_config holds what the generic code relies on — the stacks' sizes (the decoder's widths
// included), token ids, the tie — with T5Config's names and defaults. A family's own struct
// derives from it (models/<family>/config.hpp), and its parser reads the shared fields either
// as T5Config names them (parse_common_fields: T5, LongT5, LOCOST) or as BartConfig names them
// (parse_bart_style_fields: BART, LED, Pegasus-X), then its own. Configs are plain values:
// models/registry.hpp holds any family's in one variant, chosen from model_type in one place.
//
// Rules (shared by every family)
//  * vocab_size, d_model, d_kv, d_ff, num_layers, num_heads are required: Hugging Face always
//    writes them, so their absence means the file is not a config of these families. Every
//    other field takes the family's default; a JSON null counts as absent; unknown fields are
//    ignored.
//  * Absent tie_word_embeddings means true (the PretrainedConfig default); absent
//    num_decoder_layers means num_layers.
//  * is_gated_act and dense_act_fn are derived from feed_forward_proj as Hugging Face does
//    ("ACT" or "gated-ACT"; "gated-gelu" means gelu_new); values stored in the file are ignored.
//  * scale_decoder_outputs (transformers 5) says whether the LM head's input is scaled by
//    d_model^-0.5; absent, it is tie_word_embeddings (transformers 4 scales exactly when tied).
//  * Sizes are integers in [1, 2^31 - 1]; token ids lie in [0, vocab_size). d_model need not be
//    num_heads x d_kv (mT5-small: d_model 512, 6 heads of 64), so that is not checked.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "../config/error.hpp"
#include "../io/config.hpp"
#include "../ops/elementwise.hpp"
#include "model_config.hpp"

namespace locost::models {

// model_config: models/model_config.hpp.

// One size field of config.json and the member it sets.
struct size_field {
    const char* name;
    index_t model_config::*member;
};

// The token ids a family's config leaves to defaults.
struct token_defaults {
    index_t pad = 0, eos = 1;
    std::optional<index_t> decoder_start;  // none: the pad id (T5 shifts right with pad)
    std::optional<index_t> bos;            // none: no default (the field is optional)
};

namespace detail {

// The required sizes of `table`, each in [1, 2^31 - 1].
template <std::size_t N>
void read_sizes(const io::detail::field_reader& f, model_config& c, const size_field (&table)[N]) {
    for (const size_field& s : table) c.*s.member = f.integer(s.name, std::nullopt, 1, io::max_config_dim);
}

// is_encoder_decoder (which must be true) and use_cache.
inline void read_structure_flags(const io::detail::field_reader& f, model_config& c) {
    c.is_encoder_decoder = f.boolean("is_encoder_decoder", true);
    if (!c.is_encoder_decoder) f.invalid("is_encoder_decoder", "false", "true (locost runs encoder-decoder models)");
    c.use_cache = f.boolean("use_cache", true);
}

// pad, eos (an integer or a non-empty list), decoder start and bos ids, each in [0, vocab_size).
inline void read_token_ids(const io::detail::field_reader& f, model_config& c, const token_defaults& d) {
    const index_t last_id = c.vocab_size - 1;
    c.pad_token_id = f.integer("pad_token_id", d.pad, 0, last_id);
    c.eos_token_ids = {d.eos};
    if (auto eos = f.int_or_list("eos_token_id", 0, last_id)) {
        if (eos->empty()) f.invalid("eos_token_id", "[]", "an integer or a non-empty list of integers");
        c.eos_token_ids = std::move(*eos);
    }
    c.eos_token_id = c.eos_token_ids.front();
    c.decoder_start_token_id = f.integer("decoder_start_token_id", d.decoder_start.value_or(c.pad_token_id), 0, last_id);
    c.bos_token_id = d.bos ? std::optional<index_t>(f.integer("bos_token_id", *d.bos, 0, last_id)) : f.opt_integer("bos_token_id", 0, last_id);
}

} // namespace detail

// The sizes as T5Config names them.
inline constexpr size_field t5_size_fields[] = {{"vocab_size", &model_config::vocab_size}, {"d_model", &model_config::d_model},
                                                {"d_kv", &model_config::d_kv},             {"d_ff", &model_config::d_ff},
                                                {"num_layers", &model_config::num_layers}, {"num_heads", &model_config::num_heads}};

// A family's defaults for the shared fields where families differ.
struct common_defaults {
    const char* feed_forward_proj = "relu";
    bool decoder_start_is_pad = true;  // T5 shifts right with pad; LOCOSTConfig says 0
};

// Reads the shared fields (not model_type) into c. Errors: config.missing_field,
// config.wrong_type, config.invalid_value naming the field.
inline void parse_common_fields(const io::detail::field_reader& f, const io::json& j, model_config& c, const common_defaults& d) {
    constexpr index_t M = io::max_config_dim;
    c.source = f.source();
    detail::read_sizes(f, c, t5_size_fields);
    c.num_decoder_layers = f.integer("num_decoder_layers", c.num_layers, 1, M);
    c.decoder_heads = c.num_heads, c.decoder_d_kv = c.d_kv, c.decoder_d_ff = c.d_ff;
    c.relative_attention_num_buckets = f.integer("relative_attention_num_buckets", 32, 1, M);
    c.relative_attention_max_distance = f.integer("relative_attention_max_distance", 128, 1, M);

    c.dropout_rate = f.number("dropout_rate", 0.1);
    if (!(c.dropout_rate >= 0.0 && c.dropout_rate <= 1.0)) f.invalid("dropout_rate", j["dropout_rate"].dump(), "a number in [0, 1]");
    c.layer_norm_epsilon = f.number("layer_norm_epsilon", 1e-6);
    if (!(c.layer_norm_epsilon > 0.0)) f.invalid("layer_norm_epsilon", j["layer_norm_epsilon"].dump(), "a positive number");
    c.initializer_factor = f.number("initializer_factor", 1.0);

    c.feed_forward_proj = f.string("feed_forward_proj", std::string(d.feed_forward_proj));
    {
        const std::string& p = c.feed_forward_proj;
        const bool gated = p.rfind("gated-", 0) == 0;
        const std::string act = gated ? p.substr(6) : p;
        if (act != "relu" && act != "gelu" && act != "gelu_new" && act != "silu")
            f.invalid("feed_forward_proj", j["feed_forward_proj"].dump(),
                      "\"ACT\" or \"gated-ACT\" with ACT one of relu, gelu, gelu_new, silu");
        c.is_gated_act = gated;
        c.dense_act_fn = p == "gated-gelu" ? "gelu_new" : act;
    }

    c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
    c.scale_decoder_outputs = f.boolean("scale_decoder_outputs", c.tie_word_embeddings);
    detail::read_structure_flags(f, c);
    detail::read_token_ids(f, c, {0, 1, d.decoder_start_is_pad ? std::nullopt : std::optional<index_t>(0), std::nullopt});
}

// A family's config (Config) from a config.json object whose model_type is known: Config::read
// fills the shared fields and the family's own. Errors: config.* naming the field.
template <class Config>
Config read_config_as(const io::json& j, const std::string& source, const std::string& model_type) {
    const io::detail::field_reader f(j, source, "config");
    Config c;
    c.model_type = model_type;
    c.read(f, j);
    return c;
}

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
inline constexpr size_field bart_size_fields[] = {
    {"vocab_size", &model_config::vocab_size},           {"d_model", &model_config::d_model},
    {"encoder_layers", &model_config::num_layers},       {"decoder_layers", &model_config::num_decoder_layers},
    {"encoder_attention_heads", &model_config::num_heads}, {"decoder_attention_heads", &model_config::decoder_heads},
    {"encoder_ffn_dim", &model_config::d_ff},            {"decoder_ffn_dim", &model_config::decoder_d_ff}};

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
        if (c.d_model % heads != 0)
            f.invalid(name, std::to_string(heads), "a divisor of d_model (" + std::to_string(c.d_model) + ")");
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
    c.feed_forward_proj = a;
    c.is_gated_act = false;

    c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
    if (!c.tie_word_embeddings)
        f.invalid("tie_word_embeddings", "false", std::string("true (") + d.family + "'s LM head is the shared embedding)");
    c.scale_decoder_outputs = false;
    detail::read_structure_flags(f, c);
    detail::read_token_ids(f, c, d.ids);
    b.forced_bos_token_id = f.opt_integer("forced_bos_token_id", 0, c.vocab_size - 1);
    b.forced_eos_token_id = f.opt_integer("forced_eos_token_id", 0, c.vocab_size - 1);
}

// The activation named by config.json's dense_act_fn (derived from feed_forward_proj).
inline activation activation_named(const std::string& name, const std::string& source) {
    if (name == "relu") return activation::relu;
    if (name == "gelu_new") return activation::gelu_tanh;
    if (name == "gelu") return activation::gelu_erf;
    if (name == "silu") return activation::silu;
    throw error("config.invalid_value", source + ": activation '" + name + "' is not supported (relu, gelu, gelu_new, silu)");
}

// Config values that size the model are checked against the weights before anything is built
// from them: every layer owns tensors of its own, so a config with more layers than the
// checkpoint has tensors cannot describe it. Checked first because the parameter list itself
// grows with num_layers (a config.json saying 10^6 layers over a tiny checkpoint would otherwise
// build millions of names before the validation could report them missing). Error:
// checkpoint.config_mismatch.
inline void check_layers_fit(const model_config& c, std::size_t tensors, const std::string& weights) {
    const double layers = static_cast<double>(c.num_layers) + static_cast<double>(c.num_decoder_layers);
    if (layers > static_cast<double>(tensors))
        throw error("checkpoint.config_mismatch", c.source + ": num_layers " + std::to_string(c.num_layers) + " and num_decoder_layers " +
                                                      std::to_string(c.num_decoder_layers) + " need at least one tensor per layer, but " +
                                                      weights + " holds " + std::to_string(tensors) +
                                                      " tensors: the config does not describe these weights");
}

} // namespace locost::models
