// Byte-level BPE: the tokenizer of GPT-2, RoBERTa, BART and LED, reproducing Hugging Face's
// (`tokenizers`' BPE model with the ByteLevel pre-tokenizer and decoder, as transformers'
// BartTokenizer / RobertaTokenizer configure it) id for id.
//
// Files (a checkpoint directory, or the same texts in memory through byte_bpe_sources):
//   vocab.json               {"piece": id, ...}: ids number the pieces 0..n-1
//   merges.txt               "#version: ..." then one merge "a b" per line; rank = line order
//   tokenizer_config.json    optional: added_tokens_decoder, bos_token ... mask_token,
//                            additional_special_tokens, add_prefix_space
//   special_tokens_map.json  optional: the special tokens again; it wins over the config
//   added_tokens.json        optional: {"content": id} of tokens added after training
//
// encode(text), step by step as Hugging Face does it:
//  1. Ill-formed UTF-8 in the input becomes U+FFFD (one per maximal subpart, as Python's
//     errors='replace' decoding of the file would give): HF only ever sees valid strings, and
//     SentencePiece does the same, so both tokenizers of the tool treat bad bytes alike.
//  2. Added tokens split the text first: those with normalized = false (the special tokens), then
//     those with normalized = true inside what is left (there is no normalizer, so both match the
//     raw text). Matching is leftmost-longest, non-overlapping; single_word, lstrip (`<mask>`
//     takes the whitespace before it, as RoBERTa's does) and rstrip as HF's AddedVocabulary
//     (added_tokens.hpp, which also reads the configuration files).
//  3. add_prefix_space (default false, BART's) puts a space in front of every remaining piece
//     that does not start with one.
//  4. The GPT-2 pattern `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//     splits each piece into words (gpt2_pretokenizer.hpp: PCRE2, `\s` as HF's Oniguruma reads it).
//  5. Each word's bytes map to GPT-2's byte symbols and merges apply by rank, the lowest-ranked
//     adjacent pair first (byte_bpe_model.hpp: vocab.json, merges.txt and the merge loop).
//  6. BART's convention: `<s>` (cls) first and `</s>` (sep) last (RobertaProcessing).
//
// decode(ids): special tokens skipped (unless asked), each token's characters mapped back to
// bytes (a token with a character outside the byte table, such as an added token, contributes
// its own UTF-8 as HF's ByteLevel decoder does), the bytes joined and ill-formed UTF-8 replaced by
// U+FFFD per maximal subpart (= Python's bytes.decode('utf-8', errors='replace') and Rust's
// String::from_utf8_lossy). No clean_up_tokenization_spaces.
//
// Threads: encode() and decode() are const and thread-safe. The pattern is shared and read-only;
// each encode() call makes its own PCRE2 match data and its own word cache (repeated words are
// merged once per call: a book repeats most words, a short call pays for a small map), so there is
// no lock and no cache that grows across calls.
//
// Errors (locost::error; each message names the file and the line or key):
//   tokenizer.not_found   a required file is missing
//   tokenizer.bad_vocab, tokenizer.bad_merges  vocab.json, merges.txt (byte_bpe_model.hpp)
//   tokenizer.bad_config  tokenizer_config.json, special_tokens_map.json, added_tokens.json
//                         (added_tokens.hpp)
//   tokenizer.encode_failed  PCRE2 failed on an input (resource limits)
//   tokenizer.bad_id      decode() of an id outside [0, max(model_vocab, vocab_size()))
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../config/error.hpp"
#include "../core/utf8.hpp"
#include "../io/json.hpp"
#include "added_tokens.hpp"
#include "byte_bpe_model.hpp"
#include "gpt2_pretokenizer.hpp"
#include "special_ids.hpp"

