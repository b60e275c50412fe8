// The T5 family's config.json: transformers' T5Config ("t5") and MT5Config ("mt5"), which share
// every field the arithmetic reads. v1.0 checkpoints (t5-small …) use "relu" and a tied head
// scaled by d_model^-0.5; v1.1 / Flan-T5 use "gated-gelu" and an untied head. The shared fields
// (models/config.hpp) are all there is.
#pragma once
#include <string>

#include "../config.hpp"

namespace locost::models {

struct t5_family;

struct t5_config : model_config {
    using family = t5_family;
    // Errors: config.* naming the field.
    static t5_config parse(const io::json& j, const std::string& source, const std::string& model_type);
};

// Parses a T5/mT5 config.json object (model_type already known to be "t5" or "mt5").
inline t5_config t5_config::parse(const io::json& j, const std::string& source, const std::string& model_type) {
    const io::detail::field_reader f(j, source, "config");
    t5_config c;
    c.model_type = model_type;
    parse_common_fields(f, j, c, {"relu", /*decoder_start_is_pad=*/true});
    return c;
}

} // namespace locost::models
