// Continuous batching: greedy decoding or sampling of documents that join and leave one batch
// between its steps, each with generation options of its own (lengths, processors, temperature,
// seed, ...), each getting the ids of its own run (generate() over it alone with its options).
//
//   add(d, o) d waits to join; at the next step its rows enter the model's state behind the rows
//             already there (model.join: each row at its own positions, models/decoder_stack.hpp)
//   step()    one model step over every row of the batch; each document's scores go through
//             its own processors and warpers, then argmax or a draw from its own generator, as
//             greedy_or_sample does for it alone (search.hpp); a document whose rows have all
//             emitted eos, or reached max_length, leaves the state at once (model.retain)
//   remove(k) a document leaves before it finishes (its client went away)
//
// What makes a document's result that of its own run: its rows attend to their own positions
// only, its processors read its own rows, its generator draws for its own rows in order, and its
// rows stay in the batch exactly as long as they would alone (sampling keeps finished rows until
// every row of the document has finished, greedy has one row per document). Beam search reorders
// rows within a document at every step and ends by its own rule; it decodes as a whole batch
// (generate()), not here.
#pragma once
#include <algorithm>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../config/error.hpp"
#include "../models/concepts.hpp"
#include "beam_rows.hpp"
#include "decoding_rows.hpp"
#include "logits_processors.hpp"
#include "options.hpp"
#include "sampling.hpp"

namespace locost::generation {

template <models::seq2seq_model Model>
class running_batch {
public:
    using encoded = typename Model::encoded;
    using document = typename Model::document;

    // What one step did for one document.
    struct update {
        std::uint64_t key = 0;
        std::vector<std::int64_t> tokens;     // this step's token per row of the document
        std::vector<float> logprobs;          // per row, with generation_options::token_logprobs
        bool done = false;                    // it has left the batch; `sequences` are its result
        token_rows sequences;                 // num_return_sequences rows (sampling) or one, start token first
        std::string error_id, error_message;  // set when its scores could not be decoded (it left)
    };

    explicit running_batch(const Model& m) : m_(m), V_(detail::vocab_size_of(m)) {}

    // `e` (one document, encoded alone) joins the batch at the next step, decoded with options o;
    // encoder_ids: its encoder row (for encoder_no_repeat_ngram_size). Returns the key its updates
    // carry. Errors: generate.invalid_option (validate()), generate.beams_not_joinable (num_beams > 1).
    std::uint64_t add(encoded&& e, const std::vector<std::int64_t>& encoder_ids, const generation_options& o) {
        LOCOST_ASSERT(e.docs.size() == 1);
        const models::model_config& config = m_.config();
        validate(o, config);
        if (o.num_beams > 1)
            throw error("generate.beams_not_joinable",
                        "beam search (num_beams " + std::to_string(o.num_beams) +
                            ") reorders the rows of a batch at every step and cannot take documents that join it; decode it with "
                            "generate()");
        auto d = std::make_unique<entry>(o);
        d->key = next_key_++;
        d->enc = std::move(e);
        d->procs = make_processors(o, detail::rows_per_document({encoder_ids}, 1, d->per));
        d->ids.assign(static_cast<std::size_t>(d->per), std::vector<std::int64_t>{o.start_token()});
        d->finished.assign(static_cast<std::size_t>(d->per), false);
        pending_.push_back(std::move(d));
        return pending_.back()->key;
    }

    // The document leaves now, whether it waits to join or decodes (its rows are dropped from the
    // state); an unknown key is ignored.
    void remove(std::uint64_t key) {
        std::erase_if(pending_, [&](const auto& d) { return d->key == key; });
        const auto it = std::find_if(live_.begin(), live_.end(), [&](const auto& d) { return d->key == key; });
        if (it == live_.end()) return;
        keep_all_but({static_cast<std::size_t>(it - live_.begin())});
    }

    bool empty() const noexcept { return live_.empty() && pending_.empty(); }
    std::size_t documents() const noexcept { return live_.size() + pending_.size(); }
    // Rows in the model's state (those of the documents that joined).
    index_t rows() const noexcept { return live_.empty() ? 0 : state_.rows; }
    // Rows the last step ran (its documents' rows, those that left with it included).
    index_t rows_stepped() const noexcept { return stepped_; }

