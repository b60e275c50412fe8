// Fuzzes the tokenizer.json reader from bytes: the input is split at NUL bytes into tokenizer.json,
// a text, and optionally tokenizer_config.json (JSON never holds a raw NUL). Reading may fail only
// with locost::error; a tokenizer that loads (Unigram here, byte-level BPE through byte_bpe.hpp)
// encodes the text with and without special tokens and decodes the ids, and ids drawn from the
// text's bytes.
#include <locost/text/tokenizer.hpp>

#include "tokenizer_fuzz.hpp"

#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::vector<std::string_view> parts = nul_separated_parts(data, size);
    if (parts.size() < 2) return 0;
    try {
        std::optional<std::string> config;
        if (parts.size() > 2) config = std::string(parts[2]);
        const auto f = locost::text::tokenizer_json_file::parse("fuzz", parts[0], config);
        if (f.model_type() == "Unigram") exercise_tokenizer(locost::text::unigram_tokenizer(f), parts[1]);
        else exercise_tokenizer(locost::text::byte_bpe_tokenizer(locost::text::bpe_sources(f)), parts[1]);
    } catch (const locost::error&) {}
    return 0;
}
