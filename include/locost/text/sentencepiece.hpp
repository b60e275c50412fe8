// A thin RAII wrapper over SentencePiece with T5 conventions (T5, mT5, LOCOST, SLED over T5):
// no BOS, `</s>` appended when encoding, special tokens (pad, eos, unk) and the model's extra
// ids dropped when decoding. One of the tokenizers text/tokenizer.hpp opens.
#pragma once
#include <sentencepiece_processor.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../config/error.hpp"
#include "special_ids.hpp"

namespace locost::text {

class sentencepiece_tokenizer {
public:
    explicit sentencepiece_tokenizer(const std::string& model_path) : path_(model_path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
        const auto status = sp_->Load(model_path);
        if (!status.ok())
            throw error("tokenizer.load_failed", model_path + ": not a SentencePiece model (" + status.ToString() + ")");
    }

    // Token ids of `text`, followed by the eos id when append_eos (T5 input convention).
    std::vector<int> encode(std::string_view text, bool append_eos = true) const {
        std::vector<int> ids;
        const auto status = sp_->Encode(text, &ids);
        if (!status.ok()) throw error("tokenizer.encode_failed", path_ + ": " + status.ToString());
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
                throw error("tokenizer.bad_id", path_ + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(limit) + ")");
            if (id >= vocab_size()) {
                if (extra) ++*extra;
                continue;
            }
            if (sp_->IsControl(id)) continue;
            kept.push_back(id);
        }
        std::string out;
        const auto status = sp_->Decode(kept, &out);
        if (!status.ok()) throw error("tokenizer.decode_failed", path_ + ": " + status.ToString());
        return out;
    }

    int vocab_size() const { return sp_->GetPieceSize(); }
    int eos_id() const { return sp_->eos_id(); }
    int pad_id() const { return sp_->pad_id(); }
    int unk_id() const { return sp_->unk_id(); }
    // bos (-1 for T5 models, which have none), eos, pad, unk; SentencePiece has no mask token.
    special_ids specials() const {
        special_ids s;
        s.bos = sp_->bos_id();
        s.eos = eos_id();
        s.pad = pad_id();
        s.unk = unk_id();
        return s;
    }
    const std::string& path() const noexcept { return path_; }

private:
    std::string path_;
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

} // namespace locost::text
