// Pegasus-X (models/pegasus_x) beyond the shared reference cases of
// tests/models/test_hf_parity.cpp: config errors and defaults, staggered blocks, inputs of any length.
#include "models/hf_reference.hpp"

#include <cmath>
#include <functional>

TEST_CASE("pegasus_x: config errors name the field") {
    const std::string src = "pegasus-x-config";
    auto parse = [&](const std::function<void(json&)>& edit) {
        json j = read_json(hf_dir + "/pegasus_x/config.json");
        edit(j);
        return models::parse_config(j, src);
    };
    const auto ok = parse([](json&) {});
    const auto* c = std::get_if<models::pegasus_x_config>(ok.get());
    REQUIRE(c != nullptr);
    CHECK(c->block_size == 16);
    CHECK(c->num_global_tokens == 4);
    CHECK(c->staggered(1));
    CHECK_FALSE(c->staggered(0));
    CHECK(c->layer_norm_epsilon == 1e-5);
    // PegasusXConfig's defaults for what a config may leave out.
    const auto d = parse([](json& j) {
        for (const char* k : {"block_size", "num_global_tokens", "stagger_local_blocks", "scale_embedding", "pad_token_id", "eos_token_id",
                              "decoder_start_token_id"})
            j.erase(k);
    });
    const auto* dc = std::get_if<models::pegasus_x_config>(d.get());
    CHECK(dc->block_size == 512);
    CHECK(dc->num_global_tokens == 32);
    CHECK(dc->stagger_local_blocks);
    CHECK(dc->scale_embedding);
    CHECK(dc->pad_token_id == 0);
    CHECK(dc->eos_token_id == 1);
    CHECK(dc->decoder_start_token_id == 0);
    check_error([&] { parse([](json& j) { j["encoder_attention_heads"] = 5; }); }, "config.invalid_value",
                src + ": field 'encoder_attention_heads' is 5, expected a divisor of d_model (64)");
    check_error([&] { parse([](json& j) { j["decoder_attention_heads"] = 3; }); }, "config.invalid_value",
                src + ": field 'decoder_attention_heads' is 3, expected a divisor of d_model (64)");
    check_error(
        [&] {
            parse([](json& j) {
                j["d_model"] = 63;
                j["encoder_attention_heads"] = 1;
                j["decoder_attention_heads"] = 1;
            });
        },
        "config.invalid_value",
        src + ": field 'd_model' is 63, expected an even number of at least 4 (sinusoidal positions: sines and cosines, H/2 each)");
    check_error([&] { parse([](json& j) { j["block_size"] = 0; }); }, "config.invalid_value",
                src + ": field 'block_size' is 0, expected an integer in [1, 2147483647]");
    check_error([&] { parse([](json& j) { j["num_global_tokens"] = 0; }); }, "config.invalid_value",
                src + ": field 'num_global_tokens' is 0, expected an integer in [1, 2147483647]");
    check_error([&] { parse([](json& j) { j["stagger_local_blocks"] = "yes"; }); }, "config.wrong_type",
                src + ": field 'stagger_local_blocks' is a JSON string, expected a boolean");
    check_error([&] { parse([](json& j) { j["activation_function"] = "tanh"; }); }, "config.invalid_value",
                src + ": field 'activation_function' is \"tanh\", expected one of \"gelu\", \"gelu_new\", \"relu\", \"silu\", \"swish\"");
    check_error([&] { parse([](json& j) { j["tie_word_embeddings"] = false; }); }, "config.invalid_value",
                src + ": field 'tie_word_embeddings' is false, expected true (Pegasus-X's LM head is the shared embedding)");
    check_error([&] { parse([](json& j) { j.erase("encoder_layers"); }); }, "config.missing_field",
                src + ": missing required field 'encoder_layers' (expected an integer)");
    check_error([&] { parse([](json& j) { j["eos_token_id"] = 512; }); }, "config.invalid_value",
                src + ": field 'eos_token_id' is 512, expected an integer in [0, 511]");
}

TEST_CASE("pegasus_x: staggering matters, and inputs of any length run (sinusoidal positions, blocks clipped)") {
    const reference ref(hf_dir + "/pegasus_x/reference.safetensors");
    const batch in = encoder_batch(ref);
    // Without staggering the odd layer's blocks differ: the states must miss the reference.
    const std::string dir = scratch_dir("pegasus_x_unstaggered");
    auto cfg = read_json(hf_dir + "/pegasus_x/config.json");
    cfg["stagger_local_blocks"] = false;
    std::ofstream(dir + "/config.json") << cfg.dump();
    auto e = models::load_encoder<float, cpu>(locost::io::checkpoint::open(hf_dir + "/pegasus_x", dir + "/config.json"));
    const auto h = e.forward(in.ids.data(), in.mask.data(), in.B, in.L);
    CHECK(rel_error(h.data(), ref.floats("enc.last_hidden_state"), expand_mask(in.mask01, 64)) > 1e-3);
    // Past max_position_embeddings (512) and not a multiple of the block: finite states.
    auto plain = models::load_encoder<float, cpu>(locost::io::checkpoint::open(hf_dir + "/pegasus_x"));
    CHECK_FALSE(plain.max_context().has_value());
    std::vector<std::int64_t> ids(601);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(2 + (i * 37) % 500);
    const auto long_h = plain.forward(ids.data(), nullptr, 1, 601);
    bool finite = true;
    for (index_t i = 0; i < long_h.numel(); ++i) finite = finite && std::isfinite(long_h[i]);
    CHECK(finite);
}
