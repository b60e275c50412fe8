// config.json, generation_config.json and token-id JSON parsing.
#include "helpers.hpp"

#include <locost/io/config.hpp>
#include <locost/io/ids_json.hpp>
#include <locost/io/safetensors.hpp>
#include <locost/models/registry.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

using namespace locost;

namespace {

using test::data_dir;
const std::string malformed_config = data_dir + "/malformed/config";

using test::check_error;

// config.json parsed by its family (models/registry.hpp), as the family's struct C.
template <class C = models::locost_config>
C parse_as(const std::string& text, const std::string& source) {
    return test::config_as<C>(models::parse_config_text(text, source));
}
template <class C = models::locost_config>
C load_as(const std::string& path) {
    return test::config_as<C>(models::load_config(path));
}

}  // namespace

TEST_CASE("config: the tiny LOCOST configs") {
    const auto c = load_as(data_dir + "/reference/tiny_locost/config.json");
    CHECK(c.model_type == "locost");
    CHECK(c.vocab_size == 512);
    CHECK(c.d_model == 64);
    CHECK(c.d_state == 16);
    CHECK(c.d_kv == 16);
    CHECK(c.d_ff == 128);
    CHECK(c.num_ssm_heads == 1);
    CHECK(c.num_layers == 2);
    CHECK(c.num_decoder_layers == 2);
    CHECK(c.num_heads == 4);
    CHECK(c.local_radius == 127);
    CHECK(c.global_block_size == 16);
    CHECK(c.relative_attention_num_buckets == 32);
    CHECK(c.relative_attention_max_distance == 128);
    CHECK(c.dropout_rate == 0.0);
    CHECK(c.layer_norm_epsilon == 1e-6);
    CHECK(c.initializer_factor == 1.0);
    CHECK(c.feed_forward_proj == "gated-gelu");
    CHECK(c.is_gated_act);
    CHECK(c.dense_act_fn == "gelu_new");
    CHECK(c.encoder_attention_type == "local");
    CHECK(c.use_cache);
    CHECK_FALSE(c.use_fast_fft_conv);
    CHECK(c.bidirectional);
    CHECK(c.gating);
    CHECK_FALSE(c.tie_word_embeddings);
    CHECK(c.is_encoder_decoder);
    CHECK(c.pad_token_id == 0);
    CHECK(c.eos_token_id == 1);
    CHECK(c.eos_token_ids == std::vector<index_t>{1});
    CHECK(c.decoder_start_token_id == 0);
    CHECK_FALSE(c.bos_token_id.has_value());
    CHECK_FALSE(c.scale_decoder_outputs);  // absent: tie_word_embeddings

    CHECK(load_as(data_dir + "/reference/tiny_locost/config_tied.json").tie_word_embeddings);
    CHECK(load_as(data_dir + "/reference/tiny_locost/config_tied.json").scale_decoder_outputs);
}

TEST_CASE("config: defaults follow LOCOSTConfig, T5Config and LongT5Config") {
    // Only the required fields: everything else is the family's default.
    const auto l = parse_as(
        R"({"model_type": "locost", "vocab_size": 32128, "d_model": 512, "d_state": 128, "d_kv": 64, "d_ff": 2048,
            "num_layers": 6, "num_heads": 8, "unknown_field": {"ignored": [1, 2]}})",
        "l");
    CHECK(l.num_decoder_layers == 6);
    CHECK(l.num_ssm_heads == 8);
    CHECK(l.local_radius == 127);
    CHECK(l.global_block_size == 16);
    CHECK(l.dropout_rate == 0.1);
    CHECK(l.feed_forward_proj == "gated-gelu");
    CHECK(l.is_gated_act);
    CHECK(l.dense_act_fn == "gelu_new");
    CHECK(l.use_fast_fft_conv);
    CHECK(l.bidirectional);
    CHECK(l.gating);
    CHECK(l.tie_word_embeddings);  // absent means true
    CHECK(l.pad_token_id == 0);
    CHECK(l.eos_token_id == 1);
    CHECK(l.eos_token_ids == std::vector<index_t>{1});
    CHECK(l.decoder_start_token_id == 0);

    // t5-small as published (no feed_forward_proj, no num_decoder_layers).
    const auto t = parse_as<models::t5_config>(
        R"({"architectures": ["T5WithLMHeadModel"], "d_ff": 2048, "d_kv": 64, "d_model": 512,
            "decoder_start_token_id": 0, "dropout_rate": 0.1, "eos_token_id": 1, "initializer_factor": 1.0,
            "is_encoder_decoder": true, "layer_norm_epsilon": 1e-06, "model_type": "t5", "n_positions": 512,
            "num_heads": 8, "num_layers": 6, "output_past": true, "pad_token_id": 0,
            "relative_attention_num_buckets": 32, "vocab_size": 32128})",
        "t5");
    CHECK(t.feed_forward_proj == "relu");
    CHECK_FALSE(t.is_gated_act);
    CHECK(t.dense_act_fn == "relu");
    CHECK(t.num_decoder_layers == 6);
    CHECK(t.relative_attention_max_distance == 128);
    CHECK(t.tie_word_embeddings);
    CHECK(t.scale_decoder_outputs);  // v1.0: the tied head is scaled (transformers 4's rule)
    CHECK(t.decoder_start_token_id == 0);

    // LongT5 with a gated GELU other than "gated-gelu", a list eos and pad as decoder start.
    const auto g = parse_as<models::longt5_config>(
        R"({"model_type": "longt5", "vocab_size": 100, "d_model": 12, "d_kv": 3, "d_ff": 16, "num_layers": 2,
            "num_heads": 5, "num_decoder_layers": 1, "feed_forward_proj": "gated-silu", "pad_token_id": 3,
            "eos_token_id": [1, 2], "encoder_attention_type": "transient-global", "bos_token_id": null})",
        "g");
    CHECK(g.is_gated_act);
    CHECK(g.dense_act_fn == "silu");
    CHECK(g.num_decoder_layers == 1);
    CHECK(g.eos_token_id == 1);
    CHECK(g.eos_token_ids == std::vector<index_t>{1, 2});
    CHECK(g.decoder_start_token_id == 3);
    CHECK(g.encoder_attention_type == "transient-global");
    CHECK_FALSE(g.bos_token_id.has_value());  // null counts as absent
    // Structural values that would size a band held from loading on are bounded, naming the field.
    const std::string longt5_base =
        R"({"model_type": "longt5", "vocab_size": 100, "d_model": 12, "d_kv": 3, "d_ff": 16, "num_layers": 2, "num_heads": 5, )";
    check_error([&] { parse_as<models::longt5_config>(longt5_base + R"("local_radius": 1000000000})", "g"); }, "config.invalid_value",
                "g: field 'local_radius' is 1000000000, expected an integer in [0, 1048576]");
    check_error([&] { parse_as<models::longt5_config>(longt5_base + R"("global_block_size": 1000000000})", "g"); }, "config.invalid_value",
                "g: field 'global_block_size' is 1000000000, expected an integer in [1, 1048576]");
    auto led = nlohmann::json::parse(std::ifstream(data_dir + "/hf/led_g0/config.json"));
    led["attention_window"] = 1024;
    CHECK(parse_as<models::led_config>(led.dump(), "l").attention_window == std::vector<index_t>{1024, 1024});
    led["attention_window"] = {16, 2000000000};
    check_error(
        [&] { parse_as<models::led_config>(led.dump(), "l"); }, "config.invalid_value",
        "l: field 'attention_window' is [16,2000000000], expected an even positive integer, or a list of 2 of them (one per encoder "
        "layer), each at most twice max_encoder_position_embeddings (1024)");
    CHECK(parse_as<models::t5_config>(R"({"model_type": "t5", "vocab_size": 10, "d_model": 4, "d_kv": 2, "d_ff": 8,
                                     "num_layers": 1, "num_heads": 2, "feed_forward_proj": "gelu"})",
                                      "x")
              .dense_act_fn == "gelu");
    // transformers 5 writes scale_decoder_outputs; it decides the head's scaling over the tie.
    const auto t5v11 = parse_as<models::t5_config>(R"({"model_type": "t5", "vocab_size": 10, "d_model": 4, "d_kv": 2, "d_ff": 8,
        "num_layers": 1, "num_heads": 2, "tie_word_embeddings": true, "scale_decoder_outputs": false})",
                                                   "x");
    CHECK(t5v11.tie_word_embeddings);
    CHECK_FALSE(t5v11.scale_decoder_outputs);
    CHECK(parse_as<models::t5_config>(R"({"model_type": "mt5", "vocab_size": 10, "d_model": 4, "d_kv": 2, "d_ff": 8,
                                     "num_layers": 1, "num_heads": 2})",
                                      "x")
              .model_type == "mt5");
}

