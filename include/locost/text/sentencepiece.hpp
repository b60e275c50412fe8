// A thin RAII wrapper over SentencePiece with T5 conventions (T5, mT5, LOCOST, SLED over T5):
// no BOS, `</s>` appended when encoding, special tokens (pad, eos, unk) and the model's extra
// ids dropped when decoding. One of the tokenizers text/tokenizer.hpp opens.
//
// Pegasus and Pegasus-X number the same kind of model differently (Hugging Face's
// PegasusTokenizer): ids below an offset (103) are their own special tokens — pad 0, eos 1, then
// pretraining masks and `<unk_2>`… — and piece p of the SentencePiece model is id p + offset
// (its `<unk>`, piece 2, is 105). With `id_offset` > 0 this tokenizer follows that numbering:
// encode gives piece + offset and appends eos 1; decode skips every id below the offset.
#pragma once
#include <sentencepiece_processor.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../config/error.hpp"
#include "../io/json.hpp"
#include "special_ids.hpp"

namespace locost::text {

class sentencepiece_tokenizer {
public:
    explicit sentencepiece_tokenizer(const std::string& model_path, int id_offset = 0)
        : path_(model_path), offset_(id_offset), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
        // Read by us (a regular file, at most vocabulary_file_limit), parsed from memory: the
        // library's own Load() would open a FIFO and wait on it.
        const std::string proto = io::read_text_file(model_path, io::vocabulary_file_limit);
        const auto status = sp_->LoadFromSerializedProto(proto);
        if (!status.ok()) throw error("tokenizer.load_failed", model_path + ": not a SentencePiece model (" + status.ToString() + ")");
        split_mode_ = pieces_stay_inside_words();
    }

    // SentencePiece holds about 70 bytes per input byte while it encodes one call's text (measured:
    // 1.95 GB peak for a 29 MB document, 210 MB for a 3.2 MB book). encode() gives it parts of a
    // few KiB (pieces(), below) where the text allows, but a text without ASCII whitespace (Chinese,
    // Japanese, a long run of symbols) is one part, so callers check this figure against their
    // memory budget before encoding (the tool does: memory.over_budget naming the tokenizer).
    static constexpr double working_bytes_per_input_byte = 72.0;
    double working_bytes(std::size_t text_bytes) const { return working_bytes_per_input_byte * static_cast<double>(text_bytes); }

    // The length of the parts pieces() encodes one at a time (at least; a part ends at the next
    // place where it may).
    static constexpr std::size_t part_bytes = 4096;

    // Token ids of `text`, followed by the eos id when append_eos (T5 input convention).
    std::vector<int> encode(std::string_view text, bool append_eos = true) const {
        std::vector<int> ids = pieces(text);
        if (offset_ > 0)
            for (int& id : ids) id += offset_;
        if (append_eos) ids.push_back(eos_id());
        return ids;
    }

    // Text of `ids`; pad, eos, unk-free control ids are skipped (like skip_special_tokens).
    std::string decode(const std::vector<int>& ids) const { return decode(ids, vocab_size()); }

    // Text of ids a model generated whose vocabulary has model_vocab entries. T5-family models
    // extend the SentencePiece pieces with extra ids (Hugging Face's T5Tokenizer names id i ≥
    // pieces `<extra_id_{model_vocab-1-i}>`: the sentinel tokens); they are special tokens and,
    // like pad and eos, are not part of the text. *extra (when given) counts the ones skipped.
    // An id outside [0, max(model_vocab, pieces)) is an error (tokenizer.bad_id).
    std::string decode(const std::vector<int>& ids, int model_vocab, int* extra = nullptr) const {
        const int limit = std::max(model_vocab, vocab_size());
        std::vector<int> kept;
        kept.reserve(ids.size());
        if (extra) *extra = 0;
        for (int id : ids) {
            if (id < 0 || id >= limit)
                throw error("tokenizer.bad_id",
                            path_ + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(limit) + ")");
            if (id >= vocab_size()) {
                if (extra) ++*extra;
                continue;
            }
            if (id < offset_) continue;  // Pegasus's own special tokens
            const int piece = id - offset_;
            if (sp_->IsControl(piece)) continue;
            kept.push_back(piece);
        }
        std::string out;
        const auto status = sp_->Decode(kept, &out);
        if (!status.ok()) throw error("tokenizer.decode_failed", path_ + ": " + status.ToString());
        return out;
    }

    // The pieces, plus the offset's special ids.
    int vocab_size() const { return sp_->GetPieceSize() + offset_; }
    int eos_id() const { return offset_ > 0 ? 1 : sp_->eos_id(); }
    int pad_id() const { return offset_ > 0 ? 0 : sp_->pad_id(); }
    int unk_id() const { return sp_->unk_id() + offset_; }
    int id_offset() const noexcept { return offset_; }
    // bos (-1 for T5 and Pegasus models, which have none), eos, pad, unk; no mask token (Pegasus's
    // pretraining masks are not exposed).
    special_ids specials() const {
        special_ids s;
        s.bos = offset_ > 0 ? -1 : sp_->bos_id();
        s.eos = eos_id();
        s.pad = pad_id();
        s.unk = unk_id();
        return s;
    }
    const std::string& path() const noexcept { return path_; }

private:
    // The text's pieces, encoded part by part. SentencePiece's encoder takes its input as one
    // sentence and sums float scores from its start: on a book the running sum grows so large that
    // it picks segmentations scoring lower than the best (7 words of Pride and Prejudice, 67 of War
    // and Peace, against Hugging Face's tokenizers, which runs word by word in double precision).
    // Parts of a few KiB keep the sums small and the ids equal to HF's. A part ends after an ASCII
    // whitespace byte followed by an ASCII byte that is not whitespace: the normalizer strips the
    // whitespace at a part's end and the dummy prefix gives the next part's first word the `▁` the
    // whole text gave it, no grapheme cluster or normalization rule spans the cut, and no piece does
    // when every piece has `▁` at most at its start (split_mode_; else the text is one part).
    std::vector<int> pieces(std::string_view text) const {
        std::vector<int> ids;
        auto encode_part = [&](std::string_view part) {
            std::vector<int> p;
            const auto status = sp_->Encode(part, &p);
            if (!status.ok()) throw error("tokenizer.encode_failed", path_ + ": " + status.ToString());
            ids.insert(ids.end(), p.begin(), p.end());
        };
        if (!split_mode_ || text.size() <= part_bytes) {
            encode_part(text);
            return ids;
        }
        ids.reserve(text.size() / 4);
        auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; };
        for (std::size_t begin = 0; begin < text.size();) {
            std::size_t end = text.size();
            for (std::size_t at = begin + part_bytes; at + 1 < text.size(); ++at)
                if (space(text[at]) && static_cast<unsigned char>(text[at + 1]) < 0x80 && !space(text[at + 1])) {
                    end = at + 1;
                    break;
                }
            encode_part(text.substr(begin, end - begin));
            begin = end;
        }
        return ids;
    }

    // Whether no piece holds `▁` (U+2581) past its first character: then a piece never spans two
    // whitespace-separated words and pieces() may cut the text between them.
    bool pieces_stay_inside_words() const {
        const std::string meta = "\xE2\x96\x81";
        for (int i = 0; i < sp_->GetPieceSize(); ++i) {
            const std::string& p = sp_->IdToPiece(i);
            if (p.find(meta, 1) != std::string::npos) return false;
        }
        return true;
    }

    std::string path_;
    int offset_ = 0;
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
    bool split_mode_ = false;  // pieces() may cut the text into parts
};

}  // namespace locost::text
