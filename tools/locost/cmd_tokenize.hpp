// locost tokenize and detokenize: a text to the ids a checkpoint's model reads, and ids (say, what
// `locost generate` printed) back to text, through the checkpoint's own tokenizer and conventions
// (text/tokenizer.hpp: byte-level BPE wraps in <s> ... </s> as BART, SentencePiece appends </s> as
// T5). --model is a checkpoint directory or any directory of tokenizer files (no config.json
// needed), or a SentencePiece model file.
#pragma once
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "input.hpp"

namespace locost::cli {

// The model's vocabulary size from DIR/config.json (top level, or a SLED config's underlying_config
// object), or 0 when DIR has no config.json or it names none: decode() then treats ids beyond the
// tokenizer's vocabulary as errors instead of the model's extra ids.
inline int config_vocab_size(const std::string& dir) {
    const auto path = io::directory_files(dir).find("config.json");
    if (!path) return 0;
    const io::json j = io::parse_json(io::read_text_file(*path), *path, "config");
    if (!j.is_object()) return 0;
    for (const io::json* o : {&j, j.contains("underlying_config") ? &j["underlying_config"] : nullptr}) {
        if (!o || !o->is_object()) continue;
        const auto v = o->find("vocab_size");
        if (v != o->end() && v->is_number_unsigned() &&
            v->get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
            return v->get<int>();
    }
    return 0;
}

inline int run_tokenize(const args& a) {
    const std::string input = a.required("input");
    const text::tokenizer tok = tokenizer_at(a.required("model"), cache_of(a));
    const std::string text = read_text_input(input, "--input");
    const phase_scope phase("tokenizing the input");
    check_tokenizing(text, tok, models::available_memory(), "tokenize: " + input);
    const std::vector<int> ids = tok.encode(text);
    const std::string line = nlohmann::json(ids).dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), stdout);
    return 0;
}

inline int run_detokenize(const args& a) {
    const std::string model = io::resolve_model_dir(a.required("model"), cache_of(a)), path = a.required("ids");
    const text::tokenizer tok = tokenizer_at(model, cache_of(a));
    const io::id_batch batch = io::parse_ids_json(read_text_input(path, "--ids"), path);
    if (batch.batched)
        throw error("cli.bad_value",
                    "detokenize: " + path + " holds an array of " + std::to_string(batch.rows.size()) +
                        " arrays; expected one array of token ids");
    std::error_code ec;
    const int model_vocab = std::filesystem::is_directory(model, ec) ? config_vocab_size(model) : 0;
    const int limit = std::max(model_vocab, tok.vocab_size());
    std::vector<int> ids;
    ids.reserve(batch.rows[0].size());
    for (const std::int64_t id : batch.rows[0]) {
        // Checked here too: an id past int's range cannot even reach decode().
        if (id >= limit)
            throw error("tokenizer.bad_id",
                        tok.path() + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(limit) + ")");
        ids.push_back(static_cast<int>(id));
    }
    const std::string text = tok.decode(ids, model_vocab) + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

}  // namespace locost::cli
