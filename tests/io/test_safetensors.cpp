// safetensors reader/writer, sharded checkpoints and the checkpoint loader.
//
// Malformed inputs live in tests/data/malformed (written by make_malformed.py there); each must
// fail with one exact error id and message. Round trips and checkpoint variants (F16, BF16,
// sharded, broken) are written by the tests into LOCOST_TEST_TMP with the writer.
#include "helpers.hpp"

#include <locost/io/checkpoint.hpp>
#include <locost/io/safetensors.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>
#include <limits>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace locost;
using locost::io::safetensors_file;
using locost::io::safetensors_writer;
using locost::io::tensor_record;

namespace {

using test::data_dir;
const std::string malformed = data_dir + "/malformed";
using test::tiny_dir;

std::string st_scratch(const std::string& name) { return test::scratch_dir("st_" + name); }

using test::check_error;

std::vector<float> ramp(std::size_t n, float scale) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = scale * (static_cast<float>(i) - static_cast<float>(n) / 3.0f);
    return v;
}

using test::as_floats;

void copy_file(const std::string& from, const std::string& to) { fs::copy_file(from, to, fs::copy_options::overwrite_existing); }

// Writes every tensor of the tiny checkpoint to `dir` with `float_type` (plus config.json).
void write_tiny_as(const std::string& dir, dtype float_type) {
    const auto file = safetensors_file::open(tiny_dir + "/model.safetensors");
    safetensors_writer w(float_type);
    for (const auto& r : file.records()) {
        const auto v = as_floats(r);
        w.add(r.name, view<const float>{v.data(), r.shape});
    }
    w.metadata["format"] = "pt";
    w.write(dir + "/model.safetensors");
    copy_file(tiny_dir + "/config.json", dir + "/config.json");
}

}  // namespace

TEST_CASE("safetensors: every malformed file fails with its exact error") {
    struct case_t {
        const char* file;
        const char* id;
        const char* message;
    };
    // Messages after "<path>: ".
    const case_t cases[] = {
        {"too_small", "safetensors.too_small", "file is 5 bytes, too small for the 8-byte header length"},
        {"header_too_large", "safetensors.header_too_large", "header length 100000001 exceeds the limit of 100000000 bytes"},
        {"header_out_of_bounds", "safetensors.header_out_of_bounds",
         "header length 64 runs past the end of the file (4 bytes follow the length)"},
        {"empty_header", "safetensors.invalid_json",
         "invalid JSON at byte 8: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal"},
        {"invalid_json", "safetensors.invalid_json",
         "invalid JSON at byte 30: syntax error while parsing object key - unexpected ','; expected string literal"},
        {"invalid_utf8_name", "safetensors.invalid_json",
         "invalid JSON at byte 11: syntax error while parsing object key - invalid string: ill-formed UTF-8 byte; last read: '\"w\\xff'; expected string literal"},
        {"number_overflow", "safetensors.invalid_json", "invalid JSON: number overflow parsing '1e999'"},
        {"too_deep", "safetensors.nesting_too_deep", "JSON nests deeper than 64 levels"},
        {"not_object", "safetensors.header_not_object", "header is a JSON array, expected an object"},
        {"duplicate_name", "safetensors.duplicate_key", "key 'w' appears more than once in the same JSON object"},
        {"metadata_not_object", "safetensors.metadata_invalid", "__metadata__ is a JSON array, expected an object of strings"},
        {"metadata_value_not_string", "safetensors.metadata_invalid", "__metadata__ entry 'format' is a JSON integer, expected a string"},
        {"entry_not_object", "safetensors.entry_not_object",
         "tensor 'w' is a JSON integer, expected an object with dtype, shape and data_offsets"},
        {"missing_dtype", "safetensors.missing_field", "tensor 'w' has no 'dtype'"},
        {"dtype_not_string", "safetensors.field_type", "tensor 'w' field 'dtype' is a JSON integer, expected a string"},
        {"shape_not_array", "safetensors.field_type",
         "tensor 'w' field 'shape' is a JSON string, expected an array of non-negative integers"},
        {"offsets_not_array", "safetensors.field_type",
         "tensor 'w' field 'data_offsets' is a JSON object, expected an array of two non-negative integers"},
        {"offsets_three", "safetensors.field_type", "tensor 'w' field 'data_offsets' has 3 elements, expected 2"},
        {"unknown_dtype", "safetensors.unknown_dtype",
         "tensor 'w' has unknown dtype 'F8_E4M3' (expected one of F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)"},
        {"negative_shape", "safetensors.bad_shape", "tensor 'w' shape element 1 is -1, expected a non-negative integer below 2^63"},
        {"float_shape", "safetensors.bad_shape", "tensor 'w' shape element 0 is a JSON number, expected a non-negative integer below 2^63"},
        {"offsets_negative", "safetensors.bad_offsets", "tensor 'w' data_offsets element 0 is -8, expected a non-negative integer"},
        {"offsets_reversed", "safetensors.offsets_reversed", "tensor 'w' data_offsets [8, 0] end before they begin"},
        {"offsets_out_of_bounds", "safetensors.offsets_out_of_bounds",
         "tensor 'w' data_offsets [0, 400] run past the end of the data buffer (8 bytes)"},
        {"size_mismatch", "safetensors.size_mismatch", "tensor 'w' shape (3,) of F32 needs 12 bytes but data_offsets [0, 8] span 8"},
        {"size_overflow", "safetensors.size_overflow",
         "tensor 'w' shape (4611686018427387904, 16) of F32 has more than 2^63 elements or bytes"},
        {"overlap", "safetensors.offsets_overlap", "tensor 'b' data_offsets [4, 12] overlap tensor 'a' (data_offsets [0, 8])"},
        {"hole", "safetensors.data_hole", "data buffer bytes [4, 8) belong to no tensor"},
        {"trailing_bytes", "safetensors.data_hole", "data buffer bytes [4, 8) belong to no tensor"},
    };
    test::check_catalogue(
        cases, [&](const case_t& c) { return malformed + "/safetensors/" + c.file + ".safetensors"; },
        [](const std::string& path) { io::read_safetensors(path); });
    CHECK(test::count_files(malformed + "/safetensors", ".safetensors") == std::size(cases));

    const std::string nowhere = malformed + "/safetensors/absent.safetensors";
    check_error([&] { io::read_safetensors(nowhere); }, "io.open_failed", nowhere + ": cannot open (No such file or directory)");
    check_error([&] { io::read_safetensors(malformed); }, "io.not_a_file", malformed + ": is a directory, expected a regular file");
}

