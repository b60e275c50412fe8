// tokenizer.json: the one file Hugging Face's `tokenizers` (and transformers 5's save_pretrained)
// writes for a tokenizer, read component by component and run as that library runs it.
//
// A Unigram model (T5, Pegasus) runs here (unigram_tokenizer); a byte-level BPE model (BART, LED)
// becomes the sources of byte_bpe_tokenizer (byte_bpe.hpp), which already reproduces HF's BPE with
// the ByteLevel pre-tokenizer, decoder and RobertaProcessing: bpe_sources().
//
// encode(text), as HF's Tokenizer::encode(text, add_special_tokens = true):
//  1. ill-formed UTF-8 becomes U+FFFD (as byte_bpe.hpp, step 1);
//  2. added tokens with normalized = false split the raw text (added_tokens.hpp's matcher);
//  3. each piece between them is normalized: Sequence of Precompiled (precompiled_charsmap.hpp),
//     Replace (a string or a PCRE2 regex, every match, left to right), Strip, Prepend;
//  4. added tokens with normalized = true split the normalized piece;
//  5. each remaining piece is pre-tokenized: Sequence of WhitespaceSplit (drops Unicode
//     White_Space, keeps the runs between) and Metaspace (' ' → replacement; the replacement put
//     in front as prepend_scheme says — "always", "first": only a piece at the text's start, or
//     "never"; the old `add_prefix_space` field means always/never; with split, a new word
//     starts at each replacement character);
//  6. each word goes through the Unigram model (unigram_model.hpp);
//  7. the post-processor adds its tokens: TemplateProcessing's `single` ($A between special
//     tokens, T5's `$A </s>`), or none.
// decode(ids): tokens of the ids (added tokens' contents, else the model's pieces), special ones
// skipped unless keep_special, then the Metaspace decoder (the replacement becomes a space, and is
// dropped in the first token unless prepend_scheme is "never"), joined.
//
// Components outside that list are tokenizer.unsupported_component, naming the file, the place
// and the type; a malformed field is tokenizer.bad_tokenizer_json naming the field (the
// Precompiled map: tokenizer.bad_normalizer; the model: tokenizer.bad_model).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "../config/error.hpp"
#include "../core/utf8.hpp"
#include "../io/file_access.hpp"
#include "../io/json.hpp"
#include "added_tokens.hpp"
#include "byte_bpe_model.hpp"
#include "gpt2_pretokenizer.hpp"
#include "precompiled_charsmap.hpp"
#include "special_ids.hpp"
#include "unigram_model.hpp"

namespace locost::text {

namespace tokenizer_json_detail {

[[noreturn]] inline void bad(const std::string& where, const std::string& what) {
    throw error("tokenizer.bad_tokenizer_json", where + ": " + what);
}

inline const io::json& field(const io::json& obj, const char* key, const std::string& where) {
    const auto it = obj.find(key);
    if (it == obj.end()) bad(where, "has no \"" + std::string(key) + "\"");
    return *it;
}

inline std::string string_field(const io::json& obj, const char* key, const std::string& where) {
    const io::json& v = field(obj, key, where);
    if (!v.is_string()) bad(where, "\"" + std::string(key) + "\" is a JSON " + io::json_type_name(v) + ", expected a string");
    return v.get<std::string>();
}

inline bool bool_field(const io::json& obj, const char* key, const std::string& where, bool fallback) {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) bad(where, "\"" + std::string(key) + "\" is a JSON " + io::json_type_name(*it) + ", expected true or false");
    return it->get<bool>();
}

inline std::string type_of(const io::json& obj, const std::string& where) {
    if (!obj.is_object()) bad(where, "is a JSON " + io::json_type_name(obj) + ", expected an object with a \"type\"");
    return string_field(obj, "type", where);
}

[[noreturn]] inline void unsupported(const std::string& where, const std::string& type, const char* supported) {
    throw error("tokenizer.unsupported_component", where + ": type \"" + type + "\" is not supported (supported: " + supported + ")");
}

// One character (the replacement of Metaspace).
inline std::string one_char(const io::json& obj, const char* key, const std::string& where) {
    const std::string s = string_field(obj, key, where);
    const auto c = decode_utf8(reinterpret_cast<const unsigned char*>(s.data()), s.size());
    if (s.empty() || !c.valid || c.len != s.size())
        bad(where, "\"" + std::string(key) + "\" is " + detail::quoted(s) + ", expected one character");
    return s;
}

// A compiled PCRE2 pattern (Replace's Regex).
class regex {
public:
    regex(const std::string& pattern, const std::string& where) {
        int err = 0;
        PCRE2_SIZE at = 0;
        pcre2_code_8* c =
            pcre2_compile_8(reinterpret_cast<PCRE2_SPTR8>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err, &at, nullptr);
        if (c) code_ = std::shared_ptr<pcre2_code_8>(c, detail::code_deleter{});
        if (!code_) {
            PCRE2_UCHAR8 msg[256];
            pcre2_get_error_message_8(err, msg, sizeof msg);
            bad(where,
                "the pattern " + detail::quoted(pattern) + " is not a valid regular expression (" + reinterpret_cast<const char*>(msg) +
                    " at offset " + std::to_string(at) + ")");
        }
    }
    // Calls match(begin, end) for each match, left to right, non-overlapping.
    template <class Match>
    void each(std::string_view s, Match&& match) const {
        const detail::pcre2_match_data_ptr md(pcre2_match_data_create_from_pattern_8(code_.get(), nullptr));
        if (!md) throw std::bad_alloc();
        const auto* p = reinterpret_cast<PCRE2_SPTR8>(s.data());
        for (std::size_t at = 0; at <= s.size();) {
            const int rc = pcre2_match_8(code_.get(), p, s.size(), at, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
            if (rc == PCRE2_ERROR_NOMATCH) return;
            if (rc < 0) throw error("tokenizer.encode_failed", "a Replace pattern failed at byte " + std::to_string(at) + " of the input");
            const PCRE2_SIZE* ov = pcre2_get_ovector_pointer_8(md.get());
            match(ov[0], ov[1]);
            at = ov[1] > ov[0] ? ov[1] : ov[1] + (ov[1] < s.size() ? decode_utf8(p + ov[1], s.size() - ov[1]).len : 1);
        }
    }

private:
    std::shared_ptr<pcre2_code_8> code_;  // shared: a tokenizer copies cheaply
};

struct precompiled_step {
    std::shared_ptr<const precompiled_charsmap> map;
};
struct replace_step {
    std::optional<regex> pattern;  // a Regex, else the literal
    std::string literal, content;
};
struct strip_step {
    bool left = false, right = false;
};
struct prepend_step {
    std::string prepend;
};
using normalizer_step = std::variant<precompiled_step, replace_step, strip_step, prepend_step>;

enum class prepend_scheme { always, first, never };
struct whitespace_split_step {};
struct metaspace_step {
    std::string replacement = "\xE2\x96\x81";  // U+2581
    prepend_scheme scheme = prepend_scheme::always;
    bool split = true;
};
using pre_tokenizer_step = std::variant<whitespace_split_step, metaspace_step>;

inline std::string base64_decode(std::string_view s, const std::string& where) {
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    while (!s.empty() && s.back() == '=') s.remove_suffix(1);
    std::string out;
    out.reserve(s.size() * 3 / 4);
    std::uint32_t acc = 0;
    int bits = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const int v = value(s[i]);
        if (v < 0) bad(where, "\"precompiled_charsmap\" is not base64 (character " + std::to_string(i) + ")");
        acc = (acc << 6) | static_cast<std::uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((acc >> bits) & 0xFF);
        }
    }
    return out;
}

