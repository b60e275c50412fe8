// The locost tool, run as a user runs it (tests/tool/cli.hpp): help, version and misuse of any
// command (tools/locost/main.cpp, args.hpp), --device, and every option name the tool took before
// the option table (options/table.hpp) still parsing.
#include "tool/cli.hpp"

TEST_CASE("cli: help, version and misuse") {
    auto r = run_tool("--help");
    CHECK(r.rc == 0);
    CHECK(r.out.find("demo-checkpoint") != std::string::npos);
    CHECK(run_tool("--version").out == "locost " LOCOST_VERSION_STRING "\n");
    for (const char* c : {"inspect", "demo-checkpoint", "encode", "score", "generate", "summarize", "chunks", "serve"}) {
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

// --device: cpu runs, a wrong value is misuse, cuda ends in a clear error on this machine. Which
// one depends on the build (LOCOST_TOOL_CUDA) and, with CUDA, on whether a GPU is visible: with one,
// inspect lists it and the model commands name it and go on (here to a missing input; the GPU runs
// themselves are tests/cuda/test_cuda.cpp's, label "gpu").
TEST_CASE("cli: --device cpu, cuda and misuse") {
    auto r = run_tool("encode --model " + tiny + " --ids x.json --out o.safetensors --device tpu");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] encode: option '--device' expects cpu or cuda, got 'tpu'\n");
    for (const char* cmd :
         {"encode --out o.safetensors", "score --decoder-ids d.json --out o.safetensors", "generate", "summarize --input x.txt"}) {
        CAPTURE(cmd);
        const std::string c = cmd, name = c.substr(0, c.find(' '));
        const std::string input = name == "summarize" ? "" : " --ids x.json";
        r = run_tool(c + " --model " + tiny + input + " --device cuda");
        CHECK(r.rc == 1);
        if (!LOCOST_TOOL_CUDA) {
            CHECK(r.err ==
                  "locost: [locost.device.no_cuda_build] --device cuda: this locost was built without the CUDA backend "
                  "(configure with -DLOCOST_CUDA=ON; it needs nvcc)\n");
        } else {
            const bool no_gpu =
                r.err.rfind("locost: [locost.device.no_gpu] --device cuda: no CUDA device is available: cudaGetDeviceCount: ", 0) == 0;
            const bool runs = r.err.rfind(name + ": running on cuda:0 ", 0) == 0;
            CHECK((no_gpu || runs));
        }
    }
    r = run_tool("inspect --device cuda");
    if (!LOCOST_TOOL_CUDA) CHECK(r.err.rfind("locost: [locost.device.no_cuda_build] ", 0) == 0);
    else if (r.rc == 0) CHECK(r.out.rfind("device       cuda:0 ", 0) == 0);
    else CHECK(r.err.rfind("locost: [locost.device.no_gpu] ", 0) == 0);
    // The default, and --device cpu, keep the tool as it was.
    r = run_tool("inspect --model " + tiny + " --device cpu");
    CHECK(r.rc == 0);
    CHECK(r.out.rfind("checkpoint   ", 0) == 0);
}

// The option table (include/locost/options/table.hpp) replaced the tool's hand-written name sets:
// every name generate and summarize took before it still parses, each with a valid value (a
// --dry-run estimates and exits without loading weights).
TEST_CASE("cli: every option name the tool took before the option table still works") {
    const fs::path dir = fs::path(LOCOST_TEST_TMP) / "option_names";
    fs::create_directories(dir);
    { std::ofstream(dir / "g.json") << "{\"num_beams\": 2}"; }
    { std::ofstream(dir / "in.txt") << "A short text to summarize."; }
    { std::ofstream(dir / "ids.json") << "[[5, 6, 7, 8, 1], [9, 10, 1]]"; }
    const std::string demo = (dir / "demo").string();  // UNTRAINED weights: only the options matter here
    REQUIRE(run_tool("demo-checkpoint --config tiny --seed 1 --out " + demo).rc == 0);
    const std::vector<std::pair<std::string, std::string>> names = {// the model's options
                                                                    {"threads", "1"},
                                                                    {"cross-cache", "bfloat16"},
                                                                    {"weights", "int8"},
                                                                    {"compute", "float32"},
                                                                    {"compute", "fp32"},
                                                                    {"compute", "bf16"},
                                                                    {"cross-attention", "folded"},
                                                                    {"conv-mode", "original-cuda"},
                                                                    {"sled-context", "64"},
                                                                    {"global-tokens", "0,3"},
                                                                    {"memory-budget", "64G"},
                                                                    {"device", "cpu"},
                                                                    // generation
                                                                    {"max-new-tokens", "4"},
                                                                    {"max-length", "6"},
                                                                    {"min-new-tokens", "1"},
                                                                    {"min-length", "2"},
                                                                    {"num-beams", "2"},
                                                                    {"length-penalty", "0.5"},
                                                                    {"early-stopping", "true"},
                                                                    {"num-return-sequences", "1"},
                                                                    {"temperature", "0.7"},
                                                                    {"top-k", "5"},
                                                                    {"top-p", "0.9"},
                                                                    {"seed", "3"},
                                                                    {"no-repeat-ngram-size", "2"},
                                                                    {"encoder-no-repeat-ngram-size", "3"},
                                                                    {"repetition-penalty", "1.2"},
                                                                    {"bad-words-ids", "[[5],[7,8]]"},
                                                                    {"forced-bos-token-id", "3"},
                                                                    {"forced-eos-token-id", "1"},
                                                                    {"suppress-tokens", "[5,7]"},
                                                                    {"begin-suppress-tokens", "[9]"},
                                                                    {"decoder-start-token-id", "0"},
                                                                    {"eos-token-id", "1"},
                                                                    {"pad-token-id", "0"},
                                                                    {"beam-convention", "transformers-4.27"},
                                                                    {"generation-config", (dir / "g.json").string()}};
    for (const char* command : {"generate", "summarize"}) {
        const std::string input =
            std::string(command) == "summarize" ? " --input " + (dir / "in.txt").string() : " --ids " + (dir / "ids.json").string();
        for (const auto& [name, value] : names) {
            CAPTURE(command);
            CAPTURE(name);
            const auto r = run_tool(std::string(command) + " --model " + demo + input + " --dry-run --" + name + " '" + value + "'");
            CHECK(r.err == "");
            CHECK(r.rc == 0);
        }
        for (const char* flag : {"do-sample", "dry-run"}) {
            const auto r = run_tool(std::string(command) + " --model " + demo + input + " --dry-run --" + flag);
            CHECK(r.rc == 0);
        }
        // The SLED options with --sled-context; --backbone reaches its check (this checkpoint has weights).
        auto r = run_tool(std::string(command) + " --model " + demo + input +
                          " --dry-run --sled-context 32 --sled-window-fraction 0.5 --prefix-length 1 --no-encode-prefix");
        CHECK(r.rc == 0);
        r = run_tool(std::string(command) + " --model " + demo + input + " --dry-run --backbone " + demo);
        CHECK(r.err.find("[locost.sled.bad_backbone]") != std::string::npos);
    }
    // --task: a name config.json's task_specific_params must have.
    const auto r = run_tool("summarize --model " + demo + " --input " + (dir / "in.txt").string() + " --dry-run --task summarization");
    CHECK(r.err.find("[locost.cli.bad_value] summarize: option '--task' names 'summarization'") != std::string::npos);
}
