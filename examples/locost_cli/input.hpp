// Inputs of the tool's commands: token-id JSON files, text through the checkpoint's tokenizer
// (byte-level BPE or SentencePiece), and the padded (B, L) batch with its mask that the models take.
#pragma once
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace locost::cli {

inline std::string read_text_input(const std::string& path, const char* option) {
    if (path == "-") {
        std::ostringstream s;
        s << std::cin.rdbuf();
        return s.str();
    }
    std::ifstream f(path, std::ios::binary);
    if (!f) throw error("io.open_failed", path + ": cannot open (" + option + ")");
    return std::string(std::istreambuf_iterator<char>(f), {});
}

// Rows of token ids padded into a (B, L) batch with pad_token_id, and the 0/1 mask.
struct batch_input {
    std::vector<std::vector<std::int64_t>> rows;
    tensor<std::int64_t> ids;  // (B, L)
    tensor<float> mask;        // (B, L)
    index_t B = 0, L = 0;
};

inline batch_input make_batch(std::vector<std::vector<std::int64_t>> rows, index_t pad) {
    batch_input in;
    in.B = static_cast<index_t>(rows.size());
    for (const auto& r : rows) in.L = std::max<index_t>(in.L, static_cast<index_t>(r.size()));
    in.ids = tensor<std::int64_t>({in.B, in.L}, pad);
    in.mask = tensor<float>({in.B, in.L}, 0.0f);
    for (index_t b = 0; b < in.B; ++b)
        for (index_t l = 0; l < static_cast<index_t>(rows[static_cast<std::size_t>(b)].size()); ++l) {
            in.ids[b * in.L + l] = rows[static_cast<std::size_t>(b)][static_cast<std::size_t>(l)];
            in.mask[b * in.L + l] = 1.0f;
        }
    in.rows = std::move(rows);
    return in;
}

// A token-id JSON file (one array, or an array of arrays), checked against the vocabulary.
inline io::id_batch read_ids_file(const std::string& path, index_t vocab) {
    auto batch = io::parse_ids_json(read_text_input(path, "ids"), path);
    io::check_ids_vocab(batch, vocab, path);
    return batch;
}

// The tokenizer of --tokenizer (a SentencePiece model or a tokenizer directory), or the checkpoint's own
// (text::open_tokenizer: the family's conventions).
inline text::tokenizer open_tokenizer(const args& a, const io::checkpoint& ck, const std::string& command) {
    if (a.has("tokenizer")) return text::tokenizer(a.required("tokenizer"));
    try {
        return text::open_tokenizer(ck.dir());
    } catch (const error& e) {
        if (e.id() != "tokenizer.not_found") throw;
        throw error("cli.missing_option", command + ": " + ck.dir() +
                                              " holds no tokenizer (vocab.json + merges.txt, or spiece.model); pass '--tokenizer SPM|DIR'");
    }
}

// Text tokenized with the tokenizer's conventions (T5: </s> appended), checked against the model.
inline std::vector<std::int64_t> text_ids(const std::string& text, index_t vocab, const text::tokenizer& tok) {
    const auto ids = tok.encode(text);
    std::vector<std::vector<std::int64_t>> rows{std::vector<std::int64_t>(ids.begin(), ids.end())};
    io::check_ids_vocab(io::id_batch{rows, false}, vocab, tok.path());
    return rows[0];
}

// --input text, one row.
inline std::vector<std::int64_t> read_text_ids(const args& a, index_t vocab, const text::tokenizer& tok) {
    return text_ids(read_text_input(a.required("input"), "--input"), vocab, tok);
}

} // namespace locost::cli
