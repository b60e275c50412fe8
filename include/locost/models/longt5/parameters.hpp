// LongT5's tensor names: the T5 decoder's, and an encoder whose attention module is
// LocalSelfAttention or TransientGlobalSelfAttention (with the global relative bias in block 0
// and a global_input_layer_norm per block).
#pragma once
#include "../t5/parameters.hpp"
#include "config.hpp"

namespace locost::models {

inline bool is_transient_global(const longt5_config& c) { return c.encoder_attention_type == "transient-global"; }

// The encoder attention module's name under encoder.block.i.layer.0.
inline std::string longt5_attention_module(const longt5_config& c) {
    return is_transient_global(c) ? "TransientGlobalSelfAttention" : "LocalSelfAttention";
}

inline std::vector<parameter_spec> longt5_parameters(const longt5_config& c) {
    auto p = t5_decoder_parameters(c);
    auto e = t5_encoder_parameters(c, longt5_attention_module(c), is_transient_global(c));
    p.insert(p.begin() + 1, e.begin(), e.end());
    return p;
}

} // namespace locost::models
