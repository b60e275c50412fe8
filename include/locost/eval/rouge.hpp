// ROUGE as Google's rouge-score package computes it (google-research/google-research, rouge/:
// rouge_scorer.py, tokenize.py, scoring.py; pip's rouge-score), with its tokenization and
// definitions, so that a score here is the number rouge-score prints for the same texts.
//
// Tokens (rouge_tokens): Python's str.lower(), then every maximal run of [a-z0-9] is a token and
// everything else separates; with the stemmer, a token of more than 3 characters becomes its
// NLTK Porter stem (porter_stemmer.hpp), shorter ones stay; tokens that are not [a-z0-9]+ after
// that are dropped. So a non-ASCII letter (é, ü, CJK, an em dash...) is a separator: "café" gives
// "caf". Two code points are the exception, since their Python lowercase holds an ASCII letter:
// U+0130 İ lowers to "i" + U+0307 (an "i" then a separator) and U+212A KELVIN SIGN to "k".
//
// With T the target's tokens and P the prediction's, and F = 2·P·R / (P + R) (0 when P + R = 0):
//
//   ROUGE-N   overlap = Σ_g min(count_T(g), count_P(g)) over the n-grams g (with repeats)
//             P = overlap / max(#n-grams of P, 1),  R = overlap / max(#n-grams of T, 1)
//   ROUGE-L   P = LCS(T, P) / |P|,  R = LCS(T, P) / |T|  (all 0 when either is empty); LCS is the
//             length of the longest common subsequence of tokens
//   ROUGE-Lsum  the texts split at '\n' into sentences (empty strings dropped; a line of spaces
//             or punctuation stays, as a sentence of no tokens); m, n the target's and the
//             prediction's token totals (all 0 when either has no sentence or no token). For each
//             target sentence r, the union LCS is the set of positions of r that the LCS of r with
//             any prediction sentence uses (one LCS per pair, read back from the DP table as
//             rouge-score does), in order; each of those tokens is a hit if it still has a count
//             left on both sides (counts over the whole texts, decremented at each hit: ROUGE
//             1.5.5's guard against counting a token twice).  P = hits / n,  R = hits / m.
//
// Bootstrap (BootstrapAggregator): from per-document values x_1..x_N, n_samples times draw N
// indices uniformly with replacement and take the mean of the values drawn; low, mid and high are
// numpy.percentile (method "linear") of those means at 100·δ, 50 and 100·(1 − δ), with
// δ = (1 − confidence) / 2. So mid is the median of the bootstrap means, not the mean. The
// draws come from std::mt19937_64 with the seed given (numpy's stream cannot be reproduced), so
// low/mid/high agree with rouge-score's in distribution, not digit for digit; the percentile is
// numpy's, operation for operation (equal to the last bit unless the compiler fuses its
// multiply-add). As in rouge-score, P, R and F of one score type share their draws.
//
// Cost. ROUGE-N is linear. ROUGE-L keeps one row of the DP table: O(|T|·|P|) time, O(min) memory.
// ROUGE-Lsum needs the LCS itself, not only its length, for every (target sentence, prediction
// sentence) pair: rouge-score stores the whole (|r|+1)·(|c|+1) table of Python ints; here the
// table keeps one bit per cell (which way the read-back turns) and two rows of lengths, so a pair
// costs |r|·|c| bits and the texts O(m·n) time. A pair whose table would pass
// rouge_lsum_max_cells (4·10^8 cells, 50 MB of bits) is refused with eval.too_long: texts that long
// on one line are not sentences (put one sentence per line).
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../config/error.hpp"
#include "porter_stemmer.hpp"

