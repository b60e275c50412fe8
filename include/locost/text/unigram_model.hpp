// The Unigram language model of SentencePiece as Hugging Face's `tokenizers` runs it (the
// `"type": "Unigram"` model of a tokenizer.json: T5, Pegasus): each pre-tokenized word is cut
// into the pieces of highest total score,
//
//     best(0) = 0,   best(e) = max over pieces p = word[b, e)  of  best(b) + score(p),
//
// a Viterbi pass over the byte positions of the word, left to right, with the candidates ending
// at each position found by an Aho–Corasick automaton of the pieces (aho_corasick.hpp): time
// linear in the word and the lattice's edges, where a trie's common-prefix search from every
// character costs the word times the longest piece prefix found (a 100K-byte piece against a
// word of its prefix: quadratic). A character no piece of one character covers gets an
// unknown node scored min(score) − 10; adjacent unknown nodes fuse into one `unk_id` (HF's
// fuse_unk, always on). Ties keep the first candidate found (shorter pieces first, earlier starts
// first; at an end position the automaton reports the longest piece first, i.e. the earliest
// start), as HF's `encode_optimized` does. With byte_fallback, an unknown span becomes the
// `<0xXX>` pieces of its bytes when the vocabulary has them all.
//
// Pieces are numbered by their order in the vocabulary; a piece given twice resolves to its last
// id (HF's map keeps the last insertion).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../config/error.hpp"
#include "../core/utf8.hpp"
#include "../io/printable.hpp"
#include "aho_corasick.hpp"

namespace locost::text {

class unigram_model {
public:
    unigram_model() = default;

    // pieces with their scores, in id order; unk_id: the unknown piece, if any. where: the
    // file and component, for messages.
    unigram_model(std::vector<std::pair<std::string, double>> vocab, std::optional<int> unk_id, bool byte_fallback, std::string where)
        : unk_id_(unk_id), byte_fallback_(byte_fallback), where_(std::move(where)) {
        if (vocab.empty()) throw error("tokenizer.bad_model", where_ + ": the vocabulary is empty (at least the unknown piece is needed)");
        if (unk_id_ && (*unk_id_ < 0 || static_cast<std::size_t>(*unk_id_) >= vocab.size()))
            throw error("tokenizer.bad_model",
                        where_ + ": \"unk_id\" is " + std::to_string(*unk_id_) + ", outside the vocabulary of " +
                            std::to_string(vocab.size()) + " pieces");
        pieces_.reserve(vocab.size());
        scores_.reserve(vocab.size());
        for (std::size_t id = 0; id < vocab.size(); ++id) {
            auto& [piece, score] = vocab[id];
            min_score_ = std::min(min_score_, score);
            ids_[piece] = static_cast<int>(id);
            pieces_.push_back(std::move(piece));
            scores_.push_back(score);
        }
        // The empty piece is never matched (HF's trie neither); of equal pieces the last id.
        const std::vector<std::string_view> views(pieces_.begin(), pieces_.end());
        automaton_ = byte_automaton(views, /*keep_last=*/true);
    }

    int size() const noexcept { return static_cast<int>(pieces_.size()); }
    const std::string& piece(int id) const { return pieces_.at(static_cast<std::size_t>(id)); }
    double score(int id) const { return scores_.at(static_cast<std::size_t>(id)); }
    std::optional<int> unk_id() const noexcept { return unk_id_; }
    // The id of a piece, or -1.
    int id_of(std::string_view piece) const {
        const auto it = ids_.find(piece);
        return it == ids_.end() ? -1 : it->second;
    }

    // Appends the ids of one word (well-formed UTF-8).
    void encode(std::string_view word, std::vector<int>& ids) const {
        if (word.empty()) return;
        struct best_node {
            double score = 0;
            int id = -1;
            std::size_t start = npos;
        };
        const auto* s = reinterpret_cast<const unsigned char*>(word.data());
        const std::size_t n = word.size();
        const double unk_score = min_score_ - 10.0;
        std::vector<best_node> best(n + 1);
        int state = byte_automaton::root;
        for (std::size_t at = 0; at < n;) {
            const std::size_t char_len = decode_utf8(s + at, n - at).len, end = at + char_len;
            for (std::size_t k = at; k < end; ++k) state = automaton_.step(state, s[k]);
            // The pieces ending here (a well-formed piece ends a character, and starts one),
            // longest (earliest start) first; then the unknown node of this character when no
            // piece is the character alone.
            bool single = false;
            automaton_.each_match(state, [&](int id, std::size_t len) {
                const std::size_t start = end - len;
                const double cand = best[start].score + scores_[static_cast<std::size_t>(id)];
                if (best[end].start == npos || cand > best[end].score) best[end] = {cand, id, start};
                if (len == char_len) single = true;
            });
            if (!single) {
                if (!unk_id_)
                    throw error("tokenizer.encode_failed",
                                where_ + ": the text has a character no piece covers (" + detail_quote(word.substr(at, char_len)) +
                                    ") and the model has no \"unk_id\"");
                const double cand = best[at].score + unk_score;
                if (best[end].start == npos || cand > best[end].score) best[end] = {cand, *unk_id_, at};
            }
            at = end;
        }
        // Back from the end: the pieces, unknown runs fused.
        std::vector<std::pair<std::size_t, std::size_t>> spans;  // [start, end) of each token, reversed
        std::vector<bool> unknown;
        for (std::size_t end = n; end > 0;) {
            const best_node& b = best[end];
            const bool unk = unk_id_ && b.id == *unk_id_;
            if (unk && !unknown.empty() && unknown.back()) spans.back().first = b.start;
            else {
                spans.emplace_back(b.start, end);
                unknown.push_back(unk);
            }
            end = b.start;
        }
        for (std::size_t i = spans.size(); i-- > 0;) {
            const std::string_view tok = word.substr(spans[i].first, spans[i].second - spans[i].first);
            if (!unknown[i]) {
                ids.push_back(best[spans[i].second].id);
                continue;
            }
            // A fused unknown span: a piece after all if the vocabulary has it (as HF looks it up),
            // else its bytes' pieces (byte_fallback), else the unknown id.
            if (const int id = id_of(tok); id >= 0) {
                ids.push_back(id);
                continue;
            }
            if (byte_fallback_ && append_bytes(tok, ids)) continue;
            ids.push_back(*unk_id_);
        }
    }

private:
    static constexpr std::size_t npos = static_cast<std::size_t>(-1);
    struct string_hash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };

    static std::string detail_quote(std::string_view s) { return "'" + io::detail::printable(s, 64) + "'"; }

    bool append_bytes(std::string_view tok, std::vector<int>& ids) const {
        std::vector<int> out;
        for (const char ch : tok) {
            char name[8];
            std::snprintf(name, sizeof name, "<0x%02X>", static_cast<unsigned>(static_cast<unsigned char>(ch)));
            const int id = id_of(name);
            if (id < 0) return false;
            out.push_back(id);
        }
        ids.insert(ids.end(), out.begin(), out.end());
        return true;
    }

    std::vector<std::string> pieces_;
    std::vector<double> scores_;
    byte_automaton automaton_;  // of pieces_; pattern i is id i
    std::unordered_map<std::string, int, string_hash, std::equal_to<>> ids_;
    double min_score_ = std::numeric_limits<double>::infinity();
    std::optional<int> unk_id_;
    bool byte_fallback_ = false;
    std::string where_;
};

}  // namespace locost::text