TEST_CASE("config: malformed config.json files fail with their exact error") {
    struct case_t {
        const char* file;
        const char* id;
        const char* message;
    };
    const case_t cases[] = {
        {"missing_d_model", "config.missing_field", "missing required field 'd_model' (expected an integer)"},
        {"missing_model_type", "config.missing_field", "missing required field 'model_type' (expected a string)"},
        {"d_model_string", "config.wrong_type", "field 'd_model' is a JSON string, expected an integer"},
        {"d_model_float", "config.wrong_type", "field 'd_model' is a JSON number, expected an integer"},
        {"d_model_zero", "config.invalid_value", "field 'd_model' is 0, expected an integer in [1, 2147483647]"},
        {"d_state_odd", "config.invalid_value", "field 'd_state' is 15, expected an even integer (d_state / 2 complex modes)"},
        {"ssm_heads_not_divisor", "config.invalid_value", "field 'num_ssm_heads' is 3, expected a divisor of d_model (64)"},
        {"feed_forward_unknown", "config.invalid_value",
         "field 'feed_forward_proj' is \"gated-swiglu\", expected \"ACT\" or \"gated-ACT\" with ACT one of relu, gelu, gelu_new, silu"},
        {"feed_forward_bad_format", "config.invalid_value",
         "field 'feed_forward_proj' is \"double-gated-gelu\", expected \"ACT\" or \"gated-ACT\" with ACT one of relu, gelu, gelu_new, silu"},
        {"model_type_gpt2", "config.unsupported_model_type",
         "model_type 'gpt2' is not supported (expected \"locost\", \"t5\", \"mt5\", \"bart\", \"led\", \"longt5\", \"pegasus_x\" or \"tau/sled\")"},
        {"bart_with_t5_fields", "config.missing_field", "missing required field 'encoder_layers' (expected an integer)"},
        {"tie_string", "config.wrong_type", "field 'tie_word_embeddings' is a JSON string, expected a boolean"},
        {"eos_out_of_vocab", "config.invalid_value", "field 'eos_token_id' is 600, expected an integer in [0, 511]"},
        {"epsilon_zero", "config.invalid_value", "field 'layer_norm_epsilon' is 0, expected a positive number"},
        {"attention_type_unknown", "config.invalid_value",
         "field 'encoder_attention_type' is \"global\", expected \"local\" or \"transient-global\""},
        {"duplicate_key", "config.duplicate_key", "key 'd_model' appears more than once in the same JSON object"},
        {"not_object", "config.not_object", "config is a JSON array, expected an object"},
        {"truncated", "config.invalid_json",
         "invalid JSON at byte 38: syntax error while parsing object - unexpected end of input; expected '}'"},
    };
    test::check_catalogue(
        cases, [&](const case_t& c) { return malformed_config + "/" + c.file + ".json"; },
        [](const std::string& path) { models::load_config(path); });
    // Inline cases.
    const std::string base =
        R"("model_type": "locost", "vocab_size": 512, "d_model": 64, "d_state": 16, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_heads": 4, "num_ssm_heads": 1)";
    auto with = [&](const std::string& extra) { return "{" + base + ", " + extra + "}"; };
    check_error([&] { models::parse_config_text(with(R"("vocab_size2": 1, "d_ff": 18446744073709551615)"), "c"); }, "config.duplicate_key",
                "c: key 'd_ff' appears more than once in the same JSON object");
    check_error(
        [&] {
            models::parse_config_text(
                R"({"model_type": "t5", "vocab_size": 10, "d_model": 4, "d_kv": 2, "d_ff": 99999999999, "num_layers": 1, "num_heads": 2})",
                "c");
        },
        "config.invalid_value", "c: field 'd_ff' is 99999999999, expected an integer in [1, 2147483647]");
    check_error(
        [&] {
            models::parse_config_text(
                R"({"model_type": "t5", "vocab_size": 10, "d_model": 4, "d_kv": 2, "d_ff": 8, "num_layers": 1, "num_heads": 2, "num_decoder_layers": -1})",
                "c");
        },
        "config.invalid_value", "c: field 'num_decoder_layers' is -1, expected an integer in [1, 2147483647]");
    check_error(
        [&] {
            models::parse_config_text(
                R"({"model_type": "locost", "vocab_size": 10, "d_model": 4, "d_kv": 2, "d_ff": 8, "num_layers": 1, "num_heads": 2})", "c");
        },
        "config.missing_field", "c: missing required field 'd_state' (expected an integer)");
    check_error([&] { models::parse_config_text(R"({"model_type": 5})", "c"); }, "config.wrong_type",
                "c: field 'model_type' is a JSON integer, expected a string");
    check_error(
        [&] {
            models::parse_config_text(
                R"({"model_type": "t5", "vocab_size": 10, "d_model": 4, "d_kv": 2, "d_ff": 8, "num_layers": 1, "num_heads": 2, "eos_token_id": [1, "2"]})",
                "c");
        },
        "config.wrong_type", "c: field 'eos_token_id' is a JSON string, expected an integer or a list of integers");
    check_error(
        [&] {
            models::parse_config_text(
                R"({"model_type": "t5", "vocab_size": 10, "d_model": 4, "d_kv": 2, "d_ff": 8, "num_layers": 1, "num_heads": 2, "dropout_rate": 1.5})",
                "c");
        },
        "config.invalid_value", "c: field 'dropout_rate' is 1.5, expected a number in [0, 1]");
    check_error(
        [&] {
            models::parse_config_text(
                R"({"model_type": "t5", "vocab_size": 10, "d_model": 4, "d_kv": 2, "d_ff": 8, "num_layers": 1, "num_heads": 2, "is_encoder_decoder": false})",
                "c");
        },
        "config.invalid_value", "c: field 'is_encoder_decoder' is false, expected true (locost runs encoder-decoder models)");
    check_error([&] { models::parse_config_text(with(R"("eos_token_id": [])"), "c"); }, "config.invalid_value",
                "c: field 'eos_token_id' is [], expected an integer or a non-empty list of integers");
    check_error([&] { models::parse_config_text(with(R"("bidirectional": 1)"), "c"); }, "config.wrong_type",
                "c: field 'bidirectional' is a JSON integer, expected a boolean");
    check_error([&] { models::parse_config_text(with(R"("pad_token_id": 512)"), "c"); }, "config.invalid_value",
                "c: field 'pad_token_id' is 512, expected an integer in [0, 511]");
    check_error([&] { models::parse_config_text("{} x", "c"); }, "config.invalid_json",
                "c: invalid JSON at byte 3: syntax error while parsing value - invalid literal; last read: '{} x'; expected end of input");
    // The bytes before an error are quoted up to 24 of them, escaped: never a file's content.
    check_error([&] { models::parse_config_text("{\"a\": \"" + std::string(500, 'x') + "\x01\"}", "c"); }, "config.invalid_json",
                "c: invalid JSON at byte 507: syntax error while parsing value - invalid string: control character U+0001 (SOH) must be "
                "escaped to \\u0001; last read: '...xxxxxxxxxxxxxxxx<U+0001>'");
    const std::string absent = malformed_config + "/absent.json";
    check_error([&] { models::load_config(absent); }, "io.open_failed", absent + ": cannot open (No such file or directory)");
}

