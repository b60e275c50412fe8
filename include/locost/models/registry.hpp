// The registry: the ONE place where config.json becomes types. It lists the families (each a
// folder, models/<family>/, described by models/family.hpp) and turns a checkpoint's config.json
// into one of their configs — parsed once, held as a variant — then dispatches with std::visit.
//
//   read_config(ck)             the family's config (a SLED config.json, "tau/sled": its backbone's)
//   read_sled_options(ck)       the SLED settings of a "tau/sled" config.json (none otherwise)
//   parameters(c)               every tensor the family reads, recorded (layers/tensor_source.hpp)
//   validate(ck), require_matching_weights(ck, c)   the weights against that record
//   load_model<Scalar, Backend>(ck, options)       any family's encoder-decoder (any_model)
//   load_encoder<Scalar, Backend>(ck, options)     any family's encoder (any_encoder)
//   traits(c), describe(c)      what the family tells the tool (beam convention, inspect's values)
//   open_tokenizer(dir[, cache]) the directory's tokenizer with its family's conventions
//   demo_plan_of(name, ...)     what demo-checkpoint writes for the family called `name`
//
// With model_options::sled (or a SLED config.json) the family's encoder runs through
// sled<Encoder>. Generation defaults: generation_config.json when the checkpoint has one;
// otherwise the generation fields of config.json (older checkpoints keep num_beams,
// forced_bos_token_id … there, and transformers builds its GenerationConfig from them the same way).
#pragma once
#include <algorithm>
#include <array>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "../config/error.hpp"
#include "../io/checkpoint.hpp"
#include "../io/config.hpp"
#include "../layers/tensor_source.hpp"
#include "../text/tokenizer.hpp"
#include "config.hpp"
#include "family.hpp"
#include "load_decl.hpp"
#include "options.hpp"
#include "seq2seq.hpp"
#include "sled.hpp"

#include "bart/family.hpp"
#include "led/family.hpp"
#include "locost/family.hpp"
#include "longt5/family.hpp"
#include "pegasus_x/family.hpp"
#include "t5/family.hpp"

namespace locost::models {

namespace detail {
template <class Config, class... F>
constexpr std::size_t family_index() {
    const bool is[] = {std::is_same_v<Config, typename F::config>...};
    std::size_t i = 0;
    while (i < sizeof...(F) && !is[i]) ++i;
    return i;
}
}  // namespace detail

template <class... F>
struct family_list {
    using config = std::variant<typename F::config...>;

    // The family whose config type is Config.
    template <class Config>
    using family_of = std::tuple_element_t<detail::family_index<Config, F...>(), std::tuple<F...>>;

