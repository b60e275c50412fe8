// locost demo-checkpoint
#pragma once
#include <filesystem>
#include <fstream>

#include "demo_checkpoint.hpp"

#ifndef LOCOST_DEFAULT_SPM
#define LOCOST_DEFAULT_SPM ""
#endif

namespace locost::cli {

inline int run_demo_checkpoint(const args& a) {
    namespace fs = std::filesystem;
    const std::string family = a.get("family", "locost"), config = a.required("config");
    demo_plan_named(family, config, 1);  // flag errors before touching files
    const fs::path out = a.required("out");
    const auto seed = a.integer<std::uint64_t>("seed", 0, 0, ~std::uint64_t{0});
    const std::string spm = a.get("spm", LOCOST_DEFAULT_SPM);
    if (spm.empty() || !fs::is_regular_file(spm))
        throw error("cli.bad_value", "demo-checkpoint: SentencePiece model '" + spm + "' not found (pass --spm FILE)");
    const text::sentencepiece_tokenizer check(spm);  // refuse to copy something that is not a SentencePiece model
    // tiny: the vocabulary of the tokenizer it ships with, so it runs on real text.
    const demo_plan plan = demo_plan_named(family, config, check.vocab_size());
    const index_t vocab = plan.config["vocab_size"].get<index_t>();
    if (check.vocab_size() > vocab)
        throw error("cli.bad_value", "demo-checkpoint: SentencePiece model '" + spm + "' has " + std::to_string(check.vocab_size()) +
                                         " pieces, more than the vocabulary of " + std::to_string(vocab));

    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec) throw error("io.write_failed", out.string() + ": cannot create directory (" + ec.message() + ")");

    demo_rng rng(seed);
    const auto& specs = plan.parameters;
    io::safetensors_writer w;
    std::vector<tensor<float>> storage;
    storage.reserve(specs.size());
    index_t count = 0;
    for (const auto& s : specs) {
        storage.emplace_back(s.shape);
        plan.init(s, rng, storage.back().data());
        w.add(s.name, storage.back().v());
        count += s.shape.numel();
    }
    w.metadata["format"] = "pt";
    w.metadata["locost_demo_checkpoint"] = "UNTRAINED seeded random weights, seed " + std::to_string(seed);
    w.write((out / "model.safetensors").string());

    auto write_text = [&](const fs::path& p, const std::string& text) {
        std::ofstream f(p, std::ios::binary | std::ios::trunc);
        f << text;
        if (!f.good()) throw error("io.write_failed", p.string() + ": cannot write");
    };
    write_text(out / "config.json", plan.config.dump(2) + "\n");
    write_text(out / "README.md", demo_readme);
    fs::copy_file(spm, out / "spiece.model", fs::copy_options::overwrite_existing, ec);
    if (ec) throw error("io.write_failed", (out / "spiece.model").string() + ": cannot copy (" + ec.message() + ")");

    std::fprintf(stderr, "wrote %s: UNTRAINED demo checkpoint (%s %s, seed %llu), %lld parameters\n",
                 out.string().c_str(), family.c_str(), config.c_str(), static_cast<unsigned long long>(seed),
                 static_cast<long long>(count));
    return 0;
}

} // namespace locost::cli