TEST_CASE("generation_config: defaults, values and errors") {
    const auto d = io::parse_generation_config("{}", "g");
    CHECK(d.max_length == 20);
    CHECK_FALSE(d.max_new_tokens.has_value());
    CHECK(d.min_length == 0);
    CHECK_FALSE(d.min_new_tokens.has_value());
    CHECK(d.num_beams == 1);
    CHECK(d.length_penalty == 1.0);
    CHECK(d.early_stopping == io::early_stopping_mode::heuristic);
    CHECK(d.no_repeat_ngram_size == 0);
    CHECK(d.encoder_no_repeat_ngram_size == 0);
    CHECK(d.repetition_penalty == 1.0);
    CHECK_FALSE(d.do_sample);
    CHECK(d.temperature == 1.0);
    CHECK(d.top_k == 50);
    CHECK(d.top_p == 1.0);
    CHECK(d.num_return_sequences == 1);
    CHECK(d.bad_words_ids.empty());
    CHECK_FALSE(d.forced_bos_token_id.has_value());
    CHECK(d.forced_eos_token_id.empty());
    CHECK_FALSE(d.decoder_start_token_id.has_value());
    CHECK(d.eos_token_id.empty());
    CHECK_FALSE(d.pad_token_id.has_value());
    CHECK_FALSE(d.bos_token_id.has_value());

    const auto g = io::parse_generation_config(
        R"({"max_length": 512, "max_new_tokens": 64, "min_length": 3, "min_new_tokens": 2, "num_beams": 4,
            "length_penalty": 2, "early_stopping": true, "no_repeat_ngram_size": 3, "encoder_no_repeat_ngram_size": 2,
            "repetition_penalty": 1.2, "do_sample": true, "temperature": 0.7, "top_k": 0, "top_p": 0.9,
            "num_return_sequences": 8, "bad_words_ids": [[5], [6, 7]], "forced_bos_token_id": 2,
            "forced_eos_token_id": [1, 3], "decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0,
            "bos_token_id": null, "transformers_version": "4.27.1"})",
        "g");
    CHECK(g.max_length == 512);
    CHECK(g.max_new_tokens == 64);
    CHECK(g.min_length == 3);
    CHECK(g.min_new_tokens == 2);
    CHECK(g.num_beams == 4);
    CHECK(g.length_penalty == 2.0);
    CHECK(g.early_stopping == io::early_stopping_mode::on);
    CHECK(g.no_repeat_ngram_size == 3);
    CHECK(g.encoder_no_repeat_ngram_size == 2);
    CHECK(g.repetition_penalty == 1.2);
    CHECK(g.do_sample);
    CHECK(g.temperature == 0.7);
    CHECK(g.top_k == 0);
    CHECK(g.top_p == 0.9);
    CHECK(g.num_return_sequences == 8);
    CHECK(g.bad_words_ids == std::vector<std::vector<index_t>>{{5}, {6, 7}});
    CHECK(g.forced_bos_token_id == 2);
    CHECK(g.forced_eos_token_id == std::vector<index_t>{1, 3});
    CHECK(g.decoder_start_token_id == 0);
    CHECK(g.eos_token_id == std::vector<index_t>{1});
    CHECK(g.pad_token_id == 0);
    CHECK_FALSE(g.bos_token_id.has_value());
    CHECK(io::parse_generation_config(R"({"early_stopping": "never"})", "g").early_stopping == io::early_stopping_mode::never);
    CHECK(io::parse_generation_config(R"({"early_stopping": false})", "g").early_stopping == io::early_stopping_mode::heuristic);

    struct case_t {
        const char* file;
        const char* id;
        const char* message;
    };
    const case_t cases[] = {
        {"generation_num_beams_zero", "generation_config.invalid_value", "field 'num_beams' is 0, expected an integer in [1, 2147483647]"},
        {"generation_early_stopping", "generation_config.invalid_value",
         "field 'early_stopping' is \"sometimes\", expected true, false or \"never\""},
        {"generation_eos_string", "generation_config.wrong_type",
         "field 'eos_token_id' is a JSON string, expected an integer or a list of integers"},
        {"generation_bad_words", "generation_config.invalid_value",
         "field 'bad_words_ids' is a list with an empty entry, expected a list of non-empty lists of token ids"},
        {"generation_return_sequences", "generation_config.invalid_value",
         "field 'num_return_sequences' is 3, expected at most num_beams (2) when do_sample is false"},
    };
    test::check_catalogue(
        cases, [&](const case_t& c) { return malformed_config + "/" + c.file + ".json"; },
        [](const std::string& path) { io::load_generation_config(path); });
    check_error([] { io::parse_generation_config(R"({"do_sample": true, "temperature": 0})", "g"); }, "generation_config.invalid_value",
                "g: field 'temperature' is 0, expected a positive number when do_sample is true");
    CHECK(io::parse_generation_config(R"({"temperature": 0})", "g").temperature == 0.0);  // unused without sampling
    check_error([] { io::parse_generation_config(R"({"top_p": 1.5})", "g"); }, "generation_config.invalid_value",
                "g: field 'top_p' is 1.5, expected a number in [0, 1]");
    check_error([] { io::parse_generation_config(R"({"early_stopping": 1})", "g"); }, "generation_config.wrong_type",
                "g: field 'early_stopping' is a JSON integer, expected a boolean or \"never\"");
    check_error([] { io::parse_generation_config(R"({"bad_words_ids": [[5, -1]]})", "g"); }, "generation_config.invalid_value",
                "g: field 'bad_words_ids' is a list holding -1, expected a list of non-empty lists of token ids");
    check_error([] { io::parse_generation_config(R"({"bad_words_ids": [5]})", "g"); }, "generation_config.wrong_type",
                "g: field 'bad_words_ids' is a JSON integer, expected a list of non-empty lists of token ids");
    check_error([] { io::parse_generation_config(R"({"max_new_tokens": 0})", "g"); }, "generation_config.invalid_value",
                "g: field 'max_new_tokens' is 0, expected an integer in [1, 2147483647]");
    check_error([] { io::parse_generation_config("3", "g"); }, "generation_config.not_object",
                "g: generation config is a JSON integer, expected an object");
}

