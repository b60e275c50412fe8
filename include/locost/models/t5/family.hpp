// The T5 family ("t5", "mt5"): T5's encoder and decoder (encoder.hpp, decoder.hpp), as
// models/family.hpp describes a family.
#pragma once
#include <cmath>
#include <string>

#include "../family.hpp"
#include "config.hpp"
#include "decoder.hpp"
#include "encoder.hpp"

namespace locost::models {

namespace t5_conventions {

// The values inspect shows for a config of T5's shape, with the family's `extra` after the
// sizes (T5 and LongT5 add the relative bias's, LOCOST its SSM's). Config: a family's config of
// T5's shape (model_config and t5_style_fields).
template <class Config>
described describe(const Config& c, const described& extra) {
    described v = {{"vocab_size", c.vocab_size},
                   {"d_model", c.d_model},
                   {"d_kv", c.d_kv},
                   {"d_ff", c.d_ff},
                   {"num_heads", c.num_heads},
                   {"num_layers", c.num_layers},
                   {"num_decoder_layers", c.num_decoder_layers},
                   {"feed_forward_proj", c.feed_forward_proj}};
    v.insert(v.end(), extra.begin(), extra.end());
    v.insert(v.end(),
             {{"tie_word_embeddings", c.tie_word_embeddings},
              {"scale_decoder_outputs", c.scale_decoder_outputs},
              {"layer_norm_epsilon", c.layer_norm_epsilon},
              {"pad_token_id", c.pad_token_id},
              {"eos_token_id", c.eos_token_id},
              {"decoder_start_token_id", c.decoder_start_token_id}});
    return v;
}
inline described relative_bias_fields(const t5_style_fields& c) {
    return {{"relative_attention_num_buckets", c.relative_attention_num_buckets},
            {"relative_attention_max_distance", c.relative_attention_max_distance}};
}

// Scratch per row of an encoder's feed-forward (gated or plain).
template <class Config>
index_t ff_scratch_per_row(const Config& c) {
    return c.is_gated_act ? layers::rms_feed_forward<float, cpu, activation::relu, true>::scratch_per_row(c.d_model, c.d_ff)
                          : layers::rms_feed_forward<float, cpu, activation::relu, false>::scratch_per_row(c.d_model, c.d_ff);
}

// f(activation constant, gated constant) for T5-style feed-forwards.
template <class Config, class F>
decltype(auto) with_feed_forward(const Config& c, F&& f) {
    return with_flag(c.is_gated_act, [&](auto gated) -> decltype(auto) {
        return with_activation(c, [&](auto act) -> decltype(auto) { return f(act, gated); });
    });
}

// f(encoder, T5's decoder) for a config of T5's shape; encoder(act, gated) names the encoder
// type (a std::type_identity) for the feed-forward's activation and gating.
template <class Scalar, class Backend, class Config, class Encoder, class F>
decltype(auto) with_stacks(const Config& c, const Encoder& encoder, F&& f) {
    return with_feed_forward(c, [&](auto act, auto gated) -> decltype(auto) {
        return f(encoder(act, gated), std::type_identity<t5_decoder<Scalar, Backend, decltype(act)::value, decltype(gated)::value>>{});
    });
}

// The config.json of a T5-shaped demo: google/t5-v1_1-base (gated-gelu, untied head) or tiny
// (the Hugging Face references' dimensions).
inline io::json demo_config(const std::string& size, index_t tiny_vocab) {
    io::json j = {{"vocab_size", 32128}, {"d_model", 768},           {"d_kv", 64},     {"d_ff", 2048},
                  {"num_layers", 12},    {"num_decoder_layers", 12}, {"num_heads", 12}};
    if (size == "tiny")
        j = {{"vocab_size", tiny_vocab}, {"d_model", 64},           {"d_kv", 16},    {"d_ff", 128},
             {"num_layers", 2},          {"num_decoder_layers", 2}, {"num_heads", 4}};
    else if (size != "base") bad_demo_size(size);
    j.update({{"relative_attention_num_buckets", 32},
              {"relative_attention_max_distance", 128},
              {"dropout_rate", 0.0},
              {"layer_norm_epsilon", 1e-6},
              {"initializer_factor", 1.0},
              {"feed_forward_proj", "gated-gelu"},
              {"tie_word_embeddings", false},
              {"is_encoder_decoder", true},
              {"use_cache", true},
              {"pad_token_id", 0},
              {"eos_token_id", 1},
              {"decoder_start_token_id", 0},
              {"architectures", {"T5ForConditionalGeneration"}},
              {"model_type", "t5"},
              {"locost_demo_checkpoint", demo_label}});
    return j;
}

// transformers' T5PreTrainedModel._init_weights (factor 1): norms 1; shared and an untied head
// N(0, 1); wi N(0, d_model^-½), wo N(0, d_ff^-½); q N(0, (d_model·d_kv)^-½), k and v N(0, d_model^-½),
// o N(0, (heads·d_kv)^-½), relative biases N(0, d_model^-½).
inline init_rule demo_init(const layers::param_record& r, const io::json& config) {
    using layers::param_kind;
    const double H = config["d_model"].get<double>(), F = config["d_ff"].get<double>(), kv = config["d_kv"].get<double>(),
                 heads = config["num_heads"].get<double>();
    switch (r.info.kind) {
    case param_kind::norm_scale: return init_rule::constant(1.0);
    case param_kind::ff_in: return init_rule::normal(std::pow(H, -0.5));
    case param_kind::ff_out: return init_rule::normal(std::pow(F, -0.5));
    case param_kind::query: return init_rule::normal(std::pow(H * kv, -0.5));
    case param_kind::key:
    case param_kind::value:
    case param_kind::relative_bias: return init_rule::normal(std::pow(H, -0.5));
    case param_kind::attention_out: return init_rule::normal(std::pow(heads * kv, -0.5));
    default: return init_rule::normal(1.0);
    }
}

}  // namespace t5_conventions

struct t5_family : family_base<t5_family, t5_config> {
    static constexpr const char* name = "t5";
    static constexpr bool all_to_all_encoder = true;  // full self-attention over the whole input
    // What demo-checkpoint writes (its --help lists it).
    static constexpr const char* demo_shapes =
        "base: d_model 768, 12+12 layers, 12 heads, d_ff 2048 gated-gelu, vocab 32128 (t5-v1_1-base)";
    static std::vector<std::string> model_types() { return {"t5", "mt5"}; }

