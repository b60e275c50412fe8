// What every encoder-decoder family's config.json shares, and how it is read.
//
// model_config holds the fields of Hugging Face's T5Config that the T5-style decoder, the
// generation defaults and the tool rely on, with T5Config's names and defaults. A family's own
// struct derives from it (models/<family>/config.hpp) and its parser reads these fields with
// parse_common_fields(), then its own. models/registry.hpp is the one place that picks the
// family from model_type.
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

namespace locost::models {

struct model_config {
    virtual ~model_config() = default;

    std::string model_type;
    std::string source;  // the config.json path (or what the caller named), for messages

    index_t vocab_size = 32128;
    index_t d_model = 512;
    index_t d_kv = 64;
    index_t d_ff = 2048;
    index_t num_layers = 6;
    index_t num_decoder_layers = 6;  // absent: num_layers
    index_t num_heads = 8;
    index_t relative_attention_num_buckets = 32;
    index_t relative_attention_max_distance = 128;

    double dropout_rate = 0.1;
    double layer_norm_epsilon = 1e-6;
    double initializer_factor = 1.0;

    std::string feed_forward_proj = "relu";
    bool is_gated_act = false;          // derived from feed_forward_proj
    std::string dense_act_fn = "relu";  // derived from feed_forward_proj

    bool tie_word_embeddings = true;
    bool scale_decoder_outputs = true;  // absent: tie_word_embeddings
    bool is_encoder_decoder = true;
    bool use_cache = true;

    index_t pad_token_id = 0;
    index_t eos_token_id = 1;                  // the first of eos_token_ids
    std::vector<index_t> eos_token_ids = {1};  // config.json may give an integer or a list
    index_t decoder_start_token_id = 0;
    std::optional<index_t> bos_token_id;
};

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
    c.vocab_size = f.integer("vocab_size", std::nullopt, 1, M);
    c.d_model = f.integer("d_model", std::nullopt, 1, M);
    c.d_kv = f.integer("d_kv", std::nullopt, 1, M);
    c.d_ff = f.integer("d_ff", std::nullopt, 1, M);
    c.num_layers = f.integer("num_layers", std::nullopt, 1, M);
    c.num_decoder_layers = f.integer("num_decoder_layers", c.num_layers, 1, M);
    c.num_heads = f.integer("num_heads", std::nullopt, 1, M);
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
    c.is_encoder_decoder = f.boolean("is_encoder_decoder", true);
    if (!c.is_encoder_decoder) f.invalid("is_encoder_decoder", "false", "true (locost runs encoder-decoder models)");
    c.use_cache = f.boolean("use_cache", true);

    const index_t last_id = c.vocab_size - 1;
    c.pad_token_id = f.integer("pad_token_id", 0, 0, last_id);
    if (auto eos = f.int_or_list("eos_token_id", 0, last_id)) {
        if (eos->empty()) f.invalid("eos_token_id", "[]", "an integer or a non-empty list of integers");
        c.eos_token_ids = std::move(*eos);
        c.eos_token_id = c.eos_token_ids.front();
    }
    c.decoder_start_token_id = f.integer("decoder_start_token_id", d.decoder_start_is_pad ? c.pad_token_id : 0, 0, last_id);
    c.bos_token_id = f.opt_integer("bos_token_id", 0, last_id);
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