TEST_CASE("ids: token-id JSON") {
    const auto one = io::parse_ids_json(" [0, 5, 511, 1] ", "--ids");
    CHECK_FALSE(one.batched);
    CHECK(one.rows == std::vector<std::vector<std::int64_t>>{{0, 5, 511, 1}});
    const auto two = io::parse_ids_json("[[3, 4, 1], [7, 1]]", "--ids");
    CHECK(two.batched);
    CHECK(two.rows == std::vector<std::vector<std::int64_t>>{{3, 4, 1}, {7, 1}});
    CHECK(io::parse_ids_json("[[9]]", "--ids").batched);
    io::check_ids_vocab(one, 512, "--ids");
    io::check_ids_vocab(two, 8, "--ids");
    const auto big = io::parse_ids_json("[9223372036854775807]", "--ids");
    CHECK(big.rows[0][0] == 9223372036854775807LL);

    struct case_t {
        const char* text;
        const char* id;
        const char* message;
    };
    const case_t cases[] = {
        {"", "ids.invalid_json",
         "invalid JSON at byte 0: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal"},
        {"[1, 2", "ids.invalid_json", "invalid JSON at byte 5: syntax error while parsing array - unexpected end of input; expected ']'"},
        {"[1 2]", "ids.invalid_json", "invalid JSON at byte 3: syntax error while parsing array - unexpected number literal; expected ']'"},
        {"{\"ids\": [1]}", "ids.not_array", "expected an array of token ids or an array of arrays of token ids, found a JSON object"},
        {"7", "ids.not_array", "expected an array of token ids or an array of arrays of token ids, found a JSON integer"},
        {"[]", "ids.empty", "no token ids (empty array)"},
        {"[[1], []]", "ids.empty", "row 1 has no token ids"},
        {"[1, \"2\"]", "ids.not_integer", "element [1] is a JSON string, expected a non-negative integer"},
        {"[1, 2.0]", "ids.not_integer", "element [1] is a JSON number, expected a non-negative integer"},
        {"[[1, 2], [3, true]]", "ids.not_integer", "element [1][1] is a JSON boolean, expected a non-negative integer"},
        {"[1, null]", "ids.not_integer", "element [1] is a JSON null, expected a non-negative integer"},
        {"[3, -1]", "ids.negative", "element [1] is -1, expected a non-negative integer"},
        {"[[0], [4, -9]]", "ids.negative", "element [1][1] is -9, expected a non-negative integer"},
        {"[[1, [2]]]", "ids.too_deep", "element [0][1] is an array; token ids nest at most two levels ([[ids], [ids]])"},
        {"[1, [2]]", "ids.not_integer", "element [1] is a JSON array, expected a non-negative integer"},
        {"[[1], 2]", "ids.not_array", "element [1] is a JSON integer, expected an array of token ids like element [0]"},
        {"[18446744073709551615]", "ids.out_of_range", "element [0] is 18446744073709551615, too large for a token id"},
        {"[9223372036854775808]", "ids.out_of_range", "element [0] is 9223372036854775808, too large for a token id"},
        {"[1e400]", "ids.invalid_json", "invalid JSON: number overflow parsing '1e400'"},
        {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]", "ids.nesting_too_deep",
         "JSON nests deeper than 64 levels"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        check_error([&] { io::parse_ids_json(c.text, "--ids"); }, c.id, std::string("--ids: ") + c.message);
    }
    check_error([&] { io::check_ids_vocab(one, 511, "--ids"); }, "ids.out_of_vocab",
                "--ids: token id 511 at [2] is not below the vocabulary size 511");
    check_error([&] { io::check_ids_vocab(two, 7, "--ids"); }, "ids.out_of_vocab",
                "--ids: token id 7 at [1][0] is not below the vocabulary size 7");
}

