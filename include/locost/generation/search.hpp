// Decoding over an encoder-decoder model, reproducing Hugging Face transformers: generate()
// validates the options and picks the strategy; greedy_search and sample run here as 4.27.1 does
// them, beam search as 4.27.1 or as 5.x does it (generation_options::beam_convention). Any
// models::seq2seq_model will do (models::seq2seq and any_model, whatever the family); the search
// uses nothing of it that the concept does not state.
//
//   greedy   processors on the raw logits, argmax (first maximum); finished rows continue
//            with pad; stop when every row has emitted eos or at max_length. A model that can
//            (retain()) drops finished documents from its batch: their rows get pad without a
//            model step, so a batch decodes at the pace of its unfinished documents.
//   sample   processors then warpers, one draw from softmax per row with a seeded generator
//            per document (sampling.hpp), num_return_sequences rows per document.
//   beam     log_softmax, processors, + running beam scores (float32; beam_rows.hpp), then
//            hf_4_27 (beam_hf_4_27.hpp) or hf_5 (beam_hf_5.hpp, which also lists how the two
//            differ).
//
// Every strategy starts from decoding_rows.hpp (rows, processors, the model's state, a step's
// logits as float32 scores) and returns result.hpp's generation_result; the step callback sees
// each step's new tokens and may cancel.
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "../models/concepts.hpp"
#include "beam_hf_4_27.hpp"
#include "beam_hf_5.hpp"
#include "decoding_rows.hpp"
#include "logits_processors.hpp"
#include "options.hpp"
#include "generate_decl.hpp"
#include "result.hpp"
#include "sampling.hpp"

