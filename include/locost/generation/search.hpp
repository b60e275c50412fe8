// Decoding strategies over an encoder-decoder model, reproducing Hugging Face transformers:
// greedy_search and sample as 4.27.1 does them, beam search as 4.27.1 or as 5.x does it
// (generation_options::beam_convention). Any models::seq2seq_model will do (models::seq2seq and
// any_model, whatever the family); the search uses nothing of it that the concept does not state.
//
//   greedy   processors on the raw logits, argmax (first maximum); finished rows continue
//            with pad; stop when every row has emitted eos or at max_length.
//   sample   processors then warpers, one draw from softmax per row with a seeded generator
//            (splitmix64 → uniform → inverse CDF in double), num_return_sequences rows per
//            document.
//   beam     log_softmax, processors, + running beam scores (float32), then one of:
//
// hf_4_27 — BeamSearchScorer / BeamHypotheses of transformers 4.27.1 (beam_search_hf_4_27):
//            the 2K best candidates per document; eos candidates among the first K become
//            finished hypotheses scored sum_logprobs / len^length_penalty (len counts the
//            start token, not the eos; in double); is_done per early_stopping (false: worst ≥
//            best / c^lp; true: K hypotheses; "never": worst ≥ best / max_length^lp when
//            lp > 0); finalize adds open beams. Includes 4.27.1's per-document increment of
//            cur_len in is_done (documented there as c = cur_len + number of not-done
//            documents so far).
//
// hf_5 — the vectorised _beam_search of transformers 5.x, as in 5.17's generation/utils.py
//            (beam_search_hf_5). c below is HF's cur_len: the running sequences' length,
//            start token included, before the step; the step's candidates hold c generated
//            tokens. n_eos = number of eos ids, K = num_beams, lp = length_penalty.
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
// Results are HF-shaped: per document num_return_sequences rows, each starting with the start
// token and ending with eos when it stopped there; shorter rows padded (pad_token_id; see hf_5).
// A step callback sees every step's new tokens and may cancel (return false): what was
// generated so far is returned, with `cancelled` set (hf_5, which has no finalize step, then
// lets the open beams compete for the slots as if max_length had been reached).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "../models/concepts.hpp"
#include "logits_processors.hpp"
#include "options.hpp"

