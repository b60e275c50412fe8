// The locost tool, run as a user runs it: exit codes, exact error lines, outputs checked
// against the references.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <locost/locost.hpp>

#include "helpers.hpp"
#include <sstream>
#include <string>

namespace fs = std::filesystem;

namespace {

struct run_result {
    int rc;
    std::string out, err;
};

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

run_result run_tool(const std::string& arguments) {
    const fs::path dir = fs::path(LOCOST_TEST_TMP) / "cli";
    fs::create_directories(dir);
    const std::string cmd = std::string(LOCOST_TOOL) + " " + arguments + " >" + (dir / "out").string() + " 2>" + (dir / "err").string();
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / "out"), slurp(dir / "err")};
}

const std::string data = LOCOST_TEST_DATA;
const std::string tiny = data + "/reference/tiny_locost";

using locost::index_t;

} // namespace

TEST_CASE("cli: help, version and misuse") {
    auto r = run_tool("--help");
    CHECK(r.rc == 0);
    CHECK(r.out.find("demo-checkpoint") != std::string::npos);
    CHECK(run_tool("--version").out == "locost " LOCOST_VERSION_STRING "\n");
    for (const char* c : {"inspect", "demo-checkpoint", "encode", "score", "generate", "summarize"}) {
        r = run_tool(std::string(c) + " --help");
        CHECK(r.rc == 0);
        CHECK(r.out.rfind(std::string("usage: locost ") + c, 0) == 0);
    }
    r = run_tool("frobnicate");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.unknown_command] unknown command 'frobnicate' (see 'locost --help')\n");
    r = run_tool("inspect --modle x");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.unknown_option] inspect: unknown option '--modle' (see 'locost inspect --help')\n");
    r = run_tool("inspect");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.missing_option] inspect: option '--model' is required (see 'locost inspect --help')\n");
    r = run_tool("encode --model " + tiny + " --ids x.json --out o.safetensors --threads many");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] encode: option '--threads' expects an integer in [0, 1024], got 'many'\n");
    r = run_tool("demo-checkpoint --config huge --out x");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] demo-checkpoint: option '--config' expects 'base' or 'tiny', got 'huge'\n");
}

TEST_CASE("cli: inspect the tiny reference checkpoint") {
    auto r = run_tool("inspect --model " + tiny);
    CHECK(r.rc == 0);
    CHECK(r.out.find("validation   OK") != std::string::npos);
    CHECK(r.out.find("encoder.block.1.layer.0.ssm_layer.kernel.C") != std::string::npos);
    r = run_tool("inspect --json --model " + tiny);
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["model_type"] == "locost");
    CHECK(j["config"]["d_model"] == 64);
    CHECK(j["validation"]["ok"] == true);
    CHECK(j["parameter_count"].get<long long>() > 0);
}

TEST_CASE("cli: inspect reports what is wrong") {
    auto r = run_tool("inspect --model " + data + "/does-not-exist");
    CHECK(r.rc == 1);
    CHECK(r.err.rfind("locost: [locost.", 0) == 0);
    CHECK(r.err.find(data + "/does-not-exist") != std::string::npos);

    // A checkpoint whose config asks for 3 layers while the weights have 2: invalid, exit 1.
    const fs::path bad = fs::path(LOCOST_TEST_TMP) / "cli-three-layers";
    fs::create_directories(bad);
    fs::copy_file(tiny + "/model.safetensors", bad / "model.safetensors", fs::copy_options::overwrite_existing);
    auto cfg = nlohmann::json::parse(slurp(tiny + "/config.json"));
    cfg["num_layers"] = 3;
    std::ofstream(bad / "config.json") << cfg.dump();
    r = run_tool("inspect --model " + bad.string());
    CHECK(r.rc == 1);
    CHECK(r.out.find("missing: encoder.block.2.layer.0.layer_prenorm.weight") != std::string::npos);
    CHECK(r.err == "locost: [locost.checkpoint.invalid] " + bad.string() +
                       ": the checkpoint does not match its config (17 missing, 0 wrong shape, 0 wrong dtype)\n");
}