TEST_CASE("safetensors: in-memory images, truncated at every length, never read out of bounds") {
    safetensors_writer w;
    const auto a = ramp(6, 0.5f);
    w.add("a", view<const float>{a.data(), {2, 3}});
    const std::int64_t ids[] = {5, 7};
    w.add_i64("ids", {2}, ids);
    w.metadata["k"] = "v";
    const std::string image = w.serialize();
    const auto* bytes = reinterpret_cast<const std::byte*>(image.data());
    const auto full = safetensors_file::parse(bytes, image.size(), "mem", nullptr);
    CHECK(full.records().size() == 2);
    // Every proper prefix is rejected with a locost::error (copied into an exact-size buffer
    // so that ASan sees any read past its end).
    for (std::size_t len = 0; len < image.size(); ++len) {
        std::vector<std::byte> prefix(bytes, bytes + len);
        bool threw = false;
        try {
            safetensors_file::parse(prefix.data(), prefix.size(), "mem", nullptr);
        } catch (const locost::error&) { threw = true; }
        CHECK_MESSAGE(threw, "prefix of length " << len << " was accepted");
    }
}

TEST_CASE("safetensors: the reference files match their manifest") {
    std::ifstream in(data_dir + "/reference/manifest.json");
    const auto manifest = io::json::parse(in);
    int files = 0;
    for (const auto& item : manifest.items()) {
        const std::string& file = item.key();
        const auto& info = item.value();
        if (!file.ends_with(".safetensors")) continue;
        ++files;
        CAPTURE(file);
        const auto f = safetensors_file::open(data_dir + "/reference/" + file);
        const auto& tensors = info.at("tensors");
        CHECK(f.records().size() == tensors.size());
        for (const auto& t_item : tensors.items()) {
            const std::string& name = t_item.key();
            const auto& spec = t_item.value();
            CAPTURE(name);
            const tensor_record* r = f.find(name);
            REQUIRE(r != nullptr);
            const std::string t = spec.at(0).get<std::string>();
            CHECK(r->type == (t == "int64" ? dtype::i64 : dtype::f32));
            const auto dims = spec.at(1).get<std::vector<index_t>>();
            CHECK(r->shape == shape_t(dims.begin(), dims.end()));
            CHECK(r->nbytes == static_cast<std::size_t>(r->shape.numel()) * size_of(r->type));
        }
    }
    CHECK(files == 5);

    const auto enc = safetensors_file::open(data_dir + "/reference/locost_encoder.safetensors");
    CHECK(enc.metadata().at("vandermonde_precision") == "float64");
    const tensor_record* ids = enc.find("enc.L7.input_ids");
    REQUIRE(ids != nullptr);
    CHECK(ids->type == dtype::i64);
    CHECK(ids->shape == shape_t{1, 7});
    // Records stay valid after the reader is gone (the mapping is shared).
    const auto records = io::read_safetensors(data_dir + "/reference/locost_encoder.safetensors");
    std::int64_t first = -1;
    for (const auto& r : records)
        if (r.name == "enc.L1.input_ids") std::memcpy(&first, r.bytes, 8);
    CHECK(first >= 0);
    CHECK(first < 512);
}

