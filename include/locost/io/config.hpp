// The typed field reader every config file goes through, and generation_config.json.
//
// config.json itself is a model family's business: each family parses its own struct from the
// JSON object with detail::field_reader (models/<family>/config.hpp; models/registry.hpp picks
// the family by model_type). io/ reads files and knows no family.
//
// generation_config follows transformers' GenerationConfig defaults; std::optional marks values
// that are absent by default. eos_token_id and forced_eos_token_id may be an integer or a list.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../config/error.hpp"
#include "../core/tensor.hpp"
#include "generation_config.hpp"
#include "json.hpp"

namespace locost::io {

// Upper bound of every size field (and of token ids): keeps all derived products in int64.
inline constexpr index_t max_config_dim = 2147483647;

namespace detail {

// Reads typed fields of one JSON object, with errors "<kind>.missing_field",
// "<kind>.wrong_type" and "<kind>.invalid_value" that name the field.
class field_reader {
public:
    field_reader(const json& obj, const std::string& source, std::string kind) : obj_(obj), src_(source), kind_(std::move(kind)) {}

    // The field, or nullptr when absent or null.
    const json* find(const char* name) const {
        const auto it = obj_.find(name);
        return it == obj_.end() || it->is_null() ? nullptr : &*it;
    }

    [[noreturn]] void missing(const char* name, const char* expected) const {
        throw error(kind_ + ".missing_field", src_ + ": missing required field '" + name + "' (expected " + expected + ")");
    }
    [[noreturn]] void wrong_type(const char* name, const json& v, const char* expected) const {
        throw error(kind_ + ".wrong_type", src_ + ": field '" + name + "' is a JSON " + json_type_name(v) + ", expected " + expected);
    }
    [[noreturn]] void invalid(const char* name, const std::string& shown, const std::string& expected) const {
        throw error(kind_ + ".invalid_value", src_ + ": field '" + name + "' is " + shown + ", expected " + expected);
    }

