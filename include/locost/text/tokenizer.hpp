// A thin RAII wrapper over SentencePiece with T5 conventions: no BOS, `</s>` appended when
// encoding, special tokens (pad, eos, unk) dropped when decoding.
#pragma once
#include <sentencepiece_processor.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../config/error.hpp"

namespace locost::text {

class tokenizer {
public:
    explicit tokenizer(const std::string& model_path) : path_(model_path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
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
    std::string decode(const std::vector<int>& ids) const {
        std::vector<int> kept;
        kept.reserve(ids.size());
        for (int id : ids) {
            if (id < 0 || id >= vocab_size())
                throw error("tokenizer.bad_id", path_ + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")");
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
    const std::string& path() const noexcept { return path_; }

private:
    std::string path_;
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

} // namespace locost::text
