// locost score, generate and summarize (tools/locost/cmd_seq2seq.hpp): the original's logits and
// ids, every Hugging Face family through the tool against transformers 5.17, generation settings
// where checkpoints keep them, and summarize's prefix.
#include "tool/cli.hpp"

TEST_CASE("cli: score writes the original's teacher-forced logits") {
    const auto ref = locost::io::safetensors_file::open(data + "/reference/locost_decoder.safetensors");
    const std::string out = std::string(LOCOST_TEST_TMP) + "/cli-score.safetensors";
    const auto enc = json_file("score-enc", ints_of(ref, "dec.enc_input_ids")),
               dec = json_file("score-dec", ints_of(ref, "dec.decoder_input_ids"));
    auto r = run_tool("score --model " + tiny + " --ids " + enc + " --decoder-ids " + dec + " --out " + out);
    REQUIRE(r.rc == 0);
    const auto got = locost::io::safetensors_file::open(out);
    CHECK(got.find("logits")->shape == locost::shape_t{1, 12, 512});
    CHECK(max_rel(floats_of(got, "logits"), floats_of(ref, "dec.logits")) < 1e-4);
    // --weights reaches the decoder: its 12 teacher-forced rows (the widen-then-GEMM path) move
    // off the float32 reference by the storage's rounding, no more (tests/models/test_locost_decoder.cpp and
    // tests/models/test_hf_parity.cpp bound the greedy steps' error the same way).
    // --compute bf16 and int8 reach the encoder and the cross-attention projection the same way.
    for (const auto& [w, bound] : {std::pair<std::string, double>{"--weights bfloat16", 1e-2},
                                   {"--weights int8", 3e-2},
                                   {"--compute bf16", 3e-2},
                                   {"--compute int8", 1e-2}}) {  // measured: 2.7e-3, 9.8e-3, 9.0e-4, 2.9e-3
        CAPTURE(w);
        r = run_tool("score --model " + tiny + " --ids " + enc + " --decoder-ids " + dec + " " + w + " --out " + out);
        REQUIRE(r.rc == 0);
        const double e = max_rel(floats_of(locost::io::safetensors_file::open(out), "logits"), floats_of(ref, "dec.logits"));
        MESSAGE("locost score " << w << ": logit error / max|logit| " << e);
        CHECK(e > 1e-4);
        CHECK(e < bound);
    }

    // Folded cross-attention is the same function reassociated: the reference's logits within parity.
    r = run_tool("score --model " + tiny + " --ids " + enc + " --decoder-ids " + dec + " --cross-attention folded --out " + out);
    REQUIRE(r.rc == 0);
    CHECK(max_rel(floats_of(locost::io::safetensors_file::open(out), "logits"), floats_of(ref, "dec.logits")) < 1e-4);
    r = run_tool("score --model " + tiny + " --ids " + enc + " --decoder-ids " + dec + " --cross-attention lazy --out " + out);
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] score: option '--cross-attention' expects cached or folded, got 'lazy'\n");

    const auto ragged = json_file("ragged", nlohmann::json::parse("[[0, 5, 6], [0, 7]]"));
    r = run_tool("score --model " + tiny + " --ids " + enc + " --decoder-ids " + ragged + " --out " + out);
    CHECK(r.rc == 2);
    CHECK(r.err ==
          "locost: [locost.cli.bad_value] score: " + ragged + ": row 1 has 2 decoder ids, row 0 has 3 (rows must have equal lengths)\n");
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
    r = run_tool("generate --model " + tiny + " --ids " +
                 json_file("gen-batch", nlohmann::json::array({ids, std::vector<std::int64_t>(ids.begin(), ids.begin() + 30)})) +
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

    r = run_tool("generate --model " + tiny + " --ids " + enc + " --weights int4");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] generate: option '--weights' expects float32, bfloat16 or int8, got 'int4'\n");
    r = run_tool("generate --model " + tiny + " --ids " + enc + " --compute fp16");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] generate: option '--compute' expects float32, bfloat16 or int8, got 'fp16'\n");

    r = run_tool("generate --model " + tiny + " --ids " + enc + " --num-beams 2 --num-return-sequences 3");
    CHECK(r.rc == 1);
    CHECK(
        r.err ==
        "locost: [locost.generate.invalid_option] generation option 'num_return_sequences' is 3, at most num_beams (2) without sampling\n");
    r = run_tool("generate --model " + tiny + " --ids " + enc + " --early-stopping maybe");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] generate: option '--early-stopping' expects true, false or never, got 'maybe'\n");
    r = run_tool("generate --model " + tiny + " --ids " + enc + " --bad-words-ids 7");
    CHECK(r.rc == 2);
    CHECK(
        r.err ==
        "locost: [locost.cli.bad_value] generate: option '--bad-words-ids' expects a JSON list of lists of ids like [[5],[7,8]], got '7'\n");
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
    CHECK(r.err ==
          "locost: [locost.cli.bad_value] summarize: option '--cross-cache' expects auto, float32, bfloat16 or int8, got 'int16'\n");
}