namespace locost::eval {

struct rouge_prf {
    double precision = 0, recall = 0, fmeasure = 0;
};

struct rouge_scores {
    rouge_prf rouge1, rouge2, rougeL, rougeLsum;
};

// The largest LCS table ROUGE-Lsum builds for one pair of sentences, in cells.
inline constexpr std::size_t rouge_lsum_max_cells = 400'000'000;

// rouge-score's default tokenizer (see the top of this file).
inline std::vector<std::string> rouge_tokens(std::string_view text, bool use_stemmer) {
    std::vector<std::string> tokens;
    std::string token;
    const auto end_token = [&] {
        if (token.empty()) return;
        tokens.push_back(use_stemmer && token.size() > 3 ? porter_stem(token) : token);
        if (tokens.back().empty()) tokens.pop_back();  // rouge-score's final check (never fires)
        token.clear();
    };
    for (std::size_t i = 0; i < text.size();) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (c < 0x80) {
            if (c >= 'A' && c <= 'Z') token += static_cast<char>(c - 'A' + 'a');
            else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) token += static_cast<char>(c);
            else end_token();
            ++i;
        } else if (text.substr(i, 2) == "\xC4\xB0") {  // U+0130: lower() gives i + U+0307
            token += 'i';
            end_token();
            i += 2;
        } else if (text.substr(i, 3) == "\xE2\x84\xAA") {  // U+212A KELVIN SIGN: lower() gives k
            token += 'k';
            i += 3;
        } else {
            // Any other byte of a non-ASCII character (or of ill-formed UTF-8) separates. In
            // well-formed UTF-8 the two sequences above only start at a character's first byte.
            end_token();
            ++i;
        }
    }
    end_token();
    return tokens;
}

// rouge-score's sentences for ROUGE-Lsum: the text split at '\n', empty strings dropped, each
// tokenized (a sentence may have no token).
inline std::vector<std::vector<std::string>> rouge_sentences(std::string_view text, bool use_stemmer) {
    std::vector<std::vector<std::string>> sentences;
    std::size_t start = 0;
    while (start <= text.size()) {
        std::size_t stop = text.find('\n', start);
        if (stop == std::string_view::npos) stop = text.size();
        if (stop > start) sentences.push_back(rouge_tokens(text.substr(start, stop - start), use_stemmer));
        start = stop + 1;
    }
    return sentences;
}

namespace detail {

inline double rouge_f(double precision, double recall) {
    return precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0.0;
}

inline rouge_prf rouge_ratio(std::size_t hits, std::size_t prediction_total, std::size_t target_total) {
    rouge_prf s;
    s.precision = static_cast<double>(hits) / static_cast<double>(std::max<std::size_t>(prediction_total, 1));
    s.recall = static_cast<double>(hits) / static_cast<double>(std::max<std::size_t>(target_total, 1));
    s.fmeasure = rouge_f(s.precision, s.recall);
    return s;
}

// Token strings to small integers, shared by the texts compared.
class token_ids {
public:
    std::uint32_t id(const std::string& token) { return ids_.try_emplace(token, static_cast<std::uint32_t>(ids_.size())).first->second; }
    std::vector<std::uint32_t> ids(const std::vector<std::string>& tokens) {
        std::vector<std::uint32_t> out;
        out.reserve(tokens.size());
        for (const auto& t : tokens) out.push_back(id(t));
        return out;
    }
    std::size_t size() const { return ids_.size(); }

private:
    std::unordered_map<std::string, std::uint32_t> ids_;
};

// The LCS length of a and b, one DP row (over the shorter) at a time.
inline std::size_t lcs_length(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
    const auto& outer = a.size() >= b.size() ? a : b;
    const auto& inner = a.size() >= b.size() ? b : a;
    std::vector<std::uint32_t> row(inner.size() + 1, 0);  // row[j] = LCS(outer[0, i), inner[0, j))
    for (const std::uint32_t x : outer) {
        std::uint32_t diagonal = 0;  // the previous row's row[j - 1]
        for (std::size_t j = 1; j <= inner.size(); ++j) {
            const std::uint32_t above = row[j];
            row[j] = x == inner[j - 1] ? diagonal + 1 : std::max(above, row[j - 1]);
            diagonal = above;
        }
    }
    return row.back();
}

// The positions in ref of one LCS of ref and can: the one rouge-score's _backtrack_norec reads
// from the full table t, walking back from (|ref|, |can|): a match is taken when the tokens are
// equal, else it moves left when t[i][j-1] > t[i-1][j] and up otherwise. Only that comparison is
// kept, one bit per cell, in `turns` (reused between calls).
inline void lcs_positions(const std::vector<std::uint32_t>& ref, const std::vector<std::uint32_t>& can, std::vector<std::uint64_t>& turns,
                          std::vector<std::size_t>& positions) {
    positions.clear();
    const std::size_t rows = ref.size(), cols = can.size();
    if (rows == 0 || cols == 0) return;
    turns.assign((rows * cols + 63) / 64, 0);
    std::vector<std::uint32_t> above(cols + 1, 0), here(cols + 1, 0);
    for (std::size_t i = 1; i <= rows; ++i) {
        here[0] = 0;
        for (std::size_t j = 1; j <= cols; ++j) {
            if (ref[i - 1] == can[j - 1]) {
                here[j] = above[j - 1] + 1;
            } else {
                here[j] = std::max(above[j], here[j - 1]);
                if (here[j - 1] > above[j]) {
                    const std::size_t cell = (i - 1) * cols + (j - 1);
                    turns[cell / 64] |= std::uint64_t{1} << (cell % 64);
                }
            }
        }
        std::swap(above, here);
    }
    for (std::size_t i = rows, j = cols; i > 0 && j > 0;) {
        const std::size_t cell = (i - 1) * cols + (j - 1);
        if (ref[i - 1] == can[j - 1]) {
            positions.push_back(i - 1);
            --i, --j;
        } else if (turns[cell / 64] >> (cell % 64) & 1) {
            --j;
        } else {
            --i;
        }
    }
    std::reverse(positions.begin(), positions.end());
}

}  // namespace detail

