// The memory budget of any command (tools/locost/budget.hpp, models/memory_estimate.hpp): costly
// requests refused before anything is allocated, naming the estimate and its cause; out of memory
// inside parallel work reported as system.out_of_memory, never an abort.
#include "tool/cli.hpp"

TEST_CASE("cli: costly requests are refused before anything is allocated, naming the estimate and its cause") {
    const fs::path tmp = fs::path(LOCOST_TEST_TMP) / "hostile-cost";
    fs::remove_all(tmp);
    const fs::path demo = tmp / "demo-t5";
    REQUIRE(run_tool("demo-checkpoint --family t5 --config tiny --seed 1 --out " + demo.string()).rc == 0);
    const std::string m = demo.string(), ids = json_file("cost-ids", nlohmann::json::parse("[[5, 6, 7, 1]]"));
    const std::string err = "locost: [locost.memory.over_budget] generate: needs an estimated ";

    // One flag asking for terabytes: refused at once, naming the flag. Tiny T5: 2 decoder layers
    // of 4 heads × 16, vocabulary 16000. 10^6 beams: logits and scores (8 bytes) plus the beam
    // candidates and their top-k (24 bytes) per row and vocabulary entry: 10^6 · 16000 · 32 = 512 GB.
    auto r = run_tool("generate --model " + m + " --ids " + ids + " --num-beams 1000000 --memory-budget 4G --threads 1");
    CHECK(r.rc == 1);
    CHECK(r.out.empty());
    CHECK(r.err.rfind(err, 0) == 0);
    CHECK(
        r.err.find("more than the budget of 4.00 GB (--memory-budget); the largest part is logits and search buffers, 512 GB, which grows "
                   "with --num-beams (1000000)\n") != std::string::npos);
    // Generating 2·10^9 tokens: every row's self-attention cache at full length, 2 layers × keys and
    // values × 2·10^9 positions × 64 floats = 2.05 TB.
    r = run_tool("generate --model " + m + " --ids " + ids + " --max-new-tokens 2000000000 --memory-budget 4G --threads 1");
    CHECK(r.rc == 1);
    CHECK(r.err.find("the largest part is self-attention caches, 2.05 TB, which grows with --max-new-tokens (2000000000)\n") !=
          std::string::npos);
    // The same cause from the checkpoint's generation_config.json names that file.
    std::ofstream(demo / "generation_config.json")
        << R"({"num_beams": 100000000, "decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0})";
    r = run_tool("generate --model " + m + " --ids " + ids + " --memory-budget 4G --threads 1");
    CHECK(r.rc == 1);
    CHECK(r.err.find(
              "the largest part is logits and search buffers, 51.2 TB, which grows with num_beams 100000000 (generation_config.json)\n") !=
          std::string::npos);
    fs::remove(demo / "generation_config.json");
    // Tokenizing is checked before it runs: SentencePiece holds ~72 bytes per byte of text.
    const fs::path doc = tmp / "words.txt";
    {
        std::ofstream f(doc);
        for (int i = 0; i < 20000; ++i) f << "word ";
    }
    r = run_tool("encode --model " + m + " --input " + doc.string() + " --out " + (tmp / "w.safetensors").string() +
                 " --memory-budget 1M --threads 1");
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.memory.over_budget] encode: " + doc.string() +
              ": tokenizing 100000 bytes of text needs an estimated 7.20 MB of "
              "memory, more than the budget of 1.00 MB (--memory-budget); the tokenizer (" +
              m +
              "/spiece.model) holds about 75.5 MB per "
              "MiB of text, which grows with the document's size\n");

    // --dry-run: the shape, the work and the estimate per phase; nothing loaded or written.
    const std::string out = (tmp / "states.safetensors").string();
    r = run_tool("encode --model " + m + " --ids " + ids + " --out " + out + " --dry-run --memory-budget 1G --threads 1");
    CHECK(r.rc == 0);
    CHECK(r.out.rfind("dry run: locost encode on " + m + " (t5)\ninput      1 row, longest 4 tokens: 4 positions, 0 of them padding\n",
                      0) == 0);
    CHECK(r.out.find("  encode ") != std::string::npos);
    CHECK(r.out.find("budget     1.00 GB (--memory-budget): fits\n") != std::string::npos);
    CHECK(!fs::exists(out));
    r = run_tool("generate --model " + m + " --ids " + ids + " --num-beams 4 --max-new-tokens 8 --dry-run");
    CHECK(r.rc == 0);
    CHECK(r.out.find("decoding   up to 8 positions x 4 rows per document (beam search)\n") != std::string::npos);
    CHECK(r.out.find("  decode ") != std::string::npos);
    // The budget's default is what the machine has now, ulimit -v included (a child with a 2 GB
    // address space refuses a request of 5 GB instead of failing inside the allocator).
    r = run_shell("ulimit -v 2000000; \"$LOCOST\" generate --model " + m + " --ids " + ids + " --num-beams 10000");
    CHECK(r.rc == 1);
    CHECK(r.err.rfind(err, 0) == 0);
    CHECK(r.err.find(
              " (RLIMIT_AS (ulimit -v)); the largest part is logits and search buffers, 5.12 GB, which grows with --num-beams (10000)\n") !=
          std::string::npos);
    r = run_tool("generate --model " + m + " --ids " + ids + " --memory-budget 12X");
    CHECK(r.rc == 2);
    CHECK(
        r.err ==
        "locost: [locost.cli.bad_value] generate: option '--memory-budget' expects a size such as 12G, 800M, 1.5GiB or 'unlimited', got '12X'\n");
    r = run_tool("generate --model " + m + " --ids " + ids + " --max-new-tokens 2 --memory-budget 1.5GiB");
    CHECK(r.rc == 0);

    // Rows of very different lengths are not padded to the longest without bound.
    {
        std::ofstream f(tmp / "ragged.json");
        f << "[[5, 1], [";
        for (int i = 0; i < 1200000; ++i) f << (i ? ",5" : "5");
        f << "], [6, 1]]";
    }
    r = run_tool("generate --model " + m + " --ids " + (tmp / "ragged.json").string());
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.input.padding_waste] generate: " + (tmp / "ragged.json").string() +
              ": its 3 rows padded to the longest (row 1, 1200000 ids) would be 3600000 positions for 1200004 real ids (66.7% padding); "
              "put rows of similar lengths in one file, or run the longest rows apart\n");

    // A config.json whose num_layers the weights cannot hold is refused before anything is built
    // from it (the parameter list alone would have 10^7 names).
    auto cfg = nlohmann::json::parse(slurp(demo / "config.json"));
    cfg["num_layers"] = 1000000;
    std::ofstream(demo / "config.json") << cfg.dump();
    r = run_tool("generate --model " + m + " --ids " + ids);
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.checkpoint.config_mismatch] " + (demo / "config.json").string() +
              ": num_layers 1000000 and num_decoder_layers 2 need at least one tensor per layer, but " +
              (demo / "model.safetensors").string() + " holds " + std::to_string(locost::io::checkpoint::open(m).records().size()) +
              " tensors: the config does not describe these weights\n");
    r = run_tool("inspect --model " + m);
    CHECK(r.rc == 1);
    CHECK(r.err.rfind("locost: [locost.checkpoint.config_mismatch] ", 0) == 0);
}

