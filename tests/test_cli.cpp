// The locost tool, run as a user runs it: exit codes, exact error lines, outputs checked
// against the references.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <locost/locost.hpp>
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
    for (const char* c : {"inspect", "demo-checkpoint", "encode"}) {
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
    const auto emb = ck.load_f32("shared.weight", {512, 64});
    double sum2 = 0;
    for (index_t i = 0; i < emb.numel(); ++i) sum2 += double(emb[i]) * emb[i];
    CHECK(std::sqrt(sum2 / double(emb.numel())) == doctest::Approx(1.0).epsilon(0.05));  // N(0, 1)
}
