// The registry: the ONE place where config.json's model_type and structural fields become types.
//
//   read_config(ck)         the family's config struct, parsed by the family (model_type picks it);
//                           a SLED config.json ("tau/sled") yields its backbone's config
//   read_sled_options(ck)   the SLED settings of a "tau/sled" config.json (none otherwise)
//   expected_parameters(c)  the family's tensor list (validation)
//   load_model<Backend, Scalar>(ck, options)     any family's encoder-decoder (any_model)
//   load_encoder<Backend, Scalar>(ck, options)   any family's encoder (any_encoder)
//   key_config(c)           the values `locost inspect` shows, per family
//
// With model_options::sled (or a SLED config.json) the family's encoder runs through
// sled<Encoder>. Families: "locost" (models/locost/), "t5" and "mt5" (models/t5/), "bart"
// (models/bart/), "led" (models/led/: BART with a Longformer encoder), "longt5" (models/longt5/:
// local or transient-global encoder, T5 decoder), "pegasus_x" (models/pegasus_x/: staggered
// block-local encoder with global tokens).
//
// Generation defaults: generation_config.json when the checkpoint has one; otherwise the
// generation fields of config.json (older checkpoints keep num_beams, forced_bos_token_id … there,
// and transformers builds its GenerationConfig from them the same way).
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../config/error.hpp"
#include "../io/checkpoint.hpp"
#include "../io/config.hpp"
#include "bart/config.hpp"
#include "bart/decoder.hpp"
#include "bart/encoder.hpp"
#include "bart/parameters.hpp"
#include "config.hpp"
#include "locost/config.hpp"
#include "locost/encoder.hpp"
#include "locost/parameters.hpp"
#include "longt5/config.hpp"
#include "longt5/encoder.hpp"
#include "longt5/parameters.hpp"
#include "led/config.hpp"
#include "led/encoder.hpp"
#include "led/parameters.hpp"
#include "options.hpp"
#include "pegasus_x/config.hpp"
#include "pegasus_x/decoder.hpp"
#include "pegasus_x/encoder.hpp"
#include "pegasus_x/parameters.hpp"
#include "seq2seq.hpp"
#include "sled.hpp"
#include "t5/config.hpp"
#include "t5/decoder.hpp"
#include "t5/encoder.hpp"
#include "t5/parameters.hpp"