TEST_CASE("safetensors writer: F32, F16 and BF16 round trips are exact") {
    const std::string dir = st_scratch("roundtrip");
    // Values exactly representable in all three types, then values that must round.
    std::vector<float> exact = {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 1024.0f, -3.0f / 64.0f, 0.5f};
    std::vector<float> rounding = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0.1f, -1.0e-7f,
                                   70000.0f,        3.14159265f};
    auto big = ramp(1000, 0.37f);
    for (const dtype t : {dtype::f32, dtype::f16, dtype::bf16}) {
        CAPTURE(safetensors_name(t));
        safetensors_writer w(t);
        w.add("exact", view<const float>{exact.data(), {2, 4}});
        w.add("rounding", view<const float>{rounding.data(), {8}});
        w.add("big", view<const float>{big.data(), {10, 10, 10}});
        w.add("empty", view<const float>{nullptr, {0, 3}});
        w.add("scalar", view<const float>{exact.data() + 3, {}});
        w.metadata["note"] = "round \"trip\"";
        const std::string path = dir + "/m.safetensors";
        w.write(path);

        const auto f = safetensors_file::open(path);
        CHECK(f.metadata().at("note") == "round \"trip\"");
        REQUIRE(f.records().size() == 5);
        // Data order is insertion order; the header is padded to a multiple of 8.
        CHECK(f.records()[0].name == "exact");
        std::ifstream in(path, std::ios::binary);
        std::uint64_t header_len = 0;
        in.read(reinterpret_cast<char*>(&header_len), 8);
        CHECK(header_len % 8 == 0);
        CHECK(!fs::exists(path + ".tmp." + std::to_string(::getpid())));

        for (const auto* name : {"exact", "rounding", "big", "empty", "scalar"}) {
            CAPTURE(name);
            const tensor_record* r = f.find(name);
            REQUIRE(r != nullptr);
            CHECK(r->type == t);
            const std::vector<float>& src = std::string(name) == "exact" ? exact
                : std::string(name) == "rounding"                        ? rounding
                : std::string(name) == "big"                             ? big
                                                                         : exact;
            const std::size_t offset = std::string(name) == "scalar" ? 3 : 0;
            const auto got = as_floats(*r);
            CHECK(got.size() == static_cast<std::size_t>(r->shape.numel()));
            for (std::size_t i = 0; i < got.size(); ++i) {
                const float x = src[offset + i];
                const float want = t == dtype::f32 ? x : t == dtype::f16 ? f16_to_float(float_to_f16(x)) : bf16_to_float(float_to_bf16(x));
                CHECK(std::memcmp(&got[i], &want, 4) == 0);  // bitwise, so -0.0 and 0.0 differ
                if (std::string(name) == "exact") CHECK(got[i] == x);
            }
        }
        if (t != dtype::f32) {
            // Round to nearest, ties to even, in the narrow type's own precision.
            const auto r = as_floats(*f.find("rounding"));
            if (t == dtype::f16) {
                CHECK(r[0] == 1.0f);                                    // 1 + 2^-11: tie, to even (1.0)
                CHECK(r[1] == 1.0f + 0x1p-9f);                          // 1 + 3*2^-11: tie, to even (1 + 2^-9)
                CHECK(r[6] == std::numeric_limits<float>::infinity());  // beyond 65504
            } else {
                CHECK(r[2] == 1.0f);            // 1 + 2^-8: tie, to even
                CHECK(r[3] == 1.0f + 0x1p-6f);  // 1 + 3*2^-8: tie, to even
                CHECK(r[6] == 70144.0f);
            }
        }
    }

    // int64 and raw bytes.
    safetensors_writer w;
    const std::int64_t ids[] = {0, 1, 511, std::numeric_limits<std::int64_t>::max()};
    w.add_i64("ids", {2, 2}, ids);
    const std::uint8_t raw[] = {1, 0, 1};
    w.add("mask", dtype::boolean, {3}, std::as_bytes(std::span(raw)));
    w.write(dir + "/ids.safetensors");
    const auto f = safetensors_file::open(dir + "/ids.safetensors");
    CHECK(f.metadata().empty());
    REQUIRE(f.find("ids") != nullptr);
    CHECK(f.find("ids")->type == dtype::i64);
    CHECK(std::memcmp(f.find("ids")->bytes, ids, sizeof ids) == 0);
    CHECK(f.find("mask")->type == dtype::boolean);
    CHECK(std::memcmp(f.find("mask")->bytes, raw, 3) == 0);
}

