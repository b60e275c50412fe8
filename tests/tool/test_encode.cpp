// locost encode (tools/locost/cmd_encode.hpp): the original's states, and local attention's
// memory growing linearly with the input.
#include "tool/cli.hpp"

TEST_CASE("cli: encode equals the original's states (single row, padded batch)") {
    const auto ref = locost::io::safetensors_file::open(data + "/reference/locost_encoder.safetensors");
    const auto ids = ints_of(ref, "enc.L1000.input_ids");
    const std::string out = std::string(LOCOST_TEST_TMP) + "/cli-enc.safetensors";
    auto r = run_tool("encode --model " + tiny + " --ids " + json_file("ids1000", ids) + " --out " + out + " --threads 2");
    REQUIRE(r.rc == 0);
    // The closing line other programs parse (bench/peers/compare_*.py): the encode's own seconds and
    // rate, the weights' load apart.
    CHECK(std::regex_search(r.err,
                            std::regex(R"(encoded 1 x 1000 tokens in [0-9.]+ s: [0-9]+ tokens/s, peak memory [0-9.]+ GB; )"
                                       R"(weights loaded in [0-9.]+ s)")));
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
    CHECK(r.err ==
          "locost: [locost.ids.out_of_vocab] " + json_file("oov", std::vector<int>{3, 512}) +
              ": token id 512 at [1] is not below the vocabulary size 512\n");
}

TEST_CASE("cli: local attention's memory grows linearly with the input (LongT5 local, 4K to 64K tokens)") {
    // Peak RSS of whole `locost encode` processes on the tiny LongT5-local reference. A quadratic
    // attention would need 4 heads x L^2 x 4 bytes = 69 GB of scores at 64K tokens (even T5's
    // query blocks of 512 would take 0.5 GB per layer); local attention's per-token working set
    // here is about 2 KB (states, q/k/v, context, output), so 60K more tokens must cost well under
    // 4 KB each.
    auto peak_gb = [&](index_t L) {
        std::vector<std::int64_t> row(static_cast<std::size_t>(L));
        for (index_t i = 0; i < L; ++i) row[static_cast<std::size_t>(i)] = 2 + (i * 7919) % 500;
        const auto ids = json_file("mem-" + std::to_string(L), nlohmann::json::array({row}));
        const auto r = run_tool("encode --model " + hf + "/longt5_local --ids " + ids + " --out " + std::string(LOCOST_TEST_TMP) +
                                "/mem.safetensors --threads 2");
        REQUIRE(r.rc == 0);
        const auto at = r.err.find("peak memory ");
        REQUIRE(at != std::string::npos);
        return std::stod(r.err.substr(at + 12));
    };
    const double small = peak_gb(4096), large = peak_gb(65536);
    MESSAGE("peak RSS: 4096 tokens " << small << " GB, 65536 tokens " << large << " GB");
    CHECK(large - small < 61440 * 4096 / 1e9);
    CHECK(large < 1.0);
}

TEST_CASE("cli: --max-input-tokens cuts each row to its first N ids, its closing </s> kept") {
    const fs::path demo = fs::path(LOCOST_TEST_TMP) / "demo-tiny-cut";
    REQUIRE(run_tool("demo-checkpoint --config tiny --seed 1 --out " + demo.string()).rc == 0);
    const fs::path text = fs::path(LOCOST_TEST_TMP) / "cut-chapter.txt";
    std::ofstream(text) << slurp(fs::path(data).parent_path().parent_path() / "examples/data/pride_and_prejudice.txt").substr(0, 3000);
    auto r = run_tool("tokenize --model " + demo.string() + " --input " + text.string());
    REQUIRE(r.rc == 0);
    const auto full = nlohmann::json::parse(r.out).get<std::vector<std::int64_t>>();
    REQUIRE(full.size() > 100);
    REQUIRE(full.back() == 1);
    const std::string a = std::string(LOCOST_TEST_TMP) + "/cut-a.safetensors", b = std::string(LOCOST_TEST_TMP) + "/cut-b.safetensors";
    const auto states = [](const std::string& path) { return floats_of(locost::io::safetensors_file::open(path), "last_hidden_state"); };

    // A text: the first 11 ids and </s>, as transformers' truncation=True, max_length=12 gives.
    r = run_tool("encode --model " + demo.string() + " --input " + text.string() + " --max-input-tokens 12 --out " + a);
    REQUIRE(r.rc == 0);
    CHECK(r.err.find("encode: the input cut to 12 tokens (--max-input-tokens; it had " + std::to_string(full.size()) + ")\n") !=
          std::string::npos);
    std::vector<std::int64_t> cut(full.begin(), full.begin() + 11);
    cut.push_back(1);
    r = run_tool("encode --model " + demo.string() + " --ids " + json_file("cut-text", cut) + " --out " + b);
    REQUIRE(r.rc == 0);
    CHECK(r.err.find("cut to") == std::string::npos);
    CHECK(states(a) == states(b));

    // Rows of ids: one closed by </s> keeps it, one without is cut plainly, a short one is untouched.
    const std::vector<std::int64_t> open_row(full.begin(), full.begin() + 30), short_row(full.begin(), full.begin() + 5);
    const std::string rows = json_file("cut-rows", nlohmann::json::array({full, open_row, short_row}));
    r = run_tool("encode --model " + demo.string() + " --ids " + rows + " --max-input-tokens 12 --out " + a);
    REQUIRE(r.rc == 0);
    CHECK(r.err.find("encode: " + rows + ": 2 of 3 rows cut to 12 tokens (--max-input-tokens; the longest had " +
                     std::to_string(full.size()) + ")\n") != std::string::npos);
    const std::vector<std::int64_t> open_cut(full.begin(), full.begin() + 12);
    r = run_tool("encode --model " + demo.string() + " --ids " +
                 json_file("cut-rows-by-hand", nlohmann::json::array({cut, open_cut, short_row})) + " --out " + b);
    REQUIRE(r.rc == 0);
    CHECK(states(a) == states(b));

    // A question in front counts; one that leaves no room for the document is refused.
    r = run_tool("summarize --model " + demo.string() + " --input " + text.string() +
                 " --prefix 'What happens at the ball?' --max-input-tokens 4 --max-new-tokens 2");
    CHECK(r.rc == 2);
    CHECK(r.err.find("locost: [locost.cli.bad_value] summarize: the question in front takes ") == 0);
    CHECK(r.err.find(" of the 4 tokens option '--max-input-tokens' allows, leaving none for the document\n") != std::string::npos);

    // A corpus job says which documents were cut, and from how many ids.
    const fs::path list = fs::path(LOCOST_TEST_TMP) / "cut-list.txt", out = fs::path(LOCOST_TEST_TMP) / "cut-out.jsonl";
    std::ofstream(list) << text.string() << "\n";
    fs::remove(out);
    r = run_tool("summarize --model " + demo.string() + " --inputs " + list.string() + " --out " + out.string() +
                 " --max-input-tokens 12 --max-new-tokens 2");
    REQUIRE(r.rc == 0);
    const auto line = nlohmann::json::parse(slurp(out));
    CHECK(line["input_tokens"] == 12);
    CHECK(line["truncated_from"] == full.size());
}
