// Fuzzes the tokenizer.json reader from bytes: the input is split at NUL bytes into tokenizer.json,
// a text, and optionally tokenizer_config.json (JSON never holds a raw NUL). Reading may fail only
// with locost::error; a tokenizer that loads (Unigram here, byte-level BPE through byte_bpe.hpp)
// encodes the text with and without special tokens and decodes the ids, and ids drawn from the
// text's bytes.
#include <locost/text/tokenizer.hpp>

#include <string_view>
#include <vector>

namespace {

template <class T>
void exercise(const T& tok, std::string_view text) {
    const auto ids = tok.encode(text);
    (void)tok.decode(ids);
    (void)tok.decode(tok.encode(text, false), 0, nullptr, true);
    std::vector<int> drawn;  // ids from the text's bytes, some beyond the vocabulary
    for (unsigned char c : text) drawn.push_back(static_cast<int>(c) % (tok.vocab_size() + 3));
    int extra = 0;
    (void)tok.decode(drawn, tok.vocab_size() + 2, &extra);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::vector<std::string_view> parts;
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    for (std::size_t b = 0;;) {
        const std::size_t e = in.find('\0', b);
        parts.push_back(in.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
        if (e == std::string_view::npos) break;
        b = e + 1;
    }
    if (parts.size() < 2) return 0;
    try {
        std::optional<std::string> config;
        if (parts.size() > 2) config = std::string(parts[2]);
        const auto f = locost::text::tokenizer_json_file::parse("fuzz", parts[0], config);
        if (f.model_type() == "Unigram") exercise(locost::text::unigram_tokenizer(f), parts[1]);
        else exercise(locost::text::byte_bpe_tokenizer(locost::text::bpe_sources(f)), parts[1]);
    } catch (const locost::error&) {
    }
    return 0;
}
