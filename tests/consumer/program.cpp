// A downstream program on the public API (locost/api.hpp), built twice from this one source: on the
// headers alone (locost::locost: api.hpp is the whole library) and on the compiled library
// (locost::locost_compiled: api.hpp is light declarations, the models and generation come compiled).
// It loads one checkpoint, encodes, generates and checks the result.
//   consumer CHECKPOINT_DIR, consumer_compiled CHECKPOINT_DIR
#include <locost/api.hpp>

#include <cstdio>

#if defined(EXPECT_COMPILED) && !LOCOST_COMPILED
#error "locost::locost_compiled should define LOCOST_COMPILED=1"
#endif
#if defined(EXPECT_COMPILED) && defined(EIGEN_CORE_H)
#error "with locost::locost_compiled, locost/api.hpp should parse no model code (it included Eigen)"
#endif
#if !defined(EXPECT_COMPILED) && !defined(EIGEN_CORE_H)
#error "header-only, locost/api.hpp should be the whole library"
#endif
#if defined(LOCOST_COMPILED) && LOCOST_COMPILED
constexpr const char* build = "compiled";
#else
constexpr const char* build = "header-only";
#endif

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    try {
        const auto checkpoint = locost::io::checkpoint::open(argv[1]);
        auto model = locost::models::load_model(checkpoint);
        const std::vector<std::int64_t> input = {5, 6, 7, 8, 1};
        const auto encoded = model.encode(input.data(), nullptr, 1, static_cast<locost::index_t>(input.size()));
        auto options = model.default_generation_options();
        options.max_new_tokens = 4;
        const auto result = locost::generation::generate(model, encoded, {input}, options);
        std::printf("%s: locost %s, %s, %zu tokens out\n", build, LOCOST_VERSION_STRING, model.family().name, result.sequences[0].size());
        return result.sequences[0].empty() ? 1 : 0;
    } catch (const locost::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
