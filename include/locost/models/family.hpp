// What a model family is to the rest of the library. A family is a folder, models/<family>/, with
// its config (config.hpp), its encoder and decoder layouts (encoder.hpp, decoder.hpp: which layers,
// where their tensors live) and one struct in family.hpp that models/registry.hpp lists. Nothing
// outside the folder tests a model_type: generic code, generation, the tokenizer and the tool ask
// the family through the registry.
//
// A family struct F derives from family_base<F, its config> and provides:
//   name                        what demo-checkpoint's --family calls it, and the model_type of
//                               config.json it reads (model_types() when it reads several)
//   with_stacks<Scalar, Backend>(config, f)   f(std::type_identity<encoder stack>,
//                               std::type_identity<decoder stack>) for the structure the config
//                               describes
//   describe(config)            the values `locost inspect` shows, in order
//   encoder_working_set(config, encoder_options, encoder_request)   its encoder's working set
//                               (models/memory_items.hpp)
//   demo(size, tokenizer_vocab, variant)  what demo-checkpoint writes (models/demo.hpp)
// and, where its own differ from family_base's: beam_convention, tokenizer_conventions(),
// check_loadable(config). Its config type (derived from model_config) reads itself from
// config.json: Config::read(field_reader, json) (models/config.hpp's read_config_as calls it),
// errors config.* naming the field; the registry finds F from the config's type.
// family_base builds from those what the registry calls: record() (every tensor the loaders read,
// against a recorder), encoder(), with_decoder() and traits().
//
// This file also holds the dispatch that turns a config's activation and flags into template
// arguments, so each family writes that once.
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
#include "decoder_stack.hpp"
#include "demo.hpp"
#include "memory_items.hpp"
#include "options.hpp"
#include "seq2seq.hpp"

namespace locost::models {

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

// A family's with_stacks when its encoder and decoder vary by the feed-forward's activation alone:
// f(encoder type, decoder type).
template <template <class, class, activation> class Encoder, template <class, class, activation> class Decoder>
struct activation_stacks {
    template <class Scalar, class Backend, class F>
    static decltype(auto) with_stacks(const model_config& c, F&& f) {
        return with_activation(c, [&](auto act) -> decltype(auto) {
            return f(std::type_identity<Encoder<Scalar, Backend, decltype(act)::value>>{},
                     std::type_identity<Decoder<Scalar, Backend, decltype(act)::value>>{});
        });
    }
};

// What the registry asks of every family, built from the family's own parts (above).
template <class Family, class Config>
struct family_base {
    using config = Config;

    static std::vector<std::string> model_types() { return {Family::name}; }
    // Beam search as the family's users run it: current transformers' (LOCOST's code pins 4.27.1).
    static constexpr generation::beam_convention beam_convention = generation::beam_convention::hf_5;
    static text::tokenizer_conventions tokenizer_conventions() { return {}; }
    static constexpr bool all_to_all_encoder = false;  // (family_traits says what it means)
    // A configuration the family parses but cannot run: refused (model.unsupported) before a read.
    static void check_loadable(const Config&) {}

    static family_traits traits(const Config&) {
        return {Family::name, Family::beam_convention, Family::tokenizer_conventions(), Family::all_to_all_encoder};
    }

    static void record(const layers::tensor_source& root, const Config& c) {
        Family::template with_stacks<float, cpu>(c, [&](auto e, auto d) {
            decltype(e)::type::record(root, c);
            decltype(d)::type::record(root, c);
        });
    }

    template <class Scalar, class Backend>
    static any_encoder<Scalar, Backend> encoder(const layers::tensor_source& root, const std::shared_ptr<const model_config>& c,
                                                const encoder_options& o) {
        const auto& fc = static_cast<const Config&>(*c);
        return Family::template with_stacks<Scalar, Backend>(
            fc, [&](auto e, auto) { return any_encoder<Scalar, Backend>(typename decltype(e)::type(root, fc, o), c); });
    }

    template <class Scalar, class Backend, class F>
    static decltype(auto) with_decoder(const layers::tensor_source& root, const Config& c, const decoder_settings& s, F&& f) {
        return Family::template with_stacks<Scalar, Backend>(
            c, [&](auto, auto d) -> decltype(auto) { return f(typename decltype(d)::type(root, c, s)); });
    }
};

// An optional token id as inspect shows it (null when unset).
inline io::json optional_id(const std::optional<index_t>& id) { return id ? io::json(*id) : io::json(); }

// Which optional token ids a family's config carries (inspect shows those only).
struct shown_ids {
    bool bos = false, forced_bos = false, forced_eos = false;
};

}  // namespace locost::models
