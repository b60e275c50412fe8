// What the two beam searches (beam_hf_4_27.hpp, beam_hf_5.hpp) share: K running beams per
// document and a step's candidate scores formed as transformers 4.27.1 and 5.x both form them —
// log_softmax of the logits, the processors, then + the beam's running score, all in float32.
// They part only in how they pick and finish beams from those scores.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "decoding_rows.hpp"

namespace locost::generation::detail {

// log Σ exp(s_i) of one float32 row (−inf entries, which processors write, add nothing).
inline float log_sum_exp(const float* s, index_t V) {
    float m = neg_inf;
    for (index_t i = 0; i < V; ++i) m = std::max(m, s[i]);
    double sum = 0;
    for (index_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(s[i] - m));
    return m + static_cast<float>(std::log(sum));
}

// log_softmax of one float32 row, in place.
inline void log_softmax(float* s, index_t V) {
    float m = neg_inf;
    for (index_t i = 0; i < V; ++i) m = std::max(m, s[i]);
    double sum = 0;
    for (index_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(s[i] - m));
    const float lse = static_cast<float>(std::log(sum));
    for (index_t i = 0; i < V; ++i) s[i] = s[i] - m - lse;
}

// The running score of beams 1..K−1 before the first step (both versions): −1e9 keeps their
// copies of the start token from competing with beam 0's, so the first K beams are distinct.
inline constexpr float first_step_penalty = -1.0e9f;

// B documents × K beams (row d·K + k) with their running scores (sums of log-probabilities).
template <models::seq2seq_model Model>
struct beam_rows : decoding_rows<Model> {
    index_t B, K;
    std::vector<float> running;

    beam_rows(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids, const generation_options& o)
        : decoding_rows<Model>(m, enc, encoder_ids, o, o.num_beams), B(this->docs), K(this->per),
          running(static_cast<std::size_t>(this->R), 0.0f) {
        for (index_t d = 0; d < B; ++d)
            for (index_t k = 1; k < K; ++k) running[static_cast<std::size_t>(d * K + k)] = first_step_penalty;
    }

    // One step's candidate scores in `scores`: row r, token i → running[r] + the processed
    // log-probability of i after row r.
    void score_candidates(index_t step) {
        this->run_model(step);
        const index_t V = this->V, R = this->R;
        float* scores = this->scores.data();
        for (index_t r = 0; r < R; ++r) log_softmax(scores + r * V, V);
        apply_all(this->procs, this->ids, scores, V);
        for (index_t r = 0; r < R; ++r)
            for (index_t i = 0; i < V; ++i) scores[r * V + i] += running[static_cast<std::size_t>(r)];
    }
};

}  // namespace locost::generation::detail
