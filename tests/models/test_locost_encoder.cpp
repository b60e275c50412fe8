// The LOCOST encoder (models/locost) against the original implementation's outputs
// (tests/data/reference, made by the original code; tests/data/own, our own runs of the original
// code on other variants): states, per-block states, the kernel cache, interruption, errors. One
// body per (backend, scalar) configuration.
#include "models/locost_encoder.hpp"

#include <filesystem>
#include <fstream>

TEST_CASE_TEMPLATE("encoder: every shared reference case of the original code", C, LOCOST_CONFIGS) {
    using S = typename C::scalar;
    auto enc = load<typename C::backend, S>(tiny_dir);
    const reference ref(reference_dir + "/locost_encoder.safetensors");
    for (const char* p : {"enc.L1", "enc.L7", "enc.L64", "enc.L100", "enc.L1000", "enc.padded"}) {
        CAPTURE(p);
        CHECK(encode_error(enc, ref, p) < tolerance<S>);
    }
}

TEST_CASE_TEMPLATE("encoder: per-block hidden states and the S4D module's input and output", C, LOCOST_CONFIGS) {
    using S = typename C::scalar;
    const auto ck = locost::io::checkpoint::open(tiny_dir);
    auto enc = locost::models::load_encoder<S, typename C::backend>(ck);
    const reference ref(reference_dir + "/locost_encoder.safetensors");
    const auto ids = ref.ints("enc.L100.input_ids");
    const index_t L = 100, H = 64;
    std::vector<std::vector<S>> after_ssm, after_ff;
    const auto h = enc.forward(ids.data(), nullptr, 1, L, {}, [&](index_t, locost::models::block_stage st, locost::view<const S> x) {
        (st == locost::models::block_stage::after_mixer ? after_ssm : after_ff).emplace_back(x.data, x.data + x.numel());
    });
    REQUIRE(after_ff.size() == 2);
    CHECK(rel_error(after_ff[0].data(), ref.floats("enc.L100.hidden_states.1")) < tolerance<S>);
    // The shared file's last hidden-state entry is the original's output_hidden_states tuple's,
    // which is taken after the final norm (tests/data/own/README.md, surprise 9).
    CHECK(rel_error(h.data(), ref.floats("enc.L100.hidden_states.2")) < tolerance<S>);
    // S4D module of block 0: input RMSNorm(embeddings), output = residual increment.
    const auto emb = ref.floats("enc.L100.hidden_states.0");
    const auto w = ck.load_f32("encoder.block.0.layer.0.layer_prenorm.weight", {H});
    std::vector<double> in(L * H), out(L * H);
    for (index_t l = 0; l < L; ++l) {
        double ss = 0;
        for (index_t k = 0; k < H; ++k) ss += double(emb[l * H + k]) * emb[l * H + k];
        const double inv = 1.0 / std::sqrt(ss / H + 1e-6);
        for (index_t k = 0; k < H; ++k) {
            in[l * H + k] = emb[l * H + k] * inv * w[k];
            out[l * H + k] = double(after_ssm[0][l * H + k]) - emb[l * H + k];
        }
    }
    CHECK(rel_error(in.data(), ref.floats("enc.L100.block0.ssm_layer.input")) < tolerance<S>);
    CHECK(rel_error(out.data(), ref.floats("enc.L100.block0.ssm_layer.output")) < tolerance<S>);
}

TEST_CASE_TEMPLATE("encoder: own references of the original code (relu, causal, ungated, bf16, f16 .bin)", C, LOCOST_CONFIGS) {
    using S = typename C::scalar;
    for (const char* variant : {"relu_small", "plain_causal", "tiny_bf16", "tiny_f16_bin"}) {
        CAPTURE(variant);
        auto enc = load<typename C::backend, S>(own_dir + "/" + variant);
        const checkpoint_kernels<S> kernels(own_dir + "/" + variant);
        const reference ref(own_dir + "/" + std::string(variant) + ".safetensors");
        for (const char* p : {"enc.L1", "enc.L5", "enc.L37", "enc.L300", "enc.padded"}) {
            CAPTURE(p);
            CHECK(encode_error(enc, ref, p) < tolerance<S>);
        }
        const index_t H = kernels.config().d_model, L = 37, layers = kernels.config().num_layers;
        const bool bidir = kernels.config().bidirectional;
        for (index_t layer = 0; layer < layers; ++layer) {
            const std::string p = "kernel.L37.layer" + std::to_string(layer);
            std::vector<S> f(H * L), b(H * L);
            for (index_t h = 0; h < H; ++h) {
                const auto k = kernels(layer, h, L);
                std::copy_n(k.data(), L, f.data() + h * L);
                if (bidir) std::copy_n(k.data() + L, L, b.data() + h * L);
            }
            CHECK(rel_error(f.data(), ref.floats(p + ".forward")) < 1e-5);
            if (bidir) CHECK(rel_error(b.data(), ref.floats(p + ".backward")) < 1e-5);
        }
    }
}

TEST_CASE("encoder: a 20000-token input (long reference of the original code)") {
    auto enc = load<cpu, float>(tiny_dir);
    const reference ref(own_dir + "/long.safetensors");
    CHECK(encode_error(enc, ref, "enc.L20000") < parity);
}