TEST_CASE("cli: demo-checkpoint is seeded, labelled untrained, and loads") {
    const fs::path a = fs::path(LOCOST_TEST_TMP) / "demo-a", b = fs::path(LOCOST_TEST_TMP) / "demo-b",
                   c = fs::path(LOCOST_TEST_TMP) / "demo-c";
    REQUIRE(run_tool("demo-checkpoint --config tiny --seed 7 --out " + a.string()).rc == 0);
    REQUIRE(run_tool("demo-checkpoint --config tiny --seed 7 --out " + b.string()).rc == 0);
    REQUIRE(run_tool("demo-checkpoint --config tiny --seed 8 --out " + c.string()).rc == 0);
    CHECK(slurp(a / "model.safetensors") == slurp(b / "model.safetensors"));
    CHECK(slurp(a / "model.safetensors") != slurp(c / "model.safetensors"));
    CHECK(slurp(a / "README.md").find("UNTRAINED") != std::string::npos);
    CHECK(slurp(a / "config.json").find("UNTRAINED") != std::string::npos);
    CHECK(fs::file_size(a / "spiece.model") > 0);
    CHECK(run_tool("inspect --model " + a.string()).rc == 0);

    // The initialisation follows the original: RMSNorm weights 1, S4D A = -0.5 + i·pi·n, B = 1.
    const auto ck = locost::io::checkpoint::open(a.string());
    const auto norm = ck.load_f32("encoder.final_layer_norm.weight", {64});
    CHECK(norm[0] == 1.0f);
    const auto a_imag = ck.load_f32("encoder.block.0.layer.0.ssm_layer.kernel.A_imag", {64, 8});
    CHECK(a_imag[3] == doctest::Approx(3 * 3.14159265).epsilon(1e-6));
    const auto emb = ck.load_f32("shared.weight", {16000, 64});
    double sum2 = 0;
    for (index_t i = 0; i < emb.numel(); ++i) sum2 += double(emb[i]) * emb[i];
    CHECK(std::sqrt(sum2 / double(emb.numel())) == doctest::Approx(1.0).epsilon(0.05));  // N(0, 1)
}

namespace {

// Writes `j` as a JSON file under the test scratch folder and returns its path.
std::string json_file(const std::string& name, const nlohmann::json& j) {
    const fs::path p = fs::path(LOCOST_TEST_TMP) / ("cli-" + name + ".json");
    std::ofstream(p) << j.dump();
    return p.string();
}

std::vector<std::int64_t> ints_of(const locost::io::safetensors_file& f, const std::string& name) {
    const auto* r = f.find(name);
    REQUIRE(r);
    std::vector<std::int64_t> v(static_cast<std::size_t>(r->shape.numel()));
    std::memcpy(v.data(), r->bytes, v.size() * 8);
    return v;
}
std::vector<float> floats_of(const locost::io::safetensors_file& f, const std::string& name) {
    const auto* r = f.find(name);
    REQUIRE(r);
    std::vector<float> v(static_cast<std::size_t>(r->shape.numel()));
    std::memcpy(v.data(), r->bytes, v.size() * 4);
    return v;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b, const std::vector<bool>& keep = {}) {
    double d = 0, s = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        if (!keep.empty() && !keep[i]) continue;
        d = std::max(d, std::abs(double(a[i]) - b[i]));
        s = std::max(s, std::abs(double(b[i])));
    }
    return d / s;
}

} // namespace