inline void read_normalizer(const io::json& j, const std::string& where, std::vector<normalizer_step>& steps) {
    if (j.is_null()) return;
    const std::string type = type_of(j, where);
    if (type == "Sequence") {
        const io::json& list = field(j, "normalizers", where);
        if (!list.is_array()) bad(where, "\"normalizers\" is a JSON " + io::json_type_name(list) + ", expected an array");
        for (std::size_t i = 0; i < list.size(); ++i) read_normalizer(list[i], where + "[" + std::to_string(i) + "]", steps);
    } else if (type == "Precompiled") {
        const io::json& cm = field(j, "precompiled_charsmap", where);
        if (cm.is_null()) return;  // SentencePiece models without a map (identity normalization)
        if (!cm.is_string()) bad(where, "\"precompiled_charsmap\" is a JSON " + io::json_type_name(cm) + ", expected a base64 string");
        steps.emplace_back(precompiled_step{
            std::make_shared<const precompiled_charsmap>(base64_decode(cm.get<std::string>(), where), where + " Precompiled")});
    } else if (type == "Replace") {
        replace_step r;
        const io::json& pattern = field(j, "pattern", where);
        if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string())
            r.pattern.emplace(pattern["Regex"].get<std::string>(), where + " Replace");
        else if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string())
            r.literal = pattern["String"].get<std::string>();
        else bad(where, "\"pattern\" is " + pattern.dump().substr(0, 60) + ", expected {\"String\": …} or {\"Regex\": …}");
        if (!r.pattern && r.literal.empty()) bad(where, "\"pattern\" is an empty string");
        r.content = string_field(j, "content", where);
        steps.emplace_back(std::move(r));
    } else if (type == "Strip") {
        steps.emplace_back(strip_step{bool_field(j, "strip_left", where, false), bool_field(j, "strip_right", where, false)});
    } else if (type == "Prepend") {
        steps.emplace_back(prepend_step{string_field(j, "prepend", where)});
    } else {
        unsupported(where, type, "Sequence, Precompiled, Replace, Strip, Prepend");
    }
}

inline void read_pre_tokenizer(const io::json& j, const std::string& where, std::vector<pre_tokenizer_step>& steps) {
    if (j.is_null()) return;
    const std::string type = type_of(j, where);
    if (type == "Sequence") {
        const io::json& list = field(j, "pretokenizers", where);
        if (!list.is_array()) bad(where, "\"pretokenizers\" is a JSON " + io::json_type_name(list) + ", expected an array");
        for (std::size_t i = 0; i < list.size(); ++i) read_pre_tokenizer(list[i], where + "[" + std::to_string(i) + "]", steps);
    } else if (type == "WhitespaceSplit") {
        steps.emplace_back(whitespace_split_step{});
    } else if (type == "Metaspace") {
        metaspace_step m;
        m.replacement = one_char(j, "replacement", where);
        if (const auto it = j.find("prepend_scheme"); it != j.end() && !it->is_null()) {
            const std::string s = it->is_string() ? it->get<std::string>() : std::string();
            if (s == "always") m.scheme = prepend_scheme::always;
            else if (s == "first") m.scheme = prepend_scheme::first;
            else if (s == "never") m.scheme = prepend_scheme::never;
            else bad(where, "\"prepend_scheme\" is " + it->dump().substr(0, 40) + ", expected \"always\", \"first\" or \"never\"");
        }
        if (const auto it = j.find("add_prefix_space"); it != j.end() && !it->is_null()) {
            if (!it->is_boolean()) bad(where, "\"add_prefix_space\" is a JSON " + io::json_type_name(*it) + ", expected true or false");
            if (!it->get<bool>()) {
                // HF: add_prefix_space false contradicts any scheme but "never".
                if (j.contains("prepend_scheme") && m.scheme != prepend_scheme::never)
                    bad(where, "\"add_prefix_space\" is false but \"prepend_scheme\" is not \"never\"");
                m.scheme = prepend_scheme::never;
            }
        }
        m.split = bool_field(j, "split", where, true);
        steps.emplace_back(m);
    } else {
        unsupported(where, type, "Sequence, WhitespaceSplit, Metaspace (ByteLevel with a BPE model)");
    }
}

}  // namespace tokenizer_json_detail