TEST_CASE("encoder: kernel cache on, off, and at shorter lengths give the same states") {
    const reference ref(reference_dir + "/locost_encoder.safetensors");
    locost::models::encoder_options no_cache;
    no_cache.kernel_cache_bytes = 0;
    auto cached = load<cpu, float>(tiny_dir), uncached = load<cpu, float>(tiny_dir, no_cache);
    const auto ids = ref.ints("enc.L1000.input_ids");
    const auto a = cached.forward(ids.data(), nullptr, 1, 1000);
    const auto b = uncached.forward(ids.data(), nullptr, 1, 1000);
    CHECK(std::equal(a.data(), a.data() + a.numel(), b.data()));
    // The cache now covers 1000: a shorter input reuses it and still matches its reference.
    CHECK(encode_error(cached, ref, "enc.L100") < parity);
    // Small tiles (many GEMM calls, ragged last tile) give the same states too.
    locost::models::encoder_options tiles;
    tiles.tile_rows = 7;
    auto tiled = load<cpu, float>(tiny_dir, tiles);
    const auto c = tiled.forward(ids.data(), nullptr, 1, 1000);
    CHECK(rel_error(c.data(), std::vector<float>(a.data(), a.data() + a.numel())) < 1e-6);
}

TEST_CASE("encoder: an interrupt_check stops an encode inside its first layer, and the encoder gives the same states after") {
    struct stop_now {};
    auto enc = load<cpu, float>(tiny_dir);
    std::vector<std::int64_t> ids(20000);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(3 + i * 7919 % 500);
    const auto L = static_cast<index_t>(ids.size());
    const auto plain = enc.forward(ids.data(), nullptr, 1, L);
    // A check that only counts: the same states, and it ran many times per layer (inside the
    // layers' convolutions and products, not only between layers).
    int checks = 0;
    index_t layers = 0;
    {
        const locost::interrupt_check count([&] { ++checks; });
        const auto counted = enc.forward(ids.data(), nullptr, 1, L, [&](const locost::models::encode_progress& p) { layers = p.layers; });
        CHECK(std::equal(plain.data(), plain.data() + plain.numel(), counted.data()));
    }
    REQUIRE(layers > 0);
    CHECK(checks > 10 * layers);
    // A check that throws on its third call: the exception leaves forward() before the first
    // layer has ended (progress never reports layer 1).
    index_t reached = 0;
    checks = 0;
    {
        const locost::interrupt_check stop([&] {
            if (++checks == 3) throw stop_now{};
        });
        CHECK_THROWS_AS(
            enc.forward(ids.data(), nullptr, 1, L, [&](const locost::models::encode_progress& p) { reached = std::max(reached, p.layer); }),
            stop_now);
    }
    CHECK(checks == 3);
    CHECK(reached == 0);
    const auto after = enc.forward(ids.data(), nullptr, 1, L);
    CHECK(std::equal(plain.data(), plain.data() + plain.numel(), after.data()));
}

TEST_CASE("encoder: errors name the input and what was expected") {
    auto enc = load<cpu, float>(tiny_dir);
    const std::int64_t bad[] = {5, 512, 7};
    const std::string config = tiny_dir + "/config.json";
    CHECK_THROWS_WITH(enc.forward(bad, nullptr, 1, 3),
                      std::string("[locost.ids.out_of_vocab] " + config + ": token id 512 at [0][1] is not in [0, 512)").c_str());
    CHECK_THROWS_WITH(enc.forward(bad, nullptr, 1, 0),
                      std::string("[locost.encode.empty_input] " + config + ": nothing to encode (batch 1 x length 0)").c_str());
    const std::int64_t ok[] = {5, 6};
    const float mask[] = {1.0f, 0.5f};
    CHECK_THROWS_WITH(
        enc.forward(ok, mask, 1, 2),
        std::string("[locost.encode.bad_mask] " + config + ": attention mask value 0.500000 at [0][1] is not 0 or 1").c_str());

    // A config with num_ssm_heads 2 (and weights shaped for it) is refused by name.
    const std::string dir = std::string(LOCOST_TEST_TMP) + "/ssm-heads";
    std::filesystem::create_directories(dir);
    auto cfg = nlohmann::json::parse(locost::io::read_text_file(tiny_dir + "/config.json"));
    cfg["num_ssm_heads"] = 2;
    std::ofstream(dir + "/config.json") << cfg.dump();
    std::filesystem::copy_file(tiny_dir + "/model.safetensors", dir + "/model.safetensors",
                               std::filesystem::copy_options::overwrite_existing);
    auto load_it = [&] { return load<cpu, float>(dir); };
    CHECK_THROWS_WITH(load_it(),
                      std::string("[locost.model.unsupported] " + dir +
                                  "/config.json: num_ssm_heads is 2, only 1 is supported (the original code runs num_ssm_heads > 1 only on "
                                  "its CUDA path, whose channel grouping is not specified; the released LOCOST checkpoints use 1)")
                          .c_str());
}
