// Generation options: Hugging Face's GenerationConfig fields, names and defaults
// (io::generation_config; transformers 4.27.1 semantics), plus the sampling seed.
//
//   default_generation_options(model, generation_config)   the defaults a checkpoint implies:
//       HF's GenerationConfig defaults, overridden by the checkpoint's generation_config.json when
//       it has one, with eos/pad/decoder start ids taken from config.json where still unset.
//   validate(options, model)                                 errors generate.invalid_option
//
// Lengths count the decoder start token (HF: max_length = max_new_tokens + 1 for an
// encoder-decoder whose decoder prompt is the start token).
//
// beam_convention picks whose beam search num_beams > 1 reproduces (beam_hf_4_27.hpp and
// beam_hf_5.hpp describe them, the latter also how they differ):
//   hf_4_27  transformers 4.27.1's BeamSearchScorer (the version the LOCOST code pins; default)
//   hf_5     transformers 5.x's vectorised _beam_search (as in 5.17)
// default_generation_options leaves it at hf_4_27: the caller sets the default that a model
// family's users get from transformers today.
#pragma once
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "../config/choice.hpp"
#include "../config/error.hpp"
#include "../io/generation_config.hpp"

namespace locost::generation {

using io::early_stopping_mode;

enum class beam_convention { hf_4_27, hf_5 };
inline constexpr choice beam_convention_names[] = {{"transformers-4.27", int(beam_convention::hf_4_27)},
                                                   {"transformers-5", int(beam_convention::hf_5)}};

struct generation_options : io::generation_config {
    std::uint64_t seed = 0;  // sampling: the same seed gives the same tokens
    // Whose beam search to reproduce (qualified: the member shares the enum's name).
    generation::beam_convention beam_convention = generation::beam_convention::hf_4_27;
    // Greedy and sampling: step_event::logprobs for each step (a log-sum-exp over the vocabulary
    // per row and step, which a caller that does not read them does not pay for).
    bool token_logprobs = false;

