// Embedding locost in a program: load a checkpoint (any family: LOCOST, T5, ...), summarize a text. The README shows
// this file; the tests build and run it, so the README's code stays true.
//   embed CHECKPOINT_DIR TEXT_FILE
#include <locost/api.hpp>  // light headers with locost::locost_compiled; the whole library header-only

#include <cstdio>
#include <fstream>
#include <sstream>

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: embed CHECKPOINT_DIR TEXT_FILE\n");
        return 2;
    }
    try {
        const std::string dir = argv[1];
        const auto checkpoint = locost::io::checkpoint::open(dir);   // config.json + weights
        const auto tokenizer = locost::models::open_tokenizer(dir);  // spiece.model or vocab.json + merges.txt, the family's conventions
        std::ifstream file(argv[2]);
        std::stringstream text;
        text << file.rdbuf();
        const std::vector<int> ids = tokenizer.encode(text.str());  // T5 convention: </s> appended

        auto model = locost::models::load_model(checkpoint);  // config.json picks the family
        const std::vector<std::int64_t> input(ids.begin(), ids.end());
        const auto encoded = model.encode(input.data(), nullptr, 1, static_cast<locost::index_t>(input.size()));

        auto options = model.default_generation_options();  // generation_config.json and the family's conventions
        options.max_new_tokens = 32;
        options.num_beams = 2;
        options.no_repeat_ngram_size = 3;
        const auto result = locost::generation::generate(model, encoded, {input}, options);

        const auto& best = result.sequences[0];
        std::printf("%zu tokens in, %zu out: %s\n", ids.size(), best.size(),
                    tokenizer.decode(std::vector<int>(best.begin(), best.end()), static_cast<int>(model.config().vocab_size)).c_str());
    } catch (const locost::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
