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
//     takes the whitespace before it, as RoBERTa's does) and rstrip as HF's AddedVocabulary.
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
//   tokenizer.bad_config  tokenizer_config.json, special_tokens_map.json, added_tokens.json: invalid
//                         JSON, a field of the wrong type, an added token contradicting vocab.json
//                         or another added token, added ids leaving a gap after vocab.json's
//   tokenizer.encode_failed  PCRE2 failed on an input (resource limits)
//   tokenizer.bad_id      decode() of an id outside [0, max(model_vocab, vocab_size()))
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../config/error.hpp"
#include "../core/utf8.hpp"
#include "../io/json.hpp"
#include "byte_bpe_model.hpp"
#include "gpt2_pretokenizer.hpp"
#include "special_ids.hpp"

namespace locost::text {

namespace detail {

// The input repair of encode() and decode() (core/utf8.hpp), under the name the tests use.
using locost::replace_invalid_utf8;

// Unicode's White_Space property: what Rust's regex `\s` (HF's lstrip / rstrip) matches, and the
// same set as Oniguruma's `\s` in the GPT-2 pattern.
inline bool is_white_space(char32_t c) noexcept {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

} // namespace detail

// A token added on top of the BPE vocabulary (HF's AddedToken), matched in the text before
// pre-tokenization.
struct added_token {
    std::string content;
    int id = -1;
    bool single_word = false;  // only where no word character touches it on either side
    bool lstrip = false;       // takes the whitespace on its left (RoBERTa's `<mask>`)
    bool rstrip = false;       // takes the whitespace on its right
    bool normalized = true;    // matched in the second pass (special tokens: false, the first pass)
    bool special = false;      // skipped by decode()
};

class byte_bpe_tokenizer {
public:
    // DIR/vocab.json + DIR/merges.txt and the optional configuration files beside them.
    static byte_bpe_tokenizer open(const std::string& dir) {
        namespace fs = std::filesystem;
        byte_bpe_sources src;
        src.dir = dir;
        auto read = [&](const char* name, bool required) -> std::optional<std::string> {
            const std::string path = (fs::path(dir) / name).string();
            std::error_code ec;
            if (!fs::is_regular_file(path, ec)) {
                if (required)
                    throw error("tokenizer.not_found",
                                path + ": not found (a byte-level BPE tokenizer is vocab.json and merges.txt)");
                return std::nullopt;
            }
            return io::read_text_file(path);
        };
        src.vocab_json = *read("vocab.json", true);
        src.merges_txt = *read("merges.txt", true);
        src.tokenizer_config_json = read("tokenizer_config.json", false);
        src.special_tokens_map_json = read("special_tokens_map.json", false);
        src.added_tokens_json = read("added_tokens.json", false);
        return byte_bpe_tokenizer(src);
    }

    explicit byte_bpe_tokenizer(const byte_bpe_sources& src) : path_(src.dir), model_(src) {
        read_added_tokens(src);
        finish();
    }

