// The rows a search decodes and one model step over them, set up alike by every search (greedy
// and sampling in search.hpp, the beam searches in beam_hf_4_27.hpp and beam_hf_5.hpp): they
// differ only in what they make of a step's scores, so the start — rows, processors, the model's
// decoding state, buffers — and the reading of the logits are written once, here.
//
// The model is any models::seq2seq_model; this file and the strategies use nothing of it that
// the concept does not state (config() is read as the model_config it converts to).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../config/error.hpp"
#include "../models/concepts.hpp"
#include "logits_processors.hpp"
#include "options.hpp"

namespace locost::generation::detail {

// A step's R × V logits as float32 scores. A NaN or infinity there (weights that overflow, or
// states that do) would turn into arbitrary ids, so it stops generation with
// generate.non_finite_logits naming the step, the row and the token id.
template <class S>
void to_scores(const S* src, float* dst, index_t R, index_t V, index_t step) {
    const index_t n = R * V;
    int finite = 1;
    for (index_t i = 0; i < n; ++i) {
        dst[i] = static_cast<float>(src[i]);
        finite &= static_cast<int>(std::isfinite(dst[i]));
    }
    if (finite) {
        // A row whose V scores are all one value carries no choice: states that overflowed inside
        // a normalization (x·rsqrt(mean x²) with mean x² = inf gives 0) make every logit 0, and
        // decoding them would return id 0 again and again as if it were text.
        for (index_t r = 0; r < R && V > 1; ++r) {
            const float* row = dst + r * V;
            const auto [lo, hi] = std::minmax_element(row, row + V);
            if (*lo == *hi)
                throw error("generate.constant_logits",
                            "decoding step " + std::to_string(step + 1) + ": the model's logits of row " + std::to_string(r) + " are all " +
                                std::to_string(*lo) + "; the weights or the encoder states overflow, so no ids are returned");
        }
        return;
    }
    for (index_t i = 0; i < n; ++i)
        if (!std::isfinite(dst[i]))
            throw error("generate.non_finite_logits",
                        "decoding step " + std::to_string(step + 1) + ": the model's logits hold " +
                            (std::isnan(dst[i]) ? "nan" : "an infinity") + " (row " + std::to_string(i / V) + ", token id " +
                            std::to_string(i % V) + "); the weights or the encoder states overflow, so no ids are returned");
}

// Each document's encoder ids repeated for its `per` decoding rows (none when not given).
inline token_rows rows_per_document(const token_rows& encoder_ids, index_t docs, index_t per) {
    token_rows rows;
    for (index_t d = 0; d < docs; ++d)
        for (index_t j = 0; j < per; ++j)
            rows.push_back(encoder_ids.empty() ? std::vector<std::int64_t>{} : encoder_ids[static_cast<std::size_t>(d)]);
    return rows;
}

// The vocabulary size, read through the model_config that seq2seq_model says config() converts to.
template <models::seq2seq_model Model>
index_t vocab_size_of(const Model& m) {
    const models::model_config& config = m.config();
    return config.vocab_size;
}

// `per` decoding rows per document (row d·per + j), each starting with the decoder start token,
// with the processors over them, the model's decoding state, and one step's logits and scores.
template <models::seq2seq_model Model>
struct decoding_rows {
    const Model& model;
    index_t V, docs, per, R;
    index_t max_len;  // tokens per row at the most, the start token included
    processor_list procs;
    typename Model::state state;
    token_rows ids;                              // each row's tokens so far, start token first
    std::vector<typename Model::scalar> logits;  // R × V, as the model returns them
    std::vector<float> scores;                   // R × V, float32
    std::vector<std::int64_t> last;              // each row's newest token, the next step's input

    decoding_rows(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids, const generation_options& o,
                  index_t rows_per_doc)
        : model(m), V(vocab_size_of(m)), docs(static_cast<index_t>(enc.docs.size())), per(rows_per_doc), R(docs * per),
          max_len(o.total_length()), procs(make_processors(o, rows_per_document(encoder_ids, docs, per))),
          state(m.start(enc, per, max_len - 1)), ids(static_cast<std::size_t>(R), std::vector<std::int64_t>{o.start_token()}),
          logits(static_cast<std::size_t>(R * V)), scores(static_cast<std::size_t>(R * V)),
          last(static_cast<std::size_t>(R), o.start_token()) {}

    // Feeds `last` to the model and leaves its logits, as float32, in `scores`. step: 0 for the
    // first new token (errors name it). n: the rows in the model's state, the first n of `last`
    // (fewer than R once a batch has dropped finished documents).
    void run_model(index_t step) { run_model(step, R); }
    void run_model(index_t step, index_t n) {
        model.step(state, last.data(), 1, logits.data());
        to_scores(logits.data(), scores.data(), n, V, step);
    }
};

}  // namespace locost::generation::detail
