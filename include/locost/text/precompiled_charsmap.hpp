// SentencePiece's precompiled normalization map, as Hugging Face's `Precompiled` normalizer
// applies it (the `precompiled_charsmap` of a tokenizer.json converted from a SentencePiece model:
// T5's, Pegasus's).
//
// The map is SentencePiece's: a little-endian uint32 n, then n / 4 units of a darts-clone double-
// array trie over UTF-8 byte strings, then a blob of NUL-terminated replacement strings; a key's
// value is the offset of its replacement in the blob.
//
//   transform(chunk)   the trie's common-prefix search over chunk's bytes (stopping at a NUL
//                      byte); when any prefix is a key, the replacement of the SHORTEST one
//                      stands for the whole chunk (a quirk of HF's, kept: ids depend on it)
//   normalize(text)    for each extended grapheme cluster g of text:
//                        if g is under 6 bytes and transform(g) finds a key → its replacement;
//                        else each character c of g → transform(c), or c itself
//
// Grapheme clusters are PCRE2's `\X` (UAX #29 extended clusters, the Unicode version of the
// system's PCRE2; HF uses Rust's unicode-segmentation). Runs of ASCII other than CR LF are one
// character per cluster by the rules themselves, so only the rest goes through PCRE2.
//
// Errors (locost::error, tokenizer.bad_normalizer; `where` names the file and the component):
// a map shorter than its header says, replacements that are not UTF-8, and, found while
// normalizing, a trie or value pointing outside the map.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../config/error.hpp"
#include "../core/utf8.hpp"
#include "gpt2_pretokenizer.hpp"  // PCRE2 and its deleters

namespace locost::text {

namespace detail {

// One extended grapheme cluster at a time (PCRE2 `\X`, anchored). Thread-safe: the compiled
// pattern is shared, match data is per call.
class grapheme_splitter {
public:
    static const grapheme_splitter& get() {
        static const grapheme_splitter g;
        return g;
    }

    // Calls cluster(begin, end) for each extended grapheme cluster of well-formed UTF-8 text.
    template <class Cluster>
    void split(std::string_view text, Cluster&& cluster) const {
        const auto* s = reinterpret_cast<const unsigned char*>(text.data());
        const std::size_t n = text.size();
        pcre2_match_data_ptr md;
        std::size_t at = 0;
        while (at < n) {
            const unsigned char c = s[at];
            if (c < 0x80 && (at + 1 == n || (s[at + 1] < 0x80 && !(c == '\r' && s[at + 1] == '\n')))) {
                cluster(at, at + 1);
                ++at;
                continue;
            }
            if (!md) {
                md.reset(pcre2_match_data_create_from_pattern_8(code_.get(), nullptr));
                if (!md) throw std::bad_alloc();
            }
            const int rc = pcre2_match_8(code_.get(), s, n, at, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, md.get(), nullptr);
            std::size_t end = at + decode_utf8(s + at, n - at).len;  // one character, should \X ever fail
            if (rc >= 0) end = std::max(end, static_cast<std::size_t>(pcre2_get_ovector_pointer_8(md.get())[1]));
            cluster(at, end);
            at = end;
        }
    }

private:
    grapheme_splitter() {
        int err = 0;
        PCRE2_SIZE off = 0;
        code_.reset(pcre2_compile_8(reinterpret_cast<PCRE2_SPTR8>("\\X"), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_NO_UTF_CHECK, &err, &off,
                                    nullptr));
        LOCOST_ASSERT(code_ != nullptr);                       // a constant pattern; fails only on a PCRE2 built without Unicode
        pcre2_jit_compile_8(code_.get(), PCRE2_JIT_COMPLETE);  // the interpreter gives the same clusters
    }
    std::unique_ptr<pcre2_code_8, code_deleter> code_;
};

}  // namespace detail

class precompiled_charsmap {
public:
    precompiled_charsmap() = default;

