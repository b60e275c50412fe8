// Beam search as the vectorised _beam_search of transformers 5.x does it, as in 5.17's
// generation/utils.py (beam_convention::hf_5). beam_rows.hpp forms each step's candidate scores
// (log_softmax, processors, + running beam scores, float32); then, with c = HF's cur_len (the
// running sequences' length, start token included, before the step; the step's candidates hold
// c generated tokens), n_eos = number of eos ids, K = num_beams and lp = length_penalty:
//
//   candidates  the max(2, 1 + n_eos)·K best of the K·V scores of each document
//               (_get_top_k_continuations). A candidate "hits" when its token is an eos or
//               when c + 1 reaches max_length (MaxLengthCriteria).
//   running     the K best candidates once −1e9 is added to every hit one
//               (_get_running_beams_for_next_iteration).
//   finished    K slots per document, best first, empty ones scored −1e9. Every step each
//               candidate is scored score / c^lp (c = generated tokens, eos included, start
//               excluded); −1e9 is added when the document's slots are all finished and
//               early_stopping is true, again when the document is done (below), and again
//               unless the candidate hit and ranks among the first K; the K best of the old
//               slots and the candidates become the slots (_update_finished_beams). So at the
//               max_length step the K best candidates, eos or not, all finish.
//   done        once for good, when every slot is finished and no running beam can beat the
//               worst slot: worst ≥ best running score / L^lp, L = c, or max_length − 1
//               under "never" with lp > 0 (_check_early_stop_heuristic); also when slots are
//               still empty but the best running score / L^lp is −1e9 or lower.
//   stop        when no document can improve, or early_stopping is true and every slot of
//               every document is finished, or every candidate hit, i.e. at max_length
//               (_beam_search_has_unfinished_sequences). Done documents keep decoding; nothing
//               they produce is kept.
//   output      the first num_return_sequences slots of each document as stored (start token,
//               generated tokens, the eos when one ended it; nothing appended), cut to the
//               longest returned row and padded with pad_token_id, or with eos_token_id[0]
//               when pad_token_id is 0 (5.17 fills with `pad_token_id or eos_token_id[0]`).
//   arithmetic  float32 throughout as torch computes it (len^lp in double, then float32);
//               ties ordered as torch.topk on the CPU orders them (detail::torch_topk) — they
//               are common, the −1e9 swallowing small scores in float32.
//
// What differs between the two for an encoder-decoder (decoder prompt = the start token):
//   * eos-finished hypotheses: the same divisor c^lp (4.27.1 counts start + tokens before the
//     eos, 5.x the generated tokens with the eos); 4.27.1 divides in double, 5.x in float32.
//   * max_length: 4.27.1 keeps that step's eos candidates of rank < K (divisor
//     (max_length − 1)^lp) and adds the K open beams at finalize (divisor max_length^lp);
//     5.x finishes the K best candidates of that step, eos or not, all with divisor
//     (max_length − 1)^lp.
//   * candidates: 2K in 4.27.1, max(2, 1 + n_eos)·K in 5.x (the same for one eos id).
//   * early_stopping false: 4.27.1 compares the worst hypothesis with the best of all 2K
//     candidates (eos ones included) over (c + not-done documents so far)^lp; 5.x with the
//     best running beam (no eos) over c^lp. "never" (lp > 0): max_length^lp against
//     (max_length − 1)^lp. early_stopping true: K finished in both.
//   * keeping hypotheses: 4.27.1 adds one when there are fewer than K or it beats the worst
//     strictly (the earlier of equals stays); 5.x keeps the K best of slots and candidates in
//     torch.topk order.
//   * done documents: 4.27.1 feeds them pad (score 0) until the search ends; 5.x decodes on.
//   * rows: the same tokens for the same hypotheses (4.27.1 stores them without the eos and
//     appends it to rows shorter than the output width); padding differs as said above.
//
// On cancellation (the step callback returns false) there is no finalize step to fall back on,
// so the open beams compete for the slots as if max_length had been reached (no HF counterpart).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "beam_rows.hpp"
#include "result.hpp"

