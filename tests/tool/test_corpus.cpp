// Corpus jobs, summarize --inputs LIST --out results.jsonl (tools/locost/cmd_corpus.hpp): shards,
// --resume, the output lock, batches by length, and lists of any bytes.
#include "tool/cli.hpp"

#include <locost/eval/rouge.hpp>

TEST_CASE("cli: corpus jobs: summarize --inputs LIST --out results.jsonl, sharded as a scheduler runs it, resumed after an interruption") {
    const fs::path tmp = fs::path(LOCOST_TEST_TMP) / "corpus";
    fs::remove_all(tmp);
    fs::create_directories(tmp / "docs");
    const fs::path demo = tmp / "demo-t5";
    REQUIRE(run_tool("demo-checkpoint --family t5 --config tiny --seed 1 --out " + demo.string()).rc == 0);
    const std::string book = slurp(fs::path(LOCOST_TEST_DATA) / ".." / ".." / "examples" / "data" / "pride_and_prejudice.txt");
    REQUIRE(book.size() > 20000);
    std::ofstream list(tmp / "list.jsonl");
    for (int i = 0; i < 7; ++i) {
        const std::string name = "d" + std::to_string(i) + ".txt";
        std::ofstream(tmp / "docs" / name) << book.substr(static_cast<std::size_t>(1000 + 2500 * i),
                                                          static_cast<std::size_t>(600 + 150 * i));
        list << nlohmann::json{{"id", "doc-" + std::to_string(i)}, {"path", "docs/" + name}}.dump() << "\n";
    }
    std::ofstream(tmp / "docs" / "blank.txt") << " \n";
    list << R"({"id": "blank", "path": "docs/blank.txt"})"
         << "\n";
    list.close();
    const std::string base =
        "summarize --model " + demo.string() + " --inputs " + (tmp / "list.jsonl").string() + " --max-new-tokens 6 --threads 1";
    auto read_lines = [&](const fs::path& p) {
        std::map<std::string, nlohmann::json> by_id;
        std::istringstream in(slurp(p));
        std::string line;
        while (std::getline(in, line)) {
            auto j = nlohmann::json::parse(line);
            CHECK(by_id.count(j["id"].get<std::string>()) == 0);
            by_id[j["id"].get<std::string>()] = j;
        }
        return by_id;
    };

    // One worker over the whole list: every document has a line; the blank one an error line
    // (the job goes on, and exits 1 at the end).
    const fs::path all = tmp / "all.jsonl";
    auto r = run_tool(base + " --out " + all.string());
    CHECK(r.rc == 1);
    CHECK(r.err.find("summarize: shard 0/1: 8 of 8 documents are this shard's; 7 summarized, 1 failed, 0 already in " + all.string() +
                     "\n") != std::string::npos);
    const auto one = read_lines(all);
    REQUIRE(one.size() == 8);
    CHECK(one.at("blank")["error"]["id"] == "locost.input.no_text");
    for (int i = 0; i < 7; ++i) {
        const auto& j = one.at("doc-" + std::to_string(i));
        CHECK(j["summary"].is_string());
        CHECK(j["new_tokens"] == 6);
        CHECK(j["input_tokens"].get<int>() > 100);
        CHECK(j["peak_rss_bytes"].get<double>() > 0);
    }
    // An existing results file is not overwritten without --resume.
    r = run_tool(base + " --out " + all.string());
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.corpus.output_exists] summarize: " + all.string() +
              " exists; give '--resume' to continue it (documents already summarized there are skipped) or remove it\n");

    // A local loop standing in for a Slurm job array / Kubernetes Indexed Job of 3 workers; the
    // merged shards hold the same lines as the single run (greedy decoding is deterministic).
    std::map<std::string, nlohmann::json> merged;
    for (int k = 0; k < 3; ++k) {
        const fs::path part = tmp / ("part-" + std::to_string(k) + ".jsonl");
        r = run_tool(base + " --shard " + std::to_string(k) + "/3 --out " + part.string());
        CHECK(r.rc == (k == 1 ? 1 : 0));  // "blank" is document 7: 7 mod 3 = 1
        for (auto& [id, j] : read_lines(part)) {
            CHECK(merged.count(id) == 0);
            merged[id] = j;
        }
    }
    REQUIRE(merged.size() == one.size());
    for (const auto& [id, j] : one) CHECK(merged.at(id).value("summary", "") == j.value("summary", ""));

    // Interrupted: a torn last line and missing documents. --resume cuts the torn line, keeps the
    // finished ones and runs the rest (and retries the error).
    const std::string whole = slurp(all);
    std::size_t cut = 0;
    for (int n = 0; n < 3; ++n) cut = whole.find('\n', cut) + 1;
    const fs::path resumed = tmp / "resumed.jsonl";
    std::ofstream(resumed, std::ios::binary) << whole.substr(0, cut + 20);
    r = run_tool(base + " --resume --out " + resumed.string());
    CHECK(r.rc == 1);
    CHECK(r.err.find("summarize: " + resumed.string() + ": removing a torn last line (20 bytes) left by an interrupted run\n") !=
          std::string::npos);
    CHECK(r.err.find("8 of 8 documents are this shard's; 4 summarized, 1 failed, 3 already in") != std::string::npos);
    const auto again = read_lines(resumed);
    REQUIRE(again.size() == 8);
    for (const auto& [id, j] : one) CHECK(again.at(id).value("summary", "") == j.value("summary", ""));

    // --resume on a file this tool did not write refuses it before changing a byte: a user's
    // notes, or result lines followed by something that is no torn result line.
    const fs::path notes = tmp / "notes.jsonl";
    for (const std::string& content : {std::string("my notes\nsecond line"), whole.substr(0, cut) + "not a result"}) {
        std::ofstream(notes, std::ios::binary | std::ios::trunc) << content;
        r = run_tool(base + " --resume --out " + notes.string());
        CHECK(r.rc == 1);
        CHECK(r.err ==
              "locost: [locost.corpus.bad_results] " + notes.string() + (content[0] == 'm' ? ":1" : ":4") +
                  ": not a result line this tool wrote; refusing to append to it\n");
        CHECK(slurp(notes) == content);
    }
    // A second job on the same --out is refused while the first holds it (here this test process
    // holds the lock the tool takes), naming the holder; the lock goes with the holder.
    {
        const std::string before = slurp(resumed);  // before the lock: closing any descriptor of the file drops it
        const int fd = ::open(resumed.c_str(), O_RDWR | O_CLOEXEC);
        REQUIRE(fd >= 0);
        struct ::flock l {};
        l.l_type = F_WRLCK;
        l.l_whence = SEEK_SET;
        REQUIRE(::fcntl(fd, F_SETLK, &l) == 0);
        r = run_tool(base + " --resume --out " + resumed.string());
        CHECK(r.rc == 1);
        CHECK(r.err ==
              "locost: [locost.corpus.output_locked] summarize: " + resumed.string() + " is being written by another job (process " +
                  std::to_string(::getpid()) + "); wait for it to end or give another '--out'\n");
        ::close(fd);
        CHECK(slurp(resumed) == before);
        r = run_tool(base + " --resume --out " + resumed.string());
        CHECK(r.err.find("8 of 8 documents are this shard's; 0 summarized, 1 failed, 7 already in") != std::string::npos);
    }

    // Batches by length (--max-batch-tokens): every document's summary and new tokens those of
    // its own run, the batch's time shared out, the error line the same; the batches under the
    // budget (documents x longest).
    int longest = 0;
    for (int i = 0; i < 7; ++i) longest = std::max(longest, one.at("doc-" + std::to_string(i))["input_tokens"].get<int>());
    for (const std::string& budget : {std::to_string(2 * longest - 1), std::string("100000")}) {  // the longest alone; one batch
        CAPTURE(budget);
        const fs::path batched = tmp / ("batched-" + budget + ".jsonl");
        r = run_tool(base + " --max-batch-tokens " + budget + " --out " + batched.string());
        CHECK(r.rc == 1);
        CHECK(r.err.find("8 of 8 documents are this shard's; 7 summarized, 1 failed, 0 already in") != std::string::npos);
        const auto b = read_lines(batched);
        REQUIRE(b.size() == 8);
        CHECK(b.at("blank")["error"]["id"] == "locost.input.no_text");
        std::size_t in_batches = 0;
        for (int i = 0; i < 7; ++i) {
            const auto& j = b.at("doc-" + std::to_string(i));
            const auto& alone = one.at("doc-" + std::to_string(i));
            CHECK(j["summary"] == alone["summary"]);
            CHECK(j["new_tokens"] == alone["new_tokens"]);
            CHECK(j["input_tokens"] == alone["input_tokens"]);
            CHECK(j["encode_s"].get<double>() > 0);
            if (j.contains("batch_documents")) {
                ++in_batches;
                CHECK(j["batch_documents"].get<int>() * j["input_tokens"].get<int>() <= std::stoi(budget));
            }
        }
        if (budget == "100000") CHECK(in_batches == 7);
        else CHECK((in_batches > 0 && in_batches < 7));
    }
    r = run_tool(base + " --max-batch-tokens -5 --out " + (tmp / "x.jsonl").string());
    CHECK(r.rc == 2);
    CHECK(r.err ==
          "locost: [locost.cli.bad_value] summarize: option '--max-batch-tokens' expects an integer in [0, 1099511627776], got '-5'\n");
    r = run_tool("summarize --model " + demo.string() + " --input " + (tmp / "docs" / "d0.txt").string() + " --max-batch-tokens 100");
    CHECK(r.rc == 2);
    CHECK(r.err ==
          "locost: [locost.cli.missing_option] summarize: option '--max-batch-tokens' belongs to corpus jobs: give '--inputs LIST' too\n");

    r = run_tool(base + " --shard 3/3 --out " + (tmp / "x.jsonl").string());
    CHECK(r.rc == 2);
    CHECK(r.err ==
          "locost: [locost.cli.bad_value] summarize: option '--shard' expects K/N with 0 <= K < N (this worker's index and the number of "
          "workers), got '3/3'\n");
    std::ofstream(tmp / "dup.txt") << "docs/d0.txt\ndocs/d0.txt\n";
    r = run_tool("summarize --model " + demo.string() + " --inputs " + (tmp / "dup.txt").string() + " --out " + (tmp / "x.jsonl").string());
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.corpus.bad_list] " + (tmp / "dup.txt").string() + ":2: the id 'docs/d0.txt' is listed twice\n");
    r = run_tool(base + " --out " + (tmp / "docs" / "d0.txt").string());
    CHECK(r.rc == 1);
    CHECK(r.err.rfind("locost: [locost.io.output_is_input] ", 0) == 0);
}

