// What every encoder-decoder family's config.json shares, and the helpers families read it with.
//
// model_config holds what the generic code relies on — the stacks' sizes (the decoder's widths
// included), token ids, the tie — with T5Config's names and defaults. A family's own struct
// derives from it (models/<family>/config.hpp) and reads the shared fields as its configuration
// class names them: T5Config's names in models/t5/config.hpp (parse_t5_style_fields: T5, LongT5,
// LOCOST), BartConfig's in models/bart/config.hpp (parse_bart_style_fields: BART, LED,
// Pegasus-X), then its own. Configs are plain values: models/registry.hpp holds any family's in
// one variant, chosen from model_type in one place.
//
// Rules (shared by every family)
//  * The sizes Hugging Face always writes are required: their absence means the file is not a
//    config of these families. Every other field takes the family's default; a JSON null counts
//    as absent; unknown fields are ignored.
//  * Absent tie_word_embeddings means true (the PretrainedConfig default).
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
    c.bos_token_id =
        d.bos ? std::optional<index_t>(f.integer("bos_token_id", *d.bos, 0, last_id)) : f.opt_integer("bos_token_id", 0, last_id);
}

}  // namespace detail

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
        throw error("checkpoint.config_mismatch",
                    c.source + ": num_layers " + std::to_string(c.num_layers) + " and num_decoder_layers " +
                        std::to_string(c.num_decoder_layers) + " need at least one tensor per layer, but " + weights + " holds " +
                        std::to_string(tensors) + " tensors: the config does not describe these weights");
}

}  // namespace locost::models
