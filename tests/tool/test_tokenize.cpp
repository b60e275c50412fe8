// locost tokenize and detokenize (tools/locost/cmd_tokenize.hpp) through byte-level BPE and
// SentencePiece, and the SentencePiece tokenizer's handling of the model's extra ids that
// detokenize relies on.
#include "tool/cli.hpp"

TEST_CASE("tokenizer: ids beyond the pieces are the model's extra ids, skipped; beyond the model's vocabulary an error") {
    const std::string spm = (fs::path(data).parent_path().parent_path() / "examples/data/books-16k.model").string();
    const locost::text::sentencepiece_tokenizer tok(spm);
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
    test::check_error([&] { (void)tok.decode(with_extra); }, "tokenizer.bad_id",
                      spm + ": token id 16005 is outside the vocabulary [0, 16000)");
    test::check_error(
        [&] {
            (void)tok.decode({5, 32100}, 32100);
        },
        "tokenizer.bad_id", spm + ": token id 32100 is outside the vocabulary [0, 32100)");
}

// ---- tokenize and detokenize ----------------------------------------------------------------

TEST_CASE("cli: tokenize and detokenize through a byte-level BPE directory equal transformers 5.17's BartTokenizer") {
    const std::string bpe = hf + "/bpe";
    const auto cases = nlohmann::json::parse(slurp(bpe + "/cases.json"))["cases"];
    // A book passage, the empty text, leading spaces, a tab, accents and quotes, emoji, CRLF-free
    // whitespace runs with NBSP, a zero-width space: the file's bytes are the text, nothing stripped.
    for (const int i : {2, 240, 242, 243, 245, 246, 250, 251}) {
        CAPTURE(i);
        const auto& c = cases[static_cast<std::size_t>(i)];
        const fs::path text = fs::path(LOCOST_TEST_TMP) / ("bpe-case-" + std::to_string(i) + ".txt");
        std::ofstream(text, std::ios::binary) << c["text"].get<std::string>();
        auto r = run_tool("tokenize --model " + bpe + " --input " + text.string());
        REQUIRE(r.rc == 0);
        CHECK(r.out == c["ids"].dump() + "\n");
        r = run_tool("tokenize --model " + bpe + " --input - < " + text.string());  // stdin
        CHECK(r.out == c["ids"].dump() + "\n");
        r = run_tool("detokenize --model " + bpe + " --ids " + json_file("bpe-ids-" + std::to_string(i), c["ids"]));
        REQUIRE(r.rc == 0);
        CHECK(r.out == c["decoded"].get<std::string>() + "\n");
    }
    // A whole chapter there and back.
    const fs::path chapter = fs::path(LOCOST_TEST_TMP) / "bpe-chapter.txt";
    const std::string book = slurp(fs::path(data).parent_path().parent_path() / "examples/data/pride_and_prejudice.txt").substr(0, 30000);
    std::ofstream(chapter, std::ios::binary) << book;
    auto r = run_tool("tokenize --model " + bpe + " --input " + chapter.string());
    REQUIRE(r.rc == 0);
    const std::vector<int> ids = nlohmann::json::parse(r.out);
    CHECK(ids == locost::text::open_tokenizer(bpe).encode(book));
    r = run_tool("detokenize --model " + bpe + " --ids " + json_file("bpe-chapter-ids", ids));
    REQUIRE(r.rc == 0);
    CHECK(r.out == book + "\n");
    for (const char* c : {"tokenize", "detokenize"}) {
        r = run_tool(std::string(c) + " --help");
        CHECK(r.rc == 0);
        CHECK(r.out.rfind(std::string("usage: locost ") + c, 0) == 0);
    }
    CHECK(run_tool("--help").out.find("  detokenize        print the text of token ids\n") != std::string::npos);
}

