// Fuzzes the byte-level BPE tokenizer from bytes: the input is split at NUL bytes into vocab.json,
// merges.txt, a text, and optionally tokenizer_config.json and added_tokens.json (JSON never holds a
// raw NUL). Loading may fail only with locost::error; a tokenizer that loads then encodes the text
// (with and without the special tokens) and decodes the ids, and ids drawn from the text's bytes.
#include <locost/text/byte_bpe.hpp>

#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::vector<std::string_view> parts;
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    for (std::size_t b = 0;;) {
        const std::size_t e = in.find('\0', b);
        parts.push_back(in.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
        if (e == std::string_view::npos) break;
        b = e + 1;
    }
    if (parts.size() < 3) return 0;
    locost::text::byte_bpe_sources src;
    src.dir = "fuzz";
    src.vocab_json = parts[0];
    src.merges_txt = parts[1];
    if (parts.size() > 3) src.tokenizer_config_json = std::string(parts[3]);
    if (parts.size() > 4) src.added_tokens_json = std::string(parts[4]);
    try {
        const locost::text::byte_bpe_tokenizer tok(src);
        const std::string_view text = parts[2];
        const auto ids = tok.encode(text);
        (void)tok.decode(ids);
        (void)tok.decode(tok.encode(text, false), 0, nullptr, true);
        std::vector<int> drawn;  // ids from the text's bytes, some beyond the vocabulary
        for (unsigned char c : text) drawn.push_back(static_cast<int>(c) % (tok.vocab_size() + 3));
        int extra = 0;
        (void)tok.decode(drawn, tok.vocab_size() + 2, &extra);
    } catch (const locost::error&) {
    }
    return 0;
}
