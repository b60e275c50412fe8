// locost demo-checkpoint
#pragma once
#include <filesystem>
#include <fstream>
#include <set>

#include "data_files.hpp"
#include "demo_checkpoint.hpp"

namespace locost::cli {

inline int run_demo_checkpoint(const args& a) {
    namespace fs = std::filesystem;
    const std::string family = a.get("family", "locost"), config = a.required("config");
    const std::string attention = a.get("encoder-attention-type", "transient-global");
    if (a.has("encoder-attention-type") && family != "longt5")
        throw error("cli.bad_value", "demo-checkpoint: --encoder-attention-type is for LongT5; family '" + family + "' has one attention");
    // Flag errors before touching files (the vocabulary is settled below).
    const models::demo_plan draft = models::demo_plan_of(family, config, 32000, attention);
    const fs::path out = a.required("out");
    const auto seed = a.integer<std::uint64_t>("seed", 0, 0, ~std::uint64_t{0});
    // The tokenizer files it ships with: BART's byte-level BPE (vocab.json + merges.txt of
    // --bpe DIR), the others' SentencePiece model (--spm FILE); by default those installed with
    // the tool (share/locost: books-bpe/, books-16k.model; data_files.hpp).
    const bool bpe = draft.byte_bpe;
    if (bpe && a.has("spm"))
        throw error("cli.bad_value",
                    std::string("demo-checkpoint: --spm is for SentencePiece families; ") + draft.label + " takes --bpe DIR");
    if (!bpe && a.has("bpe")) {
        // The families whose demos ship byte-level BPE ("BART and LED"), from the registry.
        std::vector<std::string> labels;
        for (const auto& name : models::families::names())
            if (const auto p = models::demo_plan_of(name, "tiny", 16000, attention); p.byte_bpe) labels.push_back(p.label);
        std::string listed;
        for (std::size_t i = 0; i < labels.size(); ++i) listed += (i == 0 ? "" : i + 1 == labels.size() ? " and " : ", ") + labels[i];
        throw error("cli.bad_value", "demo-checkpoint: --bpe is for " + listed + "; family '" + family + "' takes --spm FILE");
    }
    std::vector<fs::path> tokenizer_files;
    index_t tokenizer_vocab = 0;
    if (bpe) {
        const std::string dir = a.has("bpe")
            ? a.get("bpe", "")
            : (find_data_dir({"books-bpe/vocab.json", "books-bpe/merges.txt"},
                             "demo-checkpoint: no --bpe given, and the default byte-level BPE vocabulary books-bpe/", "--bpe DIR") /
               "books-bpe")
                  .string();
        if (dir.empty() || !fs::is_regular_file(fs::path(dir) / "vocab.json") || !fs::is_regular_file(fs::path(dir) / "merges.txt"))
            throw error("cli.bad_value",
                        "demo-checkpoint: byte-level BPE directory '" + dir + "' has no vocab.json + merges.txt (pass --bpe DIR)");
        tokenizer_vocab = text::open_tokenizer(dir).vocab_size();  // refuse to copy files that do not load
        tokenizer_files = {fs::path(dir) / "vocab.json", fs::path(dir) / "merges.txt"};
    } else {
        const std::string spm = a.has("spm")
            ? a.get("spm", "")
            : (find_data_dir({"books-16k.model"}, "demo-checkpoint: no --spm given, and the default SentencePiece model books-16k.model",
                             "--spm FILE") /
               "books-16k.model")
                  .string();
        if (spm.empty() || !fs::is_regular_file(spm))
            throw error("cli.bad_value", "demo-checkpoint: SentencePiece model '" + spm + "' not found (pass --spm FILE)");
        // refuse to copy something that is not one; some families number its pieces from an offset (Pegasus-X: 103)
        tokenizer_vocab = text::sentencepiece_tokenizer(spm, draft.sentencepiece_id_offset).vocab_size();
        tokenizer_files = {fs::path(spm)};
    }
    // tiny: the vocabulary of the tokenizer it ships with, so it runs on real text.
    const models::demo_plan plan = models::demo_plan_of(family, config, tokenizer_vocab, attention);
    const index_t vocab = plan.config["vocab_size"].get<index_t>();
    if (tokenizer_vocab > vocab)
        throw error("cli.bad_value",
                    "demo-checkpoint: tokenizer '" + tokenizer_files.front().string() + "' has " + std::to_string(tokenizer_vocab) +
                        " entries, more than the vocabulary of " + std::to_string(vocab));

    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec) throw error("io.write_failed", out.string() + ": cannot create directory (" + ec.message() + ")");

    // Every tensor the family's loaders read (optional ones too: save_pretrained writes them), each
    // once, in the order they read them.
    std::vector<layers::param_record> records;
    {
        std::set<std::string> seen;
        for (auto& r : models::parameters(*models::parse_config(plan.config, "demo-checkpoint")))
            if (!r.alias && seen.insert(r.name).second) records.push_back(std::move(r));
    }
    demo_rng rng(seed);
    io::safetensors_writer w;
    std::vector<tensor<float>> storage;
    storage.reserve(records.size());
    index_t count = 0;
    for (const auto& r : records) {
        storage.emplace_back(r.shape);
        apply_init(plan.init(r), r, rng, storage.back().data());
        w.add(r.name, storage.back().v());
        count += r.shape.numel();
    }
    w.metadata["format"] = "pt";
    w.metadata["locost_demo_checkpoint"] = "UNTRAINED seeded random weights, seed " + std::to_string(seed);
    w.write((out / "model.safetensors").string());

    auto write_text = [&](const fs::path& p, const std::string& text) { io::write_file_atomically(p.string(), text); };
    write_text(out / "config.json", plan.config.dump(2) + "\n");
    if (!plan.generation.is_null()) write_text(out / "generation_config.json", plan.generation.dump(2) + "\n");
    if (!plan.tokenizer_config.is_null()) write_text(out / "tokenizer_config.json", plan.tokenizer_config.dump(2) + "\n");
    write_text(out / "README.md", demo_readme);
    for (const fs::path& f : tokenizer_files) {
        const fs::path to = out / (bpe ? f.filename() : fs::path("spiece.model"));
        fs::copy_file(f, to, fs::copy_options::overwrite_existing, ec);
        if (ec) throw error("io.write_failed", to.string() + ": cannot copy (" + ec.message() + ")");
    }

    std::fprintf(stderr, "wrote %s: UNTRAINED demo checkpoint (%s %s, seed %llu), %lld parameters\n", out.string().c_str(), family.c_str(),
                 config.c_str(), static_cast<unsigned long long>(seed), static_cast<long long>(count));
    return 0;
}

}  // namespace locost::cli