// ---- hostile caches, tokenizers and corpora (issue 60) ------------------------------------------

TEST_CASE("cli: a corpus list of any bytes, and sampled summaries that do not depend on the batch") {
    const fs::path tmp = fs::path(LOCOST_TEST_TMP) / "corpus-bytes";
    fs::remove_all(tmp);
    fs::create_directories(tmp / "docs");
    const fs::path demo = tmp / "demo-t5";
    REQUIRE(run_tool("demo-checkpoint --family t5 --config tiny --seed 1 --out " + demo.string()).rc == 0);
    const std::string book = slurp(fs::path(LOCOST_TEST_DATA) / ".." / ".." / "examples" / "data" / "pride_and_prejudice.txt");
    // A Latin-1 file name (present), one that is missing, and plain ones around them: every
    // document gets its line, the names written with \xNN for the bytes that are not UTF-8, and
    // --resume matches them.
    const std::string latin1 = "caf\xe9.txt", missing = "na\xefve.txt";
    std::ofstream(tmp / "docs" / latin1) << book.substr(2000, 700);
    std::ofstream(tmp / "docs" / "a.txt") << book.substr(5000, 600);
    std::ofstream(tmp / "docs" / "b.txt") << book.substr(9000, 650);
    std::ofstream(tmp / "list.txt") << "docs/a.txt\ndocs/" << latin1 << "\ndocs/" << missing << "\ndocs/b.txt\n";
    const std::string base =
        "summarize --model " + demo.string() + " --inputs " + (tmp / "list.txt").string() + " --max-new-tokens 6 --threads 1";
    auto lines_of = [&](const fs::path& p) {
        std::map<std::string, nlohmann::json> by_id;
        std::istringstream in(slurp(p));
        for (std::string line; std::getline(in, line);) {
            const auto j = nlohmann::json::parse(line);  // (every line is valid UTF-8 JSON)
            by_id[j["id"].get<std::string>()] = j;
        }
        return by_id;
    };
    const fs::path out = tmp / "out.jsonl";
    auto r = run_tool(base + " --out " + out.string());
    CHECK(r.rc == 1);
    CHECK(r.err.find("4 of 4 documents are this shard's; 3 summarized, 1 failed, 0 already in") != std::string::npos);
    CHECK(r.err.find("summarize: docs/na\\xefve.txt: [locost.io.open_failed] ") != std::string::npos);  // escaped on stderr too
    auto lines = lines_of(out);
    REQUIRE(lines.size() == 4);
    CHECK(lines.at("docs/caf\\xe9.txt")["path"] == (tmp / "docs").string() + "/caf\\xe9.txt");
    CHECK(lines.at("docs/caf\\xe9.txt").contains("summary"));
    CHECK(lines.at("docs/na\\xefve.txt")["error"]["id"] == "locost.io.open_failed");
    CHECK(lines.at("docs/b.txt").contains("summary"));  // the documents after it ran
    // Resumed: the summarized three are skipped, the failed one is retried and fails again.
    r = run_tool(base + " --resume --out " + out.string());
    CHECK(r.rc == 1);
    CHECK(r.err.find("4 of 4 documents are this shard's; 0 summarized, 1 failed, 3 already in") != std::string::npos);
    // Two names written alike are refused before any work.
    std::ofstream(tmp / "clash.txt") << "docs/caf\\xe9.txt\ndocs/" << latin1 << "\n";
    r = run_tool("summarize --model " + demo.string() + " --inputs " + (tmp / "clash.txt").string() + " --out " +
                 (tmp / "x.jsonl").string());
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.corpus.bad_list] " + (tmp / "clash.txt").string() + ":2: the id 'docs/caf\\xe9.txt' is listed twice\n");

    // Sampling: a document's summary is that of its own run whatever its batch (one random stream
    // per document, from the seed).
    std::ofstream(tmp / "plain.txt") << "docs/a.txt\ndocs/b.txt\ndocs/" << latin1 << "\n";
    const std::string sample = "summarize --model " + demo.string() + " --inputs " + (tmp / "plain.txt").string() +
        " --max-new-tokens 8 --min-new-tokens 8 --do-sample --seed 5 --threads 1";
    std::map<std::string, nlohmann::json> runs[2];
    int k = 0;
    for (const char* batching : {"0", "4096"}) {
        const fs::path o = tmp / ("sampled-" + std::string(batching) + ".jsonl");
        REQUIRE(run_tool(sample + " --max-batch-tokens " + batching + " --out " + o.string()).rc == 0);
        runs[k++] = lines_of(o);
    }
    REQUIRE(runs[0].size() == 3);
    bool batched = false;
    for (const auto& [id, j] : runs[0]) {
        CAPTURE(id);
        CHECK(runs[1].at(id)["summary"] == j["summary"]);
        batched = batched || runs[1].at(id).contains("batch_documents");
    }
    CHECK(batched);
}

