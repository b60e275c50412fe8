// LED and LongT5 (models/led, models/longt5) beyond the shared reference cases of
// tests/models/test_hf_parity.cpp: config errors, LED's position limits and global tokens.
#include "models/hf_reference.hpp"

#include <functional>

TEST_CASE("led and longt5: config errors name the field; inputs past LED's positions or global tokens past the input are refused") {
    const std::string src = "led-config";
    auto parse = [&](const std::string& dir, const std::function<void(json&)>& edit) {
        json j = read_json(hf_dir + "/" + dir + "/config.json");
        edit(j);
        return models::parse_config(j, src);
    };
    const auto led = parse("led_g0", [](json&) {});
    REQUIRE(std::holds_alternative<models::led_config>(*led));
    CHECK(std::get<models::led_config>(*led).attention_window == std::vector<index_t>{16, 16});
    CHECK(std::get<models::led_config>(*parse("led_g0", [](json& j) { j["attention_window"] = 8; })).attention_window ==
          std::vector<index_t>{8, 8});
    const std::string want = "an even positive integer, or a list of 2 of them (one per encoder layer)";
    check_error([&] { parse("led_g0", [](json& j) {
                          j["attention_window"] = {16, 15};
                      }); }, "config.invalid_value",
                src + ": field 'attention_window' is [16,15], expected " + want);
    check_error([&] { parse("led_g0", [](json& j) { j["attention_window"] = {16}; }); }, "config.invalid_value",
                src + ": field 'attention_window' is [16], expected " + want);
    check_error([&] { parse("led_g0", [](json& j) { j["attention_window"] = "16"; }); }, "config.wrong_type",
                src + ": field 'attention_window' is a JSON string, expected " + want);
    check_error([&] { parse("led_g0", [](json& j) { j["max_encoder_position_embeddings"] = 0; }); }, "config.invalid_value",
                src + ": field 'max_encoder_position_embeddings' is 0, expected an integer in [1, 2147483647]");
    check_error([&] { parse("longt5_local", [](json& j) { j["encoder_attention_type"] = "global"; }); }, "config.invalid_value",
                src + ": field 'encoder_attention_type' is \"global\", expected \"local\" or \"transient-global\"");

    const auto ck = locost::io::checkpoint::open(hf_dir + "/led_g0");
    const std::string cfg = hf_dir + "/led_g0/config.json";
    std::vector<std::int64_t> ids(600, 5);
    auto m = models::load_model<float, cpu>(ck);
    check_error([&] { m.encode(ids.data(), nullptr, 1, 600); }, "encode.too_long",
                cfg +
                    ": 600 tokens exceed max_encoder_position_embeddings (512, LED's learned positions); run longer inputs through "
                    "SLED (--sled-context 512)");
    const auto e = m.encode(ids.data(), nullptr, 1, 512);
    check_error([&] { m.start(e, 1, 65); }, "decode.too_long", cfg + ": 65 decoder positions exceed max_decoder_position_embeddings (64)");
    models::model_options o;
    o.encoder.global_tokens = {0, 40};
    auto g = models::load_model<float, cpu>(ck, o);
    check_error([&] { g.encode(ids.data(), nullptr, 1, 40); }, "encode.bad_global_token",
                cfg + ": global token position 40 is outside the input's 40 positions");
    // No global token at all is Longformer's plain sliding window; it runs.
    o.encoder.global_tokens = {};
    CHECK(models::load_model<float, cpu>(ck, o).encode(ids.data(), nullptr, 1, 40).docs.at(0).length == 40);
}