TEST_CASE("cli: T5, BART, LongT5, LED and SLED through the tool equal transformers 5.17 (encode, score, generate)") {
    struct tool_case {
        std::string name;
        const char* checkpoint;
        std::string flags, generate_flags;
    };
    // BART's generation cases pass forced_bos_token_id 0 to generate() (its generation_config.json
    // has only forced_eos_token_id), so the tool gets it as a flag.
    const std::string sled = " --sled-context 32 --sled-window-fraction 0.5", bos = " --forced-bos-token-id 0";
    const tool_case cases[] = {{"t5_v11", "t5_v11", "", ""},
                               {"t5_v10", "t5_v10", "", ""},
                               {"sled_t5_p0", "t5_v11", sled, ""},
                               {"sled_t5_p6", "t5_v11", sled + " --prefix-length 6", ""},
                               {"bart", "bart", "", bos},
                               {"sled_bart_p0", "bart", sled, bos},
                               {"sled_bart_p6", "bart", sled + " --prefix-length 6", bos},
                               {"longt5_local", "longt5_local", "", ""},
                               {"longt5_tglobal", "longt5_tglobal", "", ""},
                               {"led_g0", "led_g0", "", ""},
                               {"led_g1", "led_g0", " --global-tokens 0,5,50", ""},
                               {"pegasus_x", "pegasus_x", "", ""}};
    for (const auto& c : cases) {
        CAPTURE(c.name);
        const std::string n = c.name, model = hf + "/" + c.checkpoint + c.flags, gmodel = model + c.generate_flags;
        const auto ref = locost::io::safetensors_file::open(hf + "/" + n + "/reference.safetensors");
        std::vector<bool> keep;
        const auto ids = json_file(n + "-ids", hf_rows(ref, &keep, 64));
        const std::string out = std::string(LOCOST_TEST_TMP) + "/cli-" + n + ".safetensors";
        auto r = run_tool("encode --model " + model + " --ids " + ids + " --out " + out);
        REQUIRE(r.rc == 0);
        auto got = locost::io::safetensors_file::open(out);
        CHECK(got.find("last_hidden_state")->shape == ref.find("enc.last_hidden_state")->shape);
        CHECK(max_rel(floats_of(got, "last_hidden_state"), floats_of(ref, "enc.last_hidden_state"), keep) < 1e-4);

        const auto dec = ints_of(ref, "dec.decoder_input_ids");
        const auto dec_rows = json_file(n + "-dec",
                                        nlohmann::json::array({std::vector<std::int64_t>(dec.begin(), dec.begin() + 12),
                                                               std::vector<std::int64_t>(dec.begin() + 12, dec.end())}));
        r = run_tool("score --model " + model + " --ids " + ids + " --decoder-ids " + dec_rows + " --out " + out);
        REQUIRE(r.rc == 0);
        got = locost::io::safetensors_file::open(out);
        CHECK(max_rel(floats_of(got, "logits"), floats_of(ref, "dec.logits")) < 1e-4);

        const auto hf_cases = nlohmann::json::parse(slurp(hf + "/" + n + "/cases.json"));
        auto expect = [&](const char* k) {
            std::string s;
            for (const auto& row : hf_cases[k]["sequences"]) s += row.dump() + "\n";
            return s;
        };
        CHECK(run_tool("generate --model " + gmodel + " --ids " + ids + " --max-new-tokens 16").out == expect("greedy"));
        CHECK(run_tool("generate --model " + gmodel + " --ids " + ids +
                       " --max-new-tokens 16 --no-repeat-ngram-size 2 --repetition-penalty 1.5")
                  .out == expect("greedy_nr"));
        const auto eos = hf_cases["greedy_nr_eos"]["settings"]["eos_token_id"].get<int>();
        CHECK(run_tool("generate --model " + gmodel + " --ids " + ids +
                       " --max-new-tokens 16 --no-repeat-ngram-size 2 --repetition-penalty 1.5 --eos-token-id " + std::to_string(eos))
                  .out == expect("greedy_nr_eos"));
        CHECK(run_tool("generate --model " + gmodel + " --ids " + ids +
                       " --max-new-tokens 16 --num-beams 4 --length-penalty 2.0 --no-repeat-ngram-size 3 --early-stopping true "
                       "--num-return-sequences 2")
                  .out == expect("beam"));
    }
}