namespace locost::generation {

namespace detail {

// torch.topk(v, k) on the CPU (largest, sorted): the indices of the k largest of v[0, n), best
// first, with equal values in the order PyTorch gives them. PyTorch (ATen TopKImpl.h) pairs each
// value with its index and runs the standard library's partial_sort when k·64 ≤ n, otherwise
// nth_element at place k − 1 and then sort of the k − 1 places before it, comparing values only
// (NaN above all). The same algorithms with the same comparison on the same sequence give the
// same order among ties (libstdc++, as in PyTorch's Linux builds).
inline void torch_topk(const float* v, index_t n, index_t k, std::vector<index_t>& out) {
    using entry = std::pair<float, index_t>;
    std::vector<entry> q(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) q[static_cast<std::size_t>(i)] = {v[i], i};
    const auto above = [](const entry& x, const entry& y) { return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first; };
    if (k * 64 <= n) {
        std::partial_sort(q.begin(), q.begin() + k, q.end(), above);
    } else {
        std::nth_element(q.begin(), q.begin() + (k - 1), q.end(), above);
        std::sort(q.begin(), q.begin() + (k - 1), above);
    }
    out.resize(static_cast<std::size_t>(k));
    for (index_t i = 0; i < k; ++i) out[static_cast<std::size_t>(i)] = q[static_cast<std::size_t>(i)].second;
}

// transformers 5.x's −1e9 (exact in float32): the score of an empty finished slot and the
// penalty added (in float32) to keep a candidate out; beams 1..K−1 start with the same −1e9
// (first_step_penalty, beam_rows.hpp).
inline constexpr float hf5_penalty = -1.0e9f;

// len^length_penalty as Python computes it (a double), rounded to float32 as it is when it
// divides a float32 tensor.
inline float hf5_divisor(index_t len, double length_penalty) {
    return static_cast<float>(std::pow(static_cast<double>(len), length_penalty));
}

// What 5.x fills the rows of its beam output with: `pad_token_id or eos_token_id[0]`, so
// eos_token_id[0] where pad_token_id is 0 (or unset, HF then taking eos_token_id[0] as pad).
inline std::int64_t hf5_fill_token(const generation_options& o) {
    return o.pad_token_id && *o.pad_token_id != 0 ? *o.pad_token_id : o.eos_token_id.front();
}

// One document's finished hypotheses in 5.x's form (its `sequences`, `beam_scores` and
// `is_sent_finished` rows): K slots, best first.
struct hf5_slots {
    token_rows tokens;           // start token + generated tokens (eos included)
    std::vector<float> score;    // length-normalised, penalties included; hf5_penalty when empty
    std::vector<char> finished;  // slot holds a hypothesis that really finished

    hf5_slots(index_t K, std::int64_t start)
        : tokens(static_cast<std::size_t>(K), std::vector<std::int64_t>{start}), score(static_cast<std::size_t>(K), hf5_penalty),
          finished(static_cast<std::size_t>(K), 0) {}

    bool all_finished() const {
        return std::all_of(finished.begin(), finished.end(), [](char f) { return f != 0; });
    }

