// SLED (models/sled.hpp): the window plan against the original's _window_indices and a tiling
// property, the errors of bad settings and unsupported variants, SLED over LOCOST, and
// encode_prefix. (Its parity with transformers over T5 and BART is in
// tests/models/test_hf_parity.cpp.)
#include "models/hf_reference.hpp"

#include <cstdio>

TEST_CASE("sled: windows equal the original's _window_indices") {
    using W = models::sled_window;
    // docs/models.md §3 (context 512, f 0.5), keep offsets there relative to the window start.
    CHECK(models::sled_windows(514, 512, 0.5) == std::vector<W>{{0, 512, 0, 384}, {2, 514, 384, 514}});
    CHECK(models::sled_windows(780, 512, 0.5) == std::vector<W>{{0, 512, 0, 384}, {256, 768, 384, 640}, {268, 780, 640, 780}});
    CHECK(models::sled_margin(100, 0.9) == 4);  // truncated, not rounded (100·0.1/2 = 4.999…)
    CHECK(models::sled_windows(300, 512, 0.5) == std::vector<W>{{0, 300, 0, 300}});
    // The references' notes: n = 150 document tokens (156 with the 6-token prefix), c 32, f 0.5.
    const json notes = read_json(hf_dir + "/sled_t5_p6/cases.json")["notes"];
    std::vector<W> want;  // "[(0, 32, 0, 24), (16, 48, 8, 24), …]": (start, end, keep offsets)
    std::string s = notes.get<std::string>();
    s = s.substr(s.find("windows [") + 9);
    for (std::size_t at = 0; (at = s.find('(', at)) != std::string::npos; ++at) {
        long a, b, c, d;
        REQUIRE(std::sscanf(s.c_str() + at, "(%ld, %ld, %ld, %ld)", &a, &b, &c, &d) == 4);
        want.push_back({a, b, a + c, a + d});
    }
    CHECK(want.size() == 9);
    CHECK(models::sled_windows(150, 32, 0.5) == want);
}

TEST_CASE("sled: for every n up to 3c the kept ranges tile [0, n) exactly once, inside full-width windows") {
    std::size_t plans = 0;
    for (index_t c : {1, 2, 3, 5, 8, 16, 31, 32, 33, 100}) {
        for (double f : {0.1, 0.25, 1.0 / 3.0, 0.5, 0.6, 0.75, 0.9, 0.999, 1.0}) {
            const index_t m = models::sled_margin(c, f);
            for (index_t n = 1; n <= 3 * c; ++n) {
                CAPTURE(c);
                CAPTURE(f);
                CAPTURE(n);
                const auto w = models::sled_windows(n, c, f);
                REQUIRE_FALSE(w.empty());
                CHECK(static_cast<index_t>(w.size()) == models::sled_window_count(n, c, f));
                index_t next = 0;
                bool ok = true;
                for (std::size_t i = 0; i < w.size(); ++i) {
                    const auto& x = w[i];
                    ok = ok && x.start >= 0 && x.end <= n && x.end - x.start == std::min(c, n);  // full width
                    ok = ok && x.keep_start == next && x.keep_end > x.keep_start;                // tiles, in order
                    ok = ok && x.start <= x.keep_start && x.keep_end <= x.end;                   // kept inside the window
                    // Every kept token has m tokens of context on each side, except at the ends.
                    ok = ok && (x.keep_start == 0 || x.keep_start - x.start >= m) && (x.keep_end == n || x.end - x.keep_end >= m);
                    next = x.keep_end;
                }
                CHECK(ok);
                CHECK(next == n);
                ++plans;
            }
        }
    }
    CHECK(plans > 2000);
}

