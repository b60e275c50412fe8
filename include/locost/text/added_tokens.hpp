// Added tokens (Hugging Face's AddedVocabulary) of a byte-level BPE tokenizer: the tokens that
// its configuration files put on top of vocab.json, and the matching that splits text at them
// before pre-tokenization (step 2 of byte_bpe.hpp's encode()).
//
// Reading (read_added_vocabulary):
//   tokenizer_config.json    optional: added_tokens_decoder, bos_token ... mask_token,
//                            additional_special_tokens, add_prefix_space
//   special_tokens_map.json  optional: the special tokens again; it wins over the config
//   added_tokens.json        optional: {"content": id} of tokens added after training
// The named special tokens start from BartTokenizer's defaults (`<mask>` takes the whitespace
// before it, as RoBERTa's does). Tokens with explicit ids must agree with vocab.json and with each
// other, and added ids must follow vocab.json's without a gap; a special token not known yet takes
// its vocab.json id, else the next id after all others (as transformers adds them).
//
// Matching (added_token_matcher): those with normalized = false (the special tokens) split the
// text first, then those with normalized = true split what is left (there is no normalizer, so
// both match the raw text). Matching is leftmost-longest, non-overlapping; single_word, lstrip and
// rstrip as HF's AddedVocabulary. Whitespace is Unicode's White_Space; word characters are Rust
// regex's \w, which gpt2_pretokenizer.hpp's compiled pattern answers.
//
// Error: tokenizer.bad_config (invalid JSON, a field of the wrong type, an added token
// contradicting vocab.json or another added token, added ids leaving a gap after vocab.json's),
// each message naming the file and the key.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../config/error.hpp"
#include "../core/utf8.hpp"
#include "../io/json.hpp"
#include "aho_corasick.hpp"
#include "byte_bpe_model.hpp"
#include "gpt2_pretokenizer.hpp"
#include "special_ids.hpp"