namespace locost::text {

namespace detail {

// The input repair of encode() and decode() (core/utf8.hpp), under the name the tests use.
using locost::replace_invalid_utf8;

}  // namespace detail

class byte_bpe_tokenizer {
public:
    // DIR/vocab.json + DIR/merges.txt and the optional configuration files beside them.
    static byte_bpe_tokenizer open(const std::string& dir) {
        namespace fs = std::filesystem;
        byte_bpe_sources src;
        src.dir = dir;
        const io::directory_files files(dir);
        auto read = [&](const char* name, bool required) -> std::optional<std::string> {
            const auto path = files.find(name);
            if (!path) {
                if (required)
                    throw error("tokenizer.not_found",
                                (fs::path(dir) / name).string() + ": not found (a byte-level BPE tokenizer is vocab.json and merges.txt)");
                return std::nullopt;
            }
            return io::read_text_file(*path, required ? io::vocabulary_file_limit : io::config_file_limit);
        };
        src.vocab_json = *read("vocab.json", true);
        src.merges_txt = *read("merges.txt", true);
        src.tokenizer_config_json = read("tokenizer_config.json", false);
        src.special_tokens_map_json = read("special_tokens_map.json", false);
        src.added_tokens_json = read("added_tokens.json", false);
        return byte_bpe_tokenizer(src);
    }

    explicit byte_bpe_tokenizer(const byte_bpe_sources& src) : path_(src.dir), model_(src), added_(read_added_vocabulary(src, model_)) {
        finish();
    }

    // The memory encode() holds for a text of `text_bytes` (the words, the ids and a repaired copy
    // of ill-formed input; measured at 12 bytes per byte on a 29 MB document, counted as 16).
    static constexpr double working_bytes_per_input_byte = 16.0;
    double working_bytes(std::size_t text_bytes) const { return working_bytes_per_input_byte * static_cast<double>(text_bytes); }

    // Token ids of text; with add_special (the default), BART's `<s>` first and `</s>` last.
    std::vector<int> encode(std::string_view text, bool add_special = true) const {
        std::string repaired;
        text = well_formed_utf8(text, repaired);
        std::vector<int> ids;
        ids.reserve(text.size() / 4 + 2);
        if (add_special && added_.cls >= 0) ids.push_back(added_.cls);
        encode_state st{detail::gpt2_pattern::get().new_match_data(), {}, {}, {}};
        first_pass_.split(text, st.md.get(), [&](std::string_view piece, int token) {
            if (token >= 0) {
                ids.push_back(token);
                return;
            }
            second_pass_.split(piece, st.md.get(), [&](std::string_view rest, int t) {
                if (t >= 0) ids.push_back(t);
                else encode_piece(rest, st, ids);
            });
        });
        if (add_special && added_.sep >= 0) ids.push_back(added_.sep);
        return ids;
    }

    // Text of ids; special tokens are skipped unless keep_special. model_vocab: the model's
    // vocabulary size; ids past the tokenizer's but below it are the model's extra ids, skipped and
    // counted in *extra; an id beyond both is tokenizer.bad_id.
    std::string decode(const std::vector<int>& ids, int model_vocab = 0, int* extra = nullptr, bool keep_special = false) const {
        const int limit = std::max(model_vocab, vocab_size());
        if (extra) *extra = 0;
        std::string bytes;
        for (int id : ids) {
            if (id < 0 || id >= limit)
                throw error("tokenizer.bad_id",
                            path_ + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(limit) + ")");
            if (id >= vocab_size()) {
                if (extra) ++*extra;
                continue;
            }
            if (!keep_special && special_[static_cast<std::size_t>(id)]) continue;
            bytes += bytes_of_[static_cast<std::size_t>(id)];
        }
        if (is_valid_utf8(bytes)) return bytes;
        return replace_invalid_utf8(bytes);
    }

    // Pieces in vocab.json plus the added tokens beyond them.
    int vocab_size() const noexcept { return added_.size; }
    const std::string& path() const noexcept { return path_; }
    special_ids specials() const noexcept { return added_.named; }
    // The piece of an id as vocab.json spells it (byte symbols), or the added token's content.
    const std::string& piece(int id) const {
        if (id < model_.size()) return model_.piece(id);
        return added_pieces_.at(static_cast<std::size_t>(id - model_.size()));
    }
    // The id of a piece or added token, or -1.
    int id_of(std::string_view piece) const {
        if (const int id = model_.id_of(piece); id >= 0) return id;
        const auto it = added_ids_.find(piece);
        return it == added_ids_.end() ? -1 : it->second;
    }
    bool is_special(int id) const { return special_.at(static_cast<std::size_t>(id)); }
    bool add_prefix_space() const noexcept { return added_.add_prefix_space; }
    const std::vector<added_token>& added_tokens() const noexcept { return added_.tokens; }
    std::size_t merge_count() const noexcept { return model_.merge_count(); }

private:
    // Per-call state: PCRE2 match data, the word cache (word bytes → a range of `arena`), and the
    // scratch of the merge loop.
    struct encode_state {
        detail::pcre2_match_data_ptr md;
        std::unordered_map<std::string, std::pair<std::uint32_t, std::uint32_t>, detail::string_hash, std::equal_to<>> cache;
        std::vector<int> arena;
        byte_bpe_model::merge_scratch scratch;
    };