TEST_CASE("sled: bad settings and unsupported variants fail with their exact error") {
    const auto ck = locost::io::checkpoint::open(hf_dir + "/t5_v11");
    const std::string src = hf_dir + "/t5_v11/config.json";
    auto with = [&](index_t c, double f, index_t p) {
        models::model_options o;
        o.sled = models::sled_options{c, f, p, true, true, 0};
        return o;
    };
    check_error([&] { models::load_encoder<float, cpu>(ck, with(32, 0.0, 0)); }, "sled.bad_window_fraction",
                src + ": SLED window fraction is 0, expected a number in (0, 1] (the kept share of each chunk)");
    check_error([&] { models::load_encoder<float, cpu>(ck, with(32, 1.5, 0)); }, "sled.bad_window_fraction",
                src + ": SLED window fraction is 1.5, expected a number in (0, 1] (the kept share of each chunk)");
    // A fraction so small that the margins take the whole chunk: the windows would never advance.
    check_error(
        [&] { models::load_encoder<float, cpu>(ck, with(32, 1e-17, 0)); }, "sled.bad_window_fraction",
        src +
            ": SLED window fraction 1e-17 keeps no token of a chunk of 32 tokens (the windows would not advance); expected at least 1/32");
    check_error(
        [&] { models::sled_windows(1000, 256, 1e-300); }, "sled.bad_window_fraction",
        "sled: SLED window fraction 1e-300 keeps no token of a chunk of 256 tokens (the windows would not advance); expected at least 1/256");
    CHECK(models::sled_windows(100, 33, 1e-17).size() == 68);  // odd: one token kept per window
    check_error([&] { models::load_encoder<float, cpu>(ck, with(0, 0.5, 0)); }, "sled.bad_context",
                src + ": SLED context size is 0, expected at least 1 token");
    check_error([&] { models::load_encoder<float, cpu>(ck, with(32, 0.5, 33)); }, "sled.bad_prefix",
                src + ": SLED prefix of 33 tokens is longer than the context of 32 tokens");
    // A backbone with a position limit (BART's max_position_embeddings, LOCOST none, T5 none).
    check_error(
        [&] {
            models::check_sled_options({512, 0.5, 6, true, true, 0}, 512, "bart");
        },
        "sled.context_too_long", "bart: SLED chunks of 512 tokens + a prefix of 6 exceed the 512 positions the backbone encoder reads");
    auto e = models::load_encoder<float, cpu>(ck, with(32, 0.5, 6));
    const std::vector<std::int64_t> only_prefix = {5, 6, 7, 8, 9, 1};
    check_error([&] { e.forward(only_prefix.data(), nullptr, 1, 6); }, "sled.no_document",
                src + ": the input has 6 tokens, all of them the prefix of 6 (nothing to encode after it)");

    const std::string dir = scratch_dir("sled_config");
    auto cfg = read_json(hf_dir + "/t5_v11/config.json");

    // A SLED config.json whose backbone is a repository id the Hugging Face cache does not hold.
    const std::string empty_cache = scratch_dir("sled_empty_hub_cache");
    setenv("HF_HUB_CACHE", empty_cache.c_str(), 1);
    json sled = {{"model_type", "tau/sled"}, {"underlying_config", "google/t5-v1_1-base"}, {"context_size", 256}};
    const std::string with_weights = scratch_dir("sled_hub_backbone");
    fs::copy_file(hf_dir + "/t5_v11/model.safetensors", with_weights + "/model.safetensors", fs::copy_options::overwrite_existing);
    std::ofstream(with_weights + "/config.json") << sled.dump();
    check_error([&] { models::read_config(locost::io::checkpoint::open(with_weights)); }, "sled.backbone_not_found",
                with_weights +
                    "/config.json: underlying_config 'google/t5-v1_1-base' names the backbone google/t5-v1_1-base: no such directory, "
                    "and not in the Hugging Face cache (looked for " +
                    empty_cache +
                    "/models--google--t5-v1_1-base; the cache is "
                    "$HF_HUB_CACHE). locost never downloads: where there is network, run `hf download google/t5-v1_1-base` "
                    "(huggingface_hub) and copy models--google--t5-v1_1-base into " +
                    empty_cache + " here, or give the checkpoint's directory");
    // With the weights of a backbone directory (a SLED repository shipping none), that directory's
    // config.json describes them.
    std::ofstream(dir + "/sled.json") << sled.dump();
    CHECK(models::common(*models::read_config(locost::io::checkpoint::open(hf_dir + "/t5_v11", dir + "/sled.json"))).d_model == 64);
    unsetenv("HF_HUB_CACHE");
    // … and one whose backbone is a dict or a local path: SLED settings from the file.
    sled["underlying_config"] = cfg;
    sled["underlying_config"]["model_type"] = "t5";
    sled["context_size"] = 32;
    sled["window_fraction"] = 0.75;
    std::ofstream(dir + "/sled_dict.json") << sled.dump();
    const auto sd = locost::io::checkpoint::open(hf_dir + "/t5_v11", dir + "/sled_dict.json");
    CHECK(models::common(*models::read_config(sd)).model_type == "t5");
    REQUIRE(models::read_sled_options(sd).has_value());
    CHECK(models::read_sled_options(sd)->context_size == 32);
    CHECK(models::read_sled_options(sd)->window_fraction == 0.75);
    sled["underlying_config"] = hf_dir + "/t5_v11";
    std::ofstream(dir + "/sled_path.json") << sled.dump();
    CHECK(models::common(*models::read_config(locost::io::checkpoint::open(hf_dir + "/t5_v11", dir + "/sled_path.json"))).d_model == 64);
}