// ROUGE-N of two token lists; n >= 1 (rouge-score's rouge1 ... rouge9).
inline rouge_prf rouge_n(const std::vector<std::string>& target, const std::vector<std::string>& prediction, int n) {
    if (n < 1) throw error("eval.invalid_option", "ROUGE-N needs n >= 1, got " + std::to_string(n));
    const std::size_t k = static_cast<std::size_t>(n);
    // An n-gram as its tokens joined by spaces (tokens never hold one), with its two counts.
    std::unordered_map<std::string, std::array<std::size_t, 2>> counts;
    const auto count = [&](const std::vector<std::string>& tokens, std::size_t side) {
        std::size_t total = 0;
        for (std::size_t i = 0; i + k <= tokens.size(); ++i, ++total) {
            std::string gram = tokens[i];
            for (std::size_t j = 1; j < k; ++j) gram.append(1, ' ').append(tokens[i + j]);
            ++counts[gram][side];
        }
        return total;
    };
    const std::size_t target_total = count(target, 0);
    const std::size_t prediction_total = count(prediction, 1);
    std::size_t overlap = 0;
    for (const auto& [gram, c] : counts) overlap += std::min(c[0], c[1]);
    return detail::rouge_ratio(overlap, prediction_total, target_total);
}

// ROUGE-L (sentence level: newlines are ordinary separators) of two token lists.
inline rouge_prf rouge_l(const std::vector<std::string>& target, const std::vector<std::string>& prediction) {
    if (target.empty() || prediction.empty()) return {};
    detail::token_ids ids;
    const std::size_t lcs = detail::lcs_length(ids.ids(target), ids.ids(prediction));
    return detail::rouge_ratio(lcs, prediction.size(), target.size());
}

