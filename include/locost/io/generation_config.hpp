// generation_config.json's settings as a struct (parsed by io/config.hpp), on its own so that
// generation options and the public API's light headers (locost/api.hpp) carry no JSON parser.
// The defaults are transformers' GenerationConfig's; std::optional marks values that are absent
// by default. eos_token_id and forced_eos_token_id may be an integer or a list.
#pragma once
#include <optional>
#include <vector>

#include "../config/choice.hpp"
#include "../core/index.hpp"

namespace locost::io {

// early_stopping: JSON false (beam search stops by the length heuristic), true (as soon as
// num_beams hypotheses are done), or "never" (only when no better hypothesis is possible).
enum class early_stopping_mode { heuristic, on, never };
inline constexpr choice early_stopping_mode_names[] = {
    {"true", int(early_stopping_mode::on)}, {"false", int(early_stopping_mode::heuristic)}, {"never", int(early_stopping_mode::never)}};

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
    std::vector<index_t> forced_eos_token_id;    // an integer or a list; empty: none
    std::vector<index_t> suppress_tokens;        // masked at every step; empty: none
    std::vector<index_t> begin_suppress_tokens;  // masked at the first generated position; empty: none
    std::optional<index_t> decoder_start_token_id;
    std::vector<index_t> eos_token_id;  // an integer or a list; empty: none
    std::optional<index_t> pad_token_id;
    std::optional<index_t> bos_token_id;
};

}  // namespace locost::io