TEST_CASE("checkpoint files: regular files only, read from inside the directory, configs of bounded size") {
    namespace fs = std::filesystem;
    const std::string hf = data_dir + "/hf";
    const fs::path root = test::scratch_dir("hostile_dirs");
    // A copy of a checkpoint (T5 v1.1 tiny) and of a BPE tokenizer (BART tiny) to spoil.
    auto fresh = [&](const std::string& name, const std::string& from) {
        const fs::path d = root / name;
        fs::remove_all(d);
        fs::copy(hf + "/" + from, d);
        return d;
    };
    const fs::path outside = root / "secret.txt";
    { std::ofstream(outside) << "root:x:0:0:root:/root:/bin/bash\n"; }
    auto fifo = [](const fs::path& p) {
        fs::remove(p);
        REQUIRE(::mkfifo(p.c_str(), 0644) == 0);
    };

    // Files that are not files: refused by type, without waiting on them.
    for (const char* name : {"model.safetensors", "config.json", "generation_config.json"}) {
        const fs::path d = fresh(std::string("fifo_") + name, "t5_v11");
        fifo(d / name);
        check_error([&] { io::checkpoint::open(d.string()); }, "io.not_a_file",
                    (d / name).string() + ": is a FIFO, expected a regular file");
    }
    {
        const fs::path d = fresh("dir_weights", "t5_v11");
        fs::remove(d / "model.safetensors");
        fs::create_directory(d / "model.safetensors");
        check_error([&] { io::checkpoint::open(d.string()); }, "io.not_a_file",
                    (d / "model.safetensors").string() + ": is a directory, expected a regular file");
        // An optional file that is a broken link is an error, not a default.
        const fs::path e = fresh("broken_generation", "t5_v11");
        fs::remove(e / "generation_config.json");
        fs::create_symlink(root / "no-such-file.json", e / "generation_config.json");
        check_error([&] { io::checkpoint::open(e.string()); }, "io.broken_link",
                    (e / "generation_config.json").string() + ": is a symbolic link to a file that does not exist");
    }

    // Links out of the directory: refused before a byte is read (the error names the target,
    // never its content).
    for (const char* name : {"model.safetensors", "generation_config.json"}) {
        const fs::path d = fresh(std::string("link_") + name, "t5_v11");
        fs::remove(d / name);
        fs::create_symlink(outside, d / name);
        check_error([&] { io::checkpoint::open(d.string()); }, "io.outside_directory",
                    (d / name).string() + ": leads outside the directory " + d.string() + " (to " + outside.string() +
                        "); files a checkpoint names are read from inside it only");
    }
    {
        const fs::path d = fresh("link_merges", "bart");
        fs::remove(d / "merges.txt");
        fs::create_symlink(outside, d / "merges.txt");
        check_error([&] { models::open_tokenizer(d.string()); }, "io.outside_directory",
                    (d / "merges.txt").string() + ": leads outside the directory " + d.string() + " (to " + outside.string() +
                        "); files a checkpoint names are read from inside it only");
        // A link inside the directory is fine.
        const fs::path e = fresh("link_inside", "t5_v11");
        fs::rename(e / "model.safetensors", e / "weights.bin");
        fs::create_symlink("weights.bin", e / "model.safetensors");
        CHECK(io::checkpoint::open(e.string()).records().size() > 0);
    }
    // The Hugging Face cache: a snapshot's files link into the same repository's blobs.
    {
        const fs::path repo = root / "hub" / "models--google--t5-tiny", snap = repo / "snapshots" / "0123abcd";
        fs::create_directories(snap);
        fs::create_directories(repo / "blobs");
        for (const auto& e : fs::directory_iterator(hf + "/t5_v11")) {
            const std::string blob = "blob-" + e.path().filename().string();
            fs::copy_file(e.path(), repo / "blobs" / blob);
            fs::create_symlink(fs::path("../../blobs") / blob, snap / e.path().filename());
        }
        const auto ck = io::checkpoint::open(snap.string());
        CHECK(models::common(*models::read_config(ck)).d_model == 64);
        // … but not into another repository's blobs.
        const fs::path other = root / "hub" / "models--evil--x" / "blobs";
        fs::create_directories(other);
        fs::copy_file(outside, other / "x");
        fs::remove(snap / "generation_config.json");
        fs::create_symlink(other / "x", snap / "generation_config.json");
        check_error([&] { io::checkpoint::open(snap.string()); }, "io.outside_directory",
                    (snap / "generation_config.json").string() + ": leads outside the directory " + snap.string() + " (to " +
                        (other / "x").string() + "); files a checkpoint names are read from inside it only");
    }

    // A SLED config's underlying_config: resolved against the checkpoint's directory only, and
    // inside it.
    {
        const fs::path d = fresh("sled_paths", "t5_v11");
        fs::create_directories(d / "backbone");
        fs::copy_file(d / "config.json", d / "backbone" / "config.json");
        auto sled_with = [&](const std::string& u) {
            std::ofstream(d / "config.json", std::ios::trunc)
                << nlohmann::json{{"model_type", "tau/sled"}, {"underlying_config", u}, {"context_size", 32}}.dump();
            return io::checkpoint::open(d.string());
        };
        CHECK(models::common(*models::read_config(sled_with("backbone"))).d_model == 64);
        CHECK(models::common(*models::read_config(sled_with((d / "backbone").string()))).d_model == 64);
        for (const std::string& u : {outside.string(), std::string("../secret.txt")}) {
            const auto ck = sled_with(u);
            check_error([&] { models::read_config(ck); }, "io.outside_directory",
                        (u[0] == '/' ? u : (d / u).string()) + ": leads outside the directory " + d.string() + " (to " + outside.string() +
                            "); files a checkpoint names are read from inside it only");
        }
        // Not looked up in the working directory: a "backbone" there is not this checkpoint's.
        const fs::path cwd = fs::current_path();
        fs::current_path(root);
        fs::create_directories(root / "cwd_backbone");
        fs::copy_file(d / "backbone" / "config.json", root / "cwd_backbone" / "config.json", fs::copy_options::overwrite_existing);
        const auto ck = sled_with("cwd_backbone");
        bool thrown = false;
        try {
            models::read_config(ck);
        } catch (const locost::error& e) {
            thrown = true;
            CHECK(e.id() == "sled.backbone_not_found");
        }
        fs::current_path(cwd);
        CHECK(thrown);
    }

    // Configuration files have a size limit of their own, checked before they are read.
    {
        const fs::path d = fresh("huge_config", "t5_v11");
        {
            std::ofstream f(d / "config.json", std::ios::trunc);
            f << "{\"model_type\": \"t5\", \"junk\": [";
            const std::string chunk(1 << 20, ' ');
            for (int i = 0; i < 9; ++i) f << chunk;
            f << "]}";
        }
        check_error([&] { io::checkpoint::open(d.string()); }, "io.file_too_large",
                    (d / "config.json").string() + ": is 9.0 MiB, more than the 8 MiB a configuration file may hold");
    }
}