    // The candidates (scores normalised and penalised) compete with the slots; the K best, in
    // torch.topk order over [slots..., candidates...], become the slots. grown(c) makes the
    // token row of candidate c.
    template <class Grown>
    void merge(const std::vector<float>& cand_score, const std::vector<char>& cand_finished, Grown&& grown) {
        const std::size_t K = score.size(), n = cand_score.size();
        std::vector<float> all(score);
        all.insert(all.end(), cand_score.begin(), cand_score.end());
        std::vector<index_t> best;
        torch_topk(all.data(), static_cast<index_t>(K + n), static_cast<index_t>(K), best);
        token_rows next_tokens(K);
        std::vector<float> next_score(K);
        std::vector<char> next_finished(K);
        for (std::size_t j = 0; j < K; ++j) {
            const auto i = static_cast<std::size_t>(best[j]);
            if (i < K) {  // an old slot (each index appears once: moving is safe)
                next_tokens[j] = std::move(tokens[i]);
                next_score[j] = score[i];
                next_finished[j] = finished[i];
            } else {
                next_tokens[j] = grown(static_cast<index_t>(i - K));
                next_score[j] = cand_score[i - K];
                next_finished[j] = cand_finished[i - K];
            }
        }
        tokens = std::move(next_tokens);
        score = std::move(next_score);
        finished = std::move(next_finished);
    }
};

}  // namespace detail

// Beam search as transformers 5.x's vectorised _beam_search does it (beam_convention::hf_5);
// the top of this file lists the rules and how they differ from 4.27.1's. Written for an
// encoder-decoder whose decoder prompt is the start token (HF's decoder_prompt_len = 1).
template <models::seq2seq_model Model>
generation_result beam_search_hf_5(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids,
                                   const generation_options& o, const step_callback& on_step = {}) {
    detail::beam_rows<Model> beams(m, enc, encoder_ids, o);  // running beams, row d·K + k
    const index_t V = beams.V, B = beams.B, K = beams.K, R = beams.R, max_len = beams.max_len;
    const auto n_eos = static_cast<index_t>(o.eos_token_id.size());
    // candidates kept per document (HF: beams_to_keep; torch.topk would refuse more than K·V)
    const index_t keep = std::min(std::max<index_t>(2, 1 + n_eos) * K, K * V);
    const double lp = o.length_penalty;
    const bool early_on = o.early_stopping == early_stopping_mode::on;
    // length the "done" test divides the best running score by, given the step's c
    const auto hopeful_length = [&](index_t c) { return o.early_stopping == early_stopping_mode::never && lp > 0 ? max_len - 1 : c; };
    const auto at = [](index_t i) { return static_cast<std::size_t>(i); };
    token_rows& ids = beams.ids;
    std::vector<float>& running = beams.running;

    std::vector<detail::hf5_slots> fin(at(B), detail::hf5_slots(K, o.start_token()));
    std::vector<char> hopeful(at(B), 1);  // HF: is_early_stop_heuristic_unsatisfied
    std::vector<index_t> top, pick;
    std::vector<float> cand(at(keep)), cand_running(at(keep)), cand_final(at(keep));
    std::vector<char> hit(at(keep)), cand_finished(at(keep));
    generation_result res;

    for (index_t c = 1; c < max_len; ++c) {  // c: HF's cur_len before this step
        beams.score_candidates(c - 1);

        const bool at_max = c + 1 >= max_len;
        const float divisor = detail::hf5_divisor(c, lp);
        token_rows next_ids(at(R));
        std::vector<float> next_running(at(R));
        std::vector<index_t> next_src(at(R));
        std::vector<std::int64_t> next_token(at(R));
        bool any_hopeful = false, all_full = true, every_hit = true;
        for (index_t d = 0; d < B; ++d) {
            const float* sc = beams.scores.data() + d * K * V;
            detail::torch_topk(sc, K * V, keep, top);
            const auto source = [&](index_t i) { return d * K + top[at(i)] / V; };  // running row
            const auto token = [&](index_t i) { return static_cast<std::int64_t>(top[at(i)] % V); };
            const auto grown = [&](index_t i) {
                auto row = ids[at(source(i))];
                row.push_back(token(i));
                return row;
            };
            for (index_t i = 0; i < keep; ++i) {
                cand[at(i)] = sc[top[at(i)]];
                hit[at(i)] = at_max || o.is_eos(token(i));
                every_hit = every_hit && hit[at(i)];
                cand_running[at(i)] = hit[at(i)] ? cand[at(i)] + detail::hf5_penalty : cand[at(i)];
            }
            // the K best candidates that did not hit run on
            detail::torch_topk(cand_running.data(), keep, K, pick);
            for (index_t j = 0; j < K; ++j) {
                const index_t i = pick[at(j)], row = d * K + j;
                next_ids[at(row)] = grown(i);
                next_running[at(row)] = cand_running[at(i)];
                next_src[at(row)] = source(i);
                next_token[at(row)] = token(i);
            }
            // the first K candidates that hit compete for the finished slots
            auto& f = fin[at(d)];
            const bool closed = early_on && f.all_finished();
            for (index_t i = 0; i < keep; ++i) {
                float x = cand[at(i)] / divisor;
                if (closed) x += detail::hf5_penalty;
                if (!hopeful[at(d)]) x += detail::hf5_penalty;
                cand_finished[at(i)] = hit[at(i)] && i < K;
                if (!cand_finished[at(i)]) x += detail::hf5_penalty;
                cand_final[at(i)] = x;
            }
            f.merge(cand_final, cand_finished, grown);
            // can a running beam still beat the worst slot?
            const float best = next_running[at(d * K)] / detail::hf5_divisor(hopeful_length(c), lp);
            const float worst = *std::min_element(f.score.begin(), f.score.end());
            bool improvable = false;
            for (index_t k = 0; k < K; ++k) improvable = improvable || best > (f.finished[at(k)] ? worst : detail::hf5_penalty);
            hopeful[at(d)] = hopeful[at(d)] && improvable;
            any_hopeful = any_hopeful || hopeful[at(d)];
            all_full = all_full && f.all_finished();
        }
        ids = std::move(next_ids);
        running = std::move(next_running);
        beams.last = next_token;
        ++res.steps;
        const bool go_on = any_hopeful && !(early_on && all_full) && !every_hit;
        if (on_step && !on_step({c - 1, &next_token, R, K})) {
            res.cancelled = true;
            // (no HF counterpart) as if max_length were now: the running beams, c generated
            // tokens long, compete for the slots of documents still open
            if (go_on) {
                const float now = detail::hf5_divisor(c, lp);
                std::vector<float> open_score(at(K));
                std::vector<char> open_finished(at(K), 1);
                for (index_t d = 0; d < B; ++d) {
                    auto& f = fin[at(d)];
                    const bool closed = early_on && f.all_finished();
                    for (index_t k = 0; k < K; ++k) {
                        float x = running[at(d * K + k)] / now;
                        if (closed) x += detail::hf5_penalty;
                        if (!hopeful[at(d)]) x += detail::hf5_penalty;
                        open_score[at(k)] = x;
                    }
                    f.merge(open_score, open_finished, [&](index_t k) { return ids[at(d * K + k)]; });
                }
            }
            break;
        }
        if (!go_on) break;
        m.reorder(beams.state, next_src);
    }

    // the best num_return_sequences slots per document, cut to the longest and filled
    const std::int64_t fill = detail::hf5_fill_token(o);
    const index_t per = std::min(o.num_return_sequences, K);
    token_rows out;
    std::size_t width = 0;
    for (index_t d = 0; d < B; ++d)
        for (index_t j = 0; j < per; ++j) {
            out.push_back(fin[at(d)].tokens[at(j)]);
            res.scores.push_back(fin[at(d)].score[at(j)]);
            width = std::max(width, out.back().size());
        }
    for (auto& row : out) row.resize(width, fill);
    res.sequences = std::move(out);
    return res;
}

}  // namespace locost::generation