namespace locost::generation {

namespace detail {

inline token_rows pad_rows(token_rows rows, index_t pad) {
    std::size_t width = 0;
    for (const auto& r : rows) width = std::max(width, r.size());
    for (auto& r : rows) r.resize(width, pad);
    return rows;
}

}  // namespace detail

// Greedy decoding or sampling of every document (rows_per_doc = 1, or num_return_sequences
// when sampling).
template <class Model>  // a models::seq2seq_model (declared in generation/generate_decl.hpp)
generation_result greedy_or_sample(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids,
                                   const generation_options& o, const step_callback& on_step) {
    static_assert(models::seq2seq_model<Model>,
                  "generation::greedy_or_sample: Model must be a models::seq2seq_model (models/concepts.hpp)");
    detail::decoding_rows<Model> rows(m, enc, encoder_ids, o, o.do_sample ? o.num_return_sequences : 1);
    const index_t V = rows.V, R = rows.R;
    const processor_list warps = o.do_sample ? make_warpers(o) : processor_list{};
    std::vector<bool> finished(static_cast<std::size_t>(R), false);
    std::vector<std::int64_t> next(static_cast<std::size_t>(R));
    std::vector<float> logprobs(o.token_logprobs ? static_cast<std::size_t>(R) : 0, 0.0f);
    // One generator per document, each seeded with the seed, drawing for that document's rows in
    // order: a document's draws are those of its own run, whatever else is in the batch (one
    // generator for all rows made a sampled summary depend on its batch-mates and their order).
    std::vector<detail::sampler> samplers(static_cast<std::size_t>(o.do_sample ? rows.docs : 0), detail::sampler(o.seed));
    // Greedy rows are documents (one row each). Once some have finished, they leave the model's
    // state: `live` lists the rows still in it, in order. Sampling keeps every row in, as HF
    // does, so that the draws of a seed stay the same.
    constexpr bool can_drop = requires(const Model& model, typename Model::state& s, const std::vector<index_t>& keep) {
        model.retain(s, keep);
    };
    const bool drops = can_drop && !o.do_sample;
    std::vector<index_t> live(static_cast<std::size_t>(R));
    for (index_t r = 0; r < R; ++r) live[static_cast<std::size_t>(r)] = r;
    processor_list live_procs;  // the processors over the live rows (encoder ids are per row)
    token_rows live_ids;
    generation_result res;
    for (index_t len = 1; len < rows.max_len; ++len) {
        const auto n = static_cast<index_t>(live.size());
        rows.run_model(len - 1, n);
        if (n == R) {
            apply_all(rows.procs, rows.ids, rows.scores.data(), V);
            apply_all(warps, rows.ids, rows.scores.data(), V);
        } else {
            live_ids.clear();
            for (index_t r : live) live_ids.push_back(rows.ids[static_cast<std::size_t>(r)]);
            apply_all(live_procs, live_ids, rows.scores.data(), V);
        }
        std::fill(next.begin(), next.end(), o.pad_token());
        for (index_t i = 0; i < n; ++i) {
            const index_t r = live[static_cast<std::size_t>(i)];
            const float* row = rows.scores.data() + i * V;
            std::int64_t tok =
                o.do_sample ? samplers[static_cast<std::size_t>(r / rows.per)].draw(row, V) : std::max_element(row, row + V) - row;
            if (finished[static_cast<std::size_t>(r)]) tok = o.pad_token();
            else if (o.token_logprobs) logprobs[static_cast<std::size_t>(r)] = row[tok] - detail::log_sum_exp(row, V);
            next[static_cast<std::size_t>(r)] = tok;
        }
        for (index_t r = 0; r < R; ++r) {
            rows.ids[static_cast<std::size_t>(r)].push_back(next[static_cast<std::size_t>(r)]);
            if (o.is_eos(next[static_cast<std::size_t>(r)])) finished[static_cast<std::size_t>(r)] = true;
        }
        ++res.steps;
        if (on_step && !on_step({len - 1, &next, R, rows.per, o.token_logprobs ? &logprobs : nullptr})) {
            res.cancelled = true;
            break;
        }
        if (std::all_of(finished.begin(), finished.end(), [](bool f) { return f; })) break;
        std::vector<index_t> keep;  // positions in the state of the live rows that go on
        if (drops)
            for (index_t i = 0; i < n; ++i)
                if (!finished[static_cast<std::size_t>(live[static_cast<std::size_t>(i)])]) keep.push_back(i);
        if (drops && static_cast<index_t>(keep.size()) < n) {
            if constexpr (can_drop) m.retain(rows.state, keep);
            std::vector<index_t> still;
            token_rows enc_rows;
            for (index_t i : keep) {
                const index_t r = live[static_cast<std::size_t>(i)];
                still.push_back(r);
                enc_rows.push_back(encoder_ids.empty() ? std::vector<std::int64_t>{} : encoder_ids[static_cast<std::size_t>(r)]);
            }
            live = std::move(still);
            live_procs = make_processors(o, enc_rows);
        }
        for (std::size_t i = 0; i < live.size(); ++i) rows.last[i] = next[static_cast<std::size_t>(live[i])];
    }
    res.sequences = detail::pad_rows(std::move(rows.ids), o.pad_token());
    return res;
}

// Beam search in the convention the options name.
template <class Model>  // a models::seq2seq_model (declared in generation/generate_decl.hpp)
generation_result beam_search(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids,
                              const generation_options& o, const step_callback& on_step) {
    static_assert(models::seq2seq_model<Model>, "generation::beam_search: Model must be a models::seq2seq_model (models/concepts.hpp)");
    if (o.beam_convention == beam_convention::hf_5) return beam_search_hf_5(m, enc, encoder_ids, o, on_step);
    return beam_search_hf_4_27(m, enc, encoder_ids, o, on_step);
}

// Dispatches on the options (validated first, against the vocabulary of the model_config that
// config() converts to). encoder_ids: the encoder rows as given (for
// encoder_no_repeat_ngram_size).
template <class Model>  // a models::seq2seq_model (declared in generation/generate_decl.hpp)
generation_result generate(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids, const generation_options& o,
                           const step_callback& on_step) {
    static_assert(models::seq2seq_model<Model>, "generation::generate: Model must be a models::seq2seq_model (models/concepts.hpp)");
    const models::model_config& config = m.config();
    validate(o, config);
    if (o.num_beams > 1) return beam_search(m, enc, encoder_ids, o, on_step);
    return greedy_or_sample(m, enc, encoder_ids, o, on_step);
}

}  // namespace locost::generation