TEST_CASE("cli: out of memory inside parallel work is system.out_of_memory naming the phase, never an abort") {
    // A tiny T5 on 600 KB of a book, the budget check off, with every allocation from a size up
    // failing (tests/support/fail_alloc.cpp, preloaded): at 200 MB, the attention's scratch on the
    // calling thread and on the OpenMP worker both fail. Before, the worker's failure called
    // std::terminate (SIGABRT); now the tool says so and exits 1, and a corpus job writes that
    // document's error line and goes on.
    const fs::path tmp = fs::path(LOCOST_TEST_TMP) / "oom";
    const std::string preload = (fs::path(LOCOST_TEST_TMP).parent_path() / "libfail_alloc.so").string();
    REQUIRE(fs::exists(preload));
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    const fs::path demo = tmp / "demo-t5";
    REQUIRE(run_tool("demo-checkpoint --family t5 --config tiny --seed 1 --out " + demo.string()).rc == 0);
    const std::string book = slurp(fs::path(LOCOST_TEST_DATA) / ".." / ".." / "examples" / "data" / "war_and_peace.txt");
    std::ofstream(tmp / "book.txt") << book.substr(0, 600000);
    std::ofstream(tmp / "short.txt") << book.substr(700000, 500);
    std::ofstream(tmp / "list.txt") << "book.txt\nshort.txt\n";
    auto run_failing = [&](const std::string& bytes, const std::string& args) {
        const std::string cmd = "LD_PRELOAD=" + preload + " LOCOST_TEST_FAIL_ALLOC_BYTES=" + bytes + " " + LOCOST_TOOL + " " + args +
            " --model " + demo.string() + " --max-new-tokens 2 --threads 2 --memory-budget unlimited >" + (tmp / "out").string() + " 2>" +
            (tmp / "err").string();
        const int status = std::system(cmd.c_str());
        REQUIRE(WIFEXITED(status));  // (an abort is a signal)
        return std::make_pair(WEXITSTATUS(status), slurp(tmp / "err"));
    };
    for (const char* bytes : {"20000000", "200000000"}) {
        CAPTURE(bytes);
        const auto [rc, err] = run_failing(bytes, "summarize --input " + (tmp / "book.txt").string());
        CHECK(rc == 1);
        CHECK(err == "locost: [locost.system.out_of_memory] summarize: out of memory while generating\n");
    }
    const auto [rc, err] =
        run_failing("200000000", "summarize --inputs " + (tmp / "list.txt").string() + " --out " + (tmp / "results.jsonl").string());
    CAPTURE(err);
    CHECK(rc == 1);
    std::istringstream lines(slurp(tmp / "results.jsonl"));
    std::map<std::string, nlohmann::json> by_id;
    for (std::string line; std::getline(lines, line);) {
        const auto j = nlohmann::json::parse(line);
        by_id[j["id"].get<std::string>()] = j;
    }
    REQUIRE(by_id.size() == 2);
    CHECK(by_id["book.txt"]["error"]["id"] == "locost.system.out_of_memory");
    CHECK(by_id["short.txt"].contains("summary"));
}
