// Text from files and inputs, as messages may quote it: printable ASCII kept, every other byte
// written \xNN, and cut to a bound, so that a quoted name or value can never carry terminal escape
// sequences, a fake line of our own output, or megabytes into a log.
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace locost::io::detail {

// Printable ASCII only: other bytes become \xNN, so a message never carries raw binary.
inline std::string printable(std::string_view s, std::size_t max_len = 200) {
    std::string out;
    for (std::size_t i = 0; i < s.size() && i < max_len; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
            out += buf;
        }
    }
    if (s.size() > max_len) out += "...";
    return out;
}

// A message as a terminal or a log may show it: well-formed UTF-8 characters kept, except control
// characters (C0, DEL, C1: a newline would start a fake line of our own output, ESC or CSI a
// terminal sequence) and every byte of an ill-formed sequence, which become \xNN; cut to
// max_len bytes with "...". What the tool prints of an error goes through it.
inline std::string terminal_safe(std::string_view s, std::size_t max_len = 4096) {
    std::string out;
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    auto hex = [&](unsigned char c) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
        out += buf;
    };
    std::size_t i = 0;
    for (; i < s.size() && out.size() < max_len;) {
        const unsigned char b = p[i];
        if (b >= 0x20 && b < 0x7f) {
            out += static_cast<char>(b);
            ++i;
            continue;
        }
        // The length of a well-formed character starting here, or 0.
        std::size_t len = 0;
        unsigned cp = 0;
        if (b >= 0xC2 && b <= 0xDF) len = 2, cp = b & 0x1Fu;
        else if (b >= 0xE0 && b <= 0xEF) len = 3, cp = b & 0x0Fu;
        else if (b >= 0xF0 && b <= 0xF4) len = 4, cp = b & 0x07u;
        bool ok = len > 0 && i + len <= s.size();
        for (std::size_t k = 1; ok && k < len; ++k) {
            ok = (p[i + k] & 0xC0) == 0x80;
            cp = (cp << 6) | (p[i + k] & 0x3Fu);
        }
        // overlong forms, surrogates and past U+10FFFF are ill-formed; C1 controls are controls
        ok = ok && !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) && !(cp >= 0xD800 && cp <= 0xDFFF) &&
            !(cp >= 0x80 && cp <= 0x9F);
        if (!ok) {
            hex(b);
            ++i;
            continue;
        }
        out.append(s.data() + i, len);
        i += len;
    }
    if (i < s.size()) out += "...";
    return out;
}

}  // namespace locost::io::detail
