// Fuzzes the byte-level BPE tokenizer from bytes: the input is split at NUL bytes into vocab.json,
// merges.txt, a text, and optionally tokenizer_config.json and added_tokens.json (JSON never holds a
// raw NUL). Loading may fail only with locost::error; a tokenizer that loads then encodes the text
// (with and without the special tokens) and decodes the ids, and ids drawn from the text's bytes.
#include <locost/text/byte_bpe.hpp>

#include "tokenizer_fuzz.hpp"

#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::vector<std::string_view> parts = nul_separated_parts(data, size);
    if (parts.size() < 3) return 0;
    locost::text::byte_bpe_sources src;
    src.dir = "fuzz";
    src.vocab_json = parts[0];
    src.merges_txt = parts[1];
    if (parts.size() > 3) src.tokenizer_config_json = std::string(parts[3]);
    if (parts.size() > 4) src.added_tokens_json = std::string(parts[4]);
    try {
        exercise_tokenizer(locost::text::byte_bpe_tokenizer(src), parts[2]);
    } catch (const locost::error&) {}
    return 0;
}
