// The LED family's config.json: transformers' LEDConfig ("led") — BART's fields and layout with a
// Longformer encoder (Beltagy et al. 2020, §3.1 and §5):
//
//   attention_window                 one window size w per encoder layer (an integer means the
//                                    same for all); token i sees |i − j| ≤ w/2. Even, positive.
//   max_encoder_position_embeddings  the encoder's learned positions (16384 for led-base-16384)
//   max_decoder_position_embeddings  the decoder's (1024)
//
// Positions index their tables without BART's offset of 2, and the weights live under `led.`.
// Everything else is read as BART's (models/bart/config.hpp).
#pragma once
#include <string>
#include <vector>

#include "../bart/config.hpp"

namespace locost::models {

struct led_config : bart_config {
    std::vector<index_t> attention_window;  // per encoder layer

    // BART's fields, then LED's positions and windows. Errors: config.* naming the field.
    void read(const io::detail::field_reader& f, const io::json& j);
};

inline void led_config::read(const io::detail::field_reader& f, const io::json& j) {
    constexpr index_t M = io::max_config_dim;
    led_config& c = *this;
    bart_config::read(f, j);
    c.weights_root = "led";
    c.position_offset = 0;
    c.label = "LED";
    c.max_encoder_positions = f.integer("max_encoder_position_embeddings", 16384, 1, M);
    c.max_position_embeddings = f.integer("max_decoder_position_embeddings", 1024, 1, M);
    c.encoder_positions_field = "max_encoder_position_embeddings";
    c.decoder_positions_field = "max_decoder_position_embeddings";
    const io::json* w = f.find("attention_window");
    const std::string want = "an even positive integer, or a list of " + std::to_string(c.num_layers) + " of them (one per encoder layer)";
    if (!w) {
        c.attention_window.assign(static_cast<std::size_t>(c.num_layers), 512);
    } else if (w->is_number_integer()) {
        c.attention_window.assign(static_cast<std::size_t>(c.num_layers), f.integer("attention_window", std::nullopt, 1, M));
    } else if (w->is_array()) {
        if (static_cast<index_t>(w->size()) != c.num_layers) f.invalid("attention_window", w->dump(), want);
        for (const auto& v : *w) {
            if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > M)
                f.invalid("attention_window", w->dump(), want);
            c.attention_window.push_back(v.get<index_t>());
        }
    } else {
        f.wrong_type("attention_window", *w, want.c_str());
    }
    for (index_t v : c.attention_window)
        if (v % 2 != 0) f.invalid("attention_window", w->dump(), want);
    // A window wider than twice the positions changes no state (every token already sees every
    // other) but would size the band each layer holds from loading on.
    for (index_t v : c.attention_window)
        if (w && v > 2 * c.max_encoder_positions)
            f.invalid("attention_window", w->dump(),
                      want + ", each at most twice max_encoder_position_embeddings (" + std::to_string(2 * c.max_encoder_positions) + ")");
}

}  // namespace locost::models