TEST_CASE("checkpoint by name: org/name[@revision] from the Hugging Face cache, as huggingface_hub lays it out, never downloaded") {
    namespace fs = std::filesystem;
    const std::string hf = test::data_dir + "/hf";
    const fs::path root = test::scratch_dir("hub_cache");
    const fs::path cache = root / "cache", repo = cache / "models--google--t5-tiny";
    const std::string commit = "4f2b8e3a1c9d0e7f6a5b4c3d2e1f0a9b8c7d6e5f", old_commit = "00112233445566778899aabbccddeeff00112233";
    for (const std::string& c : {commit, old_commit}) {
        const fs::path snap = repo / "snapshots" / c;
        fs::create_directories(snap);
        fs::create_directories(repo / "blobs");
        for (const auto& e : fs::directory_iterator(hf + (c == commit ? "/t5_v11" : "/t5_v10"))) {
            const std::string blob = c.substr(0, 6) + "-" + e.path().filename().string();
            fs::copy_file(e.path(), repo / "blobs" / blob, fs::copy_options::overwrite_existing);
            fs::create_symlink(fs::path("../../blobs") / blob, snap / e.path().filename());
        }
    }
    fs::create_directories(repo / "refs" / "pr");
    std::ofstream(repo / "refs" / "main") << commit;  // huggingface_hub writes the hash without a newline
    std::ofstream(repo / "refs" / "pr" / "1") << old_commit << "\n";

    struct env_guard {
        std::vector<std::pair<std::string, std::optional<std::string>>> saved;
        void set(const char* name, const std::optional<std::string>& v) {
            const char* old = std::getenv(name);
            saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
            if (v) setenv(name, v->c_str(), 1);
            else unsetenv(name);
        }
        ~env_guard() {
            for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
                if (it->second) setenv(it->first.c_str(), it->second->c_str(), 1);
                else unsetenv(it->first.c_str());
            }
        }
    } env;
    env.set("HF_HUB_CACHE", cache.string());
    env.set("HUGGINGFACE_HUB_CACHE", std::nullopt);
    env.set("HF_HOME", std::nullopt);

    const auto d_model = [](const io::checkpoint& ck) { return models::common(*models::read_config(ck)).d_model; };
    const auto main_ck = io::checkpoint::open("google/t5-tiny");
    CHECK(main_ck.dir() == (repo / "snapshots" / commit).string());
    CHECK(io::checkpoint::open("google/t5-tiny@main").dir() == main_ck.dir());
    CHECK(io::checkpoint::open("google/t5-tiny@" + commit).dir() == main_ck.dir());
    CHECK(io::checkpoint::open("google/t5-tiny@pr/1").dir() == (repo / "snapshots" / old_commit).string());
    CHECK(io::checkpoint::open("google/t5-tiny@" + old_commit).dir() == (repo / "snapshots" / old_commit).string());
    CHECK(d_model(main_ck) > 0);

    check_error([&] { io::checkpoint::open("google/t5-small"); }, "checkpoint.not_in_cache",
                "google/t5-small: no such directory, and not in the Hugging Face cache (looked for " +
                    (cache / "models--google--t5-small").string() +
                    "; the cache is $HF_HUB_CACHE). locost never downloads: where there is network, run `hf download google/t5-small` "
                    "(huggingface_hub) and copy models--google--t5-small into " +
                    cache.string() + " here, or give the checkpoint's directory");
    check_error([&] { io::checkpoint::open("google/t5-tiny@v2"); }, "checkpoint.revision_not_in_cache",
                "google/t5-tiny@v2: " + repo.string() + " has no revision 'v2' (refs: main, pr/1; snapshots: " + old_commit + ", " +
                    commit + ")");
    fs::remove_all(repo / "snapshots" / old_commit);
    check_error([&] { io::checkpoint::open("google/t5-tiny@pr/1"); }, "checkpoint.revision_not_in_cache",
                "google/t5-tiny@pr/1: " + repo.string() + " has refs/pr/1 naming commit " + old_commit +
                    " but no snapshot of it (refs: main, pr/1; snapshots: " + commit + ")");

    // Where the cache is: HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else HF_HOME/hub, else
    // XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
    env.set("HF_HUB_CACHE", std::nullopt);
    env.set("HF_HOME", root.string());
    fs::rename(cache, root / "hub");
    CHECK(io::checkpoint::open("google/t5-tiny").dir() == (root / "hub" / "models--google--t5-tiny" / "snapshots" / commit).string());
    env.set("HF_HOME", std::nullopt);
    env.set("XDG_CACHE_HOME", (root / "xdg").string());
    CHECK(io::hub_cache_dir().first == root / "xdg" / "huggingface" / "hub");
    env.set("XDG_CACHE_HOME", std::nullopt);
    env.set("HOME", "/home/someone");
    CHECK(io::hub_cache_dir() ==
          std::make_pair(std::filesystem::path("/home/someone/.cache/huggingface/hub"), std::string("~/.cache/huggingface/hub")));

    // A cache the caller names (cache_dir=, --cache-dir) in place of the environment's; the
    // checkpoint keeps it for what it names in turn.
    const io::cache_location given{(root / "hub").string(), "cache_dir"};
    const auto from_given = io::checkpoint::open("google/t5-tiny", given);
    CHECK(from_given.dir() == (root / "hub" / "models--google--t5-tiny" / "snapshots" / commit).string());
    CHECK(from_given.cache().dir == given.dir);
    CHECK(io::checkpoint::open(hf + "/t5_v11").cache().dir.empty());
    check_error([&] { io::checkpoint::open("google/t5-tiny"); }, "checkpoint.not_in_cache",
                "google/t5-tiny: no such directory, and not in the Hugging Face cache (looked for "
                "/home/someone/.cache/huggingface/hub/models--google--t5-tiny; the cache is ~/.cache/huggingface/hub). locost never "
                "downloads: where there is network, run `hf download google/t5-tiny` (huggingface_hub) and copy models--google--t5-tiny "
                "into /home/someone/.cache/huggingface/hub here, or give the checkpoint's directory");
    check_error([&] { io::checkpoint::open("google/t5-small", given); }, "checkpoint.not_in_cache",
                "google/t5-small: no such directory, and not in the Hugging Face cache (looked for " +
                    (root / "hub" / "models--google--t5-small").string() + "; the cache is " + given.dir +
                    " (cache_dir)). locost never downloads: where there is network, run `hf download google/t5-small` (huggingface_hub) "
                    "and copy models--google--t5-small into " +
                    given.dir + " here, or give the checkpoint's directory");
    check_error(
        [&] {
            io::checkpoint::open("google/t5-tiny", io::cache_location{(root / "absent").string(), "cache_dir"});
        },
        "checkpoint.not_in_cache", "google/t5-tiny: cache_dir '" + (root / "absent").string() + "' is not a directory");

    // A path that exists is a path; what is not a repository id stays a path (and fails as one).
    CHECK(io::resolve_model_dir(hf + "/t5_v11") == hf + "/t5_v11");
    check_error([&] { io::checkpoint::open("/no/such/dir/x"); }, "checkpoint.not_a_directory", "/no/such/dir/x: not a directory");
    for (const char* bad : {"a/b/c", "org/../x", "org/na--me", "-org/x", "org/x.", "org/x@", "org/x@../main", "org/x@/main", ""})
        CHECK_MESSAGE(!io::parse_hub_name(bad), bad);
    const auto n = io::parse_hub_name("t5-small@refs/pr/3");
    REQUIRE(n);
    CHECK(n->repo == "t5-small");
    CHECK(n->revision == "refs/pr/3");
}

