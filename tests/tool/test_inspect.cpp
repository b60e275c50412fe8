// locost inspect (tools/locost/cmd_inspect.hpp): a checkpoint's report and what is wrong with it;
// inspect --system and the float32 GEMM it names.
#include "tool/cli.hpp"

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
    CHECK(r.err ==
          "locost: [locost.checkpoint.invalid] " + bad.string() +
              ": the checkpoint does not match its config (17 missing, 0 wrong shape, 0 wrong dtype)\n");
}

// issue 31: which library multiplies float32 matrices is visible (inspect --system, the closing
// line), chosen by the CPU's ISA, overridable, and a wrong override is an error.
TEST_CASE("cli: inspect --system names the float32 GEMM, its kernel and why; runs name it; LOCOST_GEMM overrides") {
    const auto in_process = locost::float32_gemm();  // resolved before this test touches LOCOST_GEMM
    const char* saved = std::getenv("LOCOST_GEMM");
    const std::string saved_value = saved ? saved : "";
    unsetenv("LOCOST_GEMM");
    auto r = run_tool("inspect --system --threads 1");
    REQUIRE(r.rc == 0);
    const auto expected = locost::choose_gemm(locost::machine_isa(), locost::gemm_candidates(), "");
    CHECK(r.out.find("widest ISA   " + std::string(locost::isa_name(locost::machine_isa())) + "\n") != std::string::npos);
    CHECK(r.out.find("float32 GEMM " + expected.describe() + ": " + expected.reason + "\n") != std::string::npos);
    CHECK(r.out.find("  <- in force\n") != std::string::npos);
    CHECK(r.out.find("FMA peak") != std::string::npos);

    r = run_tool("inspect --system --threads 1 --json");
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["float32_gemm"]["provider"] == locost::provider_name(expected.provider));
    CHECK(j["float32_gemm"]["reason"] == expected.reason);
    CHECK(j["threads"] == 1);
    CHECK(j["fma_peak_gflops"].get<double>() > 0);
    const auto candidates = locost::gemm_candidates();
    REQUIRE(j["providers"].size() == candidates.size());
    int in_force = 0;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        CHECK(j["providers"][i]["provider"] == locost::provider_name(candidates[i].provider));
        CHECK(j["providers"][i]["kernel"] == candidates[i].kernel);
        CHECK(j["providers"][i]["gflops"].get<double>() > 0);
        in_force += j["providers"][i]["in_force"].get<bool>() ? 1 : 0;
    }
    CHECK(in_force == 1);

    // a run's closing line names the provider it ran on
    const auto ref = locost::io::safetensors_file::open(data + "/reference/locost_decoder.safetensors");
    const std::string enc = json_file("gemm-enc", ints_of(ref, "greedy.enc_input_ids"));
    const std::string demo = tiny;
    r = run_tool("generate --model " + demo + " --ids " + enc + " --max-new-tokens 16 --threads 1");
    REQUIRE(r.rc == 0);
    CHECK(r.err.find("; float32 GEMM " + expected.describe() + "; kernels " + std::string(locost::isa_level_name(locost::kernels_isa())) +
                     "\n") != std::string::npos);

    // LOCOST_GEMM names one of this build's providers; each gives the same ids
    const std::string greedy = r.out;
    for (const auto& c : candidates) {
        setenv("LOCOST_GEMM", locost::provider_name(c.provider), 1);
        r = run_tool("inspect --system --threads 1 --json");
        REQUIRE(r.rc == 0);
        const auto jc = nlohmann::json::parse(r.out);
        CHECK(jc["float32_gemm"]["provider"] == locost::provider_name(c.provider));
        CHECK(jc["float32_gemm"]["reason"] == std::string("LOCOST_GEMM=") + locost::provider_name(c.provider));
        r = run_tool("generate --model " + demo + " --ids " + enc + " --max-new-tokens 16 --threads 1");
        REQUIRE(r.rc == 0);
        CHECK(r.out == greedy);
    }
    setenv("LOCOST_GEMM", "mkl", 1);
    r = run_tool("inspect --system");
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.gemm.unknown_provider] LOCOST_GEMM=mkl: expected auto, openblas, onednn or eigen\n");
    r = run_tool("generate --model " + demo + " --ids " + enc + " --max-new-tokens 16");
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.gemm.unknown_provider] LOCOST_GEMM=mkl: expected auto, openblas, onednn or eigen\n");
    if (saved) setenv("LOCOST_GEMM", saved_value.c_str(), 1);
    else unsetenv("LOCOST_GEMM");

    r = run_tool("inspect --system --model " + demo);
    CHECK(r.rc == 2);
    CHECK(
        r.err ==
        "locost: [locost.cli.bad_value] inspect: option '--model' does not go with --system (which shows the machine, not a checkpoint)\n");
    r = run_tool("inspect --model " + demo + " --threads 2");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] inspect: option '--threads' goes with --system only\n");
    (void)in_process;
}