    // Resolved values (after default_generation_options / validate).
    index_t start_token() const { return decoder_start_token_id.value_or(0); }
    index_t pad_token() const { return pad_token_id.value_or(0); }
    // max_length in tokens including the start token.
    index_t total_length() const { return max_new_tokens ? *max_new_tokens + 1 : max_length; }
    bool is_eos(std::int64_t t) const {
        for (auto e : eos_token_id)
            if (e == t) return true;
        return false;
    }
};

// Config: the model's config (models::model_config or a family's struct derived from it); only
// vocab_size, decoder_start_token_id, pad_token_id and eos_token_ids are read, so these
// functions do not depend on where that struct lives.
template <class Config>
generation_options default_generation_options(const Config& m, const std::optional<io::generation_config>& checkpoint = std::nullopt) {
    generation_options o;
    if (checkpoint) static_cast<io::generation_config&>(o) = *checkpoint;
    if (!o.decoder_start_token_id) o.decoder_start_token_id = m.decoder_start_token_id;
    if (!o.pad_token_id) o.pad_token_id = m.pad_token_id;
    if (o.eos_token_id.empty()) o.eos_token_id.assign(m.eos_token_ids.begin(), m.eos_token_ids.end());
    return o;
}

// Errors: generate.invalid_option naming the option (HF name) and what it must be.
template <class Config>
void validate(const generation_options& o, const Config& m) {
    auto bad = [](const std::string& name, const std::string& what) {
        throw error("generate.invalid_option", "generation option '" + name + "' " + what);
    };
    const index_t V = m.vocab_size;
    auto check_id = [&](const std::string& name, index_t id) {
        if (id < 0 || id >= V) bad(name, "is " + std::to_string(id) + ", expected a token id in [0, " + std::to_string(V) + ")");
    };
    if (o.max_new_tokens && *o.max_new_tokens < 1) bad("max_new_tokens", "must be at least 1");
    if (o.total_length() < 2) bad("max_length", "must be at least 2 (the start token and one new token)");
    if (o.num_beams < 1) bad("num_beams", "must be at least 1");
    if (o.num_return_sequences < 1) bad("num_return_sequences", "must be at least 1");
    if (!o.do_sample && o.num_return_sequences > o.num_beams)
        bad("num_return_sequences",
            "is " + std::to_string(o.num_return_sequences) + ", at most num_beams (" + std::to_string(o.num_beams) + ") without sampling");
    if (o.do_sample && o.num_beams > 1) bad("num_beams", "must be 1 with do_sample (beam sampling is not supported)");
    // The ranges the tool's flags allow, whatever the source (a generation_config.json too): a
    // temperature of 1e-300 turns the masked scores' -inf into NaN, one of 1e39 makes every
    // score equal, and forced tokens would be lost either way.
    auto number = [](double v) {
        char b[32];
        std::snprintf(b, sizeof b, "%g", v);
        return std::string(b);
    };
    if (o.do_sample && !(o.temperature > 0)) bad("temperature", "must be positive when sampling");
    if (o.do_sample && !(o.temperature >= 1e-9 && o.temperature <= 1e9))
        bad("temperature", "is " + number(o.temperature) + ", expected a number in [1e-09, 1e+09] when sampling");
    if (o.repetition_penalty > 0 && !(o.repetition_penalty >= 1e-9 && o.repetition_penalty <= 1e9))
        bad("repetition_penalty", "is " + number(o.repetition_penalty) + ", expected a number in [1e-09, 1e+09]");
    // A beam's score divides by length^length_penalty in float32 (as transformers does): past
    // float32's range the divisor is infinite or 0, scores become 0, -inf or NaN and lose their
    // order, forced tokens included. The penalty must keep it finite and non-zero up to the
    // longest output.
    if (o.num_beams > 1) {
        const double top = std::log(static_cast<double>(std::numeric_limits<float>::max())),
                     len = std::log(static_cast<double>(o.total_length()));
        const double low = std::log(static_cast<double>(std::numeric_limits<float>::min()));
        if (!(o.length_penalty * len < top && o.length_penalty * len > low))
            bad("length_penalty",
                "is " + number(o.length_penalty) + ", expected a number in [" + number(low / len) + ", " + number(top / len) +
                    "] at a maximum length of " + std::to_string(o.total_length()) +
                    " (beyond it length^length_penalty leaves float32's range and beam scores lose their order)");
    }
    if (o.top_k < 0) bad("top_k", "must be non-negative");
    if (!(o.top_p >= 0 && o.top_p <= 1)) bad("top_p", "must be in [0, 1]");
    if (!(o.repetition_penalty > 0)) bad("repetition_penalty", "must be positive");
    if (o.no_repeat_ngram_size < 0) bad("no_repeat_ngram_size", "must be non-negative");
    if (o.encoder_no_repeat_ngram_size < 0) bad("encoder_no_repeat_ngram_size", "must be non-negative");
    if (o.eos_token_id.empty()) bad("eos_token_id", "is not set and config.json has none");
    for (auto e : o.eos_token_id) check_id("eos_token_id", e);
    check_id("decoder_start_token_id", o.start_token());
    check_id("pad_token_id", o.pad_token());
    if (o.forced_bos_token_id) check_id("forced_bos_token_id", *o.forced_bos_token_id);
    for (auto e : o.forced_eos_token_id) check_id("forced_eos_token_id", e);
    for (auto t : o.suppress_tokens) check_id("suppress_tokens", t);
    for (auto t : o.begin_suppress_tokens) check_id("begin_suppress_tokens", t);
    for (const auto& w : o.bad_words_ids) {
        if (w.empty()) bad("bad_words_ids", "holds an empty word");
        for (auto t : w) check_id("bad_words_ids", t);
    }
}

}  // namespace locost::generation