// A copied or hostile cache folder (issue 60): nothing outside the cache is read or quoted through
// a name, a ref is read only as far as a commit hash can be long, and what is quoted is escaped
// and cut.
TEST_CASE("checkpoint by name: refs and folders that lead out of the cache, oversized and hostile refs, and many of them") {
    namespace fs = std::filesystem;
    const fs::path root = test::scratch_dir("hub_cache_hostile");
    const fs::path cache = root / "cache", repo = cache / "models--org--m";
    const std::string commit = "0123456789abcdef0123456789abcdef01234567";
    fs::create_directories(repo / "snapshots" / commit);
    fs::create_directories(repo / "refs");
    for (const auto& e : fs::directory_iterator(test::data_dir + "/hf/t5_v11"))
        fs::copy_file(e.path(), repo / "snapshots" / commit / e.path().filename());
    fs::create_directories(root / "outside");
    std::ofstream(root / "token") << "hf_SECRET\n";
    std::ofstream(root / "outside" / "config.json") << "{\"model_type\": \"secret\"}";
    const char* saved = std::getenv("HF_HUB_CACHE");
    setenv("HF_HUB_CACHE", cache.c_str(), 1);
    const std::string refs = (repo / "refs").string();

    fs::create_symlink("../../../token", repo / "refs" / "main");
    check_error(
        [&] { io::checkpoint::open("org/m"); }, "checkpoint.bad_ref",
        refs +
            "/main: is a symbolic link; a ref of the Hugging Face cache is a file holding a commit hash, and links are not followed out of the cache");
    fs::remove(repo / "refs" / "main");
    std::ofstream(repo / "refs" / "main") << commit;
    CHECK(io::checkpoint::open("org/m").dir() == (repo / "snapshots" / commit).string());
    {
        std::ofstream big(repo / "refs" / "big");  // a sparse gigabyte: only 257 bytes are read
        big.seekp(std::streamoff(1) << 30);
        big << 'x';
    }
    check_error([&] { io::checkpoint::open("org/m@big"); }, "checkpoint.bad_ref",
                refs + "/big: holds more than 256 bytes; a ref of the Hugging Face cache holds one commit hash");
    std::ofstream(repo / "refs" / "esc") << "\x1b[31m\nlocost: [locost.fake] x";
    check_error([&] { io::checkpoint::open("org/m@esc"); }, "checkpoint.bad_ref",
                refs + "/esc: expected a commit hash, found '\\x1b[31m\\x0alocost: [locost.fake] x'");
    // (no repository id has revision "."; read as a path, it is none)
    check_error([&] { io::checkpoint::open("org/m@."); }, "checkpoint.not_a_directory", "org/m@.: not a directory");
    // A snapshot, or a repository folder, that is a link out of the cache.
    fs::create_directory_symlink(root / "outside", repo / "snapshots" / "aaaa");
    check_error(
        [&] { io::checkpoint::open("org/m@aaaa"); }, "checkpoint.not_in_cache",
        "org/m@aaaa: " + (repo / "snapshots" / "aaaa").string() +
            " is a symbolic link or not a directory; a snapshot of the Hugging Face cache is a folder of the repository (its files link into "
            "the repository's blobs/)");
    fs::create_directory_symlink(root / "outside", cache / "models--org--linked");
    check_error(
        [&] { io::checkpoint::open("org/linked"); }, "checkpoint.not_in_cache",
        "org/linked: " + (cache / "models--org--linked").string() +
            " is a symbolic link or not a directory; a repository of the Hugging Face cache is read from its own folders only (copy the folder "
            "itself, not a link to it)");
    // 20,000 refs: the message names a dozen and counts the rest.
    for (int i = 0; i < 20000; ++i) std::ofstream(repo / "refs" / ("r" + std::to_string(i))) << commit;
    try {
        io::checkpoint::open("org/m@absent");
        FAIL("no error");
    } catch (const locost::error& e) {
        CHECK(e.id() == "checkpoint.revision_not_in_cache");
        CHECK(e.message().find(", and 19991 more; snapshots: ") != std::string::npos);
        CHECK(e.message().size() < 800);
    }
    if (saved) setenv("HF_HUB_CACHE", saved, 1);
    else unsetenv("HF_HUB_CACHE");
}