// ROUGE-Lsum (summary level) of two texts already split into token lists per sentence.
inline rouge_prf rouge_lsum(const std::vector<std::vector<std::string>>& target_sentences,
                            const std::vector<std::vector<std::string>>& prediction_sentences) {
    std::size_t m = 0, n = 0, longest_target = 0, longest_prediction = 0;
    for (const auto& s : target_sentences) m += s.size(), longest_target = std::max(longest_target, s.size());
    for (const auto& s : prediction_sentences) n += s.size(), longest_prediction = std::max(longest_prediction, s.size());
    if (m == 0 || n == 0) return {};
    if (longest_target > rouge_lsum_max_cells / longest_prediction)
        throw error("eval.too_long",
                    "ROUGE-Lsum would compare a target sentence of " + std::to_string(longest_target) +
                        " tokens with a prediction sentence of " + std::to_string(longest_prediction) +
                        " tokens, an LCS table of more than " + std::to_string(rouge_lsum_max_cells) + " cells; put one sentence per line");

    detail::token_ids ids;
    std::vector<std::vector<std::uint32_t>> refs, cans;
    for (const auto& s : target_sentences) refs.push_back(ids.ids(s));
    for (const auto& s : prediction_sentences) cans.push_back(ids.ids(s));
    std::vector<std::size_t> left_target(ids.size(), 0), left_prediction(ids.size(), 0);
    for (const auto& s : refs)
        for (const std::uint32_t t : s) ++left_target[t];
    for (const auto& s : cans)
        for (const std::uint32_t t : s) ++left_prediction[t];

    std::size_t hits = 0;
    std::vector<std::uint64_t> turns;
    std::vector<std::size_t> positions;
    std::vector<char> in_union;
    for (const auto& r : refs) {
        in_union.assign(r.size(), 0);
        for (const auto& c : cans) {
            detail::lcs_positions(r, c, turns, positions);
            for (const std::size_t p : positions) in_union[p] = 1;
        }
        for (std::size_t p = 0; p < r.size(); ++p) {
            if (!in_union[p]) continue;
            const std::uint32_t t = r[p];
            if (left_prediction[t] > 0 && left_target[t] > 0) ++hits, --left_prediction[t], --left_target[t];
        }
    }
    return detail::rouge_ratio(hits, n, m);
}

// ROUGE-Lsum of two texts whose sentences are separated by '\n'.
inline rouge_prf rouge_lsum(std::string_view target, std::string_view prediction, bool use_stemmer) {
    return rouge_lsum(rouge_sentences(target, use_stemmer), rouge_sentences(prediction, use_stemmer));
}

// rouge1, rouge2, rougeL and rougeLsum of a target (reference) and a prediction, as
// rouge_scorer.RougeScorer(['rouge1', 'rouge2', 'rougeL', 'rougeLsum'], use_stemmer).score(target, prediction).
inline rouge_scores rouge(std::string_view target, std::string_view prediction, bool use_stemmer) {
    const auto t = rouge_tokens(target, use_stemmer);
    const auto p = rouge_tokens(prediction, use_stemmer);
    return {rouge_n(t, p, 1), rouge_n(t, p, 2), rouge_l(t, p), rouge_lsum(target, prediction, use_stemmer)};
}

// ---- Bootstrap confidence intervals (scoring.BootstrapAggregator) ----------------------------

struct rouge_interval {
    double low = 0, mid = 0, high = 0;
};

struct rouge_prf_interval {
    rouge_interval precision, recall, fmeasure;
};

struct rouge_aggregate {
    rouge_prf_interval rouge1, rouge2, rougeL, rougeLsum;
};

// rouge-score's defaults: 1000 samples, a 95% interval.
struct bootstrap_options {
    std::size_t n_samples = 1000;
    double confidence = 0.95;  // in [0, 1]
    std::uint64_t seed = 0;    // of the std::mt19937_64 that draws the samples
};

