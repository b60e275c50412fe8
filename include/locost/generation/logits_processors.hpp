// Logits processors and warpers with Hugging Face transformers 4.27.1 semantics, applied to
// float32 score rows (one row per hypothesis; "mask" = set to −inf). The order and conditions
// under which generate() builds them are those of HF's _get_logits_processor and
// _get_logits_warper (make_processors / make_warpers below):
//
//   processors  RepetitionPenalty → NoRepeatNGram → EncoderNoRepeatNGram → NoBadWords →
//               MinLength → MinNewTokensLength → ForcedBOSToken → ForcedEOSToken →
//               SuppressTokens → SuppressTokensAtBegin
//   warpers     Temperature → TopK → TopP                          (sampling only)
//
// Each row's ids start with the decoder start token; cur_len is the row length (start included).
// Float details follow torch: the penalty, the temperature and 1 − top_p are rounded to float32
// before use; top-p's softmax and cumulative sum are float32; equal scores in top-p are ordered
// by token id (the lower id removed first), HF leaving that order unspecified.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <vector>

#include "options.hpp"
#include "result.hpp"  // token_rows

namespace locost::generation {

inline constexpr float neg_inf = -std::numeric_limits<float>::infinity();

class logits_processor {
public:
    virtual ~logits_processor() = default;
    // scores: rows × vocab, row r for hypothesis ids[r].
    virtual void apply(const token_rows& ids, float* scores, index_t vocab) const = 0;
};

class repetition_penalty final : public logits_processor {
public:
    explicit repetition_penalty(double p) : p_(static_cast<float>(p)) {}
    void apply(const token_rows& ids, float* scores, index_t V) const override {
        for (std::size_t r = 0; r < ids.size(); ++r) {
            float* s = scores + static_cast<index_t>(r) * V;
            for (std::int64_t t : std::set<std::int64_t>(ids[r].begin(), ids[r].end())) s[t] = s[t] < 0 ? s[t] * p_ : s[t] / p_;
        }
    }

private:
    float p_;
};

namespace detail {
// Tokens that followed the last n−1 tokens of `row` somewhere in `source` (n-grams of source).
inline std::vector<std::int64_t> ngram_followers(const std::vector<std::int64_t>& source, const std::vector<std::int64_t>& row, index_t n) {
    std::vector<std::int64_t> out;
    const auto S = static_cast<index_t>(source.size()), R = static_cast<index_t>(row.size());
    for (index_t i = 0; i + n <= S; ++i) {
        bool match = true;
        for (index_t k = 0; k < n - 1 && match; ++k) match = source[i + k] == row[R - (n - 1) + k];
        if (match) out.push_back(source[i + n - 1]);
    }
    return out;
}
}  // namespace detail

class no_repeat_ngram final : public logits_processor {
public:
    explicit no_repeat_ngram(index_t n) : n_(n) {}
    void apply(const token_rows& ids, float* scores, index_t V) const override {
        for (std::size_t r = 0; r < ids.size(); ++r) {
            if (static_cast<index_t>(ids[r].size()) + 1 < n_) continue;
            for (auto t : detail::ngram_followers(ids[r], ids[r], n_)) scores[static_cast<index_t>(r) * V + t] = neg_inf;
        }
    }

private:
    index_t n_;
};

class encoder_no_repeat_ngram final : public logits_processor {
public:
    // encoder_ids: the encoder rows as given (padded rows keep their pad ids, as in HF).
    encoder_no_repeat_ngram(index_t n, token_rows encoder_ids) : n_(n), enc_(std::move(encoder_ids)) {}
    void apply(const token_rows& ids, float* scores, index_t V) const override {
        const std::size_t per = std::max<std::size_t>(1, ids.size() / std::max<std::size_t>(1, enc_.size()));
        for (std::size_t r = 0; r < ids.size(); ++r) {
            if (static_cast<index_t>(ids[r].size()) + 1 < n_) continue;
            for (auto t : detail::ngram_followers(enc_[std::min(r / per, enc_.size() - 1)], ids[r], n_))
                scores[static_cast<index_t>(r) * V + t] = neg_inf;
        }
    }

private:
    index_t n_;
    token_rows enc_;
};

class no_bad_words final : public logits_processor {
public:
    no_bad_words(const std::vector<std::vector<index_t>>& words, const std::vector<index_t>& eos) {
        for (const auto& w : words) {
            if (w.size() == 1 && std::find(eos.begin(), eos.end(), w[0]) != eos.end()) continue;  // [eos] is dropped
            words_.emplace_back(w.begin(), w.end());
        }
    }
    void apply(const token_rows& ids, float* scores, index_t V) const override {
        for (std::size_t r = 0; r < ids.size(); ++r)
            for (const auto& w : words_) {
                const std::size_t k = w.size() - 1;
                if (k > ids[r].size()) continue;
                if (std::equal(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(k), ids[r].end() - static_cast<std::ptrdiff_t>(k)))
                    scores[static_cast<index_t>(r) * V + w.back()] = neg_inf;
            }
    }

private:
    std::vector<std::vector<std::int64_t>> words_;
};

class min_length final : public logits_processor {
public:
    // Masks eos while cur_len − skip < min (MinLength: skip 0; MinNewTokensLength: skip 1).
    min_length(index_t min, index_t skip, std::vector<index_t> eos) : min_(min), skip_(skip), eos_(std::move(eos)) {}
    void apply(const token_rows& ids, float* scores, index_t V) const override {
        for (std::size_t r = 0; r < ids.size(); ++r)
            if (static_cast<index_t>(ids[r].size()) - skip_ < min_)
                for (auto e : eos_) scores[static_cast<index_t>(r) * V + e] = neg_inf;
    }

private:
    index_t min_, skip_;
    std::vector<index_t> eos_;
};

class forced_token final : public logits_processor {
public:
    // At cur_len == at, every score −inf but those of `tokens` (0). ForcedBOS: at 1;
    // ForcedEOS: at max_length − 1.
    forced_token(index_t at, std::vector<index_t> tokens) : at_(at), tokens_(std::move(tokens)) {}
    void apply(const token_rows& ids, float* scores, index_t V) const override {
        for (std::size_t r = 0; r < ids.size(); ++r) {
            if (static_cast<index_t>(ids[r].size()) != at_) continue;
            float* s = scores + static_cast<index_t>(r) * V;
            std::fill_n(s, V, neg_inf);
            for (auto t : tokens_) s[t] = 0.0f;
        }
    }

private:
    index_t at_;
    std::vector<index_t> tokens_;
};

class suppress_tokens final : public logits_processor {
public:
    // Masks `tokens` in rows whose length is `at` (SuppressTokensAtBegin), or in every row when
    // `at` is unset (SuppressTokens).
    suppress_tokens(std::vector<index_t> tokens, std::optional<index_t> at) : tokens_(std::move(tokens)), at_(at) {}
    void apply(const token_rows& ids, float* scores, index_t V) const override {
        for (std::size_t r = 0; r < ids.size(); ++r) {
            if (at_ && static_cast<index_t>(ids[r].size()) != *at_) continue;
            for (auto t : tokens_) scores[static_cast<index_t>(r) * V + t] = neg_inf;
        }
    }

private:
    std::vector<index_t> tokens_;
    std::optional<index_t> at_;
};

class temperature final : public logits_processor {
public:
    explicit temperature(double t) : t_(static_cast<float>(t)) {}
    void apply(const token_rows& ids, float* scores, index_t V) const override {
        for (index_t i = 0; i < static_cast<index_t>(ids.size()) * V; ++i) scores[i] /= t_;
    }

private:
    float t_;
};

class top_k final : public logits_processor {
public:
    top_k(index_t k, index_t min_keep) : k_(std::max(k, min_keep)) {}
    void apply(const token_rows& ids, float* scores, index_t V) const override {
        const index_t k = std::min(k_, V);
        std::vector<float> tmp(static_cast<std::size_t>(V));
        for (std::size_t r = 0; r < ids.size(); ++r) {
            float* s = scores + static_cast<index_t>(r) * V;
            std::copy_n(s, V, tmp.begin());
            std::nth_element(tmp.begin(), tmp.begin() + (k - 1), tmp.end(), std::greater<float>());
            const float kth = tmp[static_cast<std::size_t>(k - 1)];
            for (index_t i = 0; i < V; ++i)
                if (s[i] < kth) s[i] = neg_inf;
        }
    }

private:
    index_t k_;
};

class top_p final : public logits_processor {
public:
    top_p(double p, index_t min_keep) : limit_(static_cast<float>(1.0 - p)), min_keep_(min_keep) {}
    void apply(const token_rows& ids, float* scores, index_t V) const override {
        std::vector<index_t> order(static_cast<std::size_t>(V));
        std::vector<float> prob(static_cast<std::size_t>(V));
        for (std::size_t r = 0; r < ids.size(); ++r) {
            float* s = scores + static_cast<index_t>(r) * V;
            std::iota(order.begin(), order.end(), index_t{0});
            std::stable_sort(order.begin(), order.end(), [&](index_t a, index_t b) { return s[a] < s[b]; });
            const float m = s[order.back()];
            float sum = 0;
            for (index_t i = 0; i < V; ++i)
                sum += (prob[static_cast<std::size_t>(i)] = std::exp(s[order[static_cast<std::size_t>(i)]] - m));
            float cum = 0;
            std::vector<bool> remove(static_cast<std::size_t>(V));
            for (index_t i = 0; i < V; ++i) {
                cum += prob[static_cast<std::size_t>(i)] / sum;
                remove[static_cast<std::size_t>(i)] = cum <= limit_ && i < V - min_keep_;
            }
            for (index_t i = 0; i < V; ++i)
                if (remove[static_cast<std::size_t>(i)]) s[order[static_cast<std::size_t>(i)]] = neg_inf;
        }
    }

private:
    float limit_;
    index_t min_keep_;
};

using processor_list = std::vector<std::unique_ptr<logits_processor>>;

// HF _get_logits_processor (the processors generate() applies), for options o whose lengths
// are resolved; encoder_ids feed encoder_no_repeat_ngram_size.
inline processor_list make_processors(const generation_options& o, const token_rows& encoder_ids) {
    processor_list p;
    if (o.repetition_penalty != 1.0) p.push_back(std::make_unique<repetition_penalty>(o.repetition_penalty));
    if (o.no_repeat_ngram_size > 0) p.push_back(std::make_unique<no_repeat_ngram>(o.no_repeat_ngram_size));
    if (o.encoder_no_repeat_ngram_size > 0)
        p.push_back(std::make_unique<encoder_no_repeat_ngram>(o.encoder_no_repeat_ngram_size, encoder_ids));
    if (!o.bad_words_ids.empty()) p.push_back(std::make_unique<no_bad_words>(o.bad_words_ids, o.eos_token_id));
    if (o.min_length > 0) p.push_back(std::make_unique<min_length>(o.min_length, 0, o.eos_token_id));
    if (o.min_new_tokens && *o.min_new_tokens > 0) p.push_back(std::make_unique<min_length>(*o.min_new_tokens, 1, o.eos_token_id));
    if (o.forced_bos_token_id) p.push_back(std::make_unique<forced_token>(1, std::vector<index_t>{*o.forced_bos_token_id}));
    if (!o.forced_eos_token_id.empty()) p.push_back(std::make_unique<forced_token>(o.total_length() - 1, o.forced_eos_token_id));
    if (!o.suppress_tokens.empty()) p.push_back(std::make_unique<suppress_tokens>(o.suppress_tokens, std::nullopt));
    // The first generated position: after the start token, or after the forced BOS token.
    if (!o.begin_suppress_tokens.empty())
        p.push_back(std::make_unique<suppress_tokens>(o.begin_suppress_tokens, o.forced_bos_token_id ? 2 : 1));
    return p;
}

// HF _get_logits_warper (sampling only). min_tokens_to_keep is 2 with beams, else 1.
inline processor_list make_warpers(const generation_options& o) {
    processor_list p;
    const index_t keep = o.num_beams > 1 ? 2 : 1;
    if (o.temperature != 1.0) p.push_back(std::make_unique<temperature>(o.temperature));
    if (o.top_k != 0) p.push_back(std::make_unique<top_k>(o.top_k, keep));
    if (o.top_p < 1.0) p.push_back(std::make_unique<top_p>(o.top_p, keep));
    return p;
}

inline void apply_all(const processor_list& list, const token_rows& ids, float* scores, index_t vocab) {
    for (const auto& p : list) p->apply(ids, scores, vocab);
}

}  // namespace locost::generation
