// One summarize call through the C++ API, timed as bench/python/python_overhead.py times the same call
// through Python: the checkpoint loaded first (untimed), then text → ids → encode → generate →
// text under one clock. Prints one JSON line: call_s, encode_s, decode_s, text.
//   summarize_call CHECKPOINT_DIR TEXT_FILE THREADS NEW_TOKENS
#include <locost/locost.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: summarize_call CHECKPOINT_DIR TEXT_FILE THREADS NEW_TOKENS\n");
        return 2;
    }
    try {
        using clock = std::chrono::steady_clock;
        const std::string dir = argv[1];
        locost::set_num_threads(std::atoi(argv[3]));
        locost::flush_denormals();
        const auto checkpoint = locost::io::checkpoint::open(dir);
        const auto tokenizer = locost::models::open_tokenizer(dir);
        auto model = locost::models::load_model(checkpoint);
        std::ifstream file(argv[2]);
        std::stringstream buffer;
        buffer << file.rdbuf();
        const std::string text = buffer.str();
        auto options = model.default_generation_options();
        options.max_new_tokens = std::atoi(argv[4]);
        options.min_new_tokens = options.max_new_tokens;

        const auto t0 = clock::now();
        const std::vector<int> ids = tokenizer.encode(text);
        const std::vector<std::int64_t> input(ids.begin(), ids.end());
        const auto t1 = clock::now();
        const auto encoded = model.encode(input.data(), nullptr, 1, static_cast<locost::index_t>(input.size()));
        const auto t2 = clock::now();
        const auto result = locost::generation::generate(model, encoded, {input}, options);
        const auto t3 = clock::now();
        const auto& best = result.sequences[0];
        const std::string summary =
            tokenizer.decode(std::vector<int>(best.begin(), best.end()), static_cast<int>(model.config().vocab_size));
        const auto t4 = clock::now();
        auto seconds = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
        std::printf("%s\n",
                    nlohmann::json({{"call_s", seconds(t0, t4)},
                                    {"encode_s", seconds(t1, t2)},
                                    {"decode_s", seconds(t2, t3)},
                                    {"input_tokens", ids.size()},
                                    {"text", summary}})
                        .dump()
                        .c_str());
    } catch (const locost::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
