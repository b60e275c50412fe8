// UTF-8, once for the whole library: decoding one character, encoding a code point, finding,
// checking and replacing ill-formed sequences.
//
// Well-formed means Unicode's definition (§3.9, table 3-7): no overlong forms, no surrogates,
// nothing above U+10FFFF. Every reader that checks text (pickle strings, tokenizer inputs and
// pieces, safetensors names written) and every writer of code points goes through these
// functions, so that they all draw the line between valid and invalid at the same place.
//
// Ill-formed input is replaced by U+FFFD one per maximal subpart (§3.9, "substitution of maximal
// subparts"), which is what Python's bytes.decode('utf-8', errors='replace') and Rust's
// String::from_utf8_lossy do: the tokenizers see the text Hugging Face would see.
//
// core/ is the level every other part of the library may include (io/ must not include text/).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace locost {

// One step of UTF-8 decoding: the code point and the length of a well-formed sequence, or
// valid = false, cp = U+FFFD and len = the length of the maximal subpart there (the bytes one
// U+FFFD replaces).
struct utf8_char {
    char32_t cp;
    std::uint32_t len;
    bool valid;
};

// Decodes the character at p[0..n), n >= 1.
inline utf8_char decode_utf8(const unsigned char* p, std::size_t n) noexcept {
    const unsigned b0 = p[0];
    if (b0 < 0x80) return {b0, 1, true};
    std::uint32_t need = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the range of the second byte (narrower after E0, ED, F0, F4)
    char32_t cp = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
        cp = b0 & 0x1Fu;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        cp = b0 & 0x0Fu;
        if (b0 == 0xE0) lo = 0xA0;       // no overlong forms
        else if (b0 == 0xED) hi = 0x9F;  // no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        cp = b0 & 0x07u;
        if (b0 == 0xF0) lo = 0x90;       // no overlong forms
        else if (b0 == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
    } else {
        return {0xFFFD, 1, false};  // a continuation byte, C0, C1 or F5..FF
    }
    for (std::uint32_t k = 1; k <= need; ++k) {
        if (k >= n) return {0xFFFD, k, false};
        const unsigned b = p[k];
        if (b < lo || b > hi) return {0xFFFD, k, false};
        lo = 0x80;
        hi = 0xBF;
        cp = (cp << 6) | (b & 0x3Fu);
    }
    return {cp, need + 1, true};
}

// Appends code point c (at most U+10FFFF, not a surrogate) as UTF-8.
inline void append_utf8(std::string& out, char32_t c) {
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
}

// The first byte of the character that ends just before byte `end` of p, looking no further back
// than `floor` (< end): continuation bytes are skipped backwards.
inline std::size_t utf8_char_before(const unsigned char* p, std::size_t end, std::size_t floor = 0) noexcept {
    std::size_t c = end - 1;
    while (c > floor && (p[c] & 0xC0) == 0x80) --c;
    return c;
}

// Offset of the first byte of s that is not part of well-formed UTF-8, or npos.
inline std::size_t find_invalid_utf8(std::string_view s) noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const std::size_t n = s.size();
    std::size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {  // ASCII runs eight bytes at a time
            std::uint64_t w;
            std::memcpy(&w, p + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        const utf8_char c = decode_utf8(p + i, n - i);
        if (!c.valid) return i;
        i += c.len;
    }
    return std::string_view::npos;
}

inline bool is_valid_utf8(std::string_view s) noexcept { return find_invalid_utf8(s) == std::string_view::npos; }

// s with every ill-formed sequence replaced by U+FFFD, one per maximal subpart.
inline std::string replace_invalid_utf8(std::string_view s) {
    std::size_t bad = find_invalid_utf8(s);
    if (bad == std::string_view::npos) return std::string(s);
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    std::string out(s.substr(0, bad));
    out.reserve(s.size() + 16);
    for (std::size_t i = bad; i < s.size();) {
        const utf8_char c = decode_utf8(p + i, s.size() - i);
        if (c.valid) out.append(s.data() + i, c.len);
        else append_utf8(out, 0xFFFD);
        i += c.len;
    }
    return out;
}

// s with every byte of an ill-formed sequence written as the four characters \xNN (lowercase
// hex), the well-formed characters kept: how a name that is not UTF-8 (a Latin-1 file name) is
// written where text must be UTF-8 (JSON), readably and one byte for one escape.
inline std::string escape_invalid_utf8(std::string_view s) {
    std::size_t bad = find_invalid_utf8(s);
    if (bad == std::string_view::npos) return std::string(s);
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    std::string out(s.substr(0, bad));
    static constexpr char hex[] = "0123456789abcdef";
    for (std::size_t i = bad; i < s.size();) {
        const utf8_char c = decode_utf8(p + i, s.size() - i);
        if (c.valid) {
            out.append(s.data() + i, c.len);
        } else {
            for (std::uint32_t k = 0; k < c.len; ++k) {
                out += "\\x";
                out += hex[p[i + k] >> 4];
                out += hex[p[i + k] & 15];
            }
        }
        i += c.len;
    }
    return out;
}

// s itself when it is well-formed (no copy), else its replacement, kept in `storage`.
inline std::string_view well_formed_utf8(std::string_view s, std::string& storage) {
    if (is_valid_utf8(s)) return s;
    storage = replace_invalid_utf8(s);
    return storage;
}

}  // namespace locost