    // Plain text between added tokens: prefix space, GPT-2 words, BPE of each (cached per call).
    void encode_piece(std::string_view piece, encode_state& st, std::vector<int>& ids) const {
        std::string prefixed;
        if (added_.add_prefix_space && piece.front() != ' ') {
            prefixed.reserve(piece.size() + 1);
            prefixed += ' ';
            prefixed += piece;
            piece = prefixed;
        }
        detail::gpt2_pattern::get().split(piece, st.md.get(), [&](std::size_t b, std::size_t e) {
            const std::string_view word = piece.substr(b, e - b);
            if (auto it = st.cache.find(word); it != st.cache.end()) {
                ids.insert(ids.end(), st.arena.begin() + it->second.first, st.arena.begin() + it->second.second);
                return;
            }
            const auto first = static_cast<std::uint32_t>(st.arena.size());
            model_.merge_word(word, st.scratch, st.arena);
            st.cache.emplace(std::string(word), std::make_pair(first, static_cast<std::uint32_t>(st.arena.size())));
            ids.insert(ids.end(), st.arena.begin() + first, st.arena.end());
        });
    }

    // The tables encode() and decode() read, from the model and the added tokens.
    void finish() {
        const auto& alphabet = detail::gpt2_bytes();
        const auto base = static_cast<std::size_t>(model_.size());
        added_pieces_.resize(static_cast<std::size_t>(added_.size) - base);
        for (const auto& a : added_.tokens)
            if (a.id >= model_.size()) {
                added_pieces_[static_cast<std::size_t>(a.id) - base] = a.content;
                added_ids_.emplace(a.content, a.id);
            }
        special_.assign(static_cast<std::size_t>(added_.size), false);
        for (const auto& a : added_.tokens)
            special_[static_cast<std::size_t>(a.id)] = special_[static_cast<std::size_t>(a.id)] || a.special;
        // Each id's bytes for decode(): its characters through the byte table, or, when one of them
        // is not a byte symbol, the piece's own UTF-8 (HF's ByteLevel decoder).
        bytes_of_.resize(static_cast<std::size_t>(added_.size));
        for (std::size_t id = 0; id < bytes_of_.size(); ++id) {
            const std::string& s = piece(static_cast<int>(id));
            std::string out;
            bool all_bytes = true;
            for (std::size_t i = 0; i < s.size();) {
                const auto c = decode_utf8(reinterpret_cast<const unsigned char*>(s.data()) + i, s.size() - i);
                const int b = c.valid && c.cp < alphabet.byte_of.size() ? alphabet.byte_of[c.cp] : -1;
                if (b < 0) {
                    all_bytes = false;
                    break;
                }
                out += static_cast<char>(b);
                i += c.len;
            }
            bytes_of_[id] = all_bytes ? std::move(out) : s;
        }
        // Matchers: special tokens (normalized = false) first, the others in a second pass.
        first_pass_ = added_token_matcher(added_.tokens, false);
        second_pass_ = added_token_matcher(added_.tokens, true);
    }

    std::string path_;
    byte_bpe_model model_;
    added_vocabulary added_;
    std::vector<std::string> added_pieces_;  // ids from model_.size() on: the added tokens' contents
    std::unordered_map<std::string, int, detail::string_hash, std::equal_to<>> added_ids_;  // of those
    added_token_matcher first_pass_, second_pass_;
    std::vector<bool> special_;
    std::vector<std::string> bytes_of_;
};

}  // namespace locost::text