    // blob: the decoded bytes of `precompiled_charsmap`; where: "FILE: normalizer Precompiled".
    precompiled_charsmap(const std::string& blob, std::string where) : where_(std::move(where)) {
        if (blob.size() < 4) fail("the charsmap is " + std::to_string(blob.size()) + " bytes, shorter than its 4-byte header");
        const auto* b = reinterpret_cast<const unsigned char*>(blob.data());
        const std::uint32_t trie_bytes = static_cast<std::uint32_t>(b[0]) | static_cast<std::uint32_t>(b[1]) << 8 |
            static_cast<std::uint32_t>(b[2]) << 16 | static_cast<std::uint32_t>(b[3]) << 24;
        const std::size_t units = trie_bytes / 4;
        if (units > (blob.size() - 4) / 4)
            fail("the charsmap's header gives a trie of " + std::to_string(trie_bytes) + " bytes, but only " +
                 std::to_string(blob.size() - 4) + " bytes follow it");
        if (units == 0) fail("the charsmap's trie is empty");
        array_.resize(units);
        for (std::size_t i = 0; i < units; ++i) {
            const unsigned char* u = b + 4 + 4 * i;
            array_[i] = static_cast<std::uint32_t>(u[0]) | static_cast<std::uint32_t>(u[1]) << 8 | static_cast<std::uint32_t>(u[2]) << 16 |
                static_cast<std::uint32_t>(u[3]) << 24;
        }
        normalized_ = blob.substr(4 + 4 * units);
        if (const auto bad = find_invalid_utf8(normalized_); bad != std::string_view::npos)
            fail("the charsmap's replacement strings are not UTF-8 (byte " + std::to_string(bad) + " of them)");
    }

    bool empty() const noexcept { return array_.empty(); }

    // The replacement of chunk's shortest prefix that is a key, or nothing.
    std::optional<std::string_view> transform(std::string_view chunk) const {
        std::size_t pos = 0;
        std::uint32_t unit = at(pos);
        pos ^= offset(unit);
        for (const char ch : chunk) {
            const auto c = static_cast<unsigned char>(ch);
            if (c == 0) break;
            pos ^= c;
            unit = at(pos);
            if (label(unit) != c) return std::nullopt;
            pos ^= offset(unit);
            if (has_leaf(unit)) return replacement(at(pos) & ((1u << 31) - 1));
        }
        return std::nullopt;
    }

    // text (well-formed UTF-8) normalized grapheme by grapheme, as HF's Precompiled normalizer.
    std::string normalize(std::string_view text) const {
        std::string out;
        out.reserve(text.size() + text.size() / 8);
        detail::grapheme_splitter::get().split(text, [&](std::size_t b, std::size_t e) {
            const std::string_view g = text.substr(b, e - b);
            if (g.size() < 6)
                if (const auto r = transform(g)) {
                    out += *r;
                    return;
                }
            for (std::size_t i = 0; i < g.size();) {
                const std::size_t len = decode_utf8(reinterpret_cast<const unsigned char*>(g.data()) + i, g.size() - i).len;
                const std::string_view ch = g.substr(i, len);
                if (const auto r = transform(ch)) out += *r;
                else out += ch;
                i += len;
            }
        });
        return out;
    }

private:
    // darts-clone's unit layout: label in bits 0-7 (and bit 31), has_leaf bit 8, offset in bits
    // 10-31 shifted by 8 more when bit 9 is set; a value unit holds 31 bits.
    static bool has_leaf(std::uint32_t u) noexcept { return (u >> 8) & 1u; }
    static std::uint32_t label(std::uint32_t u) noexcept { return u & ((1u << 31) | 0xFFu); }
    static std::size_t offset(std::uint32_t u) noexcept { return static_cast<std::size_t>(u >> 10) << ((u & (1u << 9)) >> 6); }

    std::uint32_t at(std::size_t pos) const {
        if (pos >= array_.size())
            fail("the charsmap's trie points at unit " + std::to_string(pos) + ", past its " + std::to_string(array_.size()) + " units");
        return array_[pos];
    }

    std::string_view replacement(std::size_t index) const {
        if (index > normalized_.size())
            fail("the charsmap's trie points at byte " + std::to_string(index) + " of " + std::to_string(normalized_.size()) +
                 " bytes of replacement strings");
        // A value inside a character would split it (HF panics there).
        if (index < normalized_.size() && (static_cast<unsigned char>(normalized_[index]) & 0xC0) == 0x80)
            fail("the charsmap's trie points inside a character of its replacement strings (byte " + std::to_string(index) + ")");
        const std::size_t end = normalized_.find('\0', index);
        return std::string_view(normalized_).substr(index, (end == std::string::npos ? normalized_.size() : end) - index);
    }

    [[noreturn]] void fail(const std::string& what) const { throw error("tokenizer.bad_normalizer", where_ + ": " + what); }

    std::vector<std::uint32_t> array_;
    std::string normalized_;
    std::string where_;
};

}  // namespace locost::text