    // f(std::type_identity<Family>) for the family that reads `model_type`; false when none does.
    template <class Fn>
    static bool with_model_type(const std::string& model_type, Fn&& f) {
        auto reads = [&](const std::vector<std::string>& types) {
            return std::find(types.begin(), types.end(), model_type) != types.end();
        };
        return ((reads(F::model_types()) && (f(std::type_identity<F>{}), true)) || ...);
    }
    // f(std::type_identity<Family>) for the family demo-checkpoint calls `name`.
    template <class Fn>
    static bool with_name(const std::string& name, Fn&& f) {
        return ((name == F::name && (f(std::type_identity<F>{}), true)) || ...);
    }
    // "\"locost\", \"t5\", \"mt5\", …" (or, joined by names: "'locost', 't5', …").
    static std::string model_type_list() {
        std::string s;
        for (const auto& types : {F::model_types()...})
            for (const auto& t : types) s += (s.empty() ? "\"" : ", \"") + t + "\"";
        return s;
    }
    static std::vector<std::string> names() { return {F::name...}; }
    // demo-checkpoint's sizes, one line per family: "name: its shapes".
    static std::vector<std::string> demo_shapes() { return {std::string(F::name) + ": " + F::demo_shapes...}; }
    static std::string name_list() {
        std::string s;
        const std::array<const char*, sizeof...(F)> names = {F::name...};
        for (std::size_t i = 0; i < names.size(); ++i)
            s += std::string(i == 0 ? "'" : i + 1 == names.size() ? " or '" : ", '") + names[i] + "'";
        return s;
    }
};

// Every family, one line each.
using families = family_list<locost_family, t5_family, bart_family, led_family, longt5_family, pegasus_x_family>;

// Any family's config.
using any_config = families::config;

inline constexpr const char* sled_model_type = "tau/sled";

// The shared fields of any family's config.
inline const model_config& common(const any_config& c) {
    return std::visit([](const auto& x) -> const model_config& { return x; }, c);
}
// A handle on the shared fields that keeps the whole config alive.
inline std::shared_ptr<const model_config> common_ptr(const std::shared_ptr<const any_config>& c) { return {c, &common(*c)}; }

// The model_type of a config object. Errors: config.missing_field, config.wrong_type.
// f(family, config) for the family of `c` (family: a std::type_identity of it) and its config.
template <class Fn>
decltype(auto) visit_family(const any_config& c, Fn&& f) {
    return std::visit(
        [&](const auto& x) -> decltype(auto) { return f(std::type_identity<families::family_of<std::remove_cvref_t<decltype(x)>>>{}, x); },
        c);
}

inline std::string config_model_type(const io::json& j, const std::string& source) {
    return io::detail::field_reader(j, source, "config").string("model_type", std::nullopt);
}

// A family's config from a config.json object. Errors: config.unsupported_model_type, and the
// family's config.* errors.
inline std::shared_ptr<const any_config> parse_config(const io::json& j, const std::string& source) {
    const std::string type = config_model_type(j, source);
    std::shared_ptr<const any_config> out;
    families::with_model_type(type, [&](auto f) {
        using F = typename decltype(f)::type;
        out =
            std::make_shared<const any_config>(std::in_place_type<typename F::config>, read_config_as<typename F::config>(j, source, type));
    });
    if (!out)
        throw error("config.unsupported_model_type",
                    source + ": model_type '" + io::detail::printable(type) + "' is not supported (expected " +
                        families::model_type_list() + " or \"" + sled_model_type + "\")");
    return out;
}

// config.json text → the family's config (SLED configs are read through read_config()).
inline std::shared_ptr<const any_config> parse_config_text(std::string_view text, const std::string& source) {
    return parse_config(io::read_config_object(text, source), source);
}
inline std::shared_ptr<const any_config> load_config(const std::string& path) { return parse_config_text(io::read_text_file(path), path); }

namespace detail {

// The directory a SLED config.json's underlying_config string names: a directory inside the
// checkpoint directory (a relative path; never the working directory, so that one command gives
// one model wherever it runs), or a repository id (`facebook/bart-base`, as tau/bart-base-sled
// names its backbone) found in the Hugging Face cache (io/hub_cache.hpp). Nothing when it names a
// file inside the directory (a config.json of its own) or is no string. Error:
// sled.backbone_not_found for a repository id the cache lacks, with the cache's message.
inline std::optional<std::string> sled_backbone_dir(const io::json& j, const std::string& source, const std::string& dir,
                                                    const io::cache_location& cache) {
    namespace fs = std::filesystem;
    const auto u = j.find("underlying_config");
    if (u == j.end() || !u->is_string() || u->get<std::string>().empty()) return std::nullopt;
    const std::string name = u->get<std::string>();
    std::error_code ec;
    const fs::path local = fs::path(dir) / name;
    if (fs::exists(fs::symlink_status(local, ec))) {
        io::directory_files(dir).require_inside(local.string());
        if (fs::is_directory(local, ec)) return local.string();
        return std::nullopt;
    }
    if (!io::parse_hub_name(name)) return std::nullopt;
    try {
        return io::cache_snapshot_dir(name, cache);  // never the working directory
    } catch (const error& e) {
        throw error("sled.backbone_not_found",
                    source + ": underlying_config '" + io::detail::printable(name) + "' names the backbone " + e.message());
    }
}

// The backbone config of a SLED config.json: underlying_config as a dict, or as a local path
// (a config.json file or a directory holding one, inside the checkpoint directory), or a
// repository id in the Hugging Face cache; when the weights come from a backbone directory (a SLED
// repository that ships none: open_checkpoint), that directory's config.json. Error:
// sled.backbone_not_found naming it when it is none of these.
inline std::shared_ptr<const any_config> sled_backbone_config(const io::json& j, const std::string& source, const std::string& dir,
                                                              const io::cache_location& cache) {
    namespace fs = std::filesystem;
    const io::detail::field_reader f(j, source, "config");
    const io::json* u = f.find("underlying_config");
    if (!u) f.missing("underlying_config", "the backbone's config: an object, a local path or a repository id");
    if (u->is_object()) {
        if (config_model_type(*u, source + " (underlying_config)") == sled_model_type)
            f.invalid("underlying_config", "a SLED config", "the backbone's config (SLED over SLED is not a model)");
        return parse_config(*u, source + " (underlying_config)");
    }
    if (!u->is_string()) f.wrong_type("underlying_config", *u, "an object or a string (a local path or a repository id)");
    const std::string name = u->get<std::string>();
    std::error_code ec;
    if (!name.empty()) {
        const fs::path p = fs::path(dir) / name;
        if (fs::exists(fs::symlink_status(p, ec)) && !fs::is_directory(p, ec)) {
            io::directory_files(dir).require_inside(p.string());
            io::require_regular_file(p.string());
            return load_config(p.string());
        }
    }
    // Weights borrowed from the backbone's directory: its own config.json describes them.
    if (fs::path(source).parent_path() != fs::path(dir))
        if (const auto own = io::directory_files(dir).find("config.json")) return load_config(*own);
    if (const auto backbone = sled_backbone_dir(j, source, dir, cache))
        return load_config(
            io::directory_files(*backbone).require("config.json", "sled.backbone_not_found", *backbone + ": no config.json"));
    throw error("sled.backbone_not_found",
                source + ": underlying_config '" + io::detail::printable(name) +
                    "' is not a local config.json, a directory holding one, or a repository id (put the backbone's config.json inside the "
                    "checkpoint directory and give its path there, put the config itself in underlying_config, or name the backbone's "
                    "repository as org/name with its files in the Hugging Face cache)");
}

}  // namespace detail

// The checkpoint's config, parsed by its family (for a SLED config.json: its backbone's).
inline std::shared_ptr<const any_config> read_config(const io::checkpoint& ck) {
    const std::string type = config_model_type(ck.config_json(), ck.config_path());
    if (type == sled_model_type) return detail::sled_backbone_config(ck.config_json(), ck.config_path(), ck.dir(), ck.cache());
    return parse_config(ck.config_json(), ck.config_path());
}

// The checkpoint at DIR or repository id `org/name[@revision]` (io/hub_cache.hpp; in `cache`, else the
// environment's cache). A SLED
// repository that ships no weights (tau/bart-base-sled: config.json and tokenizer_config.json
// only) takes them, and its backbone's config, from `backbone` (a directory or repository id) or
// else from the repository its underlying_config names. Errors: as io::checkpoint::open;
// sled.backbone_not_found when neither gives a backbone.
inline io::checkpoint open_checkpoint(const std::string& dir_or_name, const std::optional<std::string>& backbone = std::nullopt,
                                      const io::cache_location& cache = {}) {
    try {
        io::checkpoint ck = io::checkpoint::open(dir_or_name, cache);
        // A backbone given for a checkpoint with weights of its own would be silently ignored.
        if (backbone)
            throw error("sled.bad_backbone",
                        "--backbone " + io::detail::printable(*backbone) +
                            ": a backbone is taken by a SLED checkpoint "
                            "whose directory holds no weights; " +
                            ck.dir() + " is a '" + io::detail::printable(config_model_type(ck.config_json(), ck.config_path())) +
                            "' checkpoint with weights of its own");
        return ck;
    } catch (const error& e) {
        if (e.id() != "checkpoint.no_weights") throw;
        const std::string dir = io::resolve_model_dir(dir_or_name, cache);
        const std::string config =
            io::directory_files(dir).require(io::checkpoint::file_config, "checkpoint.missing_config", dir + ": no config.json");
        const io::json j = io::read_config_object(io::read_text_file(config), config);
        if (config_model_type(j, config) != sled_model_type) throw;
        std::optional<std::string> from = backbone ? std::optional<std::string>(io::resolve_model_dir(*backbone, cache))
                                                   : detail::sled_backbone_dir(j, config, dir, cache);
        if (!from)
            throw error("sled.backbone_not_found",
                        dir +
                            ": holds no weights, and its underlying_config names no backbone directory or repository "
                            "(pass --backbone DIR|ORG/NAME: the backbone model's checkpoint)");
        return io::checkpoint::open(*from, config, cache);
    }
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

// Every tensor the family's loaders read, in the order they read them (both stacks; the shared
// embedding once per stack; a tied head as an alias).
inline std::vector<layers::param_record> parameters(const any_config& c) {
    layers::parameter_recorder rec;
    visit_family(c, [&](auto f, const auto& x) { decltype(f)::type::record(layers::tensor_source(rec), x); });
    return rec.records();
}

// The stored tensors a checkpoint of config `c` must hold.
inline std::vector<io::parameter_spec> expected_parameters(const any_config& c) {
    layers::parameter_recorder rec;
    visit_family(c, [&](auto f, const auto& x) { decltype(f)::type::record(layers::tensor_source(rec), x); });
    return rec.parameters();
}

inline io::validation_report validate(const io::checkpoint& ck) {
    const auto c = read_config(ck);
    check_layers_fit(common(*c), ck.records().size(), ck.weights_path());
    return ck.validate(expected_parameters(*c));
}

// Checks that the checkpoint's weights are what config.json describes (a cheap bound first, then
// every tensor's name and shape), before a layer is built. Errors: checkpoint.config_mismatch,
// checkpoint.invalid.
inline void require_matching_weights(const io::checkpoint& ck, const any_config& c) {
    check_layers_fit(common(c), ck.records().size(), ck.weights_path());
    ck.require_valid(expected_parameters(c));
}

// What the family tells the code that drives it.
inline family_traits traits(const any_config& c) {
    return visit_family(c, [](auto f, const auto& x) { return decltype(f)::type::traits(x); });
}

// The values `locost inspect` shows for the family, in display order.
inline described describe(const any_config& c) {
    return visit_family(c, [](auto f, const auto& x) { return decltype(f)::type::describe(x); });
}

// The family's encoder working set (models/memory_estimate.hpp).
inline encoder_memory encoder_working_set(const any_config& c, const encoder_options& o, const encoder_request& r) {
    return visit_family(c, [&](auto f, const auto& x) { return decltype(f)::type::encoder_working_set(x, o, r); });
}

// The SLED settings in force: the options' (flags) over the config file's.
inline std::optional<sled_options> sled_settings(const io::checkpoint& ck, const model_options& o) {
    if (o.sled) return o.sled;
    return read_sled_options(ck);
}

// The generation defaults a checkpoint carries: generation_config.json, or else the generation
// fields of config.json (as transformers' GenerationConfig.from_model_config). Errors:
// generation_config.* naming the file.
inline std::optional<io::generation_config> checkpoint_generation(const io::checkpoint& ck) {
    if (ck.generation()) return ck.generation();
    return io::parse_generation_config(ck.config_json().dump(), ck.config_path());
}

namespace detail {

template <class Scalar, class Backend>
any_encoder<Scalar, Backend> family_encoder(const io::checkpoint& ck, const std::shared_ptr<const any_config>& c, const model_options& o) {
    // What the family cannot run is said before the weights are checked against the config.
    visit_family(*c, [](auto f, const auto& x) { decltype(f)::type::check_loadable(x); });
    require_matching_weights(ck, *c);
    layers::checkpoint_reader reader(ck);
    const layers::tensor_source root(reader);
    const auto shared = common_ptr(c);
    auto e = visit_family(
        *c, [&](auto f, const auto&) { return decltype(f)::type::template encoder<Scalar, Backend>(root, shared, o.encoder); });
    if (const auto s = sled_settings(ck, o)) return {sled<any_encoder<Scalar, Backend>>(std::move(e), *s, shared->source), shared};
    return e;
}

}  // namespace detail

// The checkpoint's encoder (through SLED when sled_settings() says so). Errors: config.*,
// checkpoint.*, model.unsupported, sled.*.
template <class Scalar, class Backend>
any_encoder<Scalar, Backend> load_encoder(const io::checkpoint& ck, const model_options& o) {
    static_assert(locost::scalar<Scalar>, "locost: Scalar must be float or double");
    return detail::family_encoder<Scalar, Backend>(ck, read_config(ck), o);
}

// The checkpoint's encoder-decoder. Errors: those of load_encoder().
template <class Scalar, class Backend>
any_model<Scalar, Backend> load_model(const io::checkpoint& ck, const model_options& o) {
    static_assert(locost::scalar<Scalar>, "locost: Scalar must be float or double");
    const auto c = read_config(ck);
    any_encoder<Scalar, Backend> e = detail::family_encoder<Scalar, Backend>(ck, c, o);
    layers::checkpoint_reader reader(ck);
    const layers::tensor_source root(reader);
    const auto shared = common_ptr(c);
    const auto gen = checkpoint_generation(ck);
    return visit_family(*c, [&](auto f, const auto& x) {
        using F = typename decltype(f)::type;
        return F::template with_decoder<Scalar, Backend>(root, x, decoder_settings_of(o), [&](auto decoder) {
            using model = seq2seq<any_encoder<Scalar, Backend>, decltype(decoder)>;
            return any_model<Scalar, Backend>(model(std::move(e), std::move(decoder), shared, o), shared, F::traits(x), gen, ck.dir());
        });
    });
}

// The tokenizer of a checkpoint directory (or a directory of tokenizer files), with the
// conventions its family adds where the files leave them open (text/conventions.hpp): the family
// config.json's model_type names, when there is one. A config.json that does not parse is left
// for the model's loader to report.
#if LOCOST_API_DEFINITIONS
LOCOST_API text::tokenizer open_tokenizer(const std::string& dir, const io::cache_location& cache) {
    text::tokenizer_conventions conventions;
    try {
        if (const auto cfg = io::directory_files(dir).find("config.json")) {
            const io::json j = io::read_config_object(io::read_text_file(*cfg), *cfg);
            families::with_model_type(config_model_type(j, *cfg),
                                      [&](auto f) { conventions = decltype(f)::type::tokenizer_conventions(); });
        }
    } catch (const error&) {}
    try {
        return text::open_tokenizer(dir, conventions);
    } catch (const error& e) {
        // A SLED repository without tokenizer files (tau/bart-base-sled): its backbone's.
        if (e.id() != "tokenizer.not_found") throw;
        const auto cfg = io::directory_files(dir).find("config.json");
        if (!cfg) throw;
        const io::json j = io::read_config_object(io::read_text_file(*cfg), *cfg);
        if (config_model_type(j, *cfg) != sled_model_type) throw;
        const auto backbone = detail::sled_backbone_dir(j, *cfg, dir, cache);
        if (!backbone) throw;
        return open_tokenizer(*backbone, cache);
    }
}
#endif  // LOCOST_API_DEFINITIONS

// What demo-checkpoint writes for the family called `name` (size: "base" or "tiny"; variant: a
// family's choice, LongT5's attention type). Error: cli.bad_value for an unknown family.
inline demo_plan demo_plan_of(const std::string& name, const std::string& size, index_t tiny_vocab, const std::string& variant) {
    demo_plan p;
    if (!families::with_name(name, [&](auto f) { p = decltype(f)::type::demo(size, tiny_vocab, variant); }))
        throw error("cli.bad_value", "demo-checkpoint: option '--family' expects " + families::name_list() + ", got '" + name + "'");
    return p;
}

}  // namespace locost::models
