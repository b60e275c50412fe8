// The LOCOST family's config.json: LOCOSTConfig (flbbb/locost-summarization, models_config.py),
// a T5Config plus the state-space encoder's fields. Defaults are LOCOSTConfig's.
//
//  * d_state is required and even (d_state / 2 complex modes); num_ssm_heads divides d_model.
//  * feed_forward_proj defaults to "gated-gelu"; decoder_start_token_id to 0.
//  * local_radius, global_block_size and encoder_attention_type are carried by LOCOSTConfig
//    (it derives from LongT5's) and checked, though the LOCOST encoder does not use them.
#pragma once
#include "../longt5/config.hpp"

namespace locost::models {

struct locost_config : t5_style_config {
    index_t d_state = 128;  // N: N/2 complex modes
    index_t num_ssm_heads = 8;
    bool bidirectional = true;
    bool gating = true;
    bool use_fast_fft_conv = true;  // the original CUDA path; informational here
    index_t local_radius = 127;
    index_t global_block_size = 16;
    std::string encoder_attention_type = "local";

    // Errors: config.* naming the field.
    void read(const io::detail::field_reader& f, const io::json& j);
};

inline void locost_config::read(const io::detail::field_reader& f, const io::json& j) {
    constexpr index_t M = io::max_config_dim;
    locost_config& c = *this;
    parse_t5_style_fields(f, j, c, c, {"gated-gelu", /*decoder_start_is_pad=*/false});
    c.d_state = f.integer("d_state", std::nullopt, 1, M);
    if (c.d_state % 2 != 0) f.invalid("d_state", std::to_string(c.d_state), "an even integer (d_state / 2 complex modes)");
    c.num_ssm_heads = f.integer("num_ssm_heads", 8, 1, M);
    if (c.d_model % c.num_ssm_heads != 0)
        f.invalid("num_ssm_heads", std::to_string(c.num_ssm_heads), "a divisor of d_model (" + std::to_string(c.d_model) + ")");
    c.bidirectional = f.boolean("bidirectional", true);
    c.gating = f.boolean("gating", true);
    c.use_fast_fft_conv = f.boolean("use_fast_fft_conv", true);
    parse_local_attention_fields(f, j, c.local_radius, c.global_block_size, c.encoder_attention_type);
}

}  // namespace locost::models