TEST_CASE("cli: encode equals the original's states (single row, padded batch)") {
    const auto ref = locost::io::safetensors_file::open(data + "/reference/locost_encoder.safetensors");
    const auto ids = ints_of(ref, "enc.L1000.input_ids");
    const std::string out = std::string(LOCOST_TEST_TMP) + "/cli-enc.safetensors";
    auto r = run_tool("encode --model " + tiny + " --ids " + json_file("ids1000", ids) + " --out " + out + " --threads 2");
    REQUIRE(r.rc == 0);
    CHECK(r.err.find("encoded 1 x 1000 tokens") != std::string::npos);
    const auto got = locost::io::safetensors_file::open(out);
    CHECK(got.find("last_hidden_state")->shape == locost::shape_t{1, 1000, 64});
    CHECK(max_rel(floats_of(got, "last_hidden_state"), floats_of(ref, "enc.L1000.last_hidden_state")) < 1e-4);

    // The padded batch as an array of rows of different lengths.
    const auto pids = ints_of(ref, "enc.padded.input_ids"), pmask = ints_of(ref, "enc.padded.attention_mask");
    nlohmann::json rows = nlohmann::json::array();
    std::vector<bool> keep;
    for (int b = 0; b < 2; ++b) {
        std::vector<std::int64_t> row;
        for (int l = 0; l < 100; ++l)
            if (pmask[b * 100 + l]) row.push_back(pids[b * 100 + l]);
        rows.push_back(row);
        for (int l = 0; l < 100; ++l)
            for (int h = 0; h < 64; ++h) keep.push_back(pmask[b * 100 + l] != 0);
    }
    r = run_tool("encode --model " + tiny + " --ids " + json_file("padded", rows) + " --out " + out);
    REQUIRE(r.rc == 0);
    const auto got2 = locost::io::safetensors_file::open(out);
    CHECK(max_rel(floats_of(got2, "last_hidden_state"), floats_of(ref, "enc.padded.last_hidden_state"), keep) < 1e-4);

    r = run_tool("encode --model " + tiny + " --ids " + json_file("oov", std::vector<int>{3, 512}) + " --out " + out);
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.ids.out_of_vocab] " + json_file("oov", std::vector<int>{3, 512}) +
                       ": token id 512 at [1] is not below the vocabulary size 512\n");
}

TEST_CASE("cli: score writes the original's teacher-forced logits") {
    const auto ref = locost::io::safetensors_file::open(data + "/reference/locost_decoder.safetensors");
    const std::string out = std::string(LOCOST_TEST_TMP) + "/cli-score.safetensors";
    const auto enc = json_file("score-enc", ints_of(ref, "dec.enc_input_ids")), dec = json_file("score-dec", ints_of(ref, "dec.decoder_input_ids"));
    auto r = run_tool("score --model " + tiny + " --ids " + enc + " --decoder-ids " + dec + " --out " + out);
    REQUIRE(r.rc == 0);
    const auto got = locost::io::safetensors_file::open(out);
    CHECK(got.find("logits")->shape == locost::shape_t{1, 12, 512});
    CHECK(max_rel(floats_of(got, "logits"), floats_of(ref, "dec.logits")) < 1e-4);

    const auto ragged = json_file("ragged", nlohmann::json::parse("[[0, 5, 6], [0, 7]]"));
    r = run_tool("score --model " + tiny + " --ids " + enc + " --decoder-ids " + ragged + " --out " + out);
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] score: " + ragged + ": row 1 has 2 decoder ids, row 0 has 3 (rows must have equal lengths)\n");
    const auto two = json_file("two", nlohmann::json::parse("[[0, 5], [0, 7]]"));
    r = run_tool("score --model " + tiny + " --ids " + enc + " --decoder-ids " + two + " --out " + out);
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] score: " + two + " has 2 rows of decoder ids for 1 rows of --ids\n");
}