TEST_CASE("sled: over LOCOST too, and one chunk equals the plain encoder") {
    // SLED's adaptor takes any encoder: over LOCOST with a context longer than the input it is
    // the plain encoder; with chunks, states stay finite and close in scale.
    const auto ck = locost::io::checkpoint::open(tiny_dir);
    const reference ref(reference_dir + "/locost_encoder.safetensors");
    std::vector<std::int64_t> ids;
    for (index_t i = 0; i < 200; ++i) ids.push_back(2 + (i * 37) % 500);
    auto plain = models::load_encoder<float, cpu>(ck);
    models::model_options o;
    o.sled = models::sled_options{256, 0.5, 0, true, true, 0};
    auto one = models::load_encoder<float, cpu>(ck, o);
    const auto a = plain.forward(ids.data(), nullptr, 1, 200), b = one.forward(ids.data(), nullptr, 1, 200);
    const std::vector<float> af(a.data(), a.data() + a.numel());
    CHECK(rel_error(b.data(), af) == 0.0);
    o.sled = models::sled_options{64, 0.5, 0, true, true, 3};
    auto chunked = models::load_encoder<float, cpu>(ck, o);
    const auto c = chunked.forward(ids.data(), nullptr, 1, 200);
    const double err = rel_error(c.data(), af);
    CHECK(err > 0.0);  // chunks see less context …
    CHECK(err < 1.0);  // … but the same model
}

TEST_CASE("sled: without encode_prefix the output drops the prefix states and keeps the document's") {
    const auto ck = locost::io::checkpoint::open(hf_dir + "/t5_v11");
    const reference ref(hf_dir + "/sled_t5_p6/reference.safetensors");
    const batch in = encoder_batch(ref);
    models::model_options with, without;
    with.sled = models::sled_options{32, 0.5, 6, true, true, 0};
    without.sled = models::sled_options{32, 0.5, 6, true, false, 0};
    auto a = models::load_encoder<float, cpu>(ck, with), b = models::load_encoder<float, cpu>(ck, without);
    CHECK(b.output_span(in.L).offset == 6);
    CHECK(b.output_span(in.L).length == in.L - 6);
    const auto ha = a.forward(in.ids.data(), in.mask.data(), in.B, in.L), hb = b.forward(in.ids.data(), in.mask.data(), in.B, in.L);
    REQUIRE(hb.shape() == locost::shape_t{in.B, in.L - 6, 64});
    double diff = 0;
    for (index_t r = 0; r < in.B; ++r)
        for (index_t l = 6; l < in.L; ++l)
            if (in.mask01[static_cast<std::size_t>(r * in.L + l)])
                for (index_t h = 0; h < 64; ++h)
                    diff = std::max(diff, std::abs(double(ha[(r * in.L + l) * 64 + h]) - double(hb[(r * (in.L - 6) + l - 6) * 64 + h])));
    CHECK(diff == 0.0);
    // The decoder then cross-attends over the document only: other logits than with the prefix.
    auto ma = models::load_model<float, cpu>(ck, with), mb = models::load_model<float, cpu>(ck, without);
    const auto dec = ref.ints("dec.decoder_input_ids");
    const auto la = ma.score(in.ids.data(), in.mask.data(), in.B, in.L, dec.data(), 12);
    const auto lb = mb.score(in.ids.data(), in.mask.data(), in.B, in.L, dec.data(), 12);
    CHECK(rel_error(lb.data(), ref.floats("dec.logits")) > parity);
    CHECK(rel_error(la.data(), ref.floats("dec.logits")) < parity);
}