TEST_CASE("safetensors writer: misuse is reported") {
    check_error([] { safetensors_writer w(dtype::i8); }, "safetensors.writer_float_type",
                "safetensors_writer: float storage type I8 is not F32, F16 or BF16");
    safetensors_writer w;
    const float x[2] = {1, 2};
    w.add("x", view<const float>{x, {2}});
    check_error(
        [&] {
            w.add("x", view<const float>{x, {2}});
        },
        "safetensors.writer_duplicate", "safetensors_writer: tensor 'x' added twice");
    check_error(
        [&] {
            w.add("__metadata__", view<const float>{x, {2}});
        },
        "safetensors.writer_bad_name", "safetensors_writer: tensor name '__metadata__' is reserved or empty");
    check_error(
        [&] {
            w.add("bad\xff", view<const float>{x, {2}});
        },
        "safetensors.writer_bad_name", "safetensors_writer: tensor name 'bad\\xff' is not valid UTF-8");
    check_error([&] { w.add("y", dtype::f32, {3}, std::as_bytes(std::span(x))); }, "safetensors.writer_size_mismatch",
                "safetensors_writer: tensor 'y' shape (3,) of F32 needs 12 bytes, got 8");
    check_error(
        [&] {
            w.add("z", view<const float>{x, {2, -1}});
        },
        "safetensors.writer_bad_shape", "safetensors_writer: tensor 'z' has invalid shape (2, -1)");
    const std::string bad_dir = st_scratch("writer") + "/no/such/dir/m.safetensors";
    // The temporary beside the target (.NAME.locost-tmp.PID.N) cannot be created.
    const std::string tmp_prefix = st_scratch("writer") + "/no/such/dir/.m.safetensors.locost-tmp." + std::to_string(::getpid()) + ".";
    try {
        w.write(bad_dir);
        FAIL("writing into a missing directory succeeded");
    } catch (const locost::error& e) {
        CHECK(e.id() == "io.write_failed");
        const std::string m = e.message();
        CHECK(m.rfind(tmp_prefix, 0) == 0);
        CHECK(m.find(": cannot create the temporary file for " + bad_dir + " (No such file or directory)") != std::string::npos);
    }
}

TEST_CASE("sharded safetensors: malformed indexes fail with their exact error") {
    struct case_t {
        const char* dir;
        const char* id;
        const char* message;
    };
    const case_t cases[] = {
        {"index_escape", "index.bad_shard_name",
         "shard '../x.safetensors' of tensor 'x' is not a plain file name in the checkpoint directory"},
        {"index_absolute", "index.bad_shard_name",
         "shard '/etc/passwd' of tensor 'x' is not a plain file name in the checkpoint directory"},
        {"index_missing_tensor", "index.tensor_not_in_shard",
         "tensor 'y' is listed in shard 'model-00002-of-00002.safetensors' but that shard does not hold it"},
        {"index_unlisted_tensor", "index.unlisted_tensor",
         "shard 'model-00001-of-00002.safetensors' holds tensor 'z', which weight_map does not list"},
        {"index_wrong_shard", "index.wrong_shard",
         "shard 'model-00001-of-00002.safetensors' holds tensor 'y', which weight_map assigns to 'model-00002-of-00002.safetensors'"},
        {"index_no_weight_map", "index.missing_weight_map", "no \"weight_map\""},
        {"index_not_string", "index.field_type", "weight_map entry 'x' is a JSON integer, expected a shard file name"},
        {"index_empty", "index.empty", "\"weight_map\" lists no tensors"},
    };
    test::check_catalogue(
        cases, [&](const case_t& c) { return malformed + "/" + c.dir + "/model.safetensors.index.json"; },
        [](const std::string& path) { io::read_sharded_safetensors(path); });
    const std::string missing = malformed + "/index_missing_shard";
    check_error([&] { io::read_sharded_safetensors(missing + "/model.safetensors.index.json"); }, "io.open_failed",
                missing + "/model-00001-of-00002.safetensors: cannot open (No such file or directory)");
    check_error([] { io::parse_safetensors_index("[]", "idx"); }, "index.not_object",
                "idx: index is a JSON array, expected an object with \"weight_map\"");
    check_error([] { io::parse_safetensors_index(R"({"metadata": 3, "weight_map": {"a": "b"}})", "idx"); }, "index.field_type",
                "idx: \"metadata\" is a JSON integer, expected an object");
    check_error([] { io::parse_safetensors_index(R"({"weight_map": ["a"]})", "idx"); }, "index.field_type",
                "idx: \"weight_map\" is a JSON array, expected an object mapping tensor names to shard file names");
    for (const char* bad : {"", ".", "..", "sub/x.safetensors", "a\\b", "tab\there"}) {
        CAPTURE(bad);
        const std::string text = io::json{{"weight_map", {{"t", bad}}}}.dump();
        check_error([&] { io::parse_safetensors_index(text, "idx"); }, "index.bad_shard_name",
                    "idx: shard '" + io::detail::printable(bad) + "' of tensor 't' is not a plain file name in the checkpoint directory");
    }
}