// The parsed file and its neighbours, before a tokenizer is made of them.
struct tokenizer_json_file {
    std::string dir, path;
    io::json j;
    std::optional<std::string> tokenizer_config_json, special_tokens_map_json;

    std::string model_type() const {
        return tokenizer_json_detail::type_of(tokenizer_json_detail::field(j, "model", path), path + ": model");
    }

    static tokenizer_json_file read(const std::string& dir) {
        const io::directory_files files(dir);
        const std::string path = files.require("tokenizer.json", "tokenizer.not_found", "not found");
        std::optional<std::string> config, map;
        if (const auto p = files.find("tokenizer_config.json")) config = io::read_text_file(*p);
        if (const auto p = files.find("special_tokens_map.json")) map = io::read_text_file(*p);
        return parse(dir, io::read_text_file(path, io::vocabulary_file_limit), std::move(config), std::move(map));
    }

    // The same from texts in memory (dir names the files in messages).
    static tokenizer_json_file parse(const std::string& dir, std::string_view text, std::optional<std::string> tokenizer_config = {},
                                     std::optional<std::string> special_tokens_map = {}) {
        tokenizer_json_file f;
        f.dir = dir;
        f.path = dir + "/tokenizer.json";
        f.j = io::parse_json(text, f.path, "tokenizer");  // tokenizer.invalid_json, .duplicate_key, .nesting_too_deep
        if (!f.j.is_object()) tokenizer_json_detail::bad(f.path, "expected a JSON object, found a JSON " + io::json_type_name(f.j));
        f.tokenizer_config_json = std::move(tokenizer_config);
        f.special_tokens_map_json = std::move(special_tokens_map);
        return f;
    }

    // The added tokens of "added_tokens", in file order.
    std::vector<added_token> added_tokens() const {
        std::vector<added_token> out;
        const auto it = j.find("added_tokens");
        if (it == j.end() || it->is_null()) return out;
        if (!it->is_array())
            tokenizer_json_detail::bad(path, "\"added_tokens\" is a JSON " + io::json_type_name(*it) + ", expected an array");
        for (std::size_t i = 0; i < it->size(); ++i) {
            const io::json& t = (*it)[i];
            const std::string where = path + ": added_tokens[" + std::to_string(i) + "]";
            if (!t.is_object()) tokenizer_json_detail::bad(where, "is a JSON " + io::json_type_name(t) + ", expected an object");
            const io::json& id = tokenizer_json_detail::field(t, "id", where);
            if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > (1 << 30))
                tokenizer_json_detail::bad(where, "\"id\" is " + id.dump().substr(0, 40) + ", expected a non-negative integer");
            added_token a;
            a.id = static_cast<int>(id.get<std::int64_t>());
            a.content = tokenizer_json_detail::string_field(t, "content", where);
            a.single_word = tokenizer_json_detail::bool_field(t, "single_word", where, false);
            a.lstrip = tokenizer_json_detail::bool_field(t, "lstrip", where, false);
            a.rstrip = tokenizer_json_detail::bool_field(t, "rstrip", where, false);
            a.normalized = tokenizer_json_detail::bool_field(t, "normalized", where, true);
            a.special = tokenizer_json_detail::bool_field(t, "special", where, false);
            out.push_back(std::move(a));
        }
        return out;
    }
};

