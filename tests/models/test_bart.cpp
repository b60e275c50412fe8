// BART (models/bart) beyond the shared reference cases of tests/models/test_hf_parity.cpp: a bare
// BartModel checkpoint, scale_embedding, the learned positions' limit, config errors.
#include "models/hf_reference.hpp"

#include <functional>

namespace {

// The bart reference checkpoint rewritten: each stored tensor passes through `edit(name, values)`,
// which returns the name to store it under ("" drops it); config.json through `config`.
std::string rewritten_bart(const std::string& name, const std::function<std::string(const std::string&, std::vector<float>&)>& edit,
                           const std::function<void(json&)>& config = {}) {
    const std::string dir = scratch_dir(name);
    const auto src = locost::io::safetensors_file::open(hf_dir + "/bart/model.safetensors");
    locost::io::safetensors_writer w;
    std::vector<std::vector<float>> keep;
    keep.reserve(src.records().size());
    for (const auto& r : src.records()) {
        std::vector<float> v(static_cast<std::size_t>(r.shape.numel()));
        REQUIRE(locost::convert_to_f32(r.type, r.bytes, v.data(), v.size()));
        const std::string to = edit(r.name, v);
        if (to.empty()) continue;
        keep.push_back(std::move(v));
        w.add(to, locost::view<const float>{keep.back().data(), r.shape});
    }
    w.write(dir + "/model.safetensors");
    json cfg = read_json(hf_dir + "/bart/config.json");
    if (config) config(cfg);
    std::ofstream(dir + "/config.json") << cfg.dump();
    return dir;
}

}  // namespace

TEST_CASE("bart: a bare BartModel checkpoint (no model. prefix, no final_logits_bias) reads the same weights") {
    const reference ref(hf_dir + "/bart/reference.safetensors");
    const batch in = encoder_batch(ref);
    std::vector<float> logits_bias;
    const std::string dir = rewritten_bart("bart_base_model", [&](const std::string& n, std::vector<float>& v) {
        if (n == "final_logits_bias") {
            logits_bias = v;
            return std::string();
        }
        return n.rfind("model.", 0) == 0 ? n.substr(6) : n;
    });
    const auto ck = locost::io::checkpoint::open(dir);
    CHECK(test::validate(ck).ok());
    CHECK(test::validate(ck).unexpected.empty());
    auto m = models::load_model<float, cpu>(ck);
    const auto dec = ref.ints("dec.decoder_input_ids");
    const auto logits = m.score(in.ids.data(), in.mask.data(), in.B, in.L, dec.data(), 12);
    // Without the buffer the head adds zeros: the reference minus final_logits_bias.
    std::vector<float> want = ref.floats("dec.logits");
    const index_t V = 2000;
    REQUIRE(logits_bias.size() == static_cast<std::size_t>(V));
    for (std::size_t i = 0; i < want.size(); ++i) want[i] -= logits_bias[i % V];
    CHECK(rel_error(logits.data(), want) < parity);
}

TEST_CASE("bart: scale_embedding multiplies token embeddings by sqrt(d_model)") {
    // Embeddings stored divided by 8 = √64 with scale_embedding true: the encoder sees the same
    // vectors, so its states equal the reference's.
    const reference ref(hf_dir + "/bart/reference.safetensors");
    const batch in = encoder_batch(ref);
    const std::string dir = rewritten_bart(
        "bart_scaled",
        [](const std::string& n, std::vector<float>& v) {
            if (n == "model.shared.weight")
                for (float& x : v) x /= 8.0f;
            return n;
        },
        [](json& c) { c["scale_embedding"] = true; });
    auto e = models::load_encoder<float, cpu>(locost::io::checkpoint::open(dir));
    const auto h = e.forward(in.ids.data(), in.mask.data(), in.B, in.L);
    CHECK(rel_error(h.data(), ref.floats("enc.last_hidden_state"), expand_mask(in.mask01, 64)) < parity);
}

TEST_CASE("bart: inputs past the learned positions are refused unless run through SLED") {
    const auto ck = locost::io::checkpoint::open(hf_dir + "/bart");
    const std::string cfg = hf_dir + "/bart/config.json";
    std::vector<std::int64_t> ids(300, 5);
    auto m = models::load_model<float, cpu>(ck);
    check_error([&] { m.encode(ids.data(), nullptr, 1, 300); }, "encode.too_long",
                cfg +
                    ": 300 tokens exceed max_position_embeddings (128, BART's learned positions); run longer inputs through SLED "
                    "(--sled-context 128)");
    const auto e = m.encode(ids.data(), nullptr, 1, 128);
    check_error([&] { m.start(e, 1, 129); }, "decode.too_long", cfg + ": 129 decoder positions exceed max_position_embeddings (128)");
    models::model_options o;
    o.sled = models::sled_options{129, 0.5, 0, true, true, 0};
    check_error([&] { models::load_model<float, cpu>(ck, o); }, "sled.context_too_long",
                cfg + ": SLED chunks of 129 tokens exceed the 128 positions the backbone encoder reads");
    o.sled = models::sled_options{128, 0.5, 0, true, true, 0};
    auto s = models::load_model<float, cpu>(ck, o);
    const auto long_doc = s.encode(ids.data(), nullptr, 1, 300);
    CHECK(long_doc.docs.at(0).length == 300);
}

TEST_CASE("bart: config errors name the field") {
    const std::string src = "bart-config";
    auto parse = [&](const std::function<void(json&)>& edit) {
        json j = read_json(hf_dir + "/bart/config.json");
        edit(j);
        return models::parse_config(j, src);
    };
    CHECK(std::holds_alternative<models::bart_config>(*parse([](json&) {})));
    check_error([&] { parse([](json& j) { j["encoder_attention_heads"] = 5; }); }, "config.invalid_value",
                src + ": field 'encoder_attention_heads' is 5, expected a divisor of d_model (64)");
    check_error([&] { parse([](json& j) { j["activation_function"] = "tanh"; }); }, "config.invalid_value",
                src + ": field 'activation_function' is \"tanh\", expected one of \"gelu\", \"gelu_new\", \"relu\", \"silu\", \"swish\"");
    check_error([&] { parse([](json& j) { j["tie_word_embeddings"] = false; }); }, "config.invalid_value",
                src + ": field 'tie_word_embeddings' is false, expected true (BART's LM head is the shared embedding)");
    check_error([&] { parse([](json& j) { j.erase("decoder_layers"); }); }, "config.missing_field",
                src + ": missing required field 'decoder_layers' (expected an integer)");
    check_error([&] { parse([](json& j) { j["normalize_before"] = true; }); }, "config.invalid_value",
                src + ": field 'normalize_before' is true, expected false (BART; this setting describes another architecture)");
    CHECK(models::common(*parse([](json& j) { j["normalize_before"] = false; })).model_type == "bart");
    check_error([&] { parse([](json& j) { j["pad_token_id"] = 2000; }); }, "config.invalid_value",
                src + ": field 'pad_token_id' is 2000, expected an integer in [0, 1999]");
}
