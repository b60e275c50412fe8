// locost eval --model M --data FILE.jsonl [--out results.jsonl [--resume]] [--scores FILE.json]:
// summarizes every document of a data set as a corpus job does (batched with --max-batch-tokens,
// resumable through --out), then scores the summaries against the references with ROUGE
// (eval_report.hpp) and prints a table; --scores writes the figures as JSON.
//
// FILE.jsonl holds one object per line: {"id": ..., "document": "the text", "summary": "the
// reference"}, or "path" (a text file, relative to FILE.jsonl's directory) instead of "document".
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cmd_corpus.hpp"
#include "eval_report.hpp"

namespace locost::cli {

// A results file in a fresh private directory, removed with it: eval without --out.
struct scratch_results {
    std::string dir;
    scratch_results() {
        std::string t = (std::filesystem::temp_directory_path() / "locost-eval-XXXXXX").string();
        if (!::mkdtemp(t.data())) throw error("io.open_failed", t + ": cannot create a directory for the results");
        dir = t;
    }
    ~scratch_results() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
    std::string file() const { return dir + "/results.jsonl"; }
};

inline int run_eval(const args& a) {
    if (a.has("resume") && !a.has("out"))
        throw error("cli.missing_option", "eval: option '--resume' continues the results of '--out FILE': give it too");
    // --results FILE: score summaries made elsewhere (a corpus job's lines, a baseline's), run nothing.
    const bool score_only = a.has("results");
    if (score_only)
        for (const char* o : {"model", "out", "resume"})
            if (a.has(o))
                throw error("cli.bad_value",
                            std::string("eval: option '--") + o +
                                "' runs a model; '--results' scores summaries already made: give one or the other");
    if (!score_only && !a.has("model"))
        throw error("cli.missing_option",
                    "eval: option '--model' (to summarize the data) or '--results' (summaries already made) is required");
    const std::string data_path = a.required("data");
    const std::vector<eval_item> items = read_eval_data(data_path);
    std::vector<corpus_document> documents;
    std::map<std::string, std::string> references;  // by the id results.jsonl writes
    std::vector<std::string> inputs = command_inputs(a);
    inputs.push_back(data_path);
    for (const auto& item : items) {
        corpus_document d{item.id, item.path, escape_invalid_utf8(item.id), escape_invalid_utf8(item.path), item.text};
        references.emplace(d.shown_id, item.reference);
        if (!d.text) inputs.push_back(d.path);
        documents.push_back(std::move(d));
    }
    std::optional<scratch_results> scratch;
    std::string out;
    if (score_only) {
        out = a.required("results");
        inputs.push_back(out);
    } else if (a.has("out")) {
        out = io::check_output_path(a.required("out"), inputs, "eval --out");
        inputs.push_back(out);
    } else {
        scratch.emplace();
        out = scratch->file();
    }
    const std::string scores = a.has("scores") ? io::check_output_path(a.required("scores"), inputs, "eval --scores") : std::string();
    eval_settings s;
    s.use_stemmer = a.get("rouge-stemmer", "porter") == "porter";
    s.bootstrap_samples = a.integer<int>("bootstrap-samples", 1000, 1, 1000000);

    if (!score_only) (void)summarize_corpus(a, documents, out, "eval");

    // Every summary in the results, this run's and a resumed run's alike (an error line of a
    // document that a later run summarized is not a failure).
    std::vector<eval_row> rows;
    std::set<std::string> summarized;
    std::istringstream lines(read_text_input(out, score_only ? "--results" : "--out"));
    std::string line;
    for (std::size_t n = 1; std::getline(lines, line); ++n) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        io::json j;
        try {
            j = io::json::parse(line);
        } catch (const io::json::exception&) {}
        // (a corpus job's lines always are; --results may come from anywhere)
        if (!j.is_object() || !j.contains("id") || !(j["id"].is_string() || j["id"].is_number_integer()) ||
            (j.contains("summary") && !j["summary"].is_string()))
            throw error("eval.bad_data",
                        io::detail::printable(out, 400) + ":" + std::to_string(n) +
                            ": expected a result line {\"id\": ..., \"summary\": TEXT} (or an error line)");
        const std::string id = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
        const auto ref = references.find(id);
        if (ref == references.end())
            throw error("eval.bad_data",
                        out + ": holds a result for id '" + io::detail::printable(id) + "', which " + data_path +
                            " does not list (results of another data set?)");
        if (!j.contains("summary") || !summarized.insert(id).second) continue;
        eval_row r;
        r.id = id;
        r.reference = ref->second;
        r.summary = j["summary"].get<std::string>();
        r.input_tokens = j.value("input_tokens", 0.0);
        r.new_tokens = j.value("new_tokens", 0.0);
        r.encode_s = j.value("encode_s", 0.0);
        r.decode_s = j.value("decode_s", 0.0);
        r.peak_rss_bytes = j.value("peak_rss_bytes", 0.0);
        rows.push_back(std::move(r));
    }
    std::size_t failed = 0;
    for (const auto& d : documents)
        if (!summarized.count(d.shown_id)) ++failed;
    const nlohmann::json report = eval_report(rows, failed, s);
    const std::string table = eval_table(report, "eval " + data_path);
    std::fwrite(table.data(), 1, table.size(), stdout);
    if (!scores.empty()) io::write_file_atomically(scores, report.dump(1) + "\n");
    return failed ? 1 : 0;
}

}  // namespace locost::cli
