// What a model family is to the rest of the library. A family is a folder, models/<family>/, with
// its config (config.hpp), its encoder and decoder layouts (encoder.hpp, decoder.hpp: which layers,
// where their tensors live) and one struct in family.hpp that models/registry.hpp lists. Nothing
// outside the folder tests a model_type: generic code, generation, the tokenizer and the tool ask
// the family through the registry.
//
// A family struct F provides:
//   config                      its config type (derives from model_config; names F as `family`)
//   name                        what demo-checkpoint's --family calls it ("t5")
//   model_types                 the model_type values of config.json it reads
//   parse(json, source, type)   its config from config.json (errors: config.* naming the field)
//   record(root, config)        every tensor its loaders read, run against a parameter_recorder
//   encoder<Scalar, Backend>(root, config, encoder_options)          → any_encoder
//   with_decoder<Scalar, Backend>(root, config, decoder_settings, f) → f(the decoder)
//   traits(config)              family_traits: the conventions of its users' tools
//   describe(config)            the values `locost inspect` shows, in order
//   encoder_working_set(config, encoder_options, encoder_request)   its encoder's working set (models/memory_items.hpp)
//   demo(size, tokenizer_vocab, variant)  what demo-checkpoint writes (models/demo.hpp)
//
// This file holds the types those share and the dispatch that turns a config's activation into a
// template argument, so each family writes that once.
#pragma once
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/device.hpp"
#include "../generation/options.hpp"
#include "../io/json.hpp"
#include "../layers/tensor_source.hpp"
#include "../ops/elementwise.hpp"
#include "../text/conventions.hpp"
#include "config.hpp"
#include "demo.hpp"
#include "options.hpp"

namespace locost::models {

// What a family tells the code that drives it, as values.
struct family_traits {
    const char* name = "";
    // Beam search as the family's users run it: LOCOST's code pins transformers 4.27.1; the other
    // families' checkpoints run with current transformers.
    generation::beam_convention beam_convention = generation::beam_convention::hf_5;
    text::tokenizer_conventions tokenizer;
};

// What an encoder's working set is computed for (models/memory_estimate.hpp).
struct encoder_request {
    index_t batch = 1, length = 1;
    std::size_t element = sizeof(float);
    int threads = 1;
    device_kind device = device_kind::cpu;
    std::string grows_with;  // what the user turns to change the length
};

// The values `locost inspect` shows, in display order.
using described = std::vector<std::pair<std::string, io::json>>;

// f(activation constant): the feed-forward's activation (config.json's dense_act_fn) as a type.
template <class F>
decltype(auto) with_activation(const model_config& c, F&& f) {
    switch (activation_named(c.dense_act_fn, c.source)) {
    case activation::relu: return f(std::integral_constant<activation, activation::relu>{});
    case activation::gelu_tanh: return f(std::integral_constant<activation, activation::gelu_tanh>{});
    case activation::gelu_erf: return f(std::integral_constant<activation, activation::gelu_erf>{});
    case activation::silu: break;
    }
    return f(std::integral_constant<activation, activation::silu>{});
}

// f(bool constant): a structural flag as a type.
template <class F>
decltype(auto) with_flag(bool v, F&& f) {
    if (v) return f(std::true_type{});
    return f(std::false_type{});
}

// f(activation constant, gated constant) for T5-style feed-forwards.
template <class F>
decltype(auto) with_feed_forward(const model_config& c, F&& f) {
    return with_flag(c.is_gated_act, [&](auto gated) -> decltype(auto) {
        return with_activation(c, [&](auto act) -> decltype(auto) { return f(act, gated); });
    });
}

// An optional token id as inspect shows it (null when unset).
inline io::json optional_id(const std::optional<index_t>& id) { return id ? io::json(*id) : io::json(); }

// The sizes of a config read with BartConfig's names, as inspect shows them (BART, LED, Pegasus-X).
inline described describe_bart_style(const model_config& c, const bart_style_fields& b) {
    return {{"vocab_size", c.vocab_size},
            {"d_model", c.d_model},
            {"encoder_layers", c.num_layers},
            {"decoder_layers", c.num_decoder_layers},
            {"encoder_attention_heads", c.num_heads},
            {"decoder_attention_heads", c.decoder_heads},
            {"encoder_ffn_dim", c.d_ff},
            {"decoder_ffn_dim", c.decoder_d_ff},
            {"activation_function", b.activation_function}};
}

// The initialisation of transformers' BART-style models (_init_weights with init_std 0.02):
// LayerNorms weight 1 and bias 0, every other bias 0, Linear weights and embeddings N(0, 0.02);
// the token table's padding row (BART's padding_idx) 0 when given.
inline init_rule bart_style_init(const layers::param_record& r, std::optional<index_t> padding_row) {
    using layers::param_kind;
    switch (r.info.kind) {
    case param_kind::norm_scale: return init_rule::constant(1.0);
    case param_kind::norm_shift:
    case param_kind::bias:
    case param_kind::logits_bias: return init_rule::constant(0.0);
    case param_kind::embedding: {
        init_rule rule = init_rule::normal(0.02);
        rule.zero_row = padding_row;
        return rule;
    }
    default: return init_rule::normal(0.02);
    }
}

} // namespace locost::models