namespace locost::models {

inline constexpr const char* sled_model_type = "tau/sled";

// The model_type of a config object. Errors: config.missing_field, config.wrong_type.
inline std::string config_model_type(const io::json& j, const std::string& source) {
    return io::detail::field_reader(j, source, "config").string("model_type", std::nullopt);
}

// A family's config from a config.json object. Errors: config.unsupported_model_type, and the
// family's config.* errors.
inline std::shared_ptr<const model_config> parse_config(const io::json& j, const std::string& source) {
    const std::string type = config_model_type(j, source);
    if (type == "locost") return std::make_shared<locost_config>(parse_locost_config(j, source));
    if (type == "t5" || type == "mt5") return std::make_shared<t5_config>(parse_t5_config(j, source, type));
    if (type == "longt5") return std::make_shared<longt5_config>(parse_longt5_config(j, source));
    if (type == "bart") return std::make_shared<bart_config>(parse_bart_config(j, source));
    if (type == "led") return std::make_shared<led_config>(parse_led_config(j, source));
    if (type == "pegasus_x") return std::make_shared<pegasus_x_config>(parse_pegasus_x_config(j, source));
    throw error("config.unsupported_model_type",
                source + ": model_type '" + io::detail::printable(type) +
                    "' is not supported (expected \"locost\", \"t5\", \"mt5\", \"bart\", \"led\", \"longt5\", \"pegasus_x\" or \"tau/sled\")");
}

// config.json text → the family's config (SLED configs are read through read_config()).
inline std::shared_ptr<const model_config> parse_config_text(std::string_view text, const std::string& source) {
    return parse_config(io::read_config_object(text, source), source);
}
inline std::shared_ptr<const model_config> load_config(const std::string& path) { return parse_config_text(io::read_text_file(path), path); }

namespace detail {

// The backbone config of a SLED config.json: underlying_config as a dict, or as a local path
// (a config.json file or a directory holding one; relative to the checkpoint directory). Error:
// sled.backbone_not_found naming it when it is neither (a hub name such as "google/t5-v1_1-base").
inline std::shared_ptr<const model_config> sled_backbone_config(const io::json& j, const std::string& source, const std::string& dir) {
    namespace fs = std::filesystem;
    const io::detail::field_reader f(j, source, "config");
    const io::json* u = f.find("underlying_config");
    if (!u) f.missing("underlying_config", "the backbone's config: an object or a local path");
    if (u->is_object()) {
        if (config_model_type(*u, source + " (underlying_config)") == sled_model_type)
            f.invalid("underlying_config", "a SLED config", "the backbone's config (SLED over SLED is not a model)");
        return parse_config(*u, source + " (underlying_config)");
    }
    if (!u->is_string()) f.wrong_type("underlying_config", *u, "an object or a string (a local path)");
    const std::string name = u->get<std::string>();
    std::error_code ec;
    for (fs::path p : {fs::path(name), fs::path(dir) / name}) {
        if (fs::is_directory(p, ec)) p /= "config.json";
        if (fs::is_regular_file(p, ec)) {
            auto c = load_config(p.string());
            return c;
        }
    }
    throw error("sled.backbone_not_found",
                source + ": underlying_config '" + io::detail::printable(name) +
                    "' is not a local config.json or a directory holding one (a Hugging Face hub name cannot be fetched: "
                    "save the backbone's config.json and give its path, or put the config itself in underlying_config)");
}

} // namespace detail

// The checkpoint's config, parsed by its family (for a SLED config.json: its backbone's).
inline std::shared_ptr<const model_config> read_config(const io::checkpoint& ck) {
    const std::string type = config_model_type(ck.config_json(), ck.config_path());
    if (type == sled_model_type) return detail::sled_backbone_config(ck.config_json(), ck.config_path(), ck.dir());
    return parse_config(ck.config_json(), ck.config_path());
}

// The SLED settings of a "tau/sled" config.json (SledConfig's names and defaults: context_size
// 256, window_fraction 0.5, prepend_prefix and encode_prefix true); none for other configs.
// The prefix length is a property of the input (flags), not of the checkpoint.
inline std::optional<sled_options> read_sled_options(const io::checkpoint& ck) {
    const io::json& j = ck.config_json();
    if (config_model_type(j, ck.config_path()) != sled_model_type) return std::nullopt;
    const io::detail::field_reader f(j, ck.config_path(), "config");
    sled_options o;
    o.context_size = f.integer("context_size", 256, 1, io::max_config_dim);
    o.window_fraction = f.number("window_fraction", 0.5);
    o.prepend_prefix = f.boolean("prepend_prefix", true);
    o.encode_prefix = f.boolean("encode_prefix", true);
    check_sled_plan(o.context_size, o.window_fraction, ck.config_path());
    return o;
}

// The tensors the family reads.
inline std::vector<io::parameter_spec> expected_parameters(const model_config& c) {
    if (auto* l = dynamic_cast<const locost_config*>(&c)) return locost_parameters(*l);
    if (auto* g = dynamic_cast<const longt5_config*>(&c)) return longt5_parameters(*g);
    if (auto* e = dynamic_cast<const led_config*>(&c)) return led_parameters(*e);
    if (auto* b = dynamic_cast<const bart_config*>(&c)) return bart_parameters(*b);
    if (auto* x = dynamic_cast<const pegasus_x_config*>(&c)) return pegasus_x_parameters(*x);
    return t5_parameters(c);
}

inline io::validation_report validate(const io::checkpoint& ck) {
    const auto c = read_config(ck);
    check_layers_fit(*c, ck.records().size(), ck.weights_path());
    return ck.validate(expected_parameters(*c));
}

// Checks that the checkpoint's weights are what config.json describes (a cheap bound first, then
// every tensor's name and shape), before a layer is built. Errors: checkpoint.config_mismatch,
// checkpoint.invalid.
inline void require_matching_weights(const io::checkpoint& ck, const model_config& c) {
    check_layers_fit(c, ck.records().size(), ck.weights_path());
    ck.require_valid(expected_parameters(c));
}

// The values `locost inspect` shows for the family, in display order.
inline std::vector<std::pair<std::string, io::json>> key_config(const model_config& c) {
    std::vector<std::pair<std::string, io::json>> v = {
        {"vocab_size", c.vocab_size}, {"d_model", c.d_model}, {"d_kv", c.d_kv}, {"d_ff", c.d_ff}, {"num_heads", c.num_heads},
        {"num_layers", c.num_layers}, {"num_decoder_layers", c.num_decoder_layers}, {"feed_forward_proj", c.feed_forward_proj}};
    // BART, LED and Pegasus-X: BartConfig's names for the sizes, then each family's own fields.
    auto bart_like = [&](index_t decoder_heads, index_t decoder_ffn, const std::string& activation) {
        return std::vector<std::pair<std::string, io::json>>{{"vocab_size", c.vocab_size},
                                                             {"d_model", c.d_model},
                                                             {"encoder_layers", c.num_layers},
                                                             {"decoder_layers", c.num_decoder_layers},
                                                             {"encoder_attention_heads", c.num_heads},
                                                             {"decoder_attention_heads", decoder_heads},
                                                             {"encoder_ffn_dim", c.d_ff},
                                                             {"decoder_ffn_dim", decoder_ffn},
                                                             {"activation_function", activation}};
    };
    auto optional_id = [](const std::optional<index_t>& id) { return id ? io::json(*id) : io::json(); };
    if (auto* b = dynamic_cast<const bart_config*>(&c)) {
        auto out = bart_like(b->decoder_attention_heads, b->decoder_ffn_dim, b->activation_function);
        if (const auto* led = dynamic_cast<const led_config*>(&c))
            out.insert(out.end(), {{"attention_window", led->attention_window},
                                   {"max_encoder_position_embeddings", b->max_encoder_positions},
                                   {"max_decoder_position_embeddings", b->max_position_embeddings},
                                   {"pad_token_id", c.pad_token_id},
                                   {"eos_token_id", c.eos_token_id},
                                   {"decoder_start_token_id", c.decoder_start_token_id}});
        else
            out.insert(out.end(), {{"max_position_embeddings", b->max_position_embeddings},
                                   {"scale_embedding", b->scale_embedding},
                                   {"pad_token_id", c.pad_token_id},
                                   {"bos_token_id", optional_id(c.bos_token_id)},
                                   {"eos_token_id", c.eos_token_id},
                                   {"decoder_start_token_id", c.decoder_start_token_id},
                                   {"forced_bos_token_id", optional_id(b->forced_bos_token_id)},
                                   {"forced_eos_token_id", optional_id(b->forced_eos_token_id)}});
        return out;
    }
    if (auto* x = dynamic_cast<const pegasus_x_config*>(&c)) {
        auto out = bart_like(x->decoder_attention_heads, x->decoder_ffn_dim, x->activation_function);
        out.insert(out.end(), {{"block_size", x->block_size},
                               {"num_global_tokens", x->num_global_tokens},
                               {"stagger_local_blocks", x->stagger_local_blocks},
                               {"max_position_embeddings", x->max_position_embeddings},
                               {"scale_embedding", x->scale_embedding},
                               {"pad_token_id", c.pad_token_id},
                               {"eos_token_id", c.eos_token_id},
                               {"decoder_start_token_id", c.decoder_start_token_id},
                               {"forced_eos_token_id", optional_id(x->forced_eos_token_id)}});
        return out;
    }
    if (auto* l = dynamic_cast<const locost_config*>(&c)) {
        v.insert(v.begin() + 2, {"d_state", l->d_state});
        v.push_back({"num_ssm_heads", l->num_ssm_heads});
        v.push_back({"bidirectional", l->bidirectional});
        v.push_back({"gating", l->gating});
    } else {
        v.push_back({"relative_attention_num_buckets", c.relative_attention_num_buckets});
        v.push_back({"relative_attention_max_distance", c.relative_attention_max_distance});
    }
    if (auto* g = dynamic_cast<const longt5_config*>(&c)) {
        v.push_back({"encoder_attention_type", g->encoder_attention_type});
        v.push_back({"local_radius", g->local_radius});
        v.push_back({"global_block_size", g->global_block_size});
    }
    v.push_back({"tie_word_embeddings", c.tie_word_embeddings});
    v.push_back({"scale_decoder_outputs", c.scale_decoder_outputs});
    v.push_back({"layer_norm_epsilon", c.layer_norm_epsilon});
    v.push_back({"pad_token_id", c.pad_token_id});
    v.push_back({"eos_token_id", c.eos_token_id});
    v.push_back({"decoder_start_token_id", c.decoder_start_token_id});
    return v;
}

namespace detail {

// f(activation constant): the feed-forward's activation as a type.
template <class F>
decltype(auto) act_switch(const model_config& c, F&& f) {
    switch (activation_named(c.dense_act_fn, c.source)) {
    case activation::relu: return f(std::integral_constant<activation, activation::relu>{});
    case activation::gelu_tanh: return f(std::integral_constant<activation, activation::gelu_tanh>{});
    case activation::gelu_erf: return f(std::integral_constant<activation, activation::gelu_erf>{});
    case activation::silu: break;
    }
    return f(std::integral_constant<activation, activation::silu>{});
}

// f(activation constant, gated constant) for T5-style feed-forwards.
template <class F>
decltype(auto) ff_switch(const model_config& c, F&& f) {
    if (c.is_gated_act) return act_switch(c, [&](auto act) -> decltype(auto) { return f(act, std::true_type{}); });
    return act_switch(c, [&](auto act) -> decltype(auto) { return f(act, std::false_type{}); });
}

template <class Backend, class Scalar>
any_encoder<Scalar, Backend> family_encoder(const io::checkpoint& ck, const std::shared_ptr<const model_config>& c,
                                            const model_options& o) {
    if (auto* l = dynamic_cast<const locost_config*>(c.get())) return {make_locost_encoder<Backend, Scalar>(ck, *l, o.encoder), c};
    require_matching_weights(ck, *c);
    if (auto* e = dynamic_cast<const led_config*>(c.get()))
        return act_switch(*c, [&](auto act) {
            return any_encoder<Scalar, Backend>(led_encoder<Scalar, Backend, decltype(act)::value>(ck, *e, o.encoder), c);
        });
    if (auto* b = dynamic_cast<const bart_config*>(c.get()))
        return act_switch(*c, [&](auto act) {
            return any_encoder<Scalar, Backend>(bart_encoder<Scalar, Backend, decltype(act)::value>(ck, *b, o.encoder), c);
        });
    if (auto* x = dynamic_cast<const pegasus_x_config*>(c.get()))
        return act_switch(*c, [&](auto act) {
            return any_encoder<Scalar, Backend>(pegasus_x_encoder<Scalar, Backend, decltype(act)::value>(ck, *x, o.encoder), c);
        });
    if (auto* g = dynamic_cast<const longt5_config*>(c.get())) {
        auto make = [&](auto tglobal) {
            return ff_switch(*c, [&](auto act, auto gated) {
                using enc = longt5_encoder<Scalar, Backend, decltype(act)::value, decltype(gated)::value, decltype(tglobal)::value>;
                return any_encoder<Scalar, Backend>(enc(ck, *g, o.encoder), c);
            });
        };
        return is_transient_global(*g) ? make(std::true_type{}) : make(std::false_type{});
    }
    return ff_switch(*c, [&](auto act, auto gated) {
        return any_encoder<Scalar, Backend>(t5_encoder<Scalar, Backend, decltype(act)::value, decltype(gated)::value>(ck, *c, o.encoder), c);
    });
}

} // namespace detail

// The SLED settings in force: the options' (flags) over the config file's.
inline std::optional<sled_options> sled_settings(const io::checkpoint& ck, const model_options& o) {
    if (o.sled) return o.sled;
    return read_sled_options(ck);
}

// The checkpoint's encoder (through SLED when sled_settings() says so). Errors:
// config.*, model.unsupported, checkpoint.invalid, sled.*.
template <class Backend = cpu, class Scalar = float>
any_encoder<Scalar, Backend> load_encoder(const io::checkpoint& ck, const model_options& o = {}) {
    const auto c = read_config(ck);
    auto e = detail::family_encoder<Backend, Scalar>(ck, c, o);
    if (const auto s = sled_settings(ck, o)) return {sled<any_encoder<Scalar, Backend>>(std::move(e), *s, c->source), c};
    return e;
}

// The generation defaults a checkpoint carries: generation_config.json, or else the generation
// fields of config.json (as transformers' GenerationConfig.from_model_config). Errors:
// generation_config.* naming the file.
inline std::optional<io::generation_config> checkpoint_generation(const io::checkpoint& ck) {
    if (ck.generation()) return ck.generation();
    return io::parse_generation_config(ck.config_json().dump(), ck.config_path());
}

// The checkpoint's encoder-decoder. Errors: those of load_encoder().
template <class Backend = cpu, class Scalar = float>
any_model<Scalar, Backend> load_model(const io::checkpoint& ck, const model_options& o = {}) {
    const auto c = read_config(ck);
    any_encoder<Scalar, Backend> e = load_encoder<Backend, Scalar>(ck, o);
    const auto gen = checkpoint_generation(ck);
    if (auto* b = dynamic_cast<const bart_config*>(c.get()))
        return detail::act_switch(*c, [&](auto act) {
            using dec = bart_decoder<Scalar, Backend, decltype(act)::value>;
            return any_model<Scalar, Backend>(seq2seq<any_encoder<Scalar, Backend>, dec>(e, dec(ck, *b, o.weights, large_products(o.encoder.compute), o.cross_attention == cross_attention_form::folded), c, o), c, gen, ck.dir());
        });
    if (auto* x = dynamic_cast<const pegasus_x_config*>(c.get()))
        return detail::act_switch(*c, [&](auto act) {
            using dec = pegasus_x_decoder<Scalar, Backend, decltype(act)::value>;
            return any_model<Scalar, Backend>(seq2seq<any_encoder<Scalar, Backend>, dec>(e, dec(ck, *x, o.weights, large_products(o.encoder.compute), o.cross_attention == cross_attention_form::folded), c, o), c, gen, ck.dir());
        });
    return detail::ff_switch(*c, [&](auto act, auto gated) {
        using dec = t5_decoder<Scalar, Backend, decltype(act)::value, decltype(gated)::value>;
        return any_model<Scalar, Backend>(seq2seq<any_encoder<Scalar, Backend>, dec>(e, dec(ck, *c, o.weights, large_products(o.encoder.compute), o.cross_attention == cross_attention_form::folded), c, o), c, gen, ck.dir());
    });
}

// The LOCOST family's own handle (observers, kernels); refuses other families. Errors:
// model.wrong_type, and those of load_encoder().
template <class Backend = cpu, class Scalar = float>
locost_encoder<Scalar, Backend> load_locost_encoder(const io::checkpoint& ck, const encoder_options& o = {}) {
    const auto c = read_config(ck);
    auto* l = dynamic_cast<const locost_config*>(c.get());
    if (!l) throw error("model.wrong_type", ck.dir() + ": model_type is '" + c->model_type + "', expected 'locost' for the LOCOST encoder");
    return make_locost_encoder<Backend, Scalar>(ck, *l, o);
}

} // namespace locost::models