    // One step of every document in the batch (those added since the last step join first).
    // Errors: the model's (decode.capacity, ids.out_of_vocab, memory): the batch is then unusable.
    std::vector<update> step() {
        join_pending();
        std::vector<update> out;
        if (live_.empty()) return out;
        const index_t R = state_.rows;
        last_.resize(static_cast<std::size_t>(R));
        for (std::size_t k = 0; k < live_.size(); ++k)
            for (index_t j = 0; j < live_[k]->per; ++j)
                last_[static_cast<std::size_t>(state_.row_begin[k] + j)] = live_[k]->ids[static_cast<std::size_t>(j)].back();
        logits_.resize(static_cast<std::size_t>(R * V_));
        scores_.resize(static_cast<std::size_t>(R * V_));
        m_.step(state_, last_.data(), 1, logits_.data());
        stepped_ = R;
        std::vector<std::size_t> leaving;
        for (std::size_t k = 0; k < live_.size(); ++k) {
            entry& d = *live_[k];
            update u;
            u.key = d.key;
            try {
                choose(d, state_.row_begin[k], u);
            } catch (const error& e) {
                u.error_id = e.id();
                u.error_message = e.message();
            }
            if (!u.error_id.empty() || std::all_of(d.finished.begin(), d.finished.end(), [](bool f) { return f; }) ||
                static_cast<index_t>(d.ids.front().size()) >= d.max_len) {
                u.done = true;
                if (u.error_id.empty()) u.sequences = std::move(d.ids);
                leaving.push_back(k);
            }
            out.push_back(std::move(u));
        }
        if (!leaving.empty()) keep_all_but(leaving);
        return out;
    }

private:
    struct entry {
        explicit entry(const generation_options& opts)
            : o(opts), per(o.do_sample ? o.num_return_sequences : 1), max_len(o.total_length()),
              warps(o.do_sample ? make_warpers(o) : processor_list{}), draws(o.seed) {}
        generation_options o;
        index_t per, max_len;  // rows; tokens per row at the most, the start token included
        processor_list warps, procs;
        detail::sampler draws;  // the document's own generator, as in its own run
        std::uint64_t key = 0;
        encoded enc;  // the document's cross-attention cache, owned here while it decodes
        token_rows ids;
        std::vector<bool> finished;
        index_t steps = 0;
    };

    // The waiting documents enter the state, those with equal rows and capacity in one call.
    void join_pending() {
        for (std::size_t a = 0; a < pending_.size();) {
            std::size_t b = a + 1;
            while (b < pending_.size() && pending_[b]->per == pending_[a]->per && pending_[b]->max_len == pending_[a]->max_len) ++b;
            std::vector<const document*> docs;
            for (std::size_t k = a; k < b; ++k) docs.push_back(&pending_[k]->enc.docs.front());
            const std::vector<index_t> rows(docs.size(), pending_[a]->per);
            if (live_.empty()) state_ = m_.start(docs, rows, pending_[a]->max_len - 1);
            else m_.join(state_, docs, rows, pending_[a]->max_len - 1);
            for (std::size_t k = a; k < b; ++k) live_.push_back(std::move(pending_[k]));
            a = b;
        }
        pending_.clear();
    }

    // Document d's rows are rows [r0, r0 + per) of this step's logits: its scores, its tokens.
    void choose(entry& d, index_t r0, update& u) {
        const generation_options& o = d.o;
        float* scores = scores_.data() + r0 * V_;
        detail::to_scores(logits_.data() + r0 * V_, scores, d.per, V_, d.steps);
        apply_all(d.procs, d.ids, scores, V_);
        apply_all(d.warps, d.ids, scores, V_);
        if (o.token_logprobs) u.logprobs.assign(static_cast<std::size_t>(d.per), 0.0f);
        for (index_t j = 0; j < d.per; ++j) {
            const float* row = scores + j * V_;
            std::int64_t tok = o.do_sample ? d.draws.draw(row, V_) : std::max_element(row, row + V_) - row;
            if (d.finished[static_cast<std::size_t>(j)]) tok = o.pad_token();
            else if (o.token_logprobs) u.logprobs[static_cast<std::size_t>(j)] = row[tok] - detail::log_sum_exp(row, V_);
            u.tokens.push_back(tok);
        }
        for (index_t j = 0; j < d.per; ++j) {
            d.ids[static_cast<std::size_t>(j)].push_back(u.tokens[static_cast<std::size_t>(j)]);
            if (o.is_eos(u.tokens[static_cast<std::size_t>(j)])) d.finished[static_cast<std::size_t>(j)] = true;
        }
        ++d.steps;
    }

    // The documents at positions `drop` of live_ (ascending) leave the state and the batch.
    void keep_all_but(const std::vector<std::size_t>& drop) {
        std::vector<index_t> keep;
        std::vector<std::unique_ptr<entry>> still;
        for (std::size_t k = 0, i = 0; k < live_.size(); ++k) {
            if (i < drop.size() && drop[i] == k) {
                ++i;
                continue;
            }
            keep.push_back(static_cast<index_t>(k));
            still.push_back(std::move(live_[k]));
        }
        if (still.empty()) state_ = {};
        else m_.retain(state_, keep);
        live_ = std::move(still);  // the leaving documents' caches are freed here
    }

    const Model& m_;
    index_t V_;
    typename Model::state state_;
    std::vector<std::unique_ptr<entry>> live_, pending_;  // live_: in the state's document order
    std::vector<std::int64_t> last_;
    std::vector<typename Model::scalar> logits_;
    std::vector<float> scores_;
    std::uint64_t next_key_ = 1;
    index_t stepped_ = 0;
};

}  // namespace locost::generation