TEST_CASE("checkpoint: the tiny LOCOST reference checkpoint") {
    const auto ck = io::checkpoint::open(tiny_dir);
    const auto c = test::config_of(ck);
    CHECK(c.model_type == "locost");
    CHECK(c.vocab_size == 512);
    CHECK(c.d_model == 64);
    CHECK(c.d_state == 16);
    CHECK(c.d_kv == 16);
    CHECK(c.d_ff == 128);
    CHECK(c.num_layers == 2);
    CHECK(c.num_decoder_layers == 2);
    CHECK(c.num_heads == 4);
    CHECK(c.num_ssm_heads == 1);
    CHECK(c.is_gated_act);
    CHECK(c.dense_act_fn == "gelu_new");
    CHECK_FALSE(c.tie_word_embeddings);
    CHECK_FALSE(c.use_fast_fft_conv);
    CHECK(c.eos_token_id == 1);
    CHECK(c.decoder_start_token_id == 0);
    CHECK(ck.weights_path() == tiny_dir + "/model.safetensors");
    CHECK_FALSE(ck.generation().has_value());

    // Every expected tensor present with its shape; nothing unexplained stored.
    const auto v = test::validate(ck);
    CHECK(v.ok());
    CHECK(v.missing.empty());
    CHECK(v.wrong_shape.empty());
    CHECK(v.wrong_dtype.empty());
    CHECK(v.unexpected.empty());
    CHECK(v.warnings.empty());
    CHECK(v.errors().empty());
    test::require_valid(ck);
    const auto expected = test::expected_tensors(ck);
    // 17 per encoder block, 14 per decoder block (+ the relative bias in block 0), shared,
    // 2 final norms, lm_head.
    CHECK(expected.size() == 2 * 17 + (15 + 14) + 4);
    CHECK(ck.records().size() == expected.size() + 2);  // + the two stored embedding copies
    for (const auto& p : test::expected_parameters(ck)) {
        CAPTURE(p.name);
        CHECK(ck.has(p.name));
        CHECK(ck.record(p.name).shape == p.shape);
    }

    // Tied names resolve to one tensor; lm_head is separate (tie_word_embeddings false).
    const tensor_record& shared = ck.record("shared.weight");
    CHECK(&ck.record("encoder.embed_tokens.weight") == &shared);
    CHECK(&ck.record("decoder.embed_tokens.weight") == &shared);
    CHECK(ck.record("encoder.embed_tokens.weight").bytes == shared.bytes);
    CHECK(ck.record("lm_head.weight").bytes != shared.bytes);

    // load_f32 gives the stored values.
    const auto w = ck.load_f32("shared.weight", {512, 64});
    CHECK(w.shape() == shape_t{512, 64});
    CHECK(std::memcmp(w.data(), shared.bytes, 512 * 64 * 4) == 0);
    const auto C = ck.load_f32("encoder.block.1.layer.0.ssm_layer.kernel.C", {2, 64, 8, 2});
    CHECK(std::memcmp(C.data(), ck.record("encoder.block.1.layer.0.ssm_layer.kernel.C").bytes, C.numel() * 4) == 0);

    const std::string st = tiny_dir + "/model.safetensors";
    check_error(
        [&] {
            ck.load_f32("shared.weight", {64, 512});
        },
        "checkpoint.shape_mismatch", st + ": tensor 'shared.weight' has shape (512, 64), expected (64, 512)");
    check_error([&] { ck.record("encoder.block.2.layer.0.layer_prenorm.weight"); }, "checkpoint.missing_tensor",
                st + ": no tensor 'encoder.block.2.layer.0.layer_prenorm.weight'");
    check_error([&] { ck.load_f32("nope", {1}); }, "checkpoint.missing_tensor", st + ": no tensor 'nope'");
    CHECK_FALSE(ck.has("nope"));
}