TEST_CASE("cli: tokenize and detokenize through SentencePiece (T5 conventions: </s> appended)") {
    const std::string spm = (fs::path(data).parent_path().parent_path() / "examples/data/books-16k.model").string();
    const std::string dir = test::scratch_dir("cli-spm-tokenizer");  // tokenizer files only, no config.json
    fs::copy_file(spm, dir + "/spiece.model");
    const std::string text =
        "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.";
    const fs::path file = fs::path(dir) / "text.txt";
    std::ofstream(file, std::ios::binary) << text;
    const locost::text::sentencepiece_tokenizer sp(spm);
    const auto expected = sp.encode(text);
    REQUIRE(expected.back() == 1);
    for (const std::string& model : {dir, spm}) {  // the directory, or the model file itself
        auto r = run_tool("tokenize --model " + model + " --input " + file.string());
        REQUIRE(r.rc == 0);
        CHECK(r.out == nlohmann::json(expected).dump() + "\n");
        r = run_tool("detokenize --model " + model + " --ids " + json_file("spm-ids", expected));
        REQUIRE(r.rc == 0);
        CHECK(r.out == text + "\n");
    }
}

TEST_CASE("cli: detokenize skips the model's extra ids and refuses bad --ids files") {
    const std::string dir = test::scratch_dir("cli-bpe-checkpoint");
    fs::copy_file(hf + "/bpe/vocab.json", dir + "/vocab.json");
    fs::copy_file(hf + "/bpe/merges.txt", dir + "/merges.txt");
    // The generation convention: the decoder start token first, then ids; 2001 and 2047 are beyond
    // the tokenizer's 2000 pieces but within a model vocabulary of 2048: extra ids, skipped.
    const std::string ids = json_file("bpe-extra", nlohmann::json::array({2, 0, 1121, 2001, 286, 2047, 2}));
    auto r = run_tool("detokenize --model " + dir + " --ids " + ids);
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.tokenizer.bad_id] " + dir + ": token id 2001 is outside the vocabulary [0, 2000)\n");
    std::ofstream(dir + "/config.json") << R"({"model_type": "bart", "vocab_size": 2048})";
    r = run_tool("detokenize --model " + dir + " --ids " + ids);
    REQUIRE(r.rc == 0);
    CHECK(r.out == locost::text::open_tokenizer(dir).decode({1121, 286}) + "\n");
    r = run_tool("detokenize --model " + dir + " --ids " + json_file("bpe-beyond", nlohmann::json::array({5, 2048})));
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.tokenizer.bad_id] " + dir + ": token id 2048 is outside the vocabulary [0, 2048)\n");
    r = run_tool("detokenize --model " + dir + " --ids " + json_file("bpe-huge", nlohmann::json::array({5, 9000000000LL})));
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.tokenizer.bad_id] " + dir + ": token id 9000000000 is outside the vocabulary [0, 2048)\n");

    const fs::path bad = fs::path(LOCOST_TEST_TMP) / "bad-ids.json";
    std::ofstream(bad) << "[1, 2";
    r = run_tool("detokenize --model " + dir + " --ids " + bad.string());
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.ids.invalid_json] " + bad.string() +
              ": invalid JSON at byte 5: syntax error while parsing array - unexpected end of input; expected ']'\n");
    std::ofstream(bad) << "[1, -2]";
    r = run_tool("detokenize --model " + dir + " --ids " + bad.string());
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.ids.negative] " + bad.string() + ": element [1] is -2, expected a non-negative integer\n");
    std::ofstream(bad) << "[[0, 5], [0, 6]]";
    r = run_tool("detokenize --model " + dir + " --ids " + bad.string());
    CHECK(r.rc == 2);
    CHECK(r.err ==
          "locost: [locost.cli.bad_value] detokenize: " + bad.string() + " holds an array of 2 arrays; expected one array of token ids\n");
    r = run_tool("detokenize --model " + dir + " --ids " + (fs::path(LOCOST_TEST_TMP) / "no-such.json").string());
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.io.open_failed] " + (fs::path(LOCOST_TEST_TMP) / "no-such.json").string() + ": cannot open (--ids)\n");
    r = run_tool("tokenize --model " + dir);
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.missing_option] tokenize: option '--input' is required (see 'locost tokenize --help')\n");
    const std::string empty = test::scratch_dir("cli-no-tokenizer");
    r = run_tool("tokenize --model " + empty + " --input " + bad.string());
    CHECK(r.rc == 1);
    CHECK(
        r.err ==
        "locost: [locost.tokenizer.not_found] " + empty +
            ": no tokenizer (expected tokenizer.json, vocab.json + merges.txt, a byte-level BPE tokenizer, or spiece.model, a SentencePiece model)\n");
}
