// Consumes locost through locost::locost_compiled: the models and generation come compiled from
// the library (this file sees extern template declarations only), and it runs one checkpoint.
//   consumer_compiled CHECKPOINT_DIR
#include <locost/locost.hpp>

#include <cstdio>

#if !LOCOST_COMPILED
#error "locost::locost_compiled should define LOCOST_COMPILED=1"
#endif

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    try {
        auto model = locost::models::load_model(locost::io::checkpoint::open(argv[1]));
        const std::vector<std::int64_t> input = {5, 6, 7, 8, 1};
        const auto encoded = model.encode(input.data(), nullptr, 1, static_cast<locost::index_t>(input.size()));
        auto options = model.default_generation_options();
        options.max_new_tokens = 4;
        const auto result = locost::generation::generate(model, encoded, {input}, options);
        std::printf("compiled: %s, %zu tokens out\n", model.family().name, result.sequences[0].size());
        return result.sequences[0].empty() ? 1 : 0;
    } catch (const locost::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