namespace locost::generation {

struct step_event {
    index_t step = 0;                          // 0 for the first new token
    const std::vector<std::int64_t>* tokens = nullptr;  // this step's token per row
    index_t rows = 0, rows_per_doc = 1;
};
using step_callback = std::function<bool(const step_event&)>;

struct generation_result {
    token_rows sequences;        // documents × num_return_sequences rows (document-major)
    std::vector<float> scores;   // beam search: sequence scores; empty otherwise
    index_t steps = 0;
    bool cancelled = false;
};

namespace detail {

// splitmix64: a tiny, well-mixed generator whose stream is the same on every platform.
class rng {
public:
    explicit rng(std::uint64_t seed) : s_(seed) {}
    double uniform() {
        std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
    }

private:
    std::uint64_t s_;
};

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
    if (finite) return;
    for (index_t i = 0; i < n; ++i)
        if (!std::isfinite(dst[i]))
            throw error("generate.non_finite_logits",
                        "decoding step " + std::to_string(step + 1) + ": the model's logits hold " + (std::isnan(dst[i]) ? "nan" : "an infinity") +
                            " (row " + std::to_string(i / V) + ", token id " + std::to_string(i % V) +
                            "); the weights or the encoder states overflow, so no ids are returned");
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

inline token_rows pad_rows(token_rows rows, index_t pad) {
    std::size_t width = 0;
    for (const auto& r : rows) width = std::max(width, r.size());
    for (auto& r : rows) r.resize(width, pad);
    return rows;
}

} // namespace detail

// Greedy decoding or sampling of every document (rows_per_doc = 1, or num_return_sequences
// when sampling).
template <models::seq2seq_model Model>
generation_result greedy_or_sample(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids,
                                   const generation_options& o, const step_callback& on_step = {}) {
    using S = typename Model::scalar;
    const index_t V = detail::vocab_size_of(m), docs = static_cast<index_t>(enc.docs.size());
    const index_t per = o.do_sample ? o.num_return_sequences : 1, R = docs * per, max_len = o.total_length();
    const token_rows enc_rows = detail::rows_per_document(encoder_ids, docs, per);
    const processor_list procs = make_processors(o, enc_rows);
    const processor_list warps = o.do_sample ? make_warpers(o) : processor_list{};
    auto s = m.start(enc, per, max_len - 1);
    token_rows ids(static_cast<std::size_t>(R), std::vector<std::int64_t>{o.start_token()});
    std::vector<bool> finished(static_cast<std::size_t>(R), false);
    std::vector<S> logits(static_cast<std::size_t>(R * V));
    std::vector<float> scores(static_cast<std::size_t>(R * V));
    std::vector<std::int64_t> last(static_cast<std::size_t>(R), o.start_token()), next(static_cast<std::size_t>(R));
    detail::rng gen(o.seed);
    generation_result res;
    for (index_t len = 1; len < max_len; ++len) {
        m.step(s, last.data(), 1, logits.data());
        detail::to_scores(logits.data(), scores.data(), R, V, len - 1);
        apply_all(procs, ids, scores.data(), V);
        apply_all(warps, ids, scores.data(), V);
        for (index_t r = 0; r < R; ++r) {
            const float* row = scores.data() + r * V;
            std::int64_t tok = 0;
            if (o.do_sample) {
                float mx = neg_inf;
                for (index_t i = 0; i < V; ++i) mx = std::max(mx, row[i]);
                std::vector<double> p(static_cast<std::size_t>(V));
                double sum = 0;
                for (index_t i = 0; i < V; ++i) sum += (p[static_cast<std::size_t>(i)] = std::exp(static_cast<double>(row[i] - mx)));
                double u = gen.uniform() * sum;
                tok = V - 1;
                for (index_t i = 0; i < V; ++i) {
                    if (p[static_cast<std::size_t>(i)] > 0 && (u -= p[static_cast<std::size_t>(i)]) < 0) {
                        tok = i;
                        break;
                    }
                }
                while (tok > 0 && p[static_cast<std::size_t>(tok)] == 0) --tok;
            } else {
                tok = std::max_element(row, row + V) - row;
            }
            if (finished[static_cast<std::size_t>(r)]) tok = o.pad_token();
            next[static_cast<std::size_t>(r)] = tok;
        }
        for (index_t r = 0; r < R; ++r) {
            ids[static_cast<std::size_t>(r)].push_back(next[static_cast<std::size_t>(r)]);
            if (o.is_eos(next[static_cast<std::size_t>(r)])) finished[static_cast<std::size_t>(r)] = true;
        }
        last = next;
        ++res.steps;
        if (on_step && !on_step({len - 1, &next, R, per})) {
            res.cancelled = true;
            break;
        }
        if (std::all_of(finished.begin(), finished.end(), [](bool f) { return f; })) break;
    }
    res.sequences = detail::pad_rows(std::move(ids), o.pad_token());
    return res;
}

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

} // namespace detail