// A tokenizer.json with a Unigram model (module comment).
class unigram_tokenizer {
public:
    explicit unigram_tokenizer(const tokenizer_json_file& f) : path_(f.dir) {
        namespace d = tokenizer_json_detail;
        const io::json& j = f.j;
        const std::string& file = f.path;
        // The model.
        const io::json& m = d::field(j, "model", file);
        const std::string mwhere = file + ": model";
        if (const std::string t = d::type_of(m, mwhere); t != "Unigram") d::unsupported(mwhere, t, "Unigram, or BPE with ByteLevel");
        const io::json& vocab = d::field(m, "vocab", mwhere);
        if (!vocab.is_array()) d::bad(mwhere, "\"vocab\" is a JSON " + io::json_type_name(vocab) + ", expected an array of [piece, score]");
        std::vector<std::pair<std::string, double>> pieces;
        pieces.reserve(vocab.size());
        for (std::size_t i = 0; i < vocab.size(); ++i) {
            const io::json& e = vocab[i];
            if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
                d::bad(mwhere, "\"vocab\"[" + std::to_string(i) + "] is " + e.dump().substr(0, 60) + ", expected [piece, score]");
            pieces.emplace_back(e[0].get<std::string>(), e[1].get<double>());
        }
        std::optional<int> unk;
        if (const auto it = m.find("unk_id"); it != m.end() && !it->is_null()) {
            if (!it->is_number_integer() || it->get<std::int64_t>() < 0 || it->get<std::int64_t>() > (1 << 30))
                d::bad(mwhere, "\"unk_id\" is " + it->dump().substr(0, 40) + ", expected a non-negative integer or null");
            unk = static_cast<int>(it->get<std::int64_t>());
        }
        model_ = std::make_shared<const unigram_model>(std::move(pieces), unk, d::bool_field(m, "byte_fallback", mwhere, false), mwhere);

        d::read_normalizer(j.value("normalizer", io::json()), file + ": normalizer", normalizers_);
        for (const auto& step : normalizers_) {
            if (const auto* r = std::get_if<d::replace_step>(&step))
                normalizers_may_lengthen_ |= r->pattern || r->content.size() > r->literal.size();
            else if (const auto* pp = std::get_if<d::prepend_step>(&step)) {
                normalizers_may_lengthen_ |= !pp->prepend.empty();
                prepended_ += pp->prepend.size();
            } else if (std::holds_alternative<d::precompiled_step>(step)) {
                normalizers_may_lengthen_ = true;  // (an entry may map a character to a longer string)
            }
        }
        d::read_pre_tokenizer(j.value("pre_tokenizer", io::json()), file + ": pre_tokenizer", pre_tokenizers_);
        read_post_processor(j.value("post_processor", io::json()), file + ": post_processor");
        read_decoder(j.value("decoder", io::json()), file + ": decoder");

        // Added tokens: ids agree with the model where they name one of its pieces, and lie within
        // the vocabulary the file declares, the model's pieces and then one id per added token
        // (an id of 10^8 in a 1 KB file would size the per-id tables below at gigabytes).
        added_ = f.added_tokens();
        size_ = model_->size();
        const std::int64_t limit = static_cast<std::int64_t>(model_->size()) + static_cast<std::int64_t>(added_.size());
        for (std::size_t i = 0; i < added_.size(); ++i) {
            const auto& a = added_[i];
            const std::string where = file + ": added_tokens[" + std::to_string(i) + "]";
            if (a.id < model_->size() && model_->piece(a.id) != a.content)
                d::bad(where,
                       detail::quoted(a.content) + " has id " + std::to_string(a.id) + ", which is the model's piece " +
                           detail::quoted(model_->piece(a.id)));
            if (a.id >= limit)
                d::bad(where,
                       "\"id\" is " + std::to_string(a.id) + ", beyond the vocabulary the file declares (the model's " +
                           std::to_string(model_->size()) + " pieces and " + std::to_string(added_.size()) + " added tokens: ids below " +
                           std::to_string(limit) + ")");
            size_ = std::max(size_, a.id + 1);
        }
        tokens_.resize(static_cast<std::size_t>(size_));
        special_.assign(static_cast<std::size_t>(size_), false);
        for (int id = 0; id < model_->size(); ++id) tokens_[static_cast<std::size_t>(id)] = model_->piece(id);
        for (const auto& a : added_) {
            tokens_[static_cast<std::size_t>(a.id)] = a.content;
            special_[static_cast<std::size_t>(a.id)] = special_[static_cast<std::size_t>(a.id)] || a.special;
            added_ids_.emplace(a.content, a.id);
        }
        first_pass_ = added_token_matcher(added_, false);
        second_pass_ = added_token_matcher(added_, true);
        read_specials(f);
    }

    // The normalized copy, the words of each pre-tokenizer step, the search over the longest word
    // and the ids: measured 27.6 bytes per input byte on War and Peace and 27.3 on 900 KB of CJK
    // text without spaces (one word); counted as 32 per byte of the normalized text.
    static constexpr double working_bytes_per_input_byte = 32.0;
    double working_bytes(std::size_t text_bytes) const { return working_bytes_per_input_byte * static_cast<double>(text_bytes); }
    // For this text: normalizers can lengthen it (a Replace whose content is longer than what it
    // matches, a Precompiled entry that expands a character, a Prepend before every piece: a 1 KB
    // tokenizer.json turned a 150 KB document into gigabytes), so where the file has one the
    // normalized length is measured first — the first pass's pieces normalized a few KiB at a
    // time, only the lengths kept — and the estimate follows the longer of the two.
    double working_bytes_of(std::string_view text) const {
        if (!normalizers_may_lengthen_) return working_bytes(text.size());
        std::string repaired;
        text = well_formed_utf8(text, repaired);
        auto md = detail::gpt2_pattern::get().new_match_data();
        double normalized = 0;
        first_pass_.split(text, md.get(), [&](std::string_view piece, int token) {
            if (token < 0) normalized += static_cast<double>(normalized_length(piece));
        });
        return working_bytes_per_input_byte * std::max(static_cast<double>(text.size()), normalized);
    }

