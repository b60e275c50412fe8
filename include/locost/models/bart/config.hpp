// The BART family's config.json: transformers' BartConfig ("bart"). Its fields are read by the
// table BART, LED and Pegasus-X share (models/config.hpp, parse_bart_style_fields), with BART's
// defaults: pad 1, bos 0, eos 2, decoder start 2, max_position_embeddings 1024, scale_embedding
// false. The LM head is the tied embedding, unscaled, plus final_logits_bias.
//
// Fields of older (fairseq-converted) configs for other architectures — normalize_before,
// add_final_layer_norm, static_position_embeddings, normalize_embedding — are ignored by
// transformers' BartModel, but a config that sets them describes a model BART's code does not
// compute (pre-LayerNorm as mBART, sinusoidal positions), so it is refused rather than misread.
#pragma once
#include <string>

#include "../config.hpp"

namespace locost::models {

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
            f.invalid(name, want ? "false" : "true", std::string(want ? "true" : "false") + " (BART; this setting describes another architecture)");
    max_encoder_positions = max_position_embeddings;
}

} // namespace locost::models
