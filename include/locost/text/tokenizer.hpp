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
#include "tokenizer_json.hpp"

namespace locost::text {

template <class T>
concept tokenizer_type = requires(const T& t, std::string_view s, const std::vector<int>& ids, int* extra) {
    { t.encode(s) } -> std::same_as<std::vector<int>>;
    { t.decode(ids, 0, extra) } -> std::same_as<std::string>;
    { t.vocab_size() } -> std::convertible_to<int>;
    { t.path() } -> std::convertible_to<std::string>;
    { t.specials() } -> std::same_as<special_ids>;
    { t.working_bytes(std::size_t{}) } -> std::same_as<double>;
};

static_assert(tokenizer_type<sentencepiece_tokenizer>);
static_assert(tokenizer_type<byte_bpe_tokenizer>);
static_assert(tokenizer_type<unigram_tokenizer>);

class tokenizer {
public:
    // A SentencePiece model file (T5 conventions), or a directory: open_tokenizer(path).
    explicit tokenizer(const std::string& path);
    template <tokenizer_type T>
    explicit tokenizer(T t) : impl_(std::make_shared<impl<T>>(std::move(t))) {}

    // Token ids of `text` with the family's conventions (T5: `</s>` appended).
    std::vector<int> encode(std::string_view text) const { return impl_->encode(text); }
    // Text of ids; special tokens are skipped. model_vocab: the model's vocabulary size (ids past
    // the tokenizer's pieces but below it are the model's extra ids, skipped and counted in
    // *extra); an id beyond both is tokenizer.bad_id.
    std::string decode(const std::vector<int>& ids, int model_vocab = 0, int* extra = nullptr) const {
        return impl_->decode(ids, model_vocab, extra);
    }
    int vocab_size() const { return impl_->vocab_size(); }
    std::string path() const { return impl_->path(); }
    // The tokenizer's special ids (bos, eos, pad, unk, mask; -1 where it has none).
    special_ids specials() const { return impl_->specials(); }
    // About how much memory encode() takes for a text of text_bytes: what to check against a
    // budget before encoding a document of unknown size.
    double working_bytes(std::size_t text_bytes) const { return impl_->working_bytes(text_bytes); }

private:
    struct iface {
        virtual ~iface() = default;
        virtual std::vector<int> encode(std::string_view) const = 0;
        virtual std::string decode(const std::vector<int>&, int, int*) const = 0;
        virtual int vocab_size() const = 0;
        virtual std::string path() const = 0;
        virtual special_ids specials() const = 0;
        virtual double working_bytes(std::size_t) const = 0;
    };
    template <class T>
    struct impl final : iface {
        T t;
        explicit impl(T x) : t(std::move(x)) {}
        std::vector<int> encode(std::string_view s) const override { return t.encode(s); }
        std::string decode(const std::vector<int>& ids, int v, int* extra) const override { return t.decode(ids, v, extra); }
        int vocab_size() const override { return t.vocab_size(); }
        std::string path() const override { return t.path(); }
        special_ids specials() const override { return t.specials(); }
        double working_bytes(std::size_t n) const override { return t.working_bytes(n); }
    };
    std::shared_ptr<const iface> impl_;
};

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
    } catch (const error& e) {
        throw error("tokenizer.bad_config", e.message());
    }
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
// Prejudice, 67 of War and Peace differ; tests/test_tokenizer_json.cpp). Byte-level BPE next: a
// BART checkpoint may carry a stray spiece.model, a T5 one never has vocab.json + merges.txt. One
// of the two BPE files alone still means BPE, so that the error names the missing one.
inline tokenizer open_tokenizer(const std::string& dir, const tokenizer_conventions& conventions = {}) {
    const io::directory_files files(dir);
    if (files.find("tokenizer.json")) return open_tokenizer_json(dir);
    const bool vocab = files.find("vocab.json").has_value(), merges = files.find("merges.txt").has_value();
    if (vocab && merges) return tokenizer(byte_bpe_tokenizer::open(dir));
    if (const auto spm = files.find("spiece.model")) return tokenizer(sentencepiece_tokenizer(*spm, pegasus_id_offset(dir, conventions)));
    if (vocab || merges) return tokenizer(byte_bpe_tokenizer::open(dir));
    throw error("tokenizer.not_found", dir + ": no tokenizer (expected tokenizer.json, vocab.json + merges.txt, a byte-level BPE tokenizer, or "
                                             "spiece.model, a SentencePiece model)");
}

inline tokenizer::tokenizer(const std::string& path) {
    std::error_code ec;
    *this = std::filesystem::is_directory(path, ec) ? open_tokenizer(path) : tokenizer(sentencepiece_tokenizer(path));
}

} // namespace locost::text