    std::vector<int> encode(std::string_view text, bool add_special = true) const {
        std::string repaired;
        text = well_formed_utf8(text, repaired);
        std::vector<int> ids;
        ids.reserve(text.size() / 4 + 4);
        if (add_special) ids.insert(ids.end(), prefix_.begin(), prefix_.end());
        auto md = detail::gpt2_pattern::get().new_match_data();
        std::size_t raw_at = 0;  // where the current raw piece starts in text (for prepend "first")
        first_pass_.split(text, md.get(), [&](std::string_view piece, int token) {
            const std::size_t begin = static_cast<std::size_t>(piece.data() - text.data());
            raw_at = begin;
            if (token >= 0) {
                ids.push_back(token);
                return;
            }
            const std::string normalized = normalize(piece);
            const std::string_view nv = normalized;
            second_pass_.split(nv, md.get(), [&](std::string_view rest, int t) {
                if (t >= 0) {
                    ids.push_back(t);
                    return;
                }
                const bool at_start = raw_at == 0 && rest.data() == nv.data();
                pre_tokenize(rest, at_start, [&](std::string_view word) { model_->encode(word, ids); });
            });
        });
        if (add_special) ids.insert(ids.end(), suffix_.begin(), suffix_.end());
        return ids;
    }

    std::string decode(const std::vector<int>& ids, int model_vocab = 0, int* extra = nullptr, bool keep_special = false) const {
        const int limit = std::max(model_vocab, vocab_size());
        if (extra) *extra = 0;
        std::string out;
        std::size_t kept = 0;
        for (const int id : ids) {
            if (id < 0 || id >= limit)
                throw error("tokenizer.bad_id",
                            path_ + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(limit) + ")");
            if (id >= vocab_size()) {
                if (extra) ++*extra;
                continue;
            }
            if (!keep_special && special_[static_cast<std::size_t>(id)]) continue;
            const std::string& tok = tokens_[static_cast<std::size_t>(id)];
            if (!decoder_) {
                if (kept > 0) out += ' ';  // HF joins with spaces when there is no decoder
                out += tok;
            } else {
                const bool drop = kept == 0 && decoder_->scheme != tokenizer_json_detail::prepend_scheme::never;
                const std::string& r = decoder_->replacement;
                for (std::size_t i = 0; i < tok.size();) {
                    if (tok.compare(i, r.size(), r) == 0) {
                        if (!drop) out += ' ';
                        i += r.size();
                    } else {
                        out += tok[i++];
                    }
                }
            }
            ++kept;
        }
        return out;
    }

    int vocab_size() const noexcept { return size_; }
    const std::string& path() const noexcept { return path_; }
    special_ids specials() const noexcept { return named_; }
    // The token of an id: an added token's content or the model's piece.
    const std::string& token(int id) const { return tokens_.at(static_cast<std::size_t>(id)); }
    // The id of a token (added or piece), or -1.
    int id_of(std::string_view token) const {
        if (const auto it = added_ids_.find(std::string(token)); it != added_ids_.end()) return it->second;
        return model_->id_of(token);
    }
    bool is_special(int id) const { return special_.at(static_cast<std::size_t>(id)); }
    const unigram_model& model() const noexcept { return *model_; }

private:
    // The length normalize(piece) would have, from the normalized lengths of its segments of about
    // 4 KiB (cut at character boundaries): what one segment's normalization holds is all the
    // memory it takes. A Replace match across a cut, a Strip at one or a Prepend repeated at each
    // make it an estimate within a few bytes per segment.
    std::size_t normalized_length(std::string_view piece) const {
        constexpr std::size_t segment = 4096;
        std::size_t total = 0, segments = 0;
        const auto* u = reinterpret_cast<const unsigned char*>(piece.data());
        for (std::size_t b = 0; b < piece.size();) {
            std::size_t e = std::min(piece.size(), b + segment);
            while (e < piece.size() && (u[e] & 0xC0) == 0x80) ++e;  // not inside a character
            total += normalize(piece.substr(b, e - b)).size();
            ++segments;
            b = e;
        }
        if (segments > 1) total -= std::min(total, (segments - 1) * prepended_);  // (a Prepend counts once a piece)
        return total;
    }

    std::string normalize(std::string_view piece) const {
        namespace d = tokenizer_json_detail;
        std::string s(piece);
        for (const auto& step : normalizers_) {
            if (const auto* p = std::get_if<d::precompiled_step>(&step)) {
                s = p->map->normalize(s);
            } else if (const auto* r = std::get_if<d::replace_step>(&step)) {
                std::string out;
                std::size_t done = 0;
                auto replace = [&](std::size_t b, std::size_t e) {
                    out.append(s, done, b - done);
                    out += r->content;
                    done = e;
                };
                if (r->pattern) {
                    r->pattern->each(s, replace);
                } else {
                    for (std::size_t at = s.find(r->literal); at != std::string::npos; at = s.find(r->literal, at + r->literal.size()))
                        replace(at, at + r->literal.size());
                }
                out.append(s, done, std::string::npos);
                s = std::move(out);
            } else if (const auto* st = std::get_if<d::strip_step>(&step)) {
                std::size_t b = 0, e = s.size();
                const auto* u = reinterpret_cast<const unsigned char*>(s.data());
                if (st->left)
                    while (b < e) {
                        const auto c = decode_utf8(u + b, e - b);
                        if (!detail::is_white_space(c.cp)) break;
                        b += c.len;
                    }
                if (st->right)
                    while (e > b) {
                        const std::size_t at = utf8_char_before(u, e, b);
                        if (!detail::is_white_space(decode_utf8(u + at, e - at).cp)) break;
                        e = at;
                    }
                s = s.substr(b, e - b);
            } else if (const auto* pp = std::get_if<d::prepend_step>(&step)) {
                if (!s.empty()) s.insert(0, pp->prepend);  // HF prepends to non-empty strings only
            }
        }
        return s;
    }

