// locost demo-checkpoint (tools/locost/cmd_demo_checkpoint.hpp, demo_checkpoint.hpp): seeded demo
// checkpoints of every family (UNTRAINED weights), their initialisation, and each one inspected
// and summarizing a chapter.
#include "tool/cli.hpp"

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

TEST_CASE("cli: a T5 demo checkpoint (UNTRAINED weights) summarizes through SLED with a question; inspect shows its family") {
    const fs::path demo = fs::path(LOCOST_TEST_TMP) / "demo-t5-tiny";
    auto r = run_tool("demo-checkpoint --family t5 --config tiny --seed 2 --out " + demo.string());
    REQUIRE(r.rc == 0);
    CHECK(slurp(demo / "README.md").find("UNTRAINED") != std::string::npos);
    r = run_tool("inspect --json --model " + demo.string());
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["model_type"] == "t5");
    CHECK(j["config"]["feed_forward_proj"] == "gated-gelu");
    CHECK(j["config"]["relative_attention_num_buckets"] == 32);
    CHECK_FALSE(j["config"].contains("d_state"));
    CHECK(j["validation"]["ok"] == true);

    const fs::path text = fs::path(LOCOST_TEST_TMP) / "chapter-t5.txt";
    std::ofstream(text) << slurp(fs::path(data).parent_path().parent_path() / "examples/data/pride_and_prejudice.txt").substr(0, 30000);
    r = run_tool("summarize --model " + demo.string() + " --input " + text.string() +
                 " --sled-context 256 --prefix \"Who is Mr. Darcy?\" --max-new-tokens 8 --progress");
    REQUIRE(r.rc == 0);
    CHECK(lines_of(r.out).size() == 1);
    CHECK(r.err.find("SLED chunk ") != std::string::npos);
    CHECK(r.err.find(" input tokens; encode ") != std::string::npos);
    r = run_tool("demo-checkpoint --family bert --config tiny --out x");
    CHECK(r.rc == 2);
    CHECK(
        r.err ==
        "locost: [locost.cli.bad_value] demo-checkpoint: option '--family' expects 'locost', 't5', 'bart', 'led', 'longt5' or 'pegasus_x', got 'bert'\n");
}

TEST_CASE("cli: a BART demo checkpoint (UNTRAINED weights, byte-level BPE) refuses long inputs alone and reads them through SLED") {
    const fs::path demo = fs::path(LOCOST_TEST_TMP) / "demo-bart-tiny", again = fs::path(LOCOST_TEST_TMP) / "demo-bart-tiny-2";
    auto r = run_tool("demo-checkpoint --family bart --config tiny --seed 2 --out " + demo.string());
    REQUIRE(r.rc == 0);
    REQUIRE(run_tool("demo-checkpoint --family bart --config tiny --seed 2 --out " + again.string()).rc == 0);
    CHECK(slurp(demo / "model.safetensors") == slurp(again / "model.safetensors"));
    CHECK(slurp(demo / "README.md").find("UNTRAINED") != std::string::npos);
    CHECK(slurp(demo / "config.json").find("UNTRAINED") != std::string::npos);
    const fs::path books_bpe = fs::path(data).parent_path().parent_path() / "examples/data/books-bpe";
    CHECK(slurp(demo / "vocab.json") == slurp(books_bpe / "vocab.json"));
    CHECK(slurp(demo / "merges.txt") == slurp(books_bpe / "merges.txt"));
    r = run_tool("inspect --json --model " + demo.string());
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["model_type"] == "bart");
    CHECK(j["config"]["encoder_layers"] == 2);
    CHECK(j["config"]["max_position_embeddings"] == 1024);
    CHECK(j["validation"]["ok"] == true);
    // BartPreTrainedModel's initialisation: N(0, 0.02), LayerNorms 1 and 0, the pad row 0.
    const auto ck = locost::io::checkpoint::open(demo.string());
    const auto emb = ck.load_f32("model.shared.weight", {16000, 64});
    double sum2 = 0;
    for (index_t i = 0; i < emb.numel(); ++i) sum2 += double(emb[i]) * emb[i];
    CHECK(std::sqrt(sum2 / double(emb.numel())) == doctest::Approx(0.02).epsilon(0.05));
    CHECK(emb[64] == 0.0f);
    CHECK(ck.load_f32("model.encoder.layers.0.final_layer_norm.weight", {64})[5] == 1.0f);
    CHECK(ck.load_f32("model.encoder.layers.0.final_layer_norm.bias", {64})[5] == 0.0f);

    const fs::path text = fs::path(LOCOST_TEST_TMP) / "chapter-bart.txt";
    std::ofstream(text) << slurp(fs::path(data).parent_path().parent_path() / "examples/data/pride_and_prejudice.txt").substr(0, 30000);
    const auto n_tokens = nlohmann::json::parse(run_tool("tokenize --model " + demo.string() + " --input " + text.string()).out).size();
    CHECK(n_tokens > 1024);
    r = run_tool("summarize --model " + demo.string() + " --input " + text.string() + " --max-new-tokens 8");
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.encode.too_long] " + (demo / "config.json").string() + ": " + std::to_string(n_tokens) +
              " tokens exceed max_position_embeddings (1024, BART's learned positions); run longer inputs through SLED "
              "(--sled-context 1024)\n");
    r = run_tool("summarize --model " + demo.string() + " --input " + text.string() +
                 " --sled-context 256 --prefix \"Who is Mr. Darcy?\" --max-new-tokens 8 --min-new-tokens 8 --progress");
    REQUIRE(r.rc == 0);
    CHECK(lines_of(r.out).size() == 1);
    CHECK(r.err.find("SLED chunk ") != std::string::npos);
    CHECK(r.err.find("decode 8 steps") != std::string::npos);
    r = run_tool("demo-checkpoint --family bart --config tiny --spm x.model --out x");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] demo-checkpoint: --spm is for SentencePiece families; BART takes --bpe DIR\n");
}

