// config.json -> model_config, generation_config.json -> generation_config.
//
// model_config holds the fields of the three supported families, with the names and defaults
// of their Python configuration classes:
//   "locost"  LOCOSTConfig (flbbb/locost-summarization, models_config.py)
//   "t5"      transformers T5Config
//   "longt5"  transformers LongT5Config
// Rules
//  * model_type, vocab_size, d_model, d_kv, d_ff, num_layers, num_heads (and d_state for
//    "locost") are required: Hugging Face always writes them, so their absence means the file
//    is not a config of these families. Every other field takes the family's default; a JSON
//    null counts as absent. Unknown fields are ignored.
//  * Absent tie_word_embeddings means true (the PretrainedConfig default, which LOCOSTConfig
//    never overrides); absent num_decoder_layers means num_layers.
//  * is_gated_act and dense_act_fn are derived from feed_forward_proj as Hugging Face does
//    ("ACT" or "gated-ACT"; "gated-gelu" means gelu_new); values stored in the file are
//    ignored. ACT must be one locost implements: relu, gelu, gelu_new, silu.
//  * Wrong JSON types, out-of-range and nonsensical values are errors naming the field and
//    what was expected: sizes are integers in [1, 2^31 - 1]; d_state is even (d_state/2
//    complex modes); num_ssm_heads divides d_model; token ids lie in [0, vocab_size). Note
//    d_model need not be num_heads x d_kv nor a multiple of num_heads: T5 projects to
//    num_heads x d_kv (mT5-small has d_model 512 with 6 heads of 64), so that is not checked.
//  * decoder_start_token_id defaults to 0 for LOCOST (LOCOSTConfig) and to pad_token_id for
//    T5/LongT5, whose configuration classes leave it unset and whose models shift right with pad.
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
#include "../models/locost_parameters.hpp"
#include "json.hpp"

namespace locost::io {

// Upper bound of every size field (and of token ids): keeps all derived products in int64.
inline constexpr index_t max_config_dim = 2147483647;

struct model_config {
    std::string model_type;  // "locost", "t5" or "longt5"

    index_t vocab_size = 32128;
    index_t d_model = 512;
    index_t d_kv = 64;
    index_t d_ff = 2048;
    index_t num_layers = 6;
    index_t num_decoder_layers = 6;  // absent: num_layers
    index_t num_heads = 8;
    index_t relative_attention_num_buckets = 32;
    index_t relative_attention_max_distance = 128;

    // LOCOST encoder
    index_t d_state = 128;  // N: N/2 complex modes
    index_t num_ssm_heads = 8;
    bool bidirectional = true;
    bool gating = true;
    bool use_fast_fft_conv = true;  // the original CUDA path; informational here

    // LongT5 encoder attention (also carried by LOCOSTConfig)
    index_t local_radius = 127;
    index_t global_block_size = 16;
    std::string encoder_attention_type = "local";  // "local" or "transient-global"

    double dropout_rate = 0.1;
    double layer_norm_epsilon = 1e-6;
    double initializer_factor = 1.0;

    std::string feed_forward_proj = "gated-gelu";  // LOCOST default; T5 and LongT5: "relu"
    bool is_gated_act = true;                      // derived from feed_forward_proj
    std::string dense_act_fn = "gelu_new";         // derived from feed_forward_proj

    bool tie_word_embeddings = true;
    bool is_encoder_decoder = true;
    bool use_cache = true;

    index_t pad_token_id = 0;
    index_t eos_token_id = 1;                 // the first of eos_token_ids
    std::vector<index_t> eos_token_ids = {1}; // config.json may give an integer or a list
    index_t decoder_start_token_id = 0;
    std::optional<index_t> bos_token_id;

    // The LOCOST parameter layout these values imply (models/locost_parameters.hpp).
    models::locost_dims locost_dims() const {
        models::locost_dims d;
        d.vocab_size = vocab_size;
        d.d_model = d_model;
        d.d_state = d_state;
        d.d_kv = d_kv;
        d.d_ff = d_ff;
        d.num_layers = num_layers;
        d.num_decoder_layers = num_decoder_layers;
        d.num_heads = num_heads;
        d.num_ssm_heads = num_ssm_heads;
        d.relative_attention_num_buckets = relative_attention_num_buckets;
        d.gated_ff = is_gated_act;
        d.bidirectional = bidirectional;
        d.gating = gating;
        d.tie_word_embeddings = tie_word_embeddings;
        return d;
    }
};

namespace detail {

// Reads typed fields of one JSON object, with errors "<kind>.missing_field",
// "<kind>.wrong_type" and "<kind>.invalid_value" that name the field.
class field_reader {
public:
    field_reader(const json& obj, const std::string& source, std::string kind)
        : obj_(obj), src_(source), kind_(std::move(kind)) {}