    // Calls word(w) for each pre-token of piece; at_start: the piece begins the original text.
    template <class Word>
    void pre_tokenize(std::string_view piece, bool at_start, Word&& word) const {
        namespace d = tokenizer_json_detail;
        struct part {
            std::string text;
            bool at_start;
        };
        std::vector<part> parts{{std::string(piece), at_start}};
        for (const auto& step : pre_tokenizers_) {
            std::vector<part> next;
            for (auto& p : parts) {
                if (std::holds_alternative<d::whitespace_split_step>(step)) {
                    const auto* u = reinterpret_cast<const unsigned char*>(p.text.data());
                    std::size_t start = std::string::npos;
                    for (std::size_t i = 0; i <= p.text.size();) {
                        bool space = true;
                        std::size_t len = 1;
                        if (i < p.text.size()) {
                            const auto c = decode_utf8(u + i, p.text.size() - i);
                            space = detail::is_white_space(c.cp);
                            len = c.len;
                        }
                        if (!space && start == std::string::npos) start = i;
                        if (space && start != std::string::npos) {
                            next.push_back({p.text.substr(start, i - start), p.at_start && start == 0});
                            start = std::string::npos;
                        }
                        i += len;
                    }
                } else {
                    const auto& m = std::get<d::metaspace_step>(step);
                    std::string s;
                    s.reserve(p.text.size() + 4);
                    for (const char c : p.text) {
                        if (c == ' ') s += m.replacement;
                        else s += c;
                    }
                    if (!s.empty() && s.compare(0, m.replacement.size(), m.replacement) != 0 &&
                        (m.scheme == d::prepend_scheme::always || (m.scheme == d::prepend_scheme::first && p.at_start)))
                        s.insert(0, m.replacement);
                    if (!m.split) {
                        if (!s.empty()) next.push_back({std::move(s), p.at_start});
                        continue;
                    }
                    std::size_t begin = 0;
                    for (std::size_t at = s.find(m.replacement, 1); at != std::string::npos;
                         at = s.find(m.replacement, at + m.replacement.size())) {
                        if (at > begin) next.push_back({s.substr(begin, at - begin), p.at_start && begin == 0});
                        begin = at;
                    }
                    if (begin < s.size()) next.push_back({s.substr(begin), p.at_start && begin == 0});
                }
            }
            parts = std::move(next);
        }
        for (const auto& p : parts) word(p.text);
    }

    void read_post_processor(const io::json& j, const std::string& where) {
        namespace d = tokenizer_json_detail;
        if (j.is_null()) return;
        const std::string type = d::type_of(j, where);
        if (type == "Sequence") {
            const io::json& list = d::field(j, "processors", where);
            if (!list.is_array()) d::bad(where, "\"processors\" is a JSON " + io::json_type_name(list) + ", expected an array");
            for (std::size_t i = 0; i < list.size(); ++i) read_post_processor(list[i], where + "[" + std::to_string(i) + "]");
            return;
        }
        if (type == "ByteLevel") return;  // adjusts offsets only
        if (type != "TemplateProcessing") d::unsupported(where, type, "TemplateProcessing, Sequence (RobertaProcessing with a BPE model)");
        const io::json& single = d::field(j, "single", where);
        const io::json& specials = d::field(j, "special_tokens", where);
        if (!single.is_array()) d::bad(where, "\"single\" is a JSON " + io::json_type_name(single) + ", expected an array");
        if (!specials.is_object()) d::bad(where, "\"special_tokens\" is a JSON " + io::json_type_name(specials) + ", expected an object");
        bool seen_a = false;
        prefix_.clear();
        suffix_.clear();
        for (std::size_t i = 0; i < single.size(); ++i) {
            const io::json& item = single[i];
            const std::string at = where + ": \"single\"[" + std::to_string(i) + "]";
            if (item.is_object() && item.contains("Sequence")) {
                const io::json& s = item["Sequence"];
                if (!s.is_object() || s.value("id", std::string()) != "A" || seen_a) d::bad(at, "expected the sequence $A, once");
                seen_a = true;
            } else if (item.is_object() && item.contains("SpecialToken")) {
                const io::json& s = item["SpecialToken"];
                if (!s.is_object() || !s.contains("id") || !s["id"].is_string()) d::bad(at, "expected {\"SpecialToken\": {\"id\": NAME}}");
                const std::string name = s["id"].get<std::string>();
                const auto it = specials.find(name);
                if (it == specials.end() || !it->is_object() || !it->contains("ids") || !(*it)["ids"].is_array())
                    d::bad(at, "names the special token " + detail::quoted(name) + ", which \"special_tokens\" does not give ids");
                for (const auto& id : (*it)["ids"]) {
                    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > (1 << 30))
                        d::bad(where, "\"special_tokens\"[" + detail::quoted(name) + "] has an id that is not a non-negative integer");
                    (seen_a ? suffix_ : prefix_).push_back(static_cast<int>(id.get<std::int64_t>()));
                }
            } else {
                d::bad(at, "is " + item.dump().substr(0, 60) + ", expected {\"Sequence\": …} or {\"SpecialToken\": …}");
            }
        }
        if (!seen_a) d::bad(where, "\"single\" has no $A");
    }

    void read_decoder(const io::json& j, const std::string& where) {
        namespace d = tokenizer_json_detail;
        if (j.is_null()) return;
        const std::string type = d::type_of(j, where);
        if (type != "Metaspace") d::unsupported(where, type, "Metaspace (ByteLevel with a BPE model)");
        std::vector<d::pre_tokenizer_step> m;
        d::read_pre_tokenizer(j, where, m);  // the same fields
        decoder_ = std::get<d::metaspace_step>(m.front());
    }

    // The special ids: tokenizer_config.json's and special_tokens_map.json's names where they
    // give them, else `</s>`, `<pad>`, the model's unknown piece and `<s>` when these exist.
    void read_specials(const tokenizer_json_file& f) {
        std::map<std::string, std::optional<std::string>> name = {
            {"bos_token", "<s>"}, {"eos_token", "</s>"}, {"pad_token", "<pad>"}, {"unk_token", std::nullopt}, {"mask_token", std::nullopt}};
        if (model_->unk_id()) name["unk_token"] = model_->piece(*model_->unk_id());
        const std::pair<const std::optional<std::string>*, std::string> files[] = {
            {&f.tokenizer_config_json, f.dir + "/tokenizer_config.json"}, {&f.special_tokens_map_json, f.dir + "/special_tokens_map.json"}};
        for (const auto& [text, file] : files) {
            if (!*text) continue;
            const io::json c = detail::read_config_json(**text, file);
            for (auto& [key, value] : name)
                if (const auto it = c.find(key); it != c.end()) {
                    const auto t = detail::read_token(*it, file + ": \"" + key + "\"");
                    value = t ? std::optional<std::string>(t->content) : std::nullopt;
                }
        }
        auto id = [&](const char* key) { return name[key] ? id_of(*name[key]) : -1; };
        named_ = {id("bos_token"), id("eos_token"), id("pad_token"), id("unk_token"), id("mask_token")};
    }

    std::string path_;
    std::shared_ptr<const unigram_model> model_;
    std::vector<tokenizer_json_detail::normalizer_step> normalizers_;
    std::vector<tokenizer_json_detail::pre_tokenizer_step> pre_tokenizers_;
    std::optional<tokenizer_json_detail::metaspace_step> decoder_;
    std::vector<int> prefix_, suffix_;
    std::vector<added_token> added_;
    added_token_matcher first_pass_, second_pass_;
    std::vector<std::string> tokens_;
    std::vector<bool> special_;
    std::map<std::string, int> added_ids_;
    int size_ = 0;
    special_ids named_;
    bool normalizers_may_lengthen_ = false;
    std::size_t prepended_ = 0;  // bytes the Prepend steps put before a piece
};