// Beam search as transformers 4.27.1's BeamSearchScorer does it (beam_convention::hf_4_27).
template <models::seq2seq_model Model>
generation_result beam_search_hf_4_27(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids,
                                      const generation_options& o, const step_callback& on_step = {}) {
    using S = typename Model::scalar;
    const index_t V = detail::vocab_size_of(m), B = static_cast<index_t>(enc.docs.size()), K = o.num_beams, R = B * K;
    const index_t max_len = o.total_length();
    const token_rows enc_rows = detail::rows_per_document(encoder_ids, B, K);
    const processor_list procs = make_processors(o, enc_rows);
    auto s = m.start(enc, K, max_len - 1);
    token_rows ids(static_cast<std::size_t>(R), std::vector<std::int64_t>{o.start_token()});
    std::vector<float> running(static_cast<std::size_t>(R), 0.0f);
    for (index_t d = 0; d < B; ++d)
        for (index_t k = 1; k < K; ++k) running[static_cast<std::size_t>(d * K + k)] = -1e9f;
    std::vector<detail::beam_hypotheses> hyps(static_cast<std::size_t>(B), {K, o.length_penalty, o.early_stopping, max_len, {}, 1e9});
    std::vector<bool> done(static_cast<std::size_t>(B), false);
    std::vector<S> logits(static_cast<std::size_t>(R * V));
    std::vector<float> scores(static_cast<std::size_t>(R * V));
    std::vector<std::int64_t> last(static_cast<std::size_t>(R), o.start_token());
    std::vector<index_t> cand(static_cast<std::size_t>(K * V));
    generation_result res;
    index_t len = 1;
    while (len < max_len) {
        m.step(s, last.data(), 1, logits.data());
        detail::to_scores(logits.data(), scores.data(), R, V, len - 1);
        for (index_t r = 0; r < R; ++r) detail::log_softmax(scores.data() + r * V, V);
        apply_all(procs, ids, scores.data(), V);
        for (index_t r = 0; r < R; ++r)
            for (index_t i = 0; i < V; ++i) scores[static_cast<std::size_t>(r * V + i)] += running[static_cast<std::size_t>(r)];
        std::vector<float> next_score(static_cast<std::size_t>(R), 0.0f);
        std::vector<std::int64_t> next_token(static_cast<std::size_t>(R), o.pad_token());
        std::vector<index_t> next_src(static_cast<std::size_t>(R), 0);
        index_t not_done_seen = 0;
        for (index_t d = 0; d < B; ++d) {
            if (done[static_cast<std::size_t>(d)]) continue;  // pad, score 0, source row 0 (HF)
            ++not_done_seen;
            const float* sc = scores.data() + d * K * V;
            const index_t top = std::min<index_t>(2 * K, K * V);
            std::iota(cand.begin(), cand.end(), index_t{0});
            std::partial_sort(cand.begin(), cand.begin() + top, cand.end(), [&](index_t a, index_t b) {
                return sc[a] > sc[b] || (sc[a] == sc[b] && a < b);
            });
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
        last = next_token;
        m.reorder(s, next_src);
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
            hyps[static_cast<std::size_t>(d)].add(ids[static_cast<std::size_t>(d * K + k)], static_cast<double>(running[static_cast<std::size_t>(d * K + k)]));
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
    const auto above = [](const entry& x, const entry& y) {
        return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
    };
    if (k * 64 <= n) {
        std::partial_sort(q.begin(), q.begin() + k, q.end(), above);
    } else {
        std::nth_element(q.begin(), q.begin() + (k - 1), q.end(), above);
        std::sort(q.begin(), q.begin() + (k - 1), above);
    }
    out.resize(static_cast<std::size_t>(k));
    for (index_t i = 0; i < k; ++i) out[static_cast<std::size_t>(i)] = q[static_cast<std::size_t>(i)].second;
}

// transformers 5.x's −1e9 (exact in float32): the score of an empty finished slot and of beams
// 1..K−1 before the first step, and the penalty added (in float32) to keep a candidate out.
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
        : tokens(static_cast<std::size_t>(K), std::vector<std::int64_t>{start}),
          score(static_cast<std::size_t>(K), hf5_penalty),
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

} // namespace detail

// Beam search as transformers 5.x's vectorised _beam_search does it (beam_convention::hf_5);
// the top of this file lists the rules and how they differ from 4.27.1's. Written for an
// encoder-decoder whose decoder prompt is the start token (HF's decoder_prompt_len = 1).
template <models::seq2seq_model Model>
generation_result beam_search_hf_5(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids,
                                   const generation_options& o, const step_callback& on_step = {}) {
    using S = typename Model::scalar;
    const index_t V = detail::vocab_size_of(m), B = static_cast<index_t>(enc.docs.size()), K = o.num_beams, R = B * K;
    const index_t max_len = o.total_length();
    const auto n_eos = static_cast<index_t>(o.eos_token_id.size());
    // candidates kept per document (HF: beams_to_keep; torch.topk would refuse more than K·V)
    const index_t keep = std::min(std::max<index_t>(2, 1 + n_eos) * K, K * V);
    const double lp = o.length_penalty;
    const bool early_on = o.early_stopping == early_stopping_mode::on;
    // length the "done" test divides the best running score by, given the step's c
    const auto hopeful_length = [&](index_t c) {
        return o.early_stopping == early_stopping_mode::never && lp > 0 ? max_len - 1 : c;
    };
    const auto at = [](index_t i) { return static_cast<std::size_t>(i); };

    const token_rows enc_rows = detail::rows_per_document(encoder_ids, B, K);
    const processor_list procs = make_processors(o, enc_rows);
    auto s = m.start(enc, K, max_len - 1);

    token_rows ids(at(R), std::vector<std::int64_t>{o.start_token()});  // running beams, row d·K + k
    std::vector<float> running(at(R), 0.0f);
    for (index_t d = 0; d < B; ++d)
        for (index_t k = 1; k < K; ++k) running[at(d * K + k)] = detail::hf5_penalty;
    std::vector<detail::hf5_slots> fin(at(B), detail::hf5_slots(K, o.start_token()));
    std::vector<char> hopeful(at(B), 1);  // HF: is_early_stop_heuristic_unsatisfied
    std::vector<S> logits(at(R * V));
    std::vector<float> scores(at(R * V));
    std::vector<std::int64_t> last(at(R), o.start_token());
    std::vector<index_t> top, pick;
    std::vector<float> cand(at(keep)), cand_running(at(keep)), cand_final(at(keep));
    std::vector<char> hit(at(keep)), cand_finished(at(keep));
    generation_result res;

    for (index_t c = 1; c < max_len; ++c) {  // c: HF's cur_len before this step
        m.step(s, last.data(), 1, logits.data());
        detail::to_scores(logits.data(), scores.data(), R, V, c - 1);
        for (index_t r = 0; r < R; ++r) detail::log_softmax(scores.data() + r * V, V);
        apply_all(procs, ids, scores.data(), V);
        for (index_t r = 0; r < R; ++r)
            for (index_t i = 0; i < V; ++i) scores[at(r * V + i)] += running[at(r)];

        const bool at_max = c + 1 >= max_len;
        const float divisor = detail::hf5_divisor(c, lp);
        token_rows next_ids(at(R));
        std::vector<float> next_running(at(R));
        std::vector<index_t> next_src(at(R));
        std::vector<std::int64_t> next_token(at(R));
        bool any_hopeful = false, all_full = true, every_hit = true;
        for (index_t d = 0; d < B; ++d) {
            const float* sc = scores.data() + d * K * V;
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
        last = next_token;
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
        m.reorder(s, next_src);
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

// Beam search in the convention the options name.
template <models::seq2seq_model Model>
generation_result beam_search(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids,
                              const generation_options& o, const step_callback& on_step = {}) {
    if (o.beam_convention == beam_convention::hf_5) return beam_search_hf_5(m, enc, encoder_ids, o, on_step);
    return beam_search_hf_4_27(m, enc, encoder_ids, o, on_step);
}

// Dispatches on the options (validated first, against the vocabulary of the model_config that
// config() converts to). encoder_ids: the encoder rows as given (for
// encoder_no_repeat_ngram_size).
template <models::seq2seq_model Model>
generation_result generate(const Model& m, const typename Model::encoded& enc, const token_rows& encoder_ids,
                           const generation_options& o, const step_callback& on_step = {}) {
    const models::model_config& config = m.config();
    validate(o, config);
    if (o.num_beams > 1) return beam_search(m, enc, encoder_ids, o, on_step);
    return greedy_or_sample(m, enc, encoder_ids, o, on_step);
}

} // namespace locost::generation
