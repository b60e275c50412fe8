// What the tokenizer fuzz targets share: the parts of an input separated by NUL bytes (a
// tokenizer's files and a text; JSON and text never hold a raw NUL), and the calls made on a
// tokenizer that loaded.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

inline std::vector<std::string_view> nul_separated_parts(const std::uint8_t* data, std::size_t size) {
    std::vector<std::string_view> parts;
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    for (std::size_t b = 0;;) {
        const std::size_t e = in.find('\0', b);
        parts.push_back(in.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
        if (e == std::string_view::npos) break;
        b = e + 1;
    }
    return parts;
}

// Encodes the text with and without the special tokens, decodes the ids (keeping the special
// ones once), and decodes ids drawn from the text's bytes, some beyond the vocabulary.
template <class Tokenizer>
void exercise_tokenizer(const Tokenizer& tok, std::string_view text) {
    const auto ids = tok.encode(text);
    (void)tok.decode(ids);
    (void)tok.decode(tok.encode(text, false), 0, nullptr, true);
    std::vector<int> drawn;
    for (unsigned char c : text) drawn.push_back(static_cast<int>(c) % (tok.vocab_size() + 3));
    int extra = 0;
    (void)tok.decode(drawn, tok.vocab_size() + 2, &extra);
}