namespace locost::text {

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

// What the configuration files add to vocab.json.
struct added_vocabulary {
    std::vector<added_token> tokens;  // those with ids from a file, then the special tokens registered
    int size = 0;                     // ids in all: vocab.json's, then the added ones beyond them
    special_ids named;
    int cls = -1, sep = -1;         // the first and last token of an encoding (RobertaProcessing)
    bool add_prefix_space = false;  // BART's default
};

namespace detail {

// Unicode's White_Space property: what Rust's regex `\s` (HF's lstrip / rstrip) matches, and the
// same set as Oniguruma's `\s` in the GPT-2 pattern.
inline bool is_white_space(char32_t c) noexcept {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
        c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// A token named by a configuration file: its content and the attributes given with it.
struct token_spec {
    std::string content;
    std::optional<bool> lstrip, rstrip, single_word, normalized, special;

    // The added token it describes, with `id`: `special` and lstrip's default are the caller's,
    // the other attributes default as HF's AddedToken does (normalized = !special).
    added_token as_added(int id, bool special, bool lstrip_default) const {
        added_token a;
        a.content = content;
        a.id = id;
        a.special = special;
        a.lstrip = lstrip.value_or(lstrip_default);
        a.rstrip = rstrip.value_or(false);
        a.single_word = single_word.value_or(false);
        a.normalized = normalized.value_or(!special);
        return a;
    }
};

// A special-token field: a string, an AddedToken object ({"content": ...}) or null (none).
inline std::optional<token_spec> read_token(const io::json& v, const std::string& at) {
    if (v.is_null()) return std::nullopt;
    if (v.is_string()) return token_spec{v.get<std::string>(), {}, {}, {}, {}, {}};
    if (!v.is_object())
        throw error("tokenizer.bad_config",
                    at + " is a JSON " + io::json_type_name(v) + ", expected a string or an object with \"content\"");
    const auto c = v.find("content");
    if (c == v.end() || !c->is_string()) throw error("tokenizer.bad_config", at + " has no string \"content\"");
    token_spec t{c->get<std::string>(), {}, {}, {}, {}, {}};
    const std::pair<const char*, std::optional<bool>*> flags[] = {{"lstrip", &t.lstrip},
                                                                  {"rstrip", &t.rstrip},
                                                                  {"single_word", &t.single_word},
                                                                  {"normalized", &t.normalized},
                                                                  {"special", &t.special}};
    for (const auto& [name, slot] : flags) {
        const auto f = v.find(name);
        if (f == v.end() || f->is_null()) continue;
        if (!f->is_boolean())
            throw error("tokenizer.bad_config", at + ": \"" + name + "\" is a JSON " + io::json_type_name(*f) + ", expected true or false");
        *slot = f->get<bool>();
    }
    return t;
}

inline io::json read_config_json(const std::string& text, const std::string& file) {
    io::json j;
    try {
        j = io::parse_json(text, file, "tokenizer");
    } catch (const error& e) { throw error("tokenizer.bad_config", e.message()); }
    if (!j.is_object()) throw error("tokenizer.bad_config", file + ": expected a JSON object, found a JSON " + io::json_type_name(j));
    return j;
}

// The named special tokens of tokenizer_config.json and special_tokens_map.json.
inline constexpr std::array<const char*, 7> special_keys = {"bos_token", "eos_token", "unk_token", "sep_token",
                                                            "pad_token", "cls_token", "mask_token"};

// The special-token fields of one file into `named` (by key) and `extra` (additional ones).
inline void read_special_fields(const io::json& j, const std::string& file, std::map<std::string, std::optional<token_spec>>& named,
                                std::optional<std::vector<token_spec>>& extra) {
    for (const char* key : special_keys)
        if (const auto it = j.find(key); it != j.end()) named[key] = read_token(*it, file + ": \"" + key + "\"");
    for (const char* key : {"additional_special_tokens", "extra_special_tokens"}) {
        const auto it = j.find(key);
        if (it == j.end() || it->is_null()) continue;
        if (!it->is_array() && !it->is_object())
            throw error("tokenizer.bad_config",
                        file + ": \"" + key + "\" is a JSON " + io::json_type_name(*it) + ", expected an array of tokens");
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

}  // namespace detail

// The added tokens and special-token roles that src's configuration files give on top of `vocab`
// (vocab.json, already read).
inline added_vocabulary read_added_vocabulary(const byte_bpe_sources& src, const byte_bpe_model& vocab) {
    using detail::token_spec;
    added_vocabulary added;
    const int base_size = vocab.size();
    const std::string config_file = src.config_file();
    const std::string vocab_name = src.vocab_name.empty() ? "vocab.json" : src.vocab_name;
    const std::string map_file = src.dir + "/special_tokens_map.json";
    const std::string added_file = src.dir + "/added_tokens.json";

    // The named special tokens: BartTokenizer's defaults, then tokenizer_config.json, then
    // special_tokens_map.json (transformers lets the map override the config).
    std::map<std::string, std::optional<token_spec>> named = {
        {"bos_token", token_spec{"<s>", {}, {}, {}, {}, {}}},      {"eos_token", token_spec{"</s>", {}, {}, {}, {}, {}}},
        {"unk_token", token_spec{"<unk>", {}, {}, {}, {}, {}}},    {"sep_token", token_spec{"</s>", {}, {}, {}, {}, {}}},
        {"pad_token", token_spec{"<pad>", {}, {}, {}, {}, {}}},    {"cls_token", token_spec{"<s>", {}, {}, {}, {}, {}}},
        {"mask_token", token_spec{"<mask>", true, {}, {}, {}, {}}}};  // RoBERTa: AddedToken(mask, lstrip=True)
    std::optional<std::vector<token_spec>> extra;

    struct explicit_token {
        added_token token;
        std::string file;   // the file that gives the id
        std::string entry;  // the entry in it, e.g. added_tokens_decoder['50264']
    };
    std::vector<explicit_token> explicit_tokens;  // with ids given by a file

    if (src.tokenizer_config_json) {
        const io::json j = detail::read_config_json(*src.tokenizer_config_json, config_file);
        detail::read_special_fields(j, config_file, named, extra);
        if (const auto it = j.find("add_prefix_space"); it != j.end() && !it->is_null()) {
            if (!it->is_boolean())
                throw error("tokenizer.bad_config",
                            config_file + ": \"add_prefix_space\" is a JSON " + io::json_type_name(*it) + ", expected true or false");
            added.add_prefix_space = it->get<bool>();
        }
        if (const auto it = j.find("added_tokens_decoder"); it != j.end() && !it->is_null()) {
            if (!it->is_object())
                throw error("tokenizer.bad_config",
                            config_file + ": \"added_tokens_decoder\" is a JSON " + io::json_type_name(*it) +
                                ", expected an object of id → token");
            for (const auto& [key, v] : it->items()) {
                const std::string entry = "added_tokens_decoder[" + detail::quoted(key) + "]", where = config_file + ": " + entry;
                int id = -1;
                if (!key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos) id = std::stoi(key);
                if (id < 0) throw error("tokenizer.bad_config", where + ": the key is not a token id (a non-negative integer)");
                if (!v.is_object())
                    throw error("tokenizer.bad_config", where + " is a JSON " + io::json_type_name(v) + ", expected an object");
                const token_spec t = *detail::read_token(v, where);
                explicit_tokens.push_back({t.as_added(id, t.special.value_or(false), false), config_file, entry});
            }
        }
    }
    if (src.special_tokens_map_json) {
        const io::json j = detail::read_config_json(*src.special_tokens_map_json, map_file);
        detail::read_special_fields(j, map_file, named, extra);
    }
    if (src.added_tokens_json) {
        const io::json j = detail::read_config_json(*src.added_tokens_json, added_file);
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
    std::map<int, std::size_t> by_id;                         // id → index in added.tokens
    std::unordered_map<std::string, std::size_t> by_content;  // content → index in added.tokens
    std::map<int, std::string> file_of;                       // id → the file that gave it
    for (auto& [a, file, entry] : explicit_tokens) {
        const std::string gives = file + ": " + entry + " gives id " + std::to_string(a.id) + " to " + detail::quoted(a.content);
        if (a.id < base_size && vocab.piece(a.id) != a.content)
            throw error("tokenizer.bad_config", gives + ", which is " + detail::quoted(vocab.piece(a.id)) + " in " + vocab_name);
        if (const int v = vocab.id_of(a.content); v >= 0 && v != a.id)
            throw error("tokenizer.bad_config", gives + ", which " + vocab_name + " gives id " + std::to_string(v));
        if (const auto it = by_id.find(a.id); it != by_id.end()) {
            if (added.tokens[it->second].content != a.content)
                throw error("tokenizer.bad_config",
                            gives + ", which " + file_of[a.id] + " gives to " + detail::quoted(added.tokens[it->second].content));
            continue;  // the same token again (added_tokens.json repeating the config): the first keeps its attributes
        }
        if (const auto it = by_content.find(a.content); it != by_content.end())
            throw error("tokenizer.bad_config",
                        gives + ", which " + file_of[added.tokens[it->second].id] + " gives id " +
                            std::to_string(added.tokens[it->second].id));
        by_id.emplace(a.id, added.tokens.size());
        by_content.emplace(a.content, added.tokens.size());
        file_of.emplace(a.id, file);
        added.tokens.push_back(std::move(a));
    }
    int next = base_size;
    for (const auto& [id, i] : by_id) {
        if (id < base_size) continue;
        if (id != next) {
            const int want = id;  // not the binding itself: clang 14 cannot capture structured bindings
            const auto& e =
                *std::find_if(explicit_tokens.begin(), explicit_tokens.end(), [&](const explicit_token& x) { return x.token.id == want; });
            throw error("tokenizer.bad_config",
                        e.file + ": " + e.entry + " gives id " + std::to_string(id) + " to " + detail::quoted(added.tokens[i].content) +
                            ", leaving id " + std::to_string(next) + " without a token (" + vocab_name + " has ids 0.." +
                            std::to_string(base_size - 1) + "; added ids must follow them without a gap)");
        }
        ++next;
    }

    // The special tokens: marked special where already known, else registered with their
    // vocab.json id, else appended after every other id (as transformers adds them).
    auto add_special = [&](const token_spec& t, bool lstrip_default) -> int {
        if (t.content.empty()) return -1;
        if (const auto it = by_content.find(t.content); it != by_content.end()) {
            added.tokens[it->second].special = true;
            return added.tokens[it->second].id;
        }
        const int v = vocab.id_of(t.content);
        by_content.emplace(t.content, added.tokens.size());
        added.tokens.push_back(t.as_added(v >= 0 ? v : next++, true, lstrip_default));
        return added.tokens.back().id;
    };
    std::map<std::string, int> special_id;
    for (const char* key : detail::special_keys)
        special_id[key] = named[key] ? add_special(*named[key], std::string_view(key) == "mask_token") : -1;  // RoBERTa's lstrip mask
    if (extra)
        for (const auto& t : *extra) add_special(t, false);
    added.named = {special_id["bos_token"], special_id["eos_token"], special_id["pad_token"], special_id["unk_token"],
                   special_id["mask_token"]};
    added.cls = special_id["cls_token"];
    added.sep = special_id["sep_token"];
    added.size = next;
    return added;
}

// Leftmost-longest matching of a set of added tokens (HF builds an Aho-Corasick automaton with
// MatchKind::LeftmostLongest). The longest token starting at each position is found by an
// Aho–Corasick automaton of the reversed tokens run backwards over the text (a token starting at
// b is a reversed token ending at b), a window of positions at a time: linear in the text and
// the longest token, whatever the tokens' number and shapes (a trie walked from every position
// cost the text times the longest prefix found there: 18 s for an added token of 100K bytes
// against 100K bytes of its prefix, where HF's automaton is linear).
class added_token_matcher {
public:
    added_token_matcher() = default;

    // The tokens of `all` whose `normalized` is as given: HF matches the others (the special
    // tokens) in a pass of their own, first. Empty tokens are never matched (HF ignores them).
    added_token_matcher(const std::vector<added_token>& all, bool normalized) {
        for (const auto& a : all) {
            if (a.content.empty() || a.normalized != normalized) continue;
            tokens_.push_back(a);
            longest_token_ = std::max(longest_token_, a.content.size());
        }
        std::vector<std::string> reversed;
        reversed.reserve(tokens_.size());
        for (const auto& a : tokens_) reversed.emplace_back(a.content.rbegin(), a.content.rend());
        const std::vector<std::string_view> views(reversed.begin(), reversed.end());
        reversed_ = byte_automaton(views);
    }

    // HF's AddedVocabulary::find_matches: the pieces of `s`, each either plain text (token -1) or
    // an added token (its id), in order, covering s. `md`: the caller's match data of the GPT-2
    // pattern, for single_word's test.
    template <class Emit>
    void split(std::string_view s, pcre2_match_data_8* md, Emit&& emit) const {
        if (s.empty()) return;  // HF drops empty splits
        if (tokens_.empty()) {
            emit(s, -1);
            return;
        }
        const auto* p = reinterpret_cast<const unsigned char*>(s.data());
        const std::size_t n = s.size();
        // longest[b - x]: the longest token starting at b, for b in the window [x, x + window).
        const std::size_t window = std::max<std::size_t>(std::size_t{1} << 16, longest_token_);
        std::vector<int> longest;
        std::size_t x = 0, filled = 0;  // the window: [x, filled)
        auto longest_at = [&](std::size_t b) {
            if (b >= filled) {
                x = b;
                filled = std::min(n, b + window);
                const std::size_t end = std::min(n, filled + longest_token_);  // every token starting before `filled` ends by here
                longest.assign(filled - x, -1);
                int st = byte_automaton::root;
                for (std::size_t i = end; i-- > x;) {
                    st = reversed_.step(st, p[i]);
                    if (i < filled) longest[i - x] = reversed_.longest(st);
                }
            }
            return longest[b - x];
        };
        std::size_t done = 0;  // the end of the last emitted piece
        std::size_t at = 0;    // where the next match may start
        while (at < n) {
            // The leftmost position where some token matches, and the longest token there.
            std::size_t b = at;
            int hit = -1;
            for (; b < n; ++b)
                if ((hit = longest_at(b)) >= 0) break;
            if (hit < 0) break;
            const added_token& tok = tokens_[static_cast<std::size_t>(hit)];
            std::size_t start = b, stop = b + tok.content.size();
            at = stop;  // matches never overlap, discarded or not
            if (tok.single_word) {
                const bool free_left = start == 0 || !ends_with_word(s, start, md);
                const bool free_right = stop == n || !detail::gpt2_pattern::get().word_char_at(s, stop, md);
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

private:
    // Whether the character ending just before byte `end` of s is a word character.
    static bool ends_with_word(std::string_view s, std::size_t end, pcre2_match_data_8* md) {
        const std::size_t c = utf8_char_before(reinterpret_cast<const unsigned char*>(s.data()), end);
        return detail::gpt2_pattern::get().word_char_at(s.substr(0, end), c, md);
    }

    std::vector<added_token> tokens_;
    byte_automaton reversed_;  // of the tokens' contents reversed; pattern i is tokens_[i]
    std::size_t longest_token_ = 0;
};

}  // namespace locost::text