    template <class Scalar, class Backend, class F>
    static decltype(auto) with_stacks(const t5_style_config& c, F&& f) {
        return t5_conventions::with_stacks<Scalar, Backend>(
            c,
            [](auto act, auto gated) {
                return std::type_identity<t5_encoder<Scalar, Backend, decltype(act)::value, decltype(gated)::value>>{};
            },
            f);
    }

    static described describe(const config& c) { return t5_conventions::describe(c, t5_conventions::relative_bias_fields(c)); }

    // The relative bias over the input's distances is one band (heads × (2L − 1)) the encoder keeps.
    static encoder_memory encoder_working_set(const config& c, const encoder_options&, const encoder_request& r) {
        encoder_memory m = stack_memory(c.d_model, r,
                                        layers::normed_encoder_attention<float, cpu, layers::rms_before>::scratch_elements(
                                            c.d_model, c.num_heads * c.d_kv, r.batch, r.length),
                                        t5_conventions::ff_scratch_per_row(c));
        m.kept.push_back({"position bias band", band_elements(c.num_heads, r.length) * static_cast<double>(r.element), r.grows_with});
        return m;
    }

    static demo_plan demo(const std::string& size, index_t tiny_vocab, const std::string&) {
        demo_plan p;
        p.label = "T5";
        p.config = t5_conventions::demo_config(size, tiny_vocab);
        p.init = [config = p.config](const layers::param_record& r) { return t5_conventions::demo_init(r, config); };
        return p;
    }
};

}  // namespace locost::models