TEST_CASE(
    "cli: generation settings where checkpoints keep them: --generation-config FILE, --task with task_specific_params, config.json's prefix") {
    const std::string hf = data + "/hf";
    const fs::path dir = fs::path(LOCOST_TEST_TMP) / "cli-task-t5";
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const char* f : {"model.safetensors", "generation_config.json"}) fs::copy_file(hf + "/t5_v11/" + f, dir / f);
    auto cfg = nlohmann::json::parse(slurp(hf + "/t5_v11/config.json"));
    cfg["task_specific_params"] = {
        {"summarization", {{"num_beams", 3}, {"max_length", 9}, {"length_penalty", 2.0}, {"prefix", "summarize: "}}},
        {"translation_en_to_de", {{"max_length", 5}}}};
    std::ofstream(dir / "config.json") << cfg.dump();
    const std::string ids = json_file("task-ids", nlohmann::json::array({{5, 6, 7, 8, 9, 10, 11, 1}, {12, 13, 14, 1}}));
    const std::string base = "generate --model " + hf + "/t5_v11 --ids " + ids;

    // --task: the task's parameters over generation_config.json's, as a transformers pipeline applies them.
    const auto flags = run_tool(base + " --num-beams 3 --max-length 9 --length-penalty 2.0");
    REQUIRE(flags.rc == 0);
    auto r = run_tool("generate --model " + dir.string() + " --ids " + ids + " --task summarization");
    CHECK(r.rc == 0);
    CHECK(r.out == flags.out);
    CHECK(run_tool("generate --model " + dir.string() + " --ids " + ids).out == run_tool(base).out);  // only when asked
    // --dry-run says each setting and where it came from.
    r = run_tool("generate --model " + dir.string() + " --ids " + ids + " --task summarization --num-beams 4 --dry-run");
    CHECK(r.rc == 0);
    for (const char* line :
         {"generation num_beams 4 (--num-beams)\n", "generation max_length 9 (--task)\n", "generation length_penalty 2 (--task)\n",
          "generation no_repeat_ngram_size 0 (default)\n", "generation decoder_start_token_id 0 (generation_config.json)\n"})
        CHECK_MESSAGE(r.out.find(line) != std::string::npos, line);
    r = run_tool("generate --model " + dir.string() + " --ids " + ids + " --task summarise");
    CHECK(r.rc == 2);
    CHECK(r.err ==
          "locost: [locost.cli.bad_value] generate: option '--task' names 'summarise', which config.json's task_specific_params does not "
          "have (it has: summarization, translation_en_to_de)\n");
    r = run_tool(base + " --task summarization");
    CHECK(r.rc == 2);
    CHECK(r.err ==
          "locost: [locost.cli.bad_value] generate: option '--task' names 'summarization', which config.json's task_specific_params "
          "does not have (it has none)\n");

    // --generation-config FILE replaces the checkpoint's (generation_config_for_summarization.json).
    const std::string gen = json_file("gen-for-summarization",
                                      {{"num_beams", 2},
                                       {"max_new_tokens", 5},
                                       {"no_repeat_ngram_size", 2},
                                       {"decoder_start_token_id", 0},
                                       {"eos_token_id", 1},
                                       {"pad_token_id", 0}});
    const auto gen_flags = run_tool(base + " --num-beams 2 --max-new-tokens 5 --no-repeat-ngram-size 2");
    REQUIRE(gen_flags.rc == 0);
    r = run_tool(base + " --generation-config " + gen);
    CHECK(r.rc == 0);
    CHECK(r.out == gen_flags.out);
    CHECK(run_tool(base + " --generation-config " + gen + " --num-beams 1").out ==
          run_tool(base + " --max-new-tokens 5 --no-repeat-ngram-size 2").out);
    const std::string bad = json_file("gen-bad", {{"num_beams", 0}});
    r = run_tool(base + " --generation-config " + bad);
    CHECK(r.rc == 1);
    CHECK(r.err.find("[locost.generation_config.") != std::string::npos);
    CHECK(r.err.find(bad + ": ") != std::string::npos);
    // suppress_tokens: never generated, from a flag or from the file; begin_suppress_tokens only first.
    const auto plain = run_tool(base + " --max-new-tokens 4");
    REQUIRE(plain.rc == 0);
    const auto first_ids = nlohmann::json::parse(lines_of(plain.out)[0]);
    const index_t first = first_ids[1].get<index_t>();
    const std::string suppress = "[" + std::to_string(first) + "]";
    r = run_tool(base + " --max-new-tokens 4 --suppress-tokens " + suppress);
    CHECK(r.rc == 0);
    CHECK(r.out != plain.out);
    for (const auto& line : lines_of(r.out)) {  // after the start token
        const auto row = nlohmann::json::parse(line);
        for (std::size_t i = 1; i < row.size(); ++i) CHECK(row[i].get<index_t>() != first);
    }
    auto gen_cfg = nlohmann::json::parse(slurp(hf + "/t5_v11/generation_config.json"));
    gen_cfg["suppress_tokens"] = nlohmann::json::array({first});
    CHECK(run_tool(base + " --max-new-tokens 4 --generation-config " + json_file("gen-suppress", gen_cfg)).out == r.out);
    r = run_tool(base + " --max-new-tokens 4 --begin-suppress-tokens " + suppress);
    CHECK(r.rc == 0);
    CHECK(nlohmann::json::parse(lines_of(r.out)[0])[1].get<index_t>() != first);
    r = run_tool(base + " --max-new-tokens 4 --suppress-tokens " + suppress + " --dry-run");
    CHECK(r.out.find("generation suppress_tokens " + std::to_string(first) +
                     " (--suppress-tokens)\ngeneration begin_suppress_tokens none (default)\n") != std::string::npos);
    // A minimum from the file above a --max-new-tokens is not a contradiction of flags: generation
    // stops at the maximum (as transformers does), with or without a --min-new-tokens of its own.
    const std::string long_min =
        json_file("gen-long-min", {{"min_length", 56}, {"decoder_start_token_id", 0}, {"eos_token_id", 1}, {"pad_token_id", 0}});
    r = run_tool(base + " --generation-config " + long_min + " --max-new-tokens 4 --min-new-tokens 2");
    CHECK(r.rc == 0);
    CHECK(r.out == run_tool(base + " --generation-config " + long_min + " --max-new-tokens 4").out);
    r = run_tool(base + " --min-new-tokens 5 --max-new-tokens 4");
    CHECK(r.rc == 2);
    CHECK(
        r.err ==
        "locost: [locost.cli.bad_value] generate: the minimum of 5 new tokens (--min-new-tokens) exceeds the maximum of 4 (--max-new-tokens)\n");
    r = run_tool(base + " --suppress-tokens 5");
    CHECK(r.rc == 2);
    CHECK(r.err == "locost: [locost.cli.bad_value] generate: option '--suppress-tokens' expects a JSON list of ids like [5,7], got '5'\n");

    // generation_config.json's absence: config.json's own generation fields (from_model_config).
    fs::remove(dir / "generation_config.json");
    cfg.erase("task_specific_params");
    cfg["num_beams"] = 2;
    cfg["max_new_tokens"] = 4;
    std::ofstream(dir / "config.json") << cfg.dump();
    r = run_tool("generate --model " + dir.string() + " --ids " + ids);
    CHECK(r.rc == 0);
    CHECK(r.out == run_tool(base + " --num-beams 2 --max-new-tokens 4").out);
    r = run_tool("generate --model " + dir.string() + " --ids " + ids + " --dry-run");
    CHECK(r.out.find("generation num_beams 2 (config.json)\ngeneration length_penalty 1 (default)\n") != std::string::npos);
    CHECK(r.out.find("generation max_new_tokens 4 (config.json)\n") != std::string::npos);
}