TEST_CASE("cli: a Pegasus-X demo checkpoint (UNTRAINED weights) reads a whole chapter at once: no position limit") {
    const fs::path demo = fs::path(LOCOST_TEST_TMP) / "demo-pegasus-x-tiny";
    auto r = run_tool("demo-checkpoint --family pegasus_x --config tiny --seed 3 --out " + demo.string());
    REQUIRE(r.rc == 0);
    CHECK(slurp(demo / "README.md").find("UNTRAINED") != std::string::npos);
    CHECK(fs::is_regular_file(demo / "spiece.model"));
    r = run_tool("inspect --json --model " + demo.string());
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["model_type"] == "pegasus_x");
    CHECK(j["config"]["block_size"] == 16);
    CHECK(j["config"]["num_global_tokens"] == 4);
    CHECK(j["config"]["vocab_size"] == 16103);  // books-16k's pieces after PegasusTokenizer's 103 special ids
    CHECK(j["validation"]["ok"] == true);
    CHECK(nlohmann::json::parse(slurp(demo / "tokenizer_config.json"))["tokenizer_class"] == "PegasusTokenizer");
    // PegasusXPreTrainedModel's initialisation: N(0, 0.02), LayerNorms 1 and 0, biases 0.
    const auto ck = locost::io::checkpoint::open(demo.string());
    const auto g = ck.load_f32("model.encoder.embed_global.weight", {4, 64});
    double sum2 = 0;
    for (index_t i = 0; i < g.numel(); ++i) sum2 += double(g[i]) * g[i];
    CHECK(std::sqrt(sum2 / double(g.numel())) == doctest::Approx(0.02).epsilon(0.3));
    CHECK(ck.load_f32("model.encoder.layers.1.global_self_attn_layer_norm.weight", {64})[5] == 1.0f);
    CHECK(ck.load_f32("model.decoder.layers.0.fc1.bias", {128})[5] == 0.0f);

    const fs::path text = fs::path(LOCOST_TEST_TMP) / "chapter-pegasus-x.txt";
    std::ofstream(text) << slurp(fs::path(data).parent_path().parent_path() / "examples/data/pride_and_prejudice.txt").substr(0, 30000);
    r = run_tool("summarize --model " + demo.string() + " --input " + text.string() + " --max-new-tokens 8 --min-new-tokens 8 --progress");
    REQUIRE(r.rc == 0);
    CHECK(lines_of(r.out).size() == 1);
    CHECK(r.err.find("decode 8 steps") != std::string::npos);
    r = run_tool("demo-checkpoint --family pegasus_x --config tiny --bpe x --out x");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] demo-checkpoint: --bpe is for BART and LED; family 'pegasus_x' takes --spm FILE\n");
}

TEST_CASE("cli: LongT5 and LED demo checkpoints (UNTRAINED weights) summarize a chapter in one pass; --global-tokens is checked") {
    const fs::path text = fs::path(LOCOST_TEST_TMP) / "chapter-local.txt";
    std::ofstream(text) << slurp(fs::path(data).parent_path().parent_path() / "examples/data/pride_and_prejudice.txt").substr(0, 20000);
    for (const std::string family : {"longt5", "led"}) {
        CAPTURE(family);
        const fs::path demo = fs::path(LOCOST_TEST_TMP) / ("demo-" + family + "-tiny");
        auto r = run_tool("demo-checkpoint --family " + family + " --config tiny --out " + demo.string());
        REQUIRE(r.rc == 0);
        CHECK(slurp(demo / "README.md").find("UNTRAINED") != std::string::npos);
        r = run_tool("inspect --json --model " + demo.string());
        REQUIRE(r.rc == 0);
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j["model_type"] == family);
        CHECK(j["validation"]["ok"] == true);
        r = run_tool("summarize --model " + demo.string() + " --input " + text.string() + " --max-new-tokens 4 --min-new-tokens 4");
        REQUIRE(r.rc == 0);
        CHECK(lines_of(r.out).size() == 1);
        CHECK(r.err.find("summarize: ") != std::string::npos);
    }
    const std::string led = (fs::path(LOCOST_TEST_TMP) / "demo-led-tiny").string();
    auto r = run_tool("summarize --model " + led + " --input " + text.string() + " --global-tokens 0,x");
    CHECK(r.rc == 2);
    CHECK(
        r.err ==
        "locost: [locost.cli.bad_value] summarize: option '--global-tokens' expects comma-separated positions (integers >= 0), got '0,x'\n");
    r = run_tool("summarize --model " + led + " --input " + text.string() + " --global-tokens 0,100000 --max-new-tokens 2");
    CHECK(r.rc == 1);
    CHECK(r.err.find("[locost.encode.bad_global_token] ") != std::string::npos);
    r = run_tool("demo-checkpoint --family led --config tiny --encoder-attention-type local --out x");
    CHECK(r.rc == 2);
    CHECK(r.err ==
          "locost: [locost.cli.bad_value] demo-checkpoint: --encoder-attention-type is for LongT5; family 'led' has one attention\n");
    r = run_tool("demo-checkpoint --family longt5 --config tiny --encoder-attention-type global --out x");
    CHECK(r.rc == 2);
    CHECK(
        r.err ==
        "locost: [locost.cli.bad_value] demo-checkpoint: option '--encoder-attention-type' expects 'local' or 'transient-global', got 'global'\n");
}