    // The field, or nullptr when absent or null.
    const json* find(const char* name) const {
        const auto it = obj_.find(name);
        return it == obj_.end() || it->is_null() ? nullptr : &*it;
    }

    [[noreturn]] void missing(const char* name, const char* expected) const {
        throw error(kind_ + ".missing_field", src_ + ": missing required field '" + name + "' (expected " + expected + ")");
    }
    [[noreturn]] void wrong_type(const char* name, const json& v, const char* expected) const {
        throw error(kind_ + ".wrong_type",
                    src_ + ": field '" + name + "' is a JSON " + json_type_name(v) + ", expected " + expected);
    }
    [[noreturn]] void invalid(const char* name, const std::string& shown, const std::string& expected) const {
        throw error(kind_ + ".invalid_value", src_ + ": field '" + name + "' is " + shown + ", expected " + expected);
    }

    static std::string range(index_t lo, index_t hi) {
        return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    }

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

} // namespace detail

// Parses config.json text; `source` (usually the path) starts every message.
inline model_config parse_model_config(std::string_view text, const std::string& source) {
    const json j = parse_json(text, source, "config");
    if (!j.is_object())
        throw error("config.not_object", source + ": config is a JSON " + json_type_name(j) + ", expected an object");
    const detail::field_reader f(j, source, "config");
    model_config c;
    c.model_type = f.string("model_type", std::nullopt);
    const bool is_locost = c.model_type == "locost", is_t5 = c.model_type == "t5", is_longt5 = c.model_type == "longt5";
    if (!is_locost && !is_t5 && !is_longt5)
        throw error("config.unsupported_model_type", source + ": model_type '" + detail::printable(c.model_type) +
                                                         "' is not supported (expected \"locost\", \"t5\" or \"longt5\")");
    constexpr index_t M = max_config_dim;
    c.vocab_size = f.integer("vocab_size", std::nullopt, 1, M);
    c.d_model = f.integer("d_model", std::nullopt, 1, M);
    c.d_kv = f.integer("d_kv", std::nullopt, 1, M);
    c.d_ff = f.integer("d_ff", std::nullopt, 1, M);
    c.num_layers = f.integer("num_layers", std::nullopt, 1, M);
    c.num_decoder_layers = f.integer("num_decoder_layers", c.num_layers, 1, M);
    c.num_heads = f.integer("num_heads", std::nullopt, 1, M);
    c.relative_attention_num_buckets = f.integer("relative_attention_num_buckets", 32, 1, M);
    c.relative_attention_max_distance = f.integer("relative_attention_max_distance", 128, 1, M);
    if (is_locost) {
        c.d_state = f.integer("d_state", std::nullopt, 1, M);
        if (c.d_state % 2 != 0)
            f.invalid("d_state", std::to_string(c.d_state), "an even integer (d_state / 2 complex modes)");
        c.num_ssm_heads = f.integer("num_ssm_heads", 8, 1, M);
        if (c.d_model % c.num_ssm_heads != 0)
            f.invalid("num_ssm_heads", std::to_string(c.num_ssm_heads),
                      "a divisor of d_model (" + std::to_string(c.d_model) + ")");
        c.bidirectional = f.boolean("bidirectional", true);
        c.gating = f.boolean("gating", true);
        c.use_fast_fft_conv = f.boolean("use_fast_fft_conv", true);
    } else {
        c.d_state = 0;
        c.num_ssm_heads = 0;
        c.bidirectional = false;
        c.gating = false;
        c.use_fast_fft_conv = false;
    }
    c.local_radius = f.integer("local_radius", 127, 0, M);
    c.global_block_size = f.integer("global_block_size", 16, 1, M);
    c.encoder_attention_type = f.string("encoder_attention_type", std::string("local"));
    if (c.encoder_attention_type != "local" && c.encoder_attention_type != "transient-global")
        f.invalid("encoder_attention_type", j["encoder_attention_type"].dump(), "\"local\" or \"transient-global\"");

    c.dropout_rate = f.number("dropout_rate", 0.1);
    if (!(c.dropout_rate >= 0.0 && c.dropout_rate <= 1.0))
        f.invalid("dropout_rate", j["dropout_rate"].dump(), "a number in [0, 1]");
    c.layer_norm_epsilon = f.number("layer_norm_epsilon", 1e-6);
    if (!(c.layer_norm_epsilon > 0.0)) f.invalid("layer_norm_epsilon", j["layer_norm_epsilon"].dump(), "a positive number");
    c.initializer_factor = f.number("initializer_factor", 1.0);

    c.feed_forward_proj = f.string("feed_forward_proj", std::string(is_locost ? "gated-gelu" : "relu"));
    {
        const std::string& p = c.feed_forward_proj;
        const bool gated = p.rfind("gated-", 0) == 0;
        const std::string act = gated ? p.substr(6) : p;
        if (act != "relu" && act != "gelu" && act != "gelu_new" && act != "silu")
            f.invalid("feed_forward_proj", j["feed_forward_proj"].dump(),
                      "\"ACT\" or \"gated-ACT\" with ACT one of relu, gelu, gelu_new, silu");
        c.is_gated_act = gated;
        c.dense_act_fn = p == "gated-gelu" ? "gelu_new" : act;
    }

    c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
    c.is_encoder_decoder = f.boolean("is_encoder_decoder", true);
    if (!c.is_encoder_decoder) f.invalid("is_encoder_decoder", "false", "true (locost runs encoder-decoder models)");
    c.use_cache = f.boolean("use_cache", true);

    const index_t last_id = c.vocab_size - 1;
    c.pad_token_id = f.integer("pad_token_id", 0, 0, last_id);
    if (auto eos = f.int_or_list("eos_token_id", 0, last_id)) {
        if (eos->empty()) f.invalid("eos_token_id", "[]", "an integer or a non-empty list of integers");
        c.eos_token_ids = std::move(*eos);
        c.eos_token_id = c.eos_token_ids.front();
    }
    c.decoder_start_token_id = f.integer("decoder_start_token_id", is_locost ? 0 : c.pad_token_id, 0, last_id);
    c.bos_token_id = f.opt_integer("bos_token_id", 0, last_id);
    return c;
}

// Reads and parses a config.json file (errors: io.open_failed, config.*).
inline model_config load_model_config(const std::string& path) {
    return parse_model_config(read_text_file(path), path);
}

// ---- generation_config.json ----------------------------------------------------------------

// early_stopping: JSON false (beam search stops by the length heuristic), true (as soon as
// num_beams hypotheses are done), or "never" (only when no better hypothesis is possible).
enum class early_stopping_mode { heuristic, on, never };

struct generation_config {
    index_t max_length = 20;
    std::optional<index_t> max_new_tokens;
    index_t min_length = 0;
    std::optional<index_t> min_new_tokens;
    index_t num_beams = 1;
    double length_penalty = 1.0;
    early_stopping_mode early_stopping = early_stopping_mode::heuristic;
    index_t no_repeat_ngram_size = 0;
    index_t encoder_no_repeat_ngram_size = 0;
    double repetition_penalty = 1.0;
    bool do_sample = false;
    double temperature = 1.0;
    index_t top_k = 50;
    double top_p = 1.0;
    index_t num_return_sequences = 1;
    std::vector<std::vector<index_t>> bad_words_ids;  // empty: none
    std::optional<index_t> forced_bos_token_id;
    std::vector<index_t> forced_eos_token_id;         // an integer or a list; empty: none
    std::optional<index_t> decoder_start_token_id;
    std::vector<index_t> eos_token_id;                // an integer or a list; empty: none
    std::optional<index_t> pad_token_id;
    std::optional<index_t> bos_token_id;
};

// Parses generation_config.json text (errors: generation_config.*). Checks: lengths and sizes
// non-negative (num_beams, num_return_sequences, max_new_tokens >= 1); without sampling
// num_return_sequences <= num_beams; with sampling temperature > 0; top_p in [0, 1];
// repetition_penalty > 0; token ids non-negative; bad_words_ids a list of non-empty lists.
inline generation_config parse_generation_config(std::string_view text, const std::string& source) {
    const json j = parse_json(text, source, "generation_config");
    if (!j.is_object())
        throw error("generation_config.not_object",
                    source + ": generation config is a JSON " + json_type_name(j) + ", expected an object");
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
        if (e->is_boolean())
            g.early_stopping = e->get<bool>() ? early_stopping_mode::on : early_stopping_mode::heuristic;
        else if (e->is_string() && e->get_ref<const std::string&>() == "never")
            g.early_stopping = early_stopping_mode::never;
        else if (e->is_string())
            f.invalid("early_stopping", e->dump(), "true, false or \"never\"");
        else
            f.wrong_type("early_stopping", *e, "a boolean or \"never\"");
    }
    g.no_repeat_ngram_size = f.integer("no_repeat_ngram_size", 0, 0, M);
    g.encoder_no_repeat_ngram_size = f.integer("encoder_no_repeat_ngram_size", 0, 0, M);
    g.repetition_penalty = f.number("repetition_penalty", 1.0);
    if (!(g.repetition_penalty > 0.0))
        f.invalid("repetition_penalty", j["repetition_penalty"].dump(), "a positive number");
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
    g.decoder_start_token_id = f.opt_integer("decoder_start_token_id", 0, M);
    if (auto v = f.int_or_list("eos_token_id", 0, M)) g.eos_token_id = std::move(*v);
    g.pad_token_id = f.opt_integer("pad_token_id", 0, M);
    g.bos_token_id = f.opt_integer("bos_token_id", 0, M);
    return g;
}

inline generation_config load_generation_config(const std::string& path) {
    return parse_generation_config(read_text_file(path), path);
}

} // namespace locost::io
