// The T5 family's config.json: transformers' T5Config ("t5") and MT5Config ("mt5"), which share
// every field the arithmetic reads. v1.0 checkpoints (t5-small …) use "relu" and a tied head
// scaled by d_model^-0.5; v1.1 / Flan-T5 use "gated-gelu" and an untied head. The shared fields
// (models/config.hpp) are all there is.
#pragma once
#include <string>

#include "../config.hpp"

namespace locost::models {

// T5Config's defaults: "relu", and the decoder starts from the padding id.
struct t5_config : model_config {
    // Errors: config.* naming the field.
    void read(const io::detail::field_reader& f, const io::json& j) { parse_common_fields(f, j, *this, {"relu", /*decoder_start_is_pad=*/true}); }
};

} // namespace locost::models