TEST_CASE("checkpoint: tie_word_embeddings true resolves lm_head to the embedding") {
    const auto ck = io::checkpoint::open(tiny_dir, tiny_dir + "/config_tied.json");
    CHECK(test::config_of(ck).tie_word_embeddings);
    const tensor_record& shared = ck.record("shared.weight");
    CHECK(&ck.record("lm_head.weight") == &shared);
    CHECK(ck.record("lm_head.weight").bytes == shared.bytes);
    const auto v = test::validate(ck);
    CHECK(v.ok());
    CHECK(v.unexpected.empty());
    REQUIRE(v.warnings.size() == 1);
    CHECK(v.warnings[0] == "lm_head.weight differs from shared.weight and is ignored because tie_word_embeddings is true");
    CHECK(test::expected_tensors(ck).size() == 2 * 17 + (15 + 14) + 3);  // no lm_head.weight

    // Only one embedding stored, under a non-canonical name, and no lm_head: all four resolve to it.
    const std::string dir = st_scratch("tied_one");
    const auto src = safetensors_file::open(tiny_dir + "/model.safetensors");
    safetensors_writer w;
    for (const auto& r : src.records()) {
        if (r.name == "shared.weight" || r.name == "encoder.embed_tokens.weight" || r.name == "lm_head.weight") continue;
        w.add(r.name, r.type, r.shape, std::span(r.bytes, r.nbytes));
    }
    w.write(dir + "/model.safetensors");
    copy_file(tiny_dir + "/config_tied.json", dir + "/config.json");
    const auto one = io::checkpoint::open(dir);
    const tensor_record& dec = one.record("decoder.embed_tokens.weight");
    for (const char* n : {"shared.weight", "encoder.embed_tokens.weight", "lm_head.weight"}) CHECK(&one.record(n) == &dec);
    const auto vo = test::validate(one);
    CHECK(vo.ok());
    CHECK(vo.unexpected.empty());
    CHECK(vo.warnings.empty());
}

TEST_CASE("checkpoint: F16 and BF16 checkpoints widen exactly") {
    const auto ref = io::checkpoint::open(tiny_dir);
    for (const dtype t : {dtype::f16, dtype::bf16}) {
        CAPTURE(safetensors_name(t));
        const std::string dir = st_scratch(std::string("narrow_") + std::string(safetensors_name(t)));
        write_tiny_as(dir, t);
        const auto ck = io::checkpoint::open(dir);
        CHECK(test::validate(ck).ok());
        CHECK(test::validate(ck).warnings.empty());
        CHECK(&ck.record("decoder.embed_tokens.weight") == &ck.record("shared.weight"));
        std::size_t checked = 0;
        for (const auto& p : test::expected_parameters(ck)) {
            CAPTURE(p.name);
            CHECK(ck.record(p.name).type == t);
            const auto got = ck.load_f32(p.name, p.shape);
            const auto orig = ref.load_f32(p.name, p.shape);
            for (index_t i = 0; i < got.numel(); ++i) {
                const float want = t == dtype::f16 ? f16_to_float(float_to_f16(orig[i])) : bf16_to_float(float_to_bf16(orig[i]));
                if (got[i] != want) {
                    CHECK(got[i] == want);
                    break;
                }
                ++checked;
            }
        }
        // Every parameter element: the file's floats less the two stored embedding copies.
        CHECK(checked == (1316864 - 2 * 512 * 64 * 4) / 4);
    }
}

