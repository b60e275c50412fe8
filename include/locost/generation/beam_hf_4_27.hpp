// Beam search as transformers 4.27.1's BeamSearchScorer / BeamHypotheses do it
// (beam_convention::hf_4_27; the version the LOCOST code pins). beam_rows.hpp forms each step's
// candidate scores (log_softmax, processors, + running beam scores, float32); then:
//
//   candidates  the 2K best per document; eos candidates among the first K become finished
//               hypotheses scored sum_logprobs / len^length_penalty (len counts the start token,
//               not the eos; in double); the K best of the others run on.
//   done        per document, is_done per early_stopping (false: worst ≥ best / c^lp; true: K
//               hypotheses; "never": worst ≥ best / max_length^lp when lp > 0). Includes 4.27.1's
//               per-document increment of cur_len in is_done (documented there as c = cur_len +
//               number of not-done documents so far). Done documents are fed pad (score 0) until
//               every document is done or max_length is reached.
//   finalize    adds the open beams of documents not done (len = max_length, or the length
//               reached when the step callback cancelled), then returns the
//               num_return_sequences best hypotheses of each document, cut to min(longest + 1,
//               max_length), eos appended to the shorter rows, then pad_token_id.
//
// How this differs from transformers 5.x: beam_hf_5.hpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "beam_rows.hpp"
#include "result.hpp"

namespace locost::generation {

namespace detail {

// BeamHypotheses of transformers 4.27.1: the n-best finished hypotheses of one document.
struct beam_hypotheses {
    struct hyp {
        double score;
        std::vector<std::int64_t> tokens;
    };
    index_t K;
    double length_penalty;
    early_stopping_mode early;
    index_t max_length;
    std::vector<hyp> beams;
    double worst = 1e9;

    void add(const std::vector<std::int64_t>& tokens, double sum_logprobs) {
        const double score = sum_logprobs / std::pow(static_cast<double>(tokens.size()), length_penalty);
        if (static_cast<index_t>(beams.size()) < K || score > worst) {
            beams.push_back({score, tokens});
            if (static_cast<index_t>(beams.size()) > K) {
                // drop the lowest (the earliest among equals); worst = the next lowest
                std::size_t lo = 0;
                for (std::size_t i = 1; i < beams.size(); ++i)
                    if (beams[i].score < beams[lo].score) lo = i;
                beams.erase(beams.begin() + static_cast<std::ptrdiff_t>(lo));
                worst = beams[0].score;
                for (const auto& b : beams) worst = std::min(worst, b.score);
            } else {
                worst = std::min(score, worst);
            }
        }
    }