    // Token ids of text; with add_special (the default), BART's `<s>` first and `</s>` last.
    std::vector<int> encode(std::string_view text, bool add_special = true) const {
        std::string repaired;
        text = well_formed_utf8(text, repaired);
        std::vector<int> ids;
        ids.reserve(text.size() / 4 + 2);
        if (add_special && cls_ >= 0) ids.push_back(cls_);
        encode_state st{detail::gpt2_pattern::get().new_match_data(), {}, {}, {}};
        split_added(text, first_pass_, st, [&](std::string_view piece, int token) {
            if (token >= 0) {
                ids.push_back(token);
                return;
            }
            split_added(piece, second_pass_, st, [&](std::string_view rest, int t) {
                if (t >= 0) ids.push_back(t);
                else encode_piece(rest, st, ids);
            });
        });
        if (add_special && sep_ >= 0) ids.push_back(sep_);
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
                throw error("tokenizer.bad_id", path_ + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                                    std::to_string(limit) + ")");
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
    int vocab_size() const noexcept { return model_.size() + static_cast<int>(added_pieces_.size()); }
    const std::string& path() const noexcept { return path_; }
    special_ids specials() const noexcept { return named_; }
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
    bool add_prefix_space() const noexcept { return add_prefix_space_; }
    const std::vector<added_token>& added_tokens() const noexcept { return added_; }
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

    // Leftmost-longest matching of a set of added tokens (HF builds an Aho-Corasick automaton with
    // MatchKind::LeftmostLongest; added tokens are few, so candidates by first byte suffice).
    struct matcher {
        std::array<std::vector<int>, 256> by_first{};  // indices into added_, longest first
        std::array<bool, 256> first{};
        bool empty = true;
    };

    // HF's AddedVocabulary::find_matches: the pieces of `s`, each either plain text (token -1) or
    // an added token (its id), in order, covering s.
    template <class Emit>
    void split_added(std::string_view s, const matcher& m, encode_state& st, Emit&& emit) const {
        if (s.empty()) return;  // HF drops empty splits
        if (m.empty) {
            emit(s, -1);
            return;
        }
        const auto* p = reinterpret_cast<const unsigned char*>(s.data());
        const std::size_t n = s.size();
        std::size_t done = 0;  // the end of the last emitted piece
        std::size_t at = 0;    // where the automaton's next match may start
        while (at < n) {
            // The leftmost position where some token matches, and the longest token there.
            std::size_t b = at;
            int hit = -1;
            for (; b < n; ++b) {
                if (!m.first[p[b]]) continue;
                for (int t : m.by_first[p[b]]) {
                    const std::string& c = added_[static_cast<std::size_t>(t)].content;
                    if (c.size() <= n - b && std::memcmp(s.data() + b, c.data(), c.size()) == 0) {
                        hit = t;
                        break;
                    }
                }
                if (hit >= 0) break;
            }
            if (hit < 0) break;
            const added_token& tok = added_[static_cast<std::size_t>(hit)];
            std::size_t start = b, stop = b + tok.content.size();
            at = stop;  // matches never overlap, discarded or not
            if (tok.single_word) {
                const bool free_left = start == 0 || !ends_with_word(s, start, st);
                const bool free_right = stop == n || !detail::gpt2_pattern::get().word_char_at(s, stop, st.md.get());
                if (!free_left || !free_right) continue;
            }
            if (tok.lstrip) {
                std::size_t w = start;  // the whitespace before it, but not into the previous piece
                while (w > done) {
                    const std::size_t c = utf8_char_before(p, w, done);
                    if (!detail::is_white_space(decode_utf8(p + c, n - c).cp)) break;
                    w = c;
                }
                start = w;
            }
            if (tok.rstrip) {
                while (stop < n) {
                    const auto c = decode_utf8(p + stop, n - stop);
                    if (!detail::is_white_space(c.cp)) break;
                    stop += c.len;
                }
                at = std::max(at, stop);
            }
            if (done < start) emit(s.substr(done, start - done), -1);
            emit(s.substr(start, stop - start), tok.id);
            done = stop;
        }
        if (done < n) emit(s.substr(done), -1);
    }

    // Whether the character ending just before byte `end` of s is a word character.
    static bool ends_with_word(std::string_view s, std::size_t end, encode_state& st) {
        const std::size_t c = utf8_char_before(reinterpret_cast<const unsigned char*>(s.data()), end);
        return detail::gpt2_pattern::get().word_char_at(s.substr(0, end), c, st.md.get());
    }

    // Plain text between added tokens: prefix space, GPT-2 words, BPE of each (cached per call).
    void encode_piece(std::string_view piece, encode_state& st, std::vector<int>& ids) const {
        std::string prefixed;
        if (add_prefix_space_ && piece.front() != ' ') {
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

    // ---- the added tokens ----

    // A token named by a configuration file: its content and the attributes given with it.
    struct token_spec {
        std::string content;
        std::optional<bool> lstrip, rstrip, single_word, normalized, special;
    };

    // A special-token field: a string, an AddedToken object ({"content": ...}) or null (none).
    static std::optional<token_spec> read_token(const io::json& v, const std::string& at) {
        if (v.is_null()) return std::nullopt;
        if (v.is_string()) return token_spec{v.get<std::string>(), {}, {}, {}, {}, {}};
        if (!v.is_object())
            throw error("tokenizer.bad_config", at + " is a JSON " + io::json_type_name(v) + ", expected a string or an object with \"content\"");
        const auto c = v.find("content");
        if (c == v.end() || !c->is_string()) throw error("tokenizer.bad_config", at + " has no string \"content\"");
        token_spec t{c->get<std::string>(), {}, {}, {}, {}, {}};
        const std::pair<const char*, std::optional<bool>*> flags[] = {
            {"lstrip", &t.lstrip}, {"rstrip", &t.rstrip}, {"single_word", &t.single_word}, {"normalized", &t.normalized}, {"special", &t.special}};
        for (const auto& [name, slot] : flags) {
            const auto f = v.find(name);
            if (f == v.end() || f->is_null()) continue;
            if (!f->is_boolean())
                throw error("tokenizer.bad_config", at + ": \"" + name + "\" is a JSON " + io::json_type_name(*f) + ", expected true or false");
            *slot = f->get<bool>();
        }
        return t;
    }

    static io::json read_config_json(const std::string& text, const std::string& file) {
        io::json j;
        try {
            j = io::parse_json(text, file, "tokenizer");
        } catch (const error& e) {
            throw error("tokenizer.bad_config", e.message());
        }
        if (!j.is_object()) throw error("tokenizer.bad_config", file + ": expected a JSON object, found a JSON " + io::json_type_name(j));
        return j;
    }

    static constexpr std::array<const char*, 7> special_keys = {"bos_token", "eos_token", "unk_token", "sep_token",
                                                                "pad_token", "cls_token", "mask_token"};

    // The special-token fields of one file into `named` (by key) and `extra` (additional ones).
    static void read_special_fields(const io::json& j, const std::string& file, std::map<std::string, std::optional<token_spec>>& named,
                                    std::optional<std::vector<token_spec>>& extra) {
        for (const char* key : special_keys)
            if (const auto it = j.find(key); it != j.end()) named[key] = read_token(*it, file + ": \"" + key + "\"");
        for (const char* key : {"additional_special_tokens", "extra_special_tokens"}) {
            const auto it = j.find(key);
            if (it == j.end() || it->is_null()) continue;
            if (!it->is_array() && !it->is_object())
                throw error("tokenizer.bad_config", file + ": \"" + key + "\" is a JSON " + io::json_type_name(*it) + ", expected an array of tokens");
            std::vector<token_spec> list;
            std::size_t i = 0;
            for (const auto& [k, v] : it->items()) {
                const std::string at = file + ": \"" + key + "\"[" + (it->is_array() ? std::to_string(i) : "\"" + k + "\"") + "]";
                if (auto t = read_token(v, at)) list.push_back(std::move(*t));
                ++i;
            }
            extra = std::move(list);
        }
    }

    void read_added_tokens(const byte_bpe_sources& src) {
        const std::string config_file = src.dir + "/tokenizer_config.json";
        const std::string map_file = src.dir + "/special_tokens_map.json";
        const std::string added_file = src.dir + "/added_tokens.json";
        const int base_size = model_.size();

        // The named special tokens: BartTokenizer's defaults, then tokenizer_config.json, then
        // special_tokens_map.json (transformers lets the map override the config).
        std::map<std::string, std::optional<token_spec>> named = {
            {"bos_token", token_spec{"<s>", {}, {}, {}, {}, {}}},  {"eos_token", token_spec{"</s>", {}, {}, {}, {}, {}}},
            {"unk_token", token_spec{"<unk>", {}, {}, {}, {}, {}}}, {"sep_token", token_spec{"</s>", {}, {}, {}, {}, {}}},
            {"pad_token", token_spec{"<pad>", {}, {}, {}, {}, {}}}, {"cls_token", token_spec{"<s>", {}, {}, {}, {}, {}}},
            {"mask_token", token_spec{"<mask>", true, {}, {}, {}, {}}}};  // RoBERTa: AddedToken(mask, lstrip=True)
        std::optional<std::vector<token_spec>> extra;

        struct explicit_token {
            added_token token;
            std::string file;   // the file that gives the id
            std::string entry;  // the entry in it, e.g. added_tokens_decoder['50264']
        };
        std::vector<explicit_token> explicit_tokens;  // with ids given by a file

        if (src.tokenizer_config_json) {
            const io::json j = read_config_json(*src.tokenizer_config_json, config_file);
            read_special_fields(j, config_file, named, extra);
            if (const auto it = j.find("add_prefix_space"); it != j.end() && !it->is_null()) {
                if (!it->is_boolean())
                    throw error("tokenizer.bad_config", config_file + ": \"add_prefix_space\" is a JSON " + io::json_type_name(*it) +
                                                            ", expected true or false");
                add_prefix_space_ = it->get<bool>();
            }
            if (const auto it = j.find("added_tokens_decoder"); it != j.end() && !it->is_null()) {
                if (!it->is_object())
                    throw error("tokenizer.bad_config", config_file + ": \"added_tokens_decoder\" is a JSON " + io::json_type_name(*it) +
                                                            ", expected an object of id → token");
                for (const auto& [key, v] : it->items()) {
                    const std::string entry = "added_tokens_decoder[" + detail::quoted(key) + "]", where = config_file + ": " + entry;
                    int id = -1;
                    if (!key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos) id = std::stoi(key);
                    if (id < 0) throw error("tokenizer.bad_config", where + ": the key is not a token id (a non-negative integer)");
                    if (!v.is_object()) throw error("tokenizer.bad_config", where + " is a JSON " + io::json_type_name(v) + ", expected an object");
                    const token_spec t = *read_token(v, where);
                    added_token a;
                    a.content = t.content;
                    a.id = id;
                    a.special = t.special.value_or(false);
                    a.lstrip = t.lstrip.value_or(false);
                    a.rstrip = t.rstrip.value_or(false);
                    a.single_word = t.single_word.value_or(false);
                    a.normalized = t.normalized.value_or(!a.special);
                    explicit_tokens.push_back({std::move(a), config_file, entry});
                }
            }
        }
        if (src.special_tokens_map_json) {
            const io::json j = read_config_json(*src.special_tokens_map_json, map_file);
            read_special_fields(j, map_file, named, extra);
        }
        if (src.added_tokens_json) {
            const io::json j = read_config_json(*src.added_tokens_json, added_file);
            for (const auto& [content, v] : j.items()) {
                const std::string entry = "entry " + detail::quoted(content), where = added_file + ": " + entry;
                if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<std::int64_t>() < 0) || v.get<std::uint64_t>() > 1u << 30)
                    throw error("tokenizer.bad_config", where + " has " + v.dump() + " as its id, expected a non-negative integer");
                added_token a;
                a.content = content;
                a.id = v.get<int>();
                explicit_tokens.push_back({std::move(a), added_file, entry});
            }
        }

        // Tokens with explicit ids: they must agree with vocab.json and with each other.
        std::map<int, std::size_t> by_id;                       // id → index in added_
        std::unordered_map<std::string, std::size_t> by_content;  // content → index in added_
        std::map<int, std::string> file_of;                     // id → the file that gave it
        for (auto& [a, file, entry] : explicit_tokens) {
            const std::string gives = file + ": " + entry + " gives id " + std::to_string(a.id) + " to " + detail::quoted(a.content);
            if (a.id < base_size && model_.piece(a.id) != a.content)
                throw error("tokenizer.bad_config", gives + ", which is " + detail::quoted(model_.piece(a.id)) + " in vocab.json");
            if (const int v = model_.id_of(a.content); v >= 0 && v != a.id)
                throw error("tokenizer.bad_config", gives + ", which vocab.json gives id " + std::to_string(v));
            if (const auto it = by_id.find(a.id); it != by_id.end()) {
                if (added_[it->second].content != a.content)
                    throw error("tokenizer.bad_config", gives + ", which " + file_of[a.id] + " gives to " + detail::quoted(added_[it->second].content));
                continue;  // the same token again (added_tokens.json repeating the config): the first keeps its attributes
            }
            if (const auto it = by_content.find(a.content); it != by_content.end())
                throw error("tokenizer.bad_config", gives + ", which " + file_of[added_[it->second].id] + " gives id " +
                                                        std::to_string(added_[it->second].id));
            by_id.emplace(a.id, added_.size());
            by_content.emplace(a.content, added_.size());
            file_of.emplace(a.id, file);
            added_.push_back(std::move(a));
        }
        int next = base_size;
        for (const auto& [id, i] : by_id) {
            if (id < base_size) continue;
            if (id != next) {
                const int want = id;  // not the binding itself: clang 14 cannot capture structured bindings
                const auto& e = *std::find_if(explicit_tokens.begin(), explicit_tokens.end(), [&](const explicit_token& x) { return x.token.id == want; });
                throw error("tokenizer.bad_config", e.file + ": " + e.entry + " gives id " + std::to_string(id) + " to " + detail::quoted(added_[i].content) +
                                                        ", leaving id " + std::to_string(next) + " without a token (vocab.json has ids 0.." +
                                                        std::to_string(base_size - 1) + "; added ids must follow them without a gap)");
            }
            ++next;
        }

        // The special tokens: marked special where already known, else registered with their
        // vocab.json id, else appended after every other id (as transformers adds them).
        auto add_special = [&](const token_spec& t, bool lstrip_default) -> int {
            if (t.content.empty()) return -1;
            if (const auto it = by_content.find(t.content); it != by_content.end()) {
                added_[it->second].special = true;
                return added_[it->second].id;
            }
            added_token a;
            a.content = t.content;
            a.special = true;
            a.lstrip = t.lstrip.value_or(lstrip_default);
            a.rstrip = t.rstrip.value_or(false);
            a.single_word = t.single_word.value_or(false);
            a.normalized = t.normalized.value_or(false);
            const int v = model_.id_of(t.content);
            a.id = v >= 0 ? v : next++;
            by_content.emplace(a.content, added_.size());
            added_.push_back(std::move(a));
            return added_.back().id;
        };
        std::map<std::string, int> special_id;
        for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"})
            special_id[key] = named[key] ? add_special(*named[key], std::string_view(key) == "mask_token") : -1;  // RoBERTa's lstrip mask
        if (extra)
            for (const auto& t : *extra) add_special(t, false);
        named_ = {special_id["bos_token"], special_id["eos_token"], special_id["pad_token"], special_id["unk_token"], special_id["mask_token"]};
        cls_ = special_id["cls_token"];
        sep_ = special_id["sep_token"];

        added_pieces_.resize(static_cast<std::size_t>(next - base_size));
        for (const auto& a : added_)
            if (a.id >= base_size) {
                added_pieces_[static_cast<std::size_t>(a.id - base_size)] = a.content;
                added_ids_.emplace(a.content, a.id);
            }
    }

    void finish() {
        const auto& alphabet = detail::gpt2_bytes();
        special_.assign(static_cast<std::size_t>(vocab_size()), false);
        for (const auto& a : added_) special_[static_cast<std::size_t>(a.id)] = special_[static_cast<std::size_t>(a.id)] || a.special;
        // Each id's bytes for decode(): its characters through the byte table, or, when one of them
        // is not a byte symbol, the piece's own UTF-8 (HF's ByteLevel decoder).
        bytes_of_.resize(static_cast<std::size_t>(vocab_size()));
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
        for (std::size_t i = 0; i < added_.size(); ++i) {
            const auto& a = added_[i];
            if (a.content.empty()) continue;  // never matched (HF ignores empty added tokens)
            matcher& m = a.normalized ? second_pass_ : first_pass_;
            const auto f = static_cast<unsigned char>(a.content[0]);
            m.by_first[f].push_back(static_cast<int>(i));
            m.first[f] = true;
            m.empty = false;
        }
        for (matcher* m : {&first_pass_, &second_pass_})
            for (auto& v : m->by_first)
                std::stable_sort(v.begin(), v.end(), [&](int x, int y) {
                    return added_[static_cast<std::size_t>(x)].content.size() > added_[static_cast<std::size_t>(y)].content.size();
                });
    }

    std::string path_;
    byte_bpe_model model_;
    std::vector<std::string> added_pieces_;  // ids from model_.size() on: the added tokens' contents
    std::unordered_map<std::string, int, detail::string_hash, std::equal_to<>> added_ids_;  // of those
    std::vector<added_token> added_;
    matcher first_pass_, second_pass_;
    std::vector<bool> special_;
    std::vector<std::string> bytes_of_;
    special_ids named_;
    int cls_ = -1, sep_ = -1;
    bool add_prefix_space_ = false;
};

} // namespace locost::text
