// locost chunks (tools/locost/cmd_chunks.hpp): SLED's window plan, and the SLED flags of every
// command checked.
#include "tool/cli.hpp"

TEST_CASE("cli: chunks prints SLED's window plan; SLED flags are checked") {
    // The plan of the sled_t5_p6 reference: 156 tokens, the first 6 a prefix.
    auto r = run_tool("chunks --length 156 --context 32 --window-fraction 0.5 --prefix-length 6");
    REQUIRE(r.rc == 0);
    const auto plan = nlohmann::json::parse(r.out);
    REQUIRE(plan.size() == 9);
    CHECK(plan[0] == nlohmann::json::parse(R"({"start": 0, "end": 32, "effective_start": 0, "effective_end": 24})"));
    CHECK(plan[1] == nlohmann::json::parse(R"({"start": 16, "end": 48, "effective_start": 24, "effective_end": 40})"));
    CHECK(plan[8] == nlohmann::json::parse(R"({"start": 118, "end": 150, "effective_start": 136, "effective_end": 150})"));
    CHECK(run_tool("chunks --length 780 --context 512 --window-fraction 0.5").out ==
          "[{\"start\":0,\"end\":512,\"effective_start\":0,\"effective_end\":384},"
          "{\"start\":256,\"end\":768,\"effective_start\":384,\"effective_end\":640},"
          "{\"start\":268,\"end\":780,\"effective_start\":640,\"effective_end\":780}]\n");

    r = run_tool("chunks --length 100 --context 32 --window-fraction 1.5");
    CHECK(r.rc == 1);
    CHECK(
        r.err ==
        "locost: [locost.sled.bad_window_fraction] chunks: SLED window fraction is 1.5, expected a number in (0, 1] (the kept share of each chunk)\n");
    r = run_tool("chunks --length 100 --context 32 --window-fraction 0.5 --prefix-length 40");
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.sled.bad_prefix] chunks: SLED prefix of 40 tokens is longer than the context of 32 tokens\n");
    r = run_tool("chunks --length 6 --context 32 --window-fraction 0.5 --prefix-length 6");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] chunks: option '--length' is 6, leaving no document after the prefix of 6 tokens\n");
    r = run_tool("chunks --length 100 --context 256 --window-fraction 1e-17");
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.sled.bad_window_fraction] chunks: SLED window fraction 1e-17 keeps no token of a chunk of 256 tokens (the "
          "windows would not advance); expected at least 1/256\n");
    r = run_tool("chunks --length 1000000000 --context 1 --window-fraction 1");
    CHECK(r.rc == 2);
    CHECK(r.err ==
          "locost: [locost.cli.bad_value] chunks: option '--length' 1000000000 makes 1000000000 chunks of 1 tokens, more than the "
          "1000000 this command prints\n");
    r = run_tool("chunks --context 32 --window-fraction 0.5");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.missing_option] chunks: option '--length' is required (see 'locost chunks --help')\n");

    const auto ids = json_file("sled-ids", std::vector<int>{5, 6, 7, 8, 9, 10, 11, 1});
    r = run_tool("encode --model " + hf + "/t5_v11 --ids " + ids + " --out x.safetensors --prefix-length 2");
    CHECK(r.rc == 2);
    CHECK(
        r.err ==
        "locost: [locost.cli.missing_option] encode: option '--prefix-length' applies to SLED: give '--sled-context C' too (or use a SLED checkpoint)\n");
    r = run_tool("generate --model " + hf + "/t5_v11 --ids " + ids + " --sled-context 4 --sled-window-fraction 0");
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.sled.bad_window_fraction] " + hf +
              "/t5_v11/config.json: SLED window fraction is 0, expected a number in (0, 1] (the kept share of each chunk)\n");
    r = run_tool("generate --model " + hf + "/t5_v11 --ids " + ids + " --sled-context 16 --prefix-length 8");
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.sled.no_document] " + hf +
              "/t5_v11/config.json: the input has 8 tokens, all of them the prefix of 8 (nothing to encode after it)\n");
}
