// generate(), greedy_or_sample() and beam_search() declared, for the public API's light headers
// (locost/api.hpp); generation/search.hpp defines them. Model is a models::seq2seq_model
// (models/concepts.hpp): the definitions assert it, so that a unit that only declares them needs
// none of the model code to name them.
#pragma once
#include "options.hpp"
#include "result.hpp"

namespace locost::generation {

// Dispatches on the options (validated first, against the vocabulary of the model's config()):
// beam search when num_beams > 1, else greedy decoding or sampling. encoder_ids: the encoder
// rows as given (for encoder_no_repeat_ngram_size). on_step sees every step and may cancel.
template <class Model>
generation_result generate(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids, const generation_options& o,
                           const step_callback& on_step = {});

// Greedy decoding or sampling of every document (rows_per_doc = 1, or num_return_sequences
// when sampling).
template <class Model>
generation_result greedy_or_sample(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids,
                                   const generation_options& o, const step_callback& on_step = {});

// Beam search in the convention the options name.
template <class Model>
generation_result beam_search(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids,
                              const generation_options& o, const step_callback& on_step = {});

}  // namespace locost::generation