// ---- locost eval: a corpus job scored with ROUGE (tools/locost/cmd_eval.hpp) --------------------

TEST_CASE("cli: eval summarizes a data set, scores it with ROUGE, resumes, and names a bad line") {
    const fs::path tmp = fs::path(LOCOST_TEST_TMP) / "eval";
    fs::remove_all(tmp);
    fs::create_directories(tmp / "docs");
    const fs::path demo = tmp / "demo-t5";
    REQUIRE(run_tool("demo-checkpoint --family t5 --config tiny --seed 1 --out " + demo.string()).rc == 0);
    const std::string book = slurp(fs::path(LOCOST_TEST_DATA) / ".." / ".." / "examples" / "data" / "pride_and_prejudice.txt");
    std::vector<std::string> documents;
    for (int i = 0; i < 5; ++i) documents.push_back(book.substr(static_cast<std::size_t>(3000 + 1700 * i), static_cast<std::size_t>(500)));
    std::ofstream(tmp / "docs" / "d4.txt") << documents[4];
    auto write_data = [&](const fs::path& p, const std::vector<std::string>& refs) {
        std::ofstream f(p);
        for (int i = 0; i < 4; ++i)
            f << nlohmann::json{{"id", "doc-" + std::to_string(i)}, {"document", documents[i]}, {"summary", refs[i]}}.dump() << "\n";
        f << nlohmann::json{{"id", "doc-4"}, {"path", "docs/d4.txt"}, {"summary", refs[4]}}.dump() << "\n";
    };
    const std::vector<std::string> unrelated(5, "zzqx vvkj");
    write_data(tmp / "unrelated.jsonl", unrelated);
    const std::string base = "eval --model " + demo.string() + " --max-new-tokens 6 --threads 1 --bootstrap-samples 200";

    // References that share no word with anything: every score 0, every document summarized.
    auto r = run_tool(base + " --data " + (tmp / "unrelated.jsonl").string() + " --out " + (tmp / "r.jsonl").string() + " --scores " +
                      (tmp / "s.json").string());
    REQUIRE(r.rc == 0);
    CHECK(r.out.rfind("eval " + (tmp / "unrelated.jsonl").string() +
                          ": 5 documents, 5 summarized, 0 failed; ROUGE x100, Porter stemmer, 95% interval of 200 resamples\n",
                      0) == 0);
    CHECK(r.out.find("\nrouge1        0.00  (  0.00 -   0.00)      0.00      0.00\n") != std::string::npos);
    CHECK(r.out.find("\nspeed: ") != std::string::npos);
    const auto scores = nlohmann::json::parse(slurp(tmp / "s.json"));
    CHECK(scores["documents"] == 5);
    CHECK(scores["summarized"] == 5);
    CHECK(scores["use_stemmer"] == true);
    CHECK(scores["rouge"]["rougeLsum"]["fmeasure"]["high"] == 0.0);
    CHECK(scores["speed"]["new_tokens"].get<double>() > 0);
    CHECK(scores["peak_rss_bytes"].get<double>() > 0);

    // The same results scored again without a model (--results): the same figures.
    r = run_tool("eval --data " + (tmp / "unrelated.jsonl").string() + " --results " + (tmp / "r.jsonl").string() +
                 " --bootstrap-samples 200 --scores " + (tmp / "s-again.json").string());
    CHECK(r.rc == 0);
    CHECK(nlohmann::json::parse(slurp(tmp / "s-again.json"))["rouge"] == scores["rouge"]);
    r = run_tool("eval --data " + (tmp / "unrelated.jsonl").string() + " --results " + (tmp / "r.jsonl").string() + " --model " +
                 demo.string());
    CHECK(r.rc == 2);
    CHECK(r.err ==
          "locost: [locost.cli.bad_value] eval: option '--model' runs a model; '--results' scores summaries already made: give one "
          "or the other\n");
    std::ofstream(tmp / "baseline.jsonl") << R"({"id": "doc-0", "summary": "zzqx vvkj"})"
                                          << "\n"
                                          << R"({"id": "doc-1", "summary": 7})"
                                          << "\n";
    r = run_tool("eval --data " + (tmp / "unrelated.jsonl").string() + " --results " + (tmp / "baseline.jsonl").string());
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.eval.bad_data] " + (tmp / "baseline.jsonl").string() +
              ":2: expected a result line {\"id\": ..., \"summary\": TEXT} (or an error line)\n");

    // The generated summaries as references: each summary scores 1 against itself.
    std::map<std::string, std::string> generated;
    {
        std::istringstream in(slurp(tmp / "r.jsonl"));
        for (std::string line; std::getline(in, line);) {
            const auto j = nlohmann::json::parse(line);
            generated[j["id"].get<std::string>()] = j["summary"].get<std::string>();
        }
    }
    REQUIRE(generated.size() == 5);
    std::vector<std::string> own;
    for (int i = 0; i < 5; ++i) own.push_back(generated.at("doc-" + std::to_string(i)));
    write_data(tmp / "own.jsonl", own);
    // (an untrained model's text: count only what rouge-score's tokenizer keeps of it)
    bool words = true;
    for (const auto& s : own) words = words && locost::eval::rouge_tokens(s, true).size() >= 2;
    r = run_tool(base + " --data " + (tmp / "own.jsonl").string() + " --out " + (tmp / "own-r.jsonl").string() + " --scores " +
                 (tmp / "own-s.json").string() + " --rouge-stemmer none");
    REQUIRE(r.rc == 0);
    const auto perfect = nlohmann::json::parse(slurp(tmp / "own-s.json"));
    CHECK(perfect["use_stemmer"] == false);
    if (words)
        for (const char* k : {"rouge1", "rouge2", "rougeL", "rougeLsum"}) CHECK(perfect["rouge"][k]["fmeasure"]["low"] == 1.0);
    // The same data again on the same results, resumed: nothing runs again, the same figures.
    {
        std::string lines = slurp(tmp / "own-r.jsonl");
        lines.erase(lines.rfind('\n', lines.size() - 2) + 1);  // as if the job had stopped before the last document
        std::ofstream(tmp / "own-r.jsonl", std::ios::trunc) << lines;
    }
    r = run_tool(base + " --data " + (tmp / "own.jsonl").string() + " --out " + (tmp / "own-r.jsonl").string() + " --scores " +
                 (tmp / "own-s2.json").string() + " --rouge-stemmer none --resume");
    REQUIRE(r.rc == 0);
    CHECK(r.err.find("eval: shard 0/1: 5 of 5 documents are this shard's; 1 summarized, 0 failed, 4 already in ") != std::string::npos);
    CHECK(nlohmann::json::parse(slurp(tmp / "own-s2.json"))["rouge"] == perfect["rouge"]);

    // Bad data: the line named, before the model is loaded.
    std::ofstream(tmp / "bad.jsonl") << R"({"id": 1, "document": "a text", "summary": "x"})"
                                     << "\n"
                                     << R"({"id": 2, "document": "a text"})"
                                     << "\n";
    r = run_tool(base + " --data " + (tmp / "bad.jsonl").string());
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.eval.bad_data] " + (tmp / "bad.jsonl").string() + ":2: expected a string \"summary\" (the reference)\n");
    r = run_tool(base + " --data " + (tmp / "unrelated.jsonl").string() + " --resume");
    CHECK(r.rc == 2);  // a usage error
    CHECK(r.err == "locost: [locost.cli.missing_option] eval: option '--resume' continues the results of '--out FILE': give it too\n");
    // Results of another data set are not scored as this one's.
    std::ofstream(tmp / "other.jsonl") << R"({"id": "elsewhere", "document": "a text", "summary": "x"})"
                                       << "\n";
    r = run_tool(base + " --data " + (tmp / "other.jsonl").string() + " --out " + (tmp / "r.jsonl").string() + " --resume");
    CHECK(r.rc == 1);
    CHECK(r.err.find("[locost.eval.bad_data] " + (tmp / "r.jsonl").string() + ": holds a result for id 'doc-0', which " +
                     (tmp / "other.jsonl").string() + " does not list (results of another data set?)") != std::string::npos);
}
