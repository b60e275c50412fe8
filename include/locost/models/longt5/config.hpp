// The LongT5 family's config.json: transformers' LongT5Config, a T5Config plus local attention
// (local_radius, global_block_size, encoder_attention_type "local" or "transient-global").
// The decoder is T5's; the encoder is models/longt5/encoder.hpp.
#pragma once
#include "../locost/config.hpp"

namespace locost::models {

struct longt5_config : model_config {
    index_t local_radius = 127;
    index_t global_block_size = 16;
    std::string encoder_attention_type = "local";
};

inline longt5_config parse_longt5_config(const io::json& j, const std::string& source) {
    const io::detail::field_reader f(j, source, "config");
    longt5_config c;
    c.model_type = "longt5";
    parse_common_fields(f, j, c, {"relu", /*decoder_start_is_pad=*/true});
    parse_local_attention_fields(f, j, c.local_radius, c.global_block_size, c.encoder_attention_type);
    return c;
}

} // namespace locost::models