TEST_CASE("cli: generate prints the original's greedy ids, beams, a batch, and --out") {
    const auto ref = locost::io::safetensors_file::open(data + "/reference/locost_decoder.safetensors");
    const auto ids = ints_of(ref, "greedy.enc_input_ids");
    const auto enc = json_file("gen-enc", ids);
    auto r = run_tool("generate --model " + tiny + " --ids " + enc + " --max-new-tokens 16");
    REQUIRE(r.rc == 0);
    CHECK(r.out == nlohmann::json(ints_of(ref, "greedy.sequence")).dump() + "\n");

    const std::string out = std::string(LOCOST_TEST_TMP) + "/cli-gen.json";
    r = run_tool("generate --model " + tiny + " --ids " + json_file("gen-batch", nlohmann::json::array({ids, std::vector<std::int64_t>(ids.begin(), ids.begin() + 30)})) +
                 " --max-new-tokens 6 --num-beams 3 --num-return-sequences 2 --length-penalty 0.5 --early-stopping never --out " + out);
    REQUIRE(r.rc == 0);
    std::vector<std::string> lines;
    std::stringstream ss(r.out);
    for (std::string l; std::getline(ss, l);) lines.push_back(l);
    CHECK(lines.size() == 4);  // 2 documents × 2 returned sequences
    const auto all = nlohmann::json::parse(slurp(out));
    REQUIRE(all.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(all[i].dump() == lines[i]);
        CHECK(all[i][0] == 0);
    }
    // Sampling is seeded: the same seed gives the same ids, another seed other ids.
    const std::string s1 = run_tool("generate --model " + tiny + " --ids " + enc + " --do-sample --seed 3 --max-new-tokens 12").out;
    CHECK(s1 == run_tool("generate --model " + tiny + " --ids " + enc + " --do-sample --seed 3 --max-new-tokens 12").out);
    CHECK(s1 != run_tool("generate --model " + tiny + " --ids " + enc + " --do-sample --seed 4 --max-new-tokens 12").out);
    // top-k 1 sampling is greedy.
    CHECK(run_tool("generate --model " + tiny + " --ids " + enc + " --do-sample --top-k 1 --max-new-tokens 16").out ==
          nlohmann::json(ints_of(ref, "greedy.sequence")).dump() + "\n");

    r = run_tool("generate --model " + tiny + " --ids " + enc + " --num-beams 2 --num-return-sequences 3");
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.generate.invalid_option] generation option 'num_return_sequences' is 3, at most num_beams (2) without sampling\n");
    r = run_tool("generate --model " + tiny + " --ids " + enc + " --early-stopping maybe");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] generate: option '--early-stopping' expects true, false or never, got 'maybe'\n");
    r = run_tool("generate --model " + tiny + " --ids " + enc + " --bad-words-ids 7");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] generate: option '--bad-words-ids' expects a JSON list of lists of ids like [[5],[7,8]], got '7'\n");
}

TEST_CASE("cli: summarize a text with a demo checkpoint (UNTRAINED weights: the text is not a summary)") {
    const fs::path demo = fs::path(LOCOST_TEST_TMP) / "demo-tiny-text";
    REQUIRE(run_tool("demo-checkpoint --config tiny --seed 1 --out " + demo.string()).rc == 0);
    const fs::path text = fs::path(LOCOST_TEST_TMP) / "chapter.txt";
    std::ofstream(text) << slurp(fs::path(data).parent_path().parent_path() / "examples/data/pride_and_prejudice.txt").substr(0, 20000);
    auto r = run_tool("summarize --model " + demo.string() + " --input " + text.string() + " --max-new-tokens 12 --progress");
    REQUIRE(r.rc == 0);
    CHECK(!r.out.empty());
    CHECK(r.err.find("summarize: 100.0%") != std::string::npos);
    CHECK(r.err.find(" input tokens; encode ") != std::string::npos);
    CHECK(r.err.find("ms/token; peak memory ") != std::string::npos);
    r = run_tool("summarize --model " + demo.string() + " --input " + text.string() + " --cross-cache int16");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] summarize: option '--cross-cache' expects auto, float32, bfloat16 or int8, got 'int16'\n");
}

TEST_CASE("tokenizer: ids beyond the pieces are the model's extra ids, skipped; beyond the model's vocabulary an error") {
    const std::string spm = (fs::path(data).parent_path().parent_path() / "examples/data/books-16k.model").string();
    const locost::text::tokenizer tok(spm);
    REQUIRE(tok.vocab_size() == 16000);
    const std::vector<int> words = tok.encode("It is a truth universally acknowledged.", false);
    std::vector<int> with_extra = words;
    with_extra.insert(with_extra.begin() + 2, 16005);
    with_extra.push_back(32099);
    with_extra.push_back(1);
    int extra = -1;
    CHECK(tok.decode(with_extra, 32100, &extra) == tok.decode(words));
    CHECK(extra == 2);
    CHECK(tok.decode(words) == "It is a truth universally acknowledged.");
    test::check_error([&] { (void)tok.decode(with_extra); }, "tokenizer.bad_id", spm + ": token id 16005 is outside the vocabulary [0, 16000)");
    test::check_error([&] { (void)tok.decode({5, 32100}, 32100); }, "tokenizer.bad_id", spm + ": token id 32100 is outside the vocabulary [0, 32100)");
}
