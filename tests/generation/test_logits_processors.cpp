// Logits processors and warpers (generation/logits_processors.hpp) against references of Hugging
// Face transformers 4.27.1 semantics (tests/data/own/generation, made by an independent Python
// implementation replayed through the 4.27.1 classes): each one, chains in HF's order, and
// suppress_tokens / begin_suppress_tokens.
#include "generation/hf_generation.hpp"

#include <string>
#include <vector>

TEST_CASE("generation: every logits processor and warper equals HF 4.27.1") {
    std::size_t n = 0;
    for (const auto& c : cases().at("processor_cases")) {
        CAPTURE(c.at("name").get<std::string>());
        const auto ids = rows_of(c.at("input_ids"));
        auto scores = arrays().floats(c.at("scores").get<std::string>());
        const auto p = processor_named(c.at("class").get<std::string>(), c.at("params"));
        p->apply(ids, scores.data(), 512);
        check_scores(scores, arrays().floats(c.at("expected").get<std::string>()));
        ++n;
    }
    CHECK(n == 42);
}

TEST_CASE("generation: processor chains in HF order (processors, then warpers)") {
    const auto cfg = test::config_of(locost::io::checkpoint::open(tiny_dir));
    for (const auto& c : cases().at("chain_cases")) {
        CAPTURE(c.at("name").get<std::string>());
        auto o = locost::generation::default_generation_options(cfg, locost::io::parse_generation_config(c.at("options").dump(), "chain"));
        if (!c.at("options").contains("max_new_tokens")) o.max_length = c.at("max_length").get<index_t>();
        const auto ids = rows_of(c.at("input_ids"));
        const token_rows enc = c.at("encoder_input_ids").is_null() ? token_rows{} : rows_of(c.at("encoder_input_ids"));
        const auto procs = locost::generation::make_processors(o, enc);
        std::vector<std::string> names;
        CHECK(procs.size() == c.at("processors").size());
        auto scores = arrays().floats(c.at("scores").get<std::string>());
        locost::generation::apply_all(procs, ids, scores.data(), 512);
        check_scores(scores, arrays().floats(c.at("after_processors").get<std::string>()));
        const auto warps = locost::generation::make_warpers(o);
        CHECK(warps.size() == c.at("warpers").size());
        locost::generation::apply_all(warps, ids, scores.data(), 512);
        check_scores(scores, arrays().floats(c.at("expected").get<std::string>()));
    }
}

// SuppressTokens and SuppressTokensAtBegin (transformers' generation_config suppress_tokens and
// begin_suppress_tokens; not in the 4.27.1 references): derived by hand from their definitions —
// the first masks its ids at every step, the second only while the row holds the start token
// alone (the first generated position), or the start and a forced BOS token; both come after the
// forced-token processors, so a suppressed id forced at that step is masked too.
TEST_CASE("generation: suppress_tokens and begin_suppress_tokens, in HF's order") {
    const auto cfg = test::config_of(locost::io::checkpoint::open(tiny_dir));
    auto o = locost::generation::default_generation_options(
        cfg, locost::io::parse_generation_config(R"({"suppress_tokens": [3, 5], "begin_suppress_tokens": [7, 1]})", "g"));
    const index_t V = 10;
    const token_rows ids = {{0}, {0, 4}, {0, 4, 6}};
    auto run = [&](const generation_options& opts) {
        std::vector<float> scores(ids.size() * V);
        for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = 0.25f * static_cast<float>(i % 7);
        const auto expected_unchanged = scores;
        locost::generation::apply_all(locost::generation::make_processors(opts, {}), ids, scores.data(), V);
        std::vector<std::vector<index_t>> masked(ids.size());
        for (std::size_t r = 0; r < ids.size(); ++r)
            for (index_t t = 0; t < V; ++t) {
                const float s = scores[r * V + t];
                if (std::isinf(s) && s < 0) masked[r].push_back(t);
                else CHECK(s == expected_unchanged[r * V + t]);
            }
        return masked;
    };
    CHECK(run(o) == std::vector<std::vector<index_t>>{{1, 3, 5, 7}, {3, 5}, {3, 5}});
    o.forced_bos_token_id = 7;  // forced at the first position; the suppression moves to the second
    const auto forced = run(o);
    CHECK(forced[0] == std::vector<index_t>{0, 1, 2, 3, 4, 5, 6, 8, 9});
    CHECK(forced[1] == std::vector<index_t>{1, 3, 5, 7});
    CHECK(forced[2] == std::vector<index_t>{3, 5});
    o.suppress_tokens.clear();
    o.begin_suppress_tokens.clear();
    o.forced_bos_token_id.reset();
    CHECK(locost::generation::make_processors(o, {}).empty());
    o.suppress_tokens = {600};
    test::check_error([&] { locost::generation::validate(o, cfg); }, "generate.invalid_option",
                      "generation option 'suppress_tokens' is 600, expected a token id in [0, " + std::to_string(cfg.vocab_size) + ")");
    check_error([] { locost::io::parse_generation_config(R"({"begin_suppress_tokens": 7})", "g"); }, "generation_config.wrong_type",
                "g: field 'begin_suppress_tokens' is a JSON integer, expected a list of integers");
    check_error([] { locost::io::parse_generation_config(R"({"suppress_tokens": [-2]})", "g"); }, "generation_config.invalid_value",
                "g: field 'suppress_tokens' is -2, expected an integer in [0, 2147483647]");
    CHECK(locost::io::parse_generation_config(R"({"suppress_tokens": null})", "g").suppress_tokens.empty());
}