    static std::string range(index_t lo, index_t hi) { return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"; }

    // An integer in [lo, hi]; `def` empty means required.
    index_t integer(const char* name, std::optional<index_t> def, index_t lo, index_t hi) const {
        const json* v = find(name);
        if (!v) {
            if (!def) missing(name, "an integer");
            return *def;
        }
        return checked_int(name, *v, lo, hi);
    }
    std::optional<index_t> opt_integer(const char* name, index_t lo, index_t hi) const {
        const json* v = find(name);
        if (!v) return std::nullopt;
        return checked_int(name, *v, lo, hi);
    }
    // An integer or a list of integers, each in [lo, hi].
    std::optional<std::vector<index_t>> int_or_list(const char* name, index_t lo, index_t hi) const {
        const json* v = find(name);
        if (!v) return std::nullopt;
        if (v->is_number_integer()) return std::vector<index_t>{checked_int(name, *v, lo, hi)};
        if (!v->is_array()) wrong_type(name, *v, "an integer or a list of integers");
        std::vector<index_t> out;
        for (const json& e : *v) {
            if (!e.is_number_integer()) wrong_type(name, e, "an integer or a list of integers");
            out.push_back(checked_int(name, e, lo, hi));
        }
        return out;
    }
    // A list of integers (a single integer is not one: transformers iterates the value).
    std::optional<std::vector<index_t>> int_list(const char* name, index_t lo, index_t hi) const {
        const json* v = find(name);
        if (!v) return std::nullopt;
        if (!v->is_array()) wrong_type(name, *v, "a list of integers");
        std::vector<index_t> out;
        for (const json& e : *v) {
            if (!e.is_number_integer()) wrong_type(name, e, "a list of integers");
            out.push_back(checked_int(name, e, lo, hi));
        }
        return out;
    }
    double number(const char* name, double def) const {
        const json* v = find(name);
        if (!v) return def;
        if (!v->is_number()) wrong_type(name, *v, "a number");
        return v->get<double>();
    }
    bool boolean(const char* name, bool def) const {
        const json* v = find(name);
        if (!v) return def;
        if (!v->is_boolean()) wrong_type(name, *v, "a boolean");
        return v->get<bool>();
    }
    std::string string(const char* name, std::optional<std::string> def) const {
        const json* v = find(name);
        if (!v) {
            if (!def) missing(name, "a string");
            return *def;
        }
        if (!v->is_string()) wrong_type(name, *v, "a string");
        return v->get<std::string>();
    }

    const std::string& source() const noexcept { return src_; }

private:
    index_t checked_int(const char* name, const json& v, index_t lo, index_t hi) const {
        if (!v.is_number_integer()) wrong_type(name, v, "an integer");
        if (v.is_number_unsigned()) {
            const auto u = v.get<std::uint64_t>();
            if (u > static_cast<std::uint64_t>(hi) || static_cast<index_t>(u) < lo) invalid(name, v.dump(), range(lo, hi));
            return static_cast<index_t>(u);
        }
        const auto i = v.get<std::int64_t>();
        if (i < lo || i > hi) invalid(name, v.dump(), range(lo, hi));
        return i;
    }

    const json& obj_;
    const std::string& src_;
    std::string kind_;
};

}  // namespace detail

// config.json as a JSON object (errors: io.open_failed, config.invalid_json, config.not_object,
// config.duplicate_key): what a family's parser reads its fields from.
inline json read_config_object(std::string_view text, const std::string& source) {
    json j = parse_json(text, source, "config");
    if (!j.is_object()) throw error("config.not_object", source + ": config is a JSON " + json_type_name(j) + ", expected an object");
    return j;
}

// ---- generation_config.json ----------------------------------------------------------------

// early_stopping_mode, generation_config: io/generation_config.hpp.

// Parses generation_config.json text (errors: generation_config.*). Checks: lengths and sizes
// non-negative (num_beams, num_return_sequences, max_new_tokens >= 1); without sampling
// num_return_sequences <= num_beams; with sampling temperature > 0; top_p in [0, 1];
// repetition_penalty > 0; token ids non-negative; bad_words_ids a list of non-empty lists;
// suppress_tokens and begin_suppress_tokens lists of ids.
inline generation_config parse_generation_config(std::string_view text, const std::string& source) {
    const json j = parse_json(text, source, "generation_config");
    if (!j.is_object())
        throw error("generation_config.not_object", source + ": generation config is a JSON " + json_type_name(j) + ", expected an object");
    const detail::field_reader f(j, source, "generation_config");
    constexpr index_t M = max_config_dim;
    generation_config g;
    g.max_length = f.integer("max_length", 20, 0, M);
    g.max_new_tokens = f.opt_integer("max_new_tokens", 1, M);
    g.min_length = f.integer("min_length", 0, 0, M);
    g.min_new_tokens = f.opt_integer("min_new_tokens", 0, M);
    g.num_beams = f.integer("num_beams", 1, 1, M);
    g.length_penalty = f.number("length_penalty", 1.0);
    if (const json* e = f.find("early_stopping")) {
        if (e->is_boolean()) g.early_stopping = e->get<bool>() ? early_stopping_mode::on : early_stopping_mode::heuristic;
        else if (e->is_string() && e->get_ref<const std::string&>() == "never") g.early_stopping = early_stopping_mode::never;
        else if (e->is_string()) f.invalid("early_stopping", e->dump(), "true, false or \"never\"");
        else f.wrong_type("early_stopping", *e, "a boolean or \"never\"");
    }
    g.no_repeat_ngram_size = f.integer("no_repeat_ngram_size", 0, 0, M);
    g.encoder_no_repeat_ngram_size = f.integer("encoder_no_repeat_ngram_size", 0, 0, M);
    g.repetition_penalty = f.number("repetition_penalty", 1.0);
    if (!(g.repetition_penalty > 0.0)) f.invalid("repetition_penalty", j["repetition_penalty"].dump(), "a positive number");
    g.do_sample = f.boolean("do_sample", false);
    g.temperature = f.number("temperature", 1.0);
    if (g.do_sample && !(g.temperature > 0.0))
        f.invalid("temperature", j["temperature"].dump(), "a positive number when do_sample is true");
    g.top_k = f.integer("top_k", 50, 0, M);
    g.top_p = f.number("top_p", 1.0);
    if (!(g.top_p >= 0.0 && g.top_p <= 1.0)) f.invalid("top_p", j["top_p"].dump(), "a number in [0, 1]");
    g.num_return_sequences = f.integer("num_return_sequences", 1, 1, M);
    if (!g.do_sample && g.num_return_sequences > g.num_beams)
        f.invalid("num_return_sequences", std::to_string(g.num_return_sequences),
                  "at most num_beams (" + std::to_string(g.num_beams) + ") when do_sample is false");
    if (const json* b = f.find("bad_words_ids")) {
        const char* want = "a list of non-empty lists of token ids";
        if (!b->is_array()) f.wrong_type("bad_words_ids", *b, want);
        for (const json& seq : *b) {
            if (!seq.is_array()) f.wrong_type("bad_words_ids", seq, want);
            if (seq.empty()) f.invalid("bad_words_ids", "a list with an empty entry", want);
            std::vector<index_t> ids;
            for (const json& id : seq) {
                if (!id.is_number_integer()) f.wrong_type("bad_words_ids", id, want);
                if (!id.is_number_unsigned() || id.get<std::uint64_t>() > static_cast<std::uint64_t>(M))
                    f.invalid("bad_words_ids", "a list holding " + id.dump(), want);
                ids.push_back(id.get<index_t>());
            }
            g.bad_words_ids.push_back(std::move(ids));
        }
    }
    g.forced_bos_token_id = f.opt_integer("forced_bos_token_id", 0, M);
    if (auto v = f.int_or_list("forced_eos_token_id", 0, M)) g.forced_eos_token_id = std::move(*v);
    if (auto v = f.int_list("suppress_tokens", 0, M)) g.suppress_tokens = std::move(*v);
    if (auto v = f.int_list("begin_suppress_tokens", 0, M)) g.begin_suppress_tokens = std::move(*v);
    g.decoder_start_token_id = f.opt_integer("decoder_start_token_id", 0, M);
    if (auto v = f.int_or_list("eos_token_id", 0, M)) g.eos_token_id = std::move(*v);
    g.pad_token_id = f.opt_integer("pad_token_id", 0, M);
    g.bos_token_id = f.opt_integer("bos_token_id", 0, M);
    return g;
}

inline generation_config load_generation_config(const std::string& path) { return parse_generation_config(read_text_file(path), path); }

}  // namespace locost::io
