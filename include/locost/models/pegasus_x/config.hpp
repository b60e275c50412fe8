// The Pegasus-X family's config.json: transformers' PegasusXConfig ("pegasus_x"). Its sizes have
// BART's names, and the shared fields (models/config.hpp) are filled from them:
//
//   d_model                      d_model
//   num_layers / num_decoder_layers   encoder_layers / decoder_layers
//   num_heads, d_kv, d_ff        encoder_attention_heads, d_model / heads, encoder_ffn_dim
//   dense_act_fn                 activation_function ("gelu" is erf GELU)
//
// plus the encoder's local attention: block_size (default 512), num_global_tokens (32),
// stagger_local_blocks (true: odd layers' blocks start half a block earlier).
//
// Rules: the sizes Hugging Face always writes (vocab_size, d_model, the layer, head and ffn
// counts) are required; the rest take PegasusXConfig's defaults (pad 0, eos 1, decoder start 0,
// forced_eos 1, scale_embedding true, max_position_embeddings 16384 — informative only: the
// positions are sinusoidal and any length works — LayerNorm eps 1e-5, not a config field).
// d_model must divide by both head counts and be even and ≥ 4 (the sinusoid's two halves and
// its H/2 − 1 divisor). The LM head is the tied embedding, unscaled, without a bias.
#pragma once
#include <optional>
#include <string>

#include "../config.hpp"

namespace locost::models {

struct pegasus_x_config : model_config {
    index_t decoder_attention_heads = 16;
    index_t decoder_ffn_dim = 4096;
    index_t max_position_embeddings = 16384;
    index_t block_size = 512;
    index_t num_global_tokens = 32;
    bool stagger_local_blocks = true;
    bool scale_embedding = true;
    std::string activation_function = "gelu";
    std::optional<index_t> forced_bos_token_id;
    std::optional<index_t> forced_eos_token_id;

    index_t decoder_d_head() const { return d_model / decoder_attention_heads; }
    // Encoder layer i's blocks are staggered (start half a block earlier).
    bool staggered(index_t layer) const { return stagger_local_blocks && layer % 2 == 1; }
};

// Parses a Pegasus-X config.json object (model_type already known to be "pegasus_x").
inline pegasus_x_config parse_pegasus_x_config(const io::json& j, const std::string& source) {
    const io::detail::field_reader f(j, source, "config");
    constexpr index_t M = io::max_config_dim;
    pegasus_x_config c;
    c.model_type = "pegasus_x";
    c.source = source;
    c.vocab_size = f.integer("vocab_size", std::nullopt, 1, M);
    c.d_model = f.integer("d_model", std::nullopt, 1, M);
    c.num_layers = f.integer("encoder_layers", std::nullopt, 1, M);
    c.num_decoder_layers = f.integer("decoder_layers", std::nullopt, 1, M);
    c.num_heads = f.integer("encoder_attention_heads", std::nullopt, 1, M);
    c.decoder_attention_heads = f.integer("decoder_attention_heads", std::nullopt, 1, M);
    c.d_ff = f.integer("encoder_ffn_dim", std::nullopt, 1, M);
    c.decoder_ffn_dim = f.integer("decoder_ffn_dim", std::nullopt, 1, M);
    if (c.d_model % 2 != 0 || c.d_model < 4)
        f.invalid("d_model", std::to_string(c.d_model), "an even number of at least 4 (sinusoidal positions: sines and cosines, H/2 each)");
    for (auto [name, heads] : {std::pair{"encoder_attention_heads", c.num_heads}, std::pair{"decoder_attention_heads", c.decoder_attention_heads}})
        if (c.d_model % heads != 0)
            f.invalid(name, std::to_string(heads), "a divisor of d_model (" + std::to_string(c.d_model) + ")");
    c.d_kv = c.d_model / c.num_heads;
    c.max_position_embeddings = f.integer("max_position_embeddings", 16384, 1, M);
    c.block_size = f.integer("block_size", 512, 1, M);
    c.num_global_tokens = f.integer("num_global_tokens", 32, 1, M);
    c.stagger_local_blocks = f.boolean("stagger_local_blocks", true);
    c.scale_embedding = f.boolean("scale_embedding", true);
    c.layer_norm_epsilon = 1e-5;  // nn.LayerNorm's default; PegasusXConfig has no field for it
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
        f.invalid("tie_word_embeddings", "false", "true (Pegasus-X's LM head is the shared embedding)");
    c.scale_decoder_outputs = false;
    c.is_encoder_decoder = f.boolean("is_encoder_decoder", true);
    if (!c.is_encoder_decoder) f.invalid("is_encoder_decoder", "false", "true (locost runs encoder-decoder models)");
    c.use_cache = f.boolean("use_cache", true);

    const index_t last_id = c.vocab_size - 1;
    c.pad_token_id = f.integer("pad_token_id", 0, 0, last_id);
    c.bos_token_id = f.opt_integer("bos_token_id", 0, last_id);
    c.eos_token_ids = {1};
    if (auto eos = f.int_or_list("eos_token_id", 0, last_id)) {
        if (eos->empty()) f.invalid("eos_token_id", "[]", "an integer or a non-empty list of integers");
        c.eos_token_ids = std::move(*eos);
    }
    c.eos_token_id = c.eos_token_ids.front();
    c.decoder_start_token_id = f.integer("decoder_start_token_id", 0, 0, last_id);
    c.forced_bos_token_id = f.opt_integer("forced_bos_token_id", 0, last_id);
    c.forced_eos_token_id = f.opt_integer("forced_eos_token_id", 0, last_id);
    return c;
}

} // namespace locost::models
