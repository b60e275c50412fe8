// Tokenizers: what the tool and users need of one, as a concept, and open_tokenizer(dir), which
// picks the tokenizer a checkpoint directory holds with its family's conventions.
//
//   tokenizer_type<T>   encode(text) → ids with the conventions applied (T5: `</s>` appended;
//                       BART: `<s> … </s>`), decode(ids, model_vocab, &extra) → text without
//                       special tokens, vocab_size(), path(), specials() (the special ids),
//                       working_bytes(n) (encode's memory for n bytes of text)
//   tokenizer           a handle to any of them: SentencePiece (sentencepiece.hpp), byte-level
//                       BPE (byte_bpe.hpp) or a tokenizer.json's Unigram (tokenizer_json.hpp)
//   open_tokenizer(dir, conventions)
//                       DIR/tokenizer.json → as Hugging Face's tokenizers runs it (tokenizer_json.hpp:
//                       a Unigram model, or byte-level BPE), what transformers loads; else
//                       DIR/vocab.json + DIR/merges.txt → byte-level BPE with BART's conventions;
//                       else DIR/spiece.model → SentencePiece with T5's, or Pegasus's numbering
//                       (pegasus_id_offset: tokenizer_config.json's, or else the conventions');
//                       Error: tokenizer.not_found naming the directory and what it looked for.
//                       models::open_tokenizer(dir) passes the checkpoint family's conventions.
#pragma once
#include <concepts>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../config/error.hpp"
#include "byte_bpe.hpp"
#include "conventions.hpp"
#include "sentencepiece.hpp"
#include "special_ids.hpp"
#include "tokenizer_decl.hpp"
#include "tokenizer_json.hpp"

namespace locost::text {

// tokenizer_type: text/tokenizer_decl.hpp.

static_assert(tokenizer_type<sentencepiece_tokenizer>);
static_assert(tokenizer_type<byte_bpe_tokenizer>);
static_assert(tokenizer_type<unigram_tokenizer>);

// tokenizer: text/tokenizer_decl.hpp.

// The id offset of a SentencePiece directory (sentencepiece.hpp): Pegasus's numbering when
// tokenizer_config.json names a Pegasus tokenizer ("offset", default 103, as PegasusTokenizer);
// without tokenizer_config.json, what the conventions say (the model family's); else 0.
inline int pegasus_id_offset(const std::string& dir, const tokenizer_conventions& conventions = {}) {
    const auto found = io::directory_files(dir).find("tokenizer_config.json");
    if (!found) return conventions.sentencepiece_id_offset;
    const std::string& tc = *found;
    io::json j;
    try {
        j = io::parse_json(io::read_text_file(tc), tc, "tokenizer");
    } catch (const error& e) { throw error("tokenizer.bad_config", e.message()); }
    if (!j.is_object()) throw error("tokenizer.bad_config", tc + ": expected a JSON object, found a JSON " + io::json_type_name(j));
    constexpr int default_offset = 103;
    const auto cls = j.find("tokenizer_class");
    if (cls == j.end() || !cls->is_string() || cls->get<std::string>().rfind("Pegasus", 0) != 0) return 0;
    const auto off = j.find("offset");
    if (off == j.end()) return default_offset;
    if (!off->is_number_integer() || off->get<std::int64_t>() < 1 || off->get<std::int64_t>() > 100000)
        throw error("tokenizer.bad_config", tc + ": \"offset\" is " + off->dump() + ", expected an integer in [1, 100000]");
    return static_cast<int>(off->get<std::int64_t>());
}

// DIR/tokenizer.json alone (and the tokenizer_config.json beside it): a Unigram model, or byte-level
// BPE.
inline tokenizer open_tokenizer_json(const std::string& dir) {
    const tokenizer_json_file f = tokenizer_json_file::read(dir);
    const std::string type = f.model_type();
    if (type == "Unigram") return tokenizer(unigram_tokenizer(f));
    if (type == "BPE") return tokenizer(byte_bpe_tokenizer(bpe_sources(f)));
    tokenizer_json_detail::unsupported(f.path + ": model", type, "Unigram, BPE");
}

// The tokenizer of a checkpoint directory (or a directory of tokenizer files).
// tokenizer.json first: it is what transformers runs (AutoTokenizer's default fast tokenizer, and
// the only kind transformers 5 has). Its Unigram search runs word by word in double precision;
// SentencePiece's own encoder runs over the whole text as one sentence, summing float scores, so on
// a book it picks lower-scoring segmentations once the running sum is large (7 words of Pride and
// Prejudice, 67 of War and Peace differ; tests/text/test_tokenizer_json.cpp). Byte-level BPE next: a
// BART checkpoint may carry a stray spiece.model, a T5 one never has vocab.json + merges.txt. One
// of the two BPE files alone still means BPE, so that the error names the missing one.
#if LOCOST_API_DEFINITIONS

LOCOST_API tokenizer open_tokenizer(const std::string& dir, const tokenizer_conventions& conventions) {
    const io::directory_files files(dir);
    if (files.find("tokenizer.json")) return open_tokenizer_json(dir);
    const bool vocab = files.find("vocab.json").has_value(), merges = files.find("merges.txt").has_value();
    if (vocab && merges) return tokenizer(byte_bpe_tokenizer::open(dir));
    if (const auto spm = files.find("spiece.model")) return tokenizer(sentencepiece_tokenizer(*spm, pegasus_id_offset(dir, conventions)));
    if (vocab || merges) return tokenizer(byte_bpe_tokenizer::open(dir));
    throw error("tokenizer.not_found",
                dir +
                    ": no tokenizer (expected tokenizer.json, vocab.json + merges.txt, a byte-level BPE tokenizer, or "
                    "spiece.model, a SentencePiece model)");
}

LOCOST_API tokenizer::tokenizer(const std::string& path) {
    std::error_code ec;
    *this = std::filesystem::is_directory(path, ec) ? open_tokenizer(path) : tokenizer(sentencepiece_tokenizer(path));
}

#endif  // LOCOST_API_DEFINITIONS

}  // namespace locost::text
