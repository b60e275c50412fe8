// The LongT5 family's config.json: transformers' LongT5Config, a T5Config plus local attention:
// local_radius (default 127), global_block_size (16), and encoder_attention_type "local" or
// "transient-global". The decoder is T5's.
#pragma once
#include <string>

#include "../t5/config.hpp"

namespace locost::models {

struct longt5_config : t5_style_config {
    index_t local_radius = 127;
    index_t global_block_size = 16;
    std::string encoder_attention_type = "local";

    bool transient_global() const { return encoder_attention_type == "transient-global"; }

    // T5Config's fields and defaults, then the local attention's. Errors: config.* naming the field.
    void read(const io::detail::field_reader& f, const io::json& j);
};

// Reads LongT5Config's local-attention fields (LOCOSTConfig, which derives from it, carries them too).
inline void parse_local_attention_fields(const io::detail::field_reader& f, const io::json& j, index_t& local_radius,
                                         index_t& global_block_size, std::string& attention_type) {
    // A radius or block past any input (2^20 tokens: longer than a whole book) changes no state
    // (the window already holds everything) but would size the position band held from loading
    // on: such values are refused here, naming the field, instead of failing in an allocation.
    constexpr index_t M = index_t(1) << 20;
    local_radius = f.integer("local_radius", 127, 0, M);
    global_block_size = f.integer("global_block_size", 16, 1, M);
    attention_type = f.string("encoder_attention_type", std::string("local"));
    if (attention_type != "local" && attention_type != "transient-global")
        f.invalid("encoder_attention_type", j["encoder_attention_type"].dump(), "\"local\" or \"transient-global\"");
}

inline void longt5_config::read(const io::detail::field_reader& f, const io::json& j) {
    parse_t5_style_fields(f, j, *this, *this, {"relu", /*decoder_start_is_pad=*/true});
    parse_local_attention_fields(f, j, local_radius, global_block_size, encoder_attention_type);
}

}  // namespace locost::models