TEST_CASE("cli: summarize puts config.json's prefix, or its summarization task's, in front of the text, as transformers' summarization "
          "pipeline") {
    const fs::path demo = fs::path(LOCOST_TEST_TMP) / "demo-tiny-prefix";
    fs::remove_all(demo);
    REQUIRE(run_tool("demo-checkpoint --config tiny --seed 3 --out " + demo.string()).rc == 0);
    const fs::path text = fs::path(LOCOST_TEST_TMP) / "prefix-doc.txt", prefixed = fs::path(LOCOST_TEST_TMP) / "prefix-doc-prefixed.txt",
                   task_prefixed = fs::path(LOCOST_TEST_TMP) / "prefix-doc-task.txt";
    const std::string doc = slurp(fs::path(data).parent_path().parent_path() / "examples/data/pride_and_prejudice.txt").substr(0, 3000);
    std::ofstream(text) << doc;
    std::ofstream(prefixed) << "Chapter notes: " + doc;
    std::ofstream(task_prefixed) << "summarize: " + doc;
    const std::string opts = " --max-new-tokens 6 --threads 1";
    const auto unprefixed = run_tool("summarize --model " + demo.string() + " --input " + text.string() + opts);
    REQUIRE(unprefixed.rc == 0);
    const auto plain = run_tool("summarize --model " + demo.string() + " --input " + prefixed.string() + opts);
    const auto plain_task = run_tool("summarize --model " + demo.string() + " --input " + task_prefixed.string() + opts);
    const auto plain_task_nr =
        run_tool("summarize --model " + demo.string() + " --input " + task_prefixed.string() + opts + " --no-repeat-ngram-size 2");
    REQUIRE(plain.rc == 0);
    REQUIRE(plain_task.rc == 0);
    REQUIRE(plain_task_nr.rc == 0);
    auto cfg = nlohmann::json::parse(slurp(demo / "config.json"));
    cfg["prefix"] = "Chapter notes: ";
    std::ofstream(demo / "config.json") << cfg.dump();
    auto r = run_tool("summarize --model " + demo.string() + " --input " + text.string() + opts);
    CHECK(r.rc == 0);
    CHECK(r.out == plain.out);
    // A summarization task: summarize applies it unasked (its prefix and its settings), as the
    // pipeline does; another --task replaces it.
    cfg["task_specific_params"] = {{"summarization", {{"prefix", "summarize: "}, {"no_repeat_ngram_size", 2}}},
                                   {"translation_en_to_de", {{"prefix", "Chapter notes: "}}}};
    std::ofstream(demo / "config.json") << cfg.dump();
    r = run_tool("summarize --model " + demo.string() + " --input " + text.string() + opts);
    CHECK(r.rc == 0);
    CHECK(r.out == plain_task_nr.out);
    r = run_tool("summarize --model " + demo.string() + " --input " + text.string() + opts + " --task summarization");
    CHECK(r.rc == 0);
    CHECK(r.out == plain_task_nr.out);
    CHECK(run_tool("summarize --model " + demo.string() + " --input " + text.string() + opts + " --dry-run")
              .out.find("generation no_repeat_ngram_size 2 (task_specific_params)\n") != std::string::npos);
    r = run_tool("summarize --model " + demo.string() + " --input " + text.string() + opts + " --task translation_en_to_de");
    CHECK(r.rc == 0);
    CHECK(r.out == plain.out);
    cfg["task_specific_params"] = {{"summarization", {{"prefix", "summarize: "}}}};
    std::ofstream(demo / "config.json") << cfg.dump();
    r = run_tool("summarize --model " + demo.string() + " --input " + text.string() + opts);
    CHECK(r.out == plain_task.out);
    // The closing line counts the input tokens: the prefix is in them.
    auto input_tokens = [](const std::string& err) {
        const auto at = err.find(" input tokens");
        REQUIRE(at != std::string::npos);
        auto b = err.rfind(' ', at - 1);
        return err.substr(b + 1, at - b - 1);
    };
    CHECK(input_tokens(r.err) == input_tokens(plain_task.err));
    CHECK(input_tokens(plain.err) != input_tokens(unprefixed.err));
    CHECK(input_tokens(plain_task.err) != input_tokens(unprefixed.err));

    // A summary that stops at transformers' bare default length says so (nothing set the length).
    const std::string note =
        "summarize: the summary stopped at 19 tokens, transformers' default length (max_length 20), which neither the call nor the "
        "checkpoint sets; give --max-new-tokens for a longer one\n";
    r = run_tool("summarize --model " + demo.string() + " --input " + text.string() + " --threads 1 --min-new-tokens 19");
    CHECK(r.rc == 0);
    CHECK(r.err.find(note) != std::string::npos);
    r = run_tool("summarize --model " + demo.string() + " --input " + text.string() + " --threads 1 --min-new-tokens 19 --max-length 20");
    CHECK(r.rc == 0);
    CHECK(r.err.find("default length") == std::string::npos);
}