// JSON parsing is linear in the file (issue 60): nlohmann's callback parser rescanned the parent
// container at every object's end (200K sibling objects in a config.json: 22.7 s).
TEST_CASE("JSON: many sibling objects and keys parse in linear time, every file the readers take") {
    std::string text = "{\"model_type\": \"t5\", \"a\": [";
    for (int i = 0; i < 200000; ++i) text += i ? ",{}" : "{}";
    text += "], \"task_specific_params\": {";
    for (int i = 0; i < 200000; ++i) text += (i ? ",\"t" : "\"t") + std::to_string(i) + "\": {\"max_length\": 3}";
    text += "}}";
    REQUIRE(text.size() < (std::size_t(8) << 20));
    auto t0 = std::chrono::steady_clock::now();
    const auto j = io::parse_json(text, "config.json", "config");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(j["a"].size() == 200000);
    CHECK(j["task_specific_params"].size() == 200000);
    CHECK(seconds < 20);  // measured 0.8 s unsanitized; quadratic, minutes
    // A safetensors header of 100,000 small tensors.
    std::string header = "{";
    for (int i = 0; i < 100000; ++i)
        header += (i ? ",\"w" : "\"w") + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" +
            std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]}";
    header += "}";
    std::string file(8, '\0');
    const std::uint64_t n = header.size();
    std::memcpy(file.data(), &n, 8);
    file += header + std::string(400000, '\0');
    const std::string path = test::scratch_dir("json_linear") + "/model.safetensors";
    std::ofstream(path, std::ios::binary) << file;
    t0 = std::chrono::steady_clock::now();
    const auto st = io::safetensors_file::open(path);
    const double st_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(st.records().size() == 100000);
    CHECK(st_seconds < 30);
    MESSAGE("JSON: 200K objects and 200K keys (" << text.size() / 1024 << " KiB) in " << seconds
                                                 << " s; a safetensors header of 100K tensors in " << st_seconds << " s (sanitized build)");
}
