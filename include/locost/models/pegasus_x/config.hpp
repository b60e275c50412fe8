// The Pegasus-X family's config.json: transformers' PegasusXConfig ("pegasus_x"). Its sizes have
// BART's names and are read by the table BART, LED and Pegasus-X share (models/config.hpp,
// parse_bart_style_fields), plus the encoder's local attention: block_size (default 512), num_global_tokens (32),
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

#include "../bart/config.hpp"

namespace locost::models {

struct pegasus_x_config : model_config, bart_style_fields {
    index_t block_size = 512;
    index_t num_global_tokens = 32;
    bool stagger_local_blocks = true;

    // Encoder layer i's blocks are staggered (start half a block earlier).
    bool staggered(index_t layer) const { return stagger_local_blocks && layer % 2 == 1; }

    // Errors: config.* naming the field.
    void read(const io::detail::field_reader& f, const io::json& j);
};

inline void pegasus_x_config::read(const io::detail::field_reader& f, const io::json& j) {
    constexpr index_t M = io::max_config_dim;
    pegasus_x_config& c = *this;
    const bart_style_defaults d{"Pegasus-X", {0, 1, 0, std::nullopt}, /*scale_embedding=*/true, /*max_position_embeddings=*/16384};
    parse_bart_style_fields(f, j, c, c, d);
    if (c.d_model % 2 != 0 || c.d_model < 4)
        f.invalid("d_model", std::to_string(c.d_model), "an even number of at least 4 (sinusoidal positions: sines and cosines, H/2 each)");
    c.block_size = f.integer("block_size", 512, 1, M);
    c.num_global_tokens = f.integer("num_global_tokens", 32, 1, M);
    c.stagger_local_blocks = f.boolean("stagger_local_blocks", true);
}

}  // namespace locost::models
