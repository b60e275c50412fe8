// Decoding strategies over an encoder-decoder model — Hugging Face transformers 4.27.1
// semantics (greedy_search, sample, beam_search with BeamSearchScorer), on any model with
// start(encoded, rows_per_doc, capacity) / step(state, tokens, 1, logits) / reorder(state, src)
// (models::locost_model).
//
//   greedy   processors on the raw logits, argmax (first maximum); finished rows continue
//            with pad; stop when every row has emitted eos or at max_length.
//   sample   processors then warpers, one draw from softmax per row with a seeded generator
//            (splitmix64 → uniform → inverse CDF in double), num_return_sequences rows per
//            document.
//   beam     log_softmax, processors, + running beam scores; the 2K best candidates per
//            document; eos candidates among the first K become finished hypotheses scored
//            sum_logprobs / len^length_penalty (len counts the start token, not the eos);
//            is_done per early_stopping (false: worst ≥ best / c^lp; true: K hypotheses;
//            "never": worst ≥ best / max_length^lp when lp > 0); finalize adds open beams.
//            Includes 4.27.1's per-document increment of cur_len in is_done (documented there
//            as c = cur_len + number of not-done documents so far).
//
// Results are HF-shaped: per document num_return_sequences rows, each starting with the start
// token and ending with eos when it stopped there; shorter rows padded with pad_token_id.
// A step callback sees every step's new tokens and may cancel (return false): what was
// generated so far is returned, with `cancelled` set.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

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

template <class S>
void to_float(const S* src, float* dst, index_t n) {
    for (index_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
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

inline token_rows pad_rows(token_rows rows, index_t pad) {
    std::size_t width = 0;
    for (const auto& r : rows) width = std::max(width, r.size());
    for (auto& r : rows) r.resize(width, pad);
    return rows;
}

} // namespace detail

// Greedy decoding or sampling of every document (rows_per_doc = 1, or num_return_sequences
// when sampling).
template <class Model, class Encoded>
generation_result greedy_or_sample(const Model& m, const Encoded& enc, const token_rows& encoder_ids, const generation_options& o,
                                   const step_callback& on_step = {}) {
    using S = std::remove_cvref_t<decltype(*m.start(enc, 1, 1).cache[0].k.data())>;
    const index_t V = m.config().vocab_size, docs = static_cast<index_t>(enc.docs.size());
    const index_t per = o.do_sample ? o.num_return_sequences : 1, R = docs * per, max_len = o.total_length();
    token_rows enc_rows;
    for (index_t d = 0; d < docs; ++d)
        for (index_t j = 0; j < per; ++j) enc_rows.push_back(encoder_ids.empty() ? std::vector<std::int64_t>{} : encoder_ids[static_cast<std::size_t>(d)]);
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
        detail::to_float(logits.data(), scores.data(), R * V);
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

template <class Model, class Encoded>
generation_result beam_search(const Model& m, const Encoded& enc, const token_rows& encoder_ids, const generation_options& o,
                              const step_callback& on_step = {}) {
    using S = std::remove_cvref_t<decltype(*m.start(enc, 1, 1).cache[0].k.data())>;
    const index_t V = m.config().vocab_size, B = static_cast<index_t>(enc.docs.size()), K = o.num_beams, R = B * K;
    const index_t max_len = o.total_length();
    token_rows enc_rows;
    for (index_t d = 0; d < B; ++d)
        for (index_t j = 0; j < K; ++j) enc_rows.push_back(encoder_ids.empty() ? std::vector<std::int64_t>{} : encoder_ids[static_cast<std::size_t>(d)]);
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
        detail::to_float(logits.data(), scores.data(), R * V);
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

// Dispatches on the options (validated first). encoder_ids: the encoder rows as given
// (for encoder_no_repeat_ngram_size).
template <class Model, class Encoded>
generation_result generate(const Model& m, const Encoded& enc, const token_rows& encoder_ids, const generation_options& o,
                           const step_callback& on_step = {}) {
    validate(o, m.config());
    if (o.num_beams > 1) return beam_search(m, enc, encoder_ids, o, on_step);
    return greedy_or_sample(m, enc, encoder_ids, o, on_step);
}

} // namespace locost::generation