// A tokenizer.json with a byte-level BPE model as the sources byte_bpe_tokenizer reads: the
// vocabulary and merges (both serializations: "a b" strings and [a, b] pairs), the added tokens
// as tokenizer_config.json's added_tokens_decoder (the file's own entries kept where it has
// them), add_prefix_space from the ByteLevel pre-tokenizer, RobertaProcessing's (or a
// TemplateProcessing `X $A Y`'s) tokens as cls and sep.
inline byte_bpe_sources bpe_sources(const tokenizer_json_file& f) {
    namespace d = tokenizer_json_detail;
    const io::json& j = f.j;
    const std::string& file = f.path;
    const io::json& m = d::field(j, "model", file);
    const std::string mwhere = file + ": model";
    if (const auto it = m.find("dropout"); it != m.end() && !it->is_null())
        throw error("tokenizer.unsupported_component",
                    mwhere + ": \"dropout\" is " + it->dump() + "; only deterministic BPE (dropout null) is supported");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
        if (const auto it = m.find(key); it != m.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
            throw error("tokenizer.unsupported_component", mwhere + ": \"" + key + "\" is " + it->dump() + "; byte-level BPE has none");
    for (const char* key : {"byte_fallback", "ignore_merges"})
        if (d::bool_field(m, key, mwhere, false))
            throw error("tokenizer.unsupported_component", mwhere + ": \"" + key + "\" is true; byte-level BPE with it is not supported");
    if (const auto it = j.find("normalizer"); it != j.end() && !it->is_null())
        throw error("tokenizer.unsupported_component",
                    file + ": normalizer: type \"" + d::type_of(*it, file + ": normalizer") +
                        "\" is not supported with a BPE model (byte-level BPE has no normalizer)");
    // Pre-tokenizer and decoder: ByteLevel with the GPT-2 pattern.
    bool add_prefix_space = false;
    {
        const std::string where = file + ": pre_tokenizer";
        const io::json& p = d::field(j, "pre_tokenizer", file);
        const std::string t = p.is_null() ? std::string("null") : d::type_of(p, where);
        if (t != "ByteLevel") d::unsupported(where, t, "ByteLevel with a BPE model");
        if (!d::bool_field(p, "use_regex", where, true))
            throw error("tokenizer.unsupported_component", where + ": ByteLevel with \"use_regex\" false is not supported");
        add_prefix_space = d::bool_field(p, "add_prefix_space", where, true);
        const io::json& dec = j.value("decoder", io::json());
        if (!dec.is_null() && d::type_of(dec, file + ": decoder") != "ByteLevel")
            d::unsupported(file + ": decoder", d::type_of(dec, file + ": decoder"), "ByteLevel with a BPE model");
    }
    byte_bpe_sources src;
    src.dir = f.dir;
    // Errors about the vocabulary, merges or added tokens name tokenizer.json, the directory's file.
    src.vocab_name = file + ": model.vocab";
    src.merges_name = file + ": model.merges";
    src.config_name = file + " (its \"added_tokens\", with tokenizer_config.json)";
    // The vocabulary: checked here so that messages name tokenizer.json.
    const io::json& vocab = d::field(m, "vocab", mwhere);
    if (!vocab.is_object()) d::bad(mwhere, "\"vocab\" is a JSON " + io::json_type_name(vocab) + ", expected an object of piece → id");
    std::vector<bool> used(vocab.size(), false);
    for (const auto& [piece, id] : vocab.items()) {
        if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || static_cast<std::uint64_t>(id.get<std::int64_t>()) >= vocab.size() ||
            used[static_cast<std::size_t>(id.get<std::int64_t>())])
            d::bad(mwhere,
                   "\"vocab\"[" + detail::quoted(piece) + "] is " + id.dump().substr(0, 40) + ", expected an id of its own in [0, " +
                       std::to_string(vocab.size()) + ")");
        used[static_cast<std::size_t>(id.get<std::int64_t>())] = true;
    }
    src.vocab_json = vocab.dump();
    const io::json& merges = d::field(m, "merges", mwhere);
    if (!merges.is_array()) d::bad(mwhere, "\"merges\" is a JSON " + io::json_type_name(merges) + ", expected an array");
    src.merges_txt = "#version: 0.2\n";
    for (std::size_t i = 0; i < merges.size(); ++i) {
        const io::json& e = merges[i];
        const std::string at = "\"merges\"[" + std::to_string(i) + "]";
        std::string a, b;
        if (e.is_string()) {
            const std::string s = e.get<std::string>();
            const auto sp = s.find(' ');
            if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() || s.find(' ', sp + 1) != std::string::npos)
                d::bad(mwhere, at + " is " + detail::quoted(s) + ", expected two pieces separated by one space");
            a = s.substr(0, sp);
            b = s.substr(sp + 1);
        } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
            a = e[0].get<std::string>();
            b = e[1].get<std::string>();
            if (a.empty() || b.empty() || a.find(' ') != std::string::npos || b.find(' ') != std::string::npos)
                d::bad(mwhere, at + " is " + e.dump().substr(0, 60) + ", expected two non-empty pieces without spaces");
        } else {
            d::bad(mwhere, at + " is " + e.dump().substr(0, 60) + ", expected \"a b\" or [\"a\", \"b\"]");
        }
        for (const std::string* p : {&a, &b})
            if (!vocab.contains(*p)) d::bad(mwhere, at + " merges " + detail::quoted(*p) + ", which is not in \"vocab\"");
        if (!vocab.contains(a + b)) d::bad(mwhere, at + " makes " + detail::quoted(a + b) + ", which is not in \"vocab\"");
        src.merges_txt += a + ' ' + b + '\n';
    }
    // tokenizer_config.json with the file's added tokens, prefix space and post-processor.
    io::json config = io::json::object();
    if (f.tokenizer_config_json) config = detail::read_config_json(*f.tokenizer_config_json, f.dir + "/tokenizer_config.json");
    io::json& decoder = config["added_tokens_decoder"];
    if (!decoder.is_object()) decoder = io::json::object();
    for (const auto& a : f.added_tokens()) {
        const std::string key = std::to_string(a.id);
        if (decoder.contains(key)) continue;
        decoder[key] = {{"content", a.content},         {"lstrip", a.lstrip},         {"rstrip", a.rstrip},
                        {"single_word", a.single_word}, {"normalized", a.normalized}, {"special", a.special}};
    }
    config["add_prefix_space"] = add_prefix_space;
    const io::json& post = j.value("post_processor", io::json());
    const std::string pwhere = file + ": post_processor";
    if (post.is_null()) {
        config["cls_token"] = nullptr;
        config["sep_token"] = nullptr;
    } else if (const std::string t = d::type_of(post, pwhere); t == "RobertaProcessing" || t == "BertProcessing") {
        for (const char* key : {"cls", "sep"}) {
            const io::json& v = d::field(post, key, pwhere);
            if (!v.is_array() || v.size() != 2 || !v[0].is_string())
                d::bad(pwhere, "\"" + std::string(key) + "\" is " + v.dump().substr(0, 60) + ", expected [token, id]");
            config[std::string(key) + "_token"] = v[0].get<std::string>();
        }
    } else if (t == "TemplateProcessing") {
        const io::json& single = d::field(post, "single", pwhere);
        auto special = [&](const io::json& item) -> std::optional<std::string> {
            if (item.is_object() && item.contains("SpecialToken") && item["SpecialToken"].is_object() &&
                item["SpecialToken"].contains("id") && item["SpecialToken"]["id"].is_string())
                return item["SpecialToken"]["id"].get<std::string>();
            return std::nullopt;
        };
        const bool shape = single.is_array() && single.size() == 3 && special(single[0]) && special(single[2]) && single[1].is_object() &&
            single[1].contains("Sequence");
        if (!shape)
            throw error("tokenizer.unsupported_component",
                        pwhere + ": a TemplateProcessing with a BPE model must be \"X $A Y\" (two special tokens around the text)");
        config["cls_token"] = *special(single[0]);
        config["sep_token"] = *special(single[2]);
    } else {
        d::unsupported(pwhere, t, "RobertaProcessing, TemplateProcessing \"X $A Y\" with a BPE model");
    }
    src.tokenizer_config_json = config.dump();
    src.special_tokens_map_json = f.special_tokens_map_json;
    return src;
}

}  // namespace locost::text