    bool is_done(double best_sum_logprobs, index_t cur_len) const {
        if (static_cast<index_t>(beams.size()) < K) return false;
        if (early == early_stopping_mode::on) return true;
        double denom = static_cast<double>(cur_len);
        if (early == early_stopping_mode::never && length_penalty > 0) denom = static_cast<double>(max_length);
        return worst >= best_sum_logprobs / std::pow(denom, length_penalty);
    }
};

}  // namespace detail

// Beam search as transformers 4.27.1's BeamSearchScorer does it (beam_convention::hf_4_27).
template <models::seq2seq_model Model>
generation_result beam_search_hf_4_27(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids,
                                      const generation_options& o, const step_callback& on_step = {}) {
    detail::beam_rows<Model> beams(m, enc, encoder_ids, o);
    const index_t V = beams.V, B = beams.B, K = beams.K, R = beams.R, max_len = beams.max_len;
    token_rows& ids = beams.ids;
    std::vector<float>& running = beams.running;
    std::vector<detail::beam_hypotheses> hyps(static_cast<std::size_t>(B), {K, o.length_penalty, o.early_stopping, max_len, {}, 1e9});
    std::vector<bool> done(static_cast<std::size_t>(B), false);
    std::vector<index_t> cand(static_cast<std::size_t>(K * V));
    generation_result res;
    index_t len = 1;
    while (len < max_len) {
        beams.score_candidates(len - 1);
        std::vector<float> next_score(static_cast<std::size_t>(R), 0.0f);
        std::vector<std::int64_t> next_token(static_cast<std::size_t>(R), o.pad_token());
        std::vector<index_t> next_src(static_cast<std::size_t>(R), 0);
        index_t not_done_seen = 0;
        for (index_t d = 0; d < B; ++d) {
            if (done[static_cast<std::size_t>(d)]) continue;  // pad, score 0, source row 0 (HF)
            ++not_done_seen;
            const float* sc = beams.scores.data() + d * K * V;
            const index_t top = std::min<index_t>(2 * K, K * V);
            std::iota(cand.begin(), cand.end(), index_t{0});
            std::partial_sort(cand.begin(), cand.begin() + top, cand.end(),
                              [&](index_t a, index_t b) { return sc[a] > sc[b] || (sc[a] == sc[b] && a < b); });
            index_t filled = 0;
            for (index_t rank = 0; rank < top && filled < K; ++rank) {
                const index_t c = cand[static_cast<std::size_t>(rank)], beam = c / V;
                const std::int64_t tok = c % V;
                if (o.is_eos(tok)) {
                    if (rank >= K) continue;
                    hyps[static_cast<std::size_t>(d)].add(ids[static_cast<std::size_t>(d * K + beam)], static_cast<double>(sc[c]));
                } else {
                    const index_t row = d * K + filled++;
                    next_score[static_cast<std::size_t>(row)] = sc[c];
                    next_token[static_cast<std::size_t>(row)] = tok;
                    next_src[static_cast<std::size_t>(row)] = d * K + beam;
                }
            }
            const double best = static_cast<double>(sc[cand[0]]);
            // transformers 4.27.1 increments cur_len inside this loop, once per not-done document.
            done[static_cast<std::size_t>(d)] = hyps[static_cast<std::size_t>(d)].is_done(best, len + not_done_seen);
        }
        token_rows nids(static_cast<std::size_t>(R));
        for (index_t r = 0; r < R; ++r) {
            nids[static_cast<std::size_t>(r)] = ids[static_cast<std::size_t>(next_src[static_cast<std::size_t>(r)])];
            nids[static_cast<std::size_t>(r)].push_back(next_token[static_cast<std::size_t>(r)]);
        }
        ids = std::move(nids);
        running = next_score;
        beams.last = next_token;
        m.reorder(beams.state, next_src);
        ++len;
        ++res.steps;
        if (on_step && !on_step({len - 2, &next_token, R, K})) {
            res.cancelled = true;
            break;
        }
        if (std::all_of(done.begin(), done.end(), [](bool x) { return x; })) break;
    }
    // finalize
    for (index_t d = 0; d < B; ++d) {
        if (done[static_cast<std::size_t>(d)]) continue;
        for (index_t k = 0; k < K; ++k)
            hyps[static_cast<std::size_t>(d)].add(ids[static_cast<std::size_t>(d * K + k)],
                                                  static_cast<double>(running[static_cast<std::size_t>(d * K + k)]));
    }
    token_rows best;
    std::size_t longest = 0;
    for (index_t d = 0; d < B; ++d) {
        auto h = hyps[static_cast<std::size_t>(d)].beams;
        // Python: sorted by score (stable), best popped from the end: among equal scores the
        // later added wins.
        std::stable_sort(h.begin(), h.end(), [](const auto& a, const auto& b) { return a.score < b.score; });
        for (index_t j = 0; j < o.num_return_sequences && !h.empty(); ++j) {
            best.push_back(h.back().tokens);
            res.scores.push_back(static_cast<float>(h.back().score));
            longest = std::max(longest, h.back().tokens.size());
            h.pop_back();
        }
    }
    const std::size_t width = std::min<std::size_t>(longest + 1, static_cast<std::size_t>(max_len));
    for (auto& row : best) {
        if (row.size() < width) row.push_back(o.eos_token_id.front());
        row.resize(width, o.pad_token());
    }
    res.sequences = std::move(best);
    return res;
}

}  // namespace locost::generation