namespace detail {

inline std::string number_text(double x) {
    std::ostringstream s;
    s << x;
    return s.str();
}

// numpy's percentile, method "linear", of sorted values at q in [0, 100]: the virtual index
// (N − 1)·q/100 between two neighbours, and numpy's two-sided interpolation between them.
inline double percentile_sorted(const std::vector<double>& sorted, double q) {
    const double quantile = q / 100;
    const std::size_t last = sorted.size() - 1;
    const double virtual_index = static_cast<double>(last) * quantile;
    if (virtual_index >= static_cast<double>(last)) return sorted[last];
    const double below = std::floor(virtual_index);
    const std::size_t i = static_cast<std::size_t>(below);
    const double gamma = virtual_index - below;
    const double a = sorted[i], b = sorted[i + 1];
    const double diff = b - a;
    return gamma >= 0.5 ? b - diff * (1 - gamma) : a + diff * gamma;
}

// A uniform index in [0, n) from 64 random bits, the same on every standard library (rejection
// of the draws past the last multiple of n).
inline std::size_t uniform_index(std::mt19937_64& random, std::size_t n) {
    const std::uint64_t range = n;
    const std::uint64_t skip = (0 - range) % range;  // 2^64 mod n
    std::uint64_t x = random();
    while (x < skip) x = random();
    return static_cast<std::size_t>(x % range);
}

inline void check_bootstrap(std::size_t documents, const bootstrap_options& o) {
    if (!(o.confidence >= 0 && o.confidence <= 1))
        throw error("eval.invalid_option", "bootstrap confidence must be in [0, 1], got " + number_text(o.confidence));
    if (o.n_samples == 0) throw error("eval.invalid_option", "bootstrap n_samples must be positive, got 0");
    if (documents == 0) throw error("eval.invalid_option", "bootstrap needs at least one document's score, got none");
}

// Bootstrap intervals of K measures of the same documents (columns[k][d]), sharing the draws as
// rouge-score's rows do.
template <std::size_t K>
std::array<rouge_interval, K> bootstrap_columns(const std::array<std::vector<double>, K>& columns, const bootstrap_options& o,
                                                std::mt19937_64& random) {
    const std::size_t documents = columns[0].size();
    std::array<std::vector<double>, K> means;
    for (auto& m : means) m.reserve(o.n_samples);
    std::vector<std::size_t> drawn(documents);
    for (std::size_t s = 0; s < o.n_samples; ++s) {
        for (auto& d : drawn) d = uniform_index(random, documents);
        for (std::size_t k = 0; k < K; ++k) {
            double sum = 0;
            for (const std::size_t d : drawn) sum += columns[k][d];
            means[k].push_back(sum / static_cast<double>(documents));
        }
    }
    const double delta = (1 - o.confidence) / 2;
    std::array<rouge_interval, K> out;
    for (std::size_t k = 0; k < K; ++k) {
        std::sort(means[k].begin(), means[k].end());
        out[k] = {percentile_sorted(means[k], 100 * delta), percentile_sorted(means[k], 100 * 0.5),
                  percentile_sorted(means[k], 100 * (1 - delta))};
    }
    return out;
}

inline rouge_prf_interval bootstrap_prf(const std::vector<rouge_scores>& documents, rouge_prf rouge_scores::*which,
                                        const bootstrap_options& o, std::mt19937_64& random) {
    std::array<std::vector<double>, 3> columns;
    for (const auto& d : documents) {
        const rouge_prf& s = d.*which;
        columns[0].push_back(s.precision), columns[1].push_back(s.recall), columns[2].push_back(s.fmeasure);
    }
    const auto i = bootstrap_columns(columns, o, random);
    return {i[0], i[1], i[2]};
}

}  // namespace detail

// numpy.percentile(values, q) with its default method, "linear"; q in [0, 100].
inline double numpy_percentile(std::vector<double> values, double q) {
    if (values.empty()) throw error("eval.invalid_option", "percentile of no values");
    if (!(q >= 0 && q <= 100)) throw error("eval.invalid_option", "percentile q must be in [0, 100], got " + detail::number_text(q));
    std::sort(values.begin(), values.end());
    return detail::percentile_sorted(values, q);
}

// The bootstrap interval of the mean of per-document values (low, mid, high as
// BootstrapAggregator gives them).
inline rouge_interval bootstrap_interval(const std::vector<double>& values, const bootstrap_options& options = {}) {
    detail::check_bootstrap(values.size(), options);
    std::mt19937_64 random(options.seed);
    return detail::bootstrap_columns(std::array<std::vector<double>, 1>{values}, options, random)[0];
}

// The 12 intervals of per-document scores, as BootstrapAggregator.aggregate() gives them after
// add_scores of each document: the score types in the order rouge1, rouge2, rougeL, rougeLsum,
// one generator drawing for each in turn.
inline rouge_aggregate bootstrap_aggregate(const std::vector<rouge_scores>& documents, const bootstrap_options& options = {}) {
    detail::check_bootstrap(documents.size(), options);
    std::mt19937_64 random(options.seed);
    rouge_aggregate a;
    a.rouge1 = detail::bootstrap_prf(documents, &rouge_scores::rouge1, options, random);
    a.rouge2 = detail::bootstrap_prf(documents, &rouge_scores::rouge2, options, random);
    a.rougeL = detail::bootstrap_prf(documents, &rouge_scores::rougeL, options, random);
    a.rougeLsum = detail::bootstrap_prf(documents, &rouge_scores::rougeLsum, options, random);
    return a;
}

}  // namespace locost::eval
