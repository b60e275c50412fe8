// Minimal embedding: load a LOCOST checkpoint, tokenize a text, run the encoder.
//   embed CHECKPOINT_DIR "some text"
#include <locost/locost.hpp>

#include <cstdio>

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: embed CHECKPOINT_DIR TEXT\n");
        return 2;
    }
    try {
        const auto checkpoint = locost::io::checkpoint::open(argv[1]);
        const locost::text::tokenizer tokenizer(std::string(argv[1]) + "/spiece.model");
        const auto ids = tokenizer.encode(argv[2]);  // T5 convention: </s> appended

        auto encoder = locost::models::load_locost_encoder<locost::cpu>(checkpoint);
        const locost::tensor<float> states = encoder.encode(ids);  // (1, L, d_model)

        std::printf("%zu tokens -> encoder states %s, first value %.6f\n", ids.size(),
                    states.shape().str().c_str(), static_cast<double>(states[0]));
    } catch (const locost::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
