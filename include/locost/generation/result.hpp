// What every search returns and reports while it runs, in a file of its own so that each
// strategy (search.hpp, sampling.hpp, beam_hf_4_27.hpp, beam_hf_5.hpp) can name them without
// including the others.
//
//   generation_result  HF-shaped: per document num_return_sequences rows (document-major), each
//                      starting with the start token and ending with eos when it stopped there,
//                      shorter rows padded; beam search adds its sequence scores.
//   step_callback      sees every step's new tokens and may cancel (return false): what was
//                      generated so far is then returned, with `cancelled` set.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "../core/index.hpp"

namespace locost::generation {

// Token ids, one row per sequence.
using token_rows = std::vector<std::vector<std::int64_t>>;

struct step_event {
    index_t step = 0;                                   // 0 for the first new token
    const std::vector<std::int64_t>* tokens = nullptr;  // this step's token per row
    index_t rows = 0, rows_per_doc = 1;
    // Greedy and sampling with generation_options::token_logprobs: each row's token's
    // log-probability under the distribution it was chosen from (the scores after the processors
    // and warpers, log-softmaxed: transformers' compute_transition_scores(normalize_logits=True)).
    const std::vector<float>* logprobs = nullptr;
};
using step_callback = std::function<bool(const step_event&)>;

struct generation_result {
    token_rows sequences;       // documents × num_return_sequences rows (document-major)
    std::vector<float> scores;  // beam search: sequence scores; empty otherwise
    index_t steps = 0;
    bool cancelled = false;
};

}  // namespace locost::generation