TEST_CASE("checkpoint: sharded safetensors load like the single file") {
    const std::string dir = st_scratch("sharded");
    const auto src = safetensors_file::open(tiny_dir + "/model.safetensors");
    safetensors_writer a, b;
    io::json weight_map = io::json::object();
    for (const auto& r : src.records()) {
        const bool first = r.name.starts_with("decoder.");
        (first ? a : b).add(r.name, r.type, r.shape, std::span(r.bytes, r.nbytes));
        weight_map[r.name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    a.write(dir + "/model-00001-of-00002.safetensors");
    b.write(dir + "/model-00002-of-00002.safetensors");
    std::ofstream(dir + "/model.safetensors.index.json")
        << io::json{{"metadata", {{"total_size", 1316864}}}, {"weight_map", weight_map}}.dump(1);
    copy_file(tiny_dir + "/config.json", dir + "/config.json");

    const auto records = io::read_sharded_safetensors(dir + "/model.safetensors.index.json");
    CHECK(records.size() == src.records().size());
    const auto ck = io::checkpoint::open(dir);
    CHECK(ck.weights_path() == dir + "/model.safetensors.index.json");
    CHECK(test::validate(ck).ok());
    CHECK(test::validate(ck).unexpected.empty());
    CHECK(&ck.record("encoder.embed_tokens.weight") == &ck.record("shared.weight"));
    // Records say which shard holds them.
    CHECK(ck.record("decoder.final_layer_norm.weight").source == dir + "/model-00001-of-00002.safetensors");
    CHECK(ck.record("encoder.final_layer_norm.weight").source == dir + "/model-00002-of-00002.safetensors");
    for (const auto& r : src.records()) {
        CAPTURE(r.name);
        const tensor_record& s = ck.record(r.name);
        CHECK(s.shape == r.shape);
        CHECK(std::memcmp(s.bytes, r.bytes, r.nbytes) == 0);
    }
    const std::string dec_shard = dir + "/model-00001-of-00002.safetensors";
    check_error([&] { ck.load_f32("decoder.final_layer_norm.weight", {65}); }, "checkpoint.shape_mismatch",
                dec_shard + ": tensor 'decoder.final_layer_norm.weight' has shape (64,), expected (65,)");
    check_error([&] { ck.record("x"); }, "checkpoint.missing_tensor", dir + "/model.safetensors.index.json: no tensor 'x'");
}

TEST_CASE("checkpoint: broken directories fail with their exact error") {
    const std::string cfg = tiny_dir + "/config.json";
    const auto src = safetensors_file::open(tiny_dir + "/model.safetensors");
    // Writes the tiny checkpoint to a scratch dir, letting `edit` change tensors on the way.
    auto make = [&](const std::string& name, const std::function<bool(const tensor_record&, safetensors_writer&)>& edit) {
        const std::string dir = st_scratch(name);
        safetensors_writer w;
        for (const auto& r : src.records())
            if (!edit(r, w)) w.add(r.name, r.type, r.shape, std::span(r.bytes, r.nbytes));
        w.write(dir + "/model.safetensors");
        copy_file(cfg, dir + "/config.json");
        return dir;
    };

    const std::string not_dir = tiny_dir + "/config.json";
    check_error([&] { io::checkpoint::open(not_dir); }, "checkpoint.not_a_directory", not_dir + ": not a directory");

    const std::string no_config = st_scratch("no_config");
    check_error([&] { io::checkpoint::open(no_config); }, "checkpoint.missing_config", no_config + ": no config.json");

    const std::string no_weights = st_scratch("no_weights");
    copy_file(cfg, no_weights + "/config.json");
    check_error([&] { io::checkpoint::open(no_weights); }, "checkpoint.no_weights",
                no_weights + ": no weights (expected model.safetensors, model.safetensors.index.json or pytorch_model.bin)");

    const std::string int8 = make("int8", [](const tensor_record& r, safetensors_writer& w) {
        if (r.name != "decoder.final_layer_norm.weight") return false;
        std::vector<std::byte> q(64);
        w.add(r.name, dtype::i8, {64}, q);
        return true;
    });
    {
        // Opens (a stored tensor the model does not read may be anything), but is not valid.
        const auto ck = io::checkpoint::open(int8);
        const auto v = test::validate(ck);
        CHECK_FALSE(v.ok());
        CHECK(v.wrong_dtype == std::vector<std::string>{"decoder.final_layer_norm.weight: I8 (expected F32, F16 or BF16)"});
        CHECK(v.missing.empty());
        CHECK(v.wrong_shape.empty());
        check_error(
            [&] { ck.load_f32("decoder.final_layer_norm.weight", {64}); }, "checkpoint.unsupported_dtype",
            int8 + "/model.safetensors: unsupported dtype I8 for tensor 'decoder.final_layer_norm.weight' (expected F32, F16 or BF16)");
        check_error(
            [&] { test::require_valid(ck); }, "checkpoint.invalid",
            int8 +
                ": the weights do not match config.json (wrong dtypes: decoder.final_layer_norm.weight: I8 (expected F32, F16 or BF16))");
    }

    const std::string f64 = make("f64", [](const tensor_record& r, safetensors_writer& w) {
        if (r.name != "encoder.final_layer_norm.weight") return false;
        std::vector<std::byte> q(64 * 8);
        w.add(r.name, dtype::f64, {64}, q);
        return true;
    });
    check_error([&] { io::checkpoint::open(f64).load_f32("encoder.final_layer_norm.weight", {64}); }, "checkpoint.unsupported_dtype",
                f64 + "/model.safetensors: unsupported dtype F64 for tensor 'encoder.final_layer_norm.weight' (expected F32, F16 or BF16)");
    {
        // Integer tensors the model does not read are only "unexpected".
        const std::string extra = make("int_extra", [](const tensor_record& r, safetensors_writer& w) {
            if (r.name == "shared.weight") {
                const std::int64_t pos[] = {0, 1, 2};
                w.add_i64("encoder.position_ids", {3}, pos);
            }
            return false;
        });
        const auto v = test::validate(io::checkpoint::open(extra));
        CHECK(v.ok());
        CHECK(v.unexpected == std::vector<std::string>{"encoder.position_ids"});
    }

    const std::string mismatch = make("tied_mismatch", [](const tensor_record& r, safetensors_writer& w) {
        if (r.name != "decoder.embed_tokens.weight") return false;
        std::vector<std::byte> copy(r.bytes, r.bytes + r.nbytes);
        copy[100] ^= std::byte{1};
        w.add(r.name, r.type, r.shape, copy);
        return true;
    });
    check_error(
        [&] { io::checkpoint::open(mismatch); }, "checkpoint.tied_mismatch",
        mismatch +
            "/model.safetensors: tied tensors 'shared.weight' and 'decoder.embed_tokens.weight' differ (they are one embedding and must be identical)");

    // Missing and misshapen tensors: open succeeds, validate() reports, require_valid() throws.
    const std::string incomplete = make("incomplete", [](const tensor_record& r, safetensors_writer& w) {
        if (r.name == "decoder.block.1.layer.2.layer_norm.weight" || r.name == "encoder.block.0.layer.0.ssm_layer.D") return true;
        if (r.name == "encoder.block.1.layer.0.ssm_layer.kernel.B") {
            w.add(r.name, r.type, {64, 16}, std::span(r.bytes, r.nbytes));
            return true;
        }
        if (r.name == "decoder.final_layer_norm.weight") w.add("extra.weight", r.type, r.shape, std::span(r.bytes, r.nbytes));
        return false;
    });
    const auto ck = io::checkpoint::open(incomplete);
    const auto v = test::validate(ck);
    CHECK_FALSE(v.ok());
    CHECK(v.missing == std::vector<std::string>{"encoder.block.0.layer.0.ssm_layer.D", "decoder.block.1.layer.2.layer_norm.weight"});
    CHECK(v.wrong_dtype.empty());
    CHECK(v.wrong_shape == std::vector<std::string>{"encoder.block.1.layer.0.ssm_layer.kernel.B: found (64, 16), expected (64, 8, 2)"});
    CHECK(v.unexpected == std::vector<std::string>{"extra.weight"});
    check_error([&] { test::require_valid(ck); }, "checkpoint.invalid",
                incomplete +
                    ": the weights do not match config.json (missing tensors: encoder.block.0.layer.0.ssm_layer.D, "
                    "decoder.block.1.layer.2.layer_norm.weight; wrong shapes: encoder.block.1.layer.0.ssm_layer.kernel.B: "
                    "found (64, 16), expected (64, 8, 2))");

    // A broken config.json surfaces the config error.
    const std::string bad_cfg = st_scratch("bad_config");
    std::ofstream(bad_cfg + "/config.json") << R"({"model_type": "locost", "d_model": 64})";
    check_error([&] { models::load_config(bad_cfg + "/config.json"); }, "config.missing_field",
                bad_cfg + "/config.json: missing required field 'vocab_size' (expected an integer)");
}

TEST_CASE("checkpoint: T5 and LongT5 parameter lists") {
    const auto c = models::parse_config_text(
        R"({"model_type": "longt5", "vocab_size": 100, "d_model": 8, "d_kv": 2, "d_ff": 16, "num_layers": 2,
            "num_decoder_layers": 1, "num_heads": 3, "encoder_attention_type": "transient-global",
            "feed_forward_proj": "gated-gelu"})",
        "cfg");
    const auto p = models::expected_parameters(*c);
    auto has = [&](const std::string& n, shape_t s) {
        for (const auto& q : p)
            if (q.name == n) return q.shape == s;
        return false;
    };
    CHECK(has("encoder.block.0.layer.0.TransientGlobalSelfAttention.q.weight", {6, 8}));
    CHECK(has("encoder.block.0.layer.0.TransientGlobalSelfAttention.o.weight", {8, 6}));
    CHECK(has("encoder.block.0.layer.0.TransientGlobalSelfAttention.relative_attention_bias.weight", {32, 3}));
    CHECK(has("encoder.block.0.layer.0.TransientGlobalSelfAttention.global_relative_attention_bias.weight", {32, 3}));
    CHECK(has("encoder.block.1.layer.0.TransientGlobalSelfAttention.global_input_layer_norm.weight", {8}));
    CHECK(has("encoder.block.1.layer.1.DenseReluDense.wi_1.weight", {16, 8}));
    CHECK(has("decoder.block.0.layer.1.EncDecAttention.k.weight", {6, 8}));
    CHECK(has("shared.weight", {100, 8}));
    CHECK(!has("encoder.block.1.layer.0.TransientGlobalSelfAttention.relative_attention_bias.weight", {32, 3}));
    CHECK(!has("lm_head.weight", {100, 8}));
    // Encoder block 0: q k v o, two relative biases, global and local norm, 4 feed-forward (12);
    // block 1: the same without the biases (10); decoder block 0 (15); shared + 2 final norms.
    CHECK(p.size() == (12 + 10) + 15 + 3);

    const auto t = models::parse_config_text(R"({"model_type": "t5", "vocab_size": 100, "d_model": 8, "d_kv": 2, "d_ff": 16,
                                   "num_layers": 1, "num_heads": 4, "tie_word_embeddings": false})",
                                             "cfg");
    const auto q = models::expected_parameters(*t);
    CHECK(q.size() == 9 + 14 + 4);
    bool wi = false, lm = false;
    for (const auto& s : q) {
        wi |= s.name == "encoder.block.0.layer.1.DenseReluDense.wi.weight" && s.shape == shape_t{16, 8};
        lm |= s.name == "lm_head.weight";
    }
    CHECK(wi);
    CHECK(lm);
}
