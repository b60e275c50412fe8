// What `locost eval` and Python's Model.evaluate read and report: a data set of documents and
// their references (read_eval_data), and ROUGE-1, ROUGE-2, ROUGE-L and
// ROUGE-Lsum of each generated summary against its reference (locost/eval/rouge.hpp, as
// rouge-score computes them), their precision, recall and F-measure aggregated over the documents
// with a percentile-bootstrap 95 % interval (low, mid, high; mid the median of the resampled means,
// as rouge-score's BootstrapAggregator reports), and the speed and peak memory of the run.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <locost/eval/rouge.hpp>

#include "input.hpp"

namespace locost::cli {

// One item of a data set: the document (its text, or a file) and its reference summary.
struct eval_item {
    std::string id, path;  // path: the text file, or FILE.jsonl:LINE for a text given inline
    std::optional<std::string> text;
    std::string reference;
};

// The data set at `path` (`locost eval --data`, Model.evaluate): one JSON object per line,
// {"id": ..., "document": TEXT, "summary": REFERENCE}, or "path" (a text file, relative to the data
// file's directory) instead of "document"; the id defaults to the line number. Error:
// eval.bad_data naming the line and what it lacks.
inline std::vector<eval_item> read_eval_data(const std::string& path) {
    namespace fs = std::filesystem;
    const std::string text = read_text_input(path, "--data");
    const fs::path base = path == "-" ? fs::path() : fs::path(path).parent_path();
    std::vector<eval_item> out;
    std::set<std::string> ids;
    std::istringstream in(text);
    std::string line;
    const std::string shape = "(expected {\"id\": ..., \"document\": ..., \"summary\": ...})";
    auto bad = [&](std::size_t n, const std::string& why) {
        throw error("eval.bad_data", io::detail::printable(path, 400) + ":" + std::to_string(n) + ": " + why);
    };
    for (std::size_t n = 1; std::getline(in, line); ++n) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception&) { bad(n, "not a JSON object " + shape); }
        if (!j.is_object()) bad(n, "not a JSON object " + shape);
        if (!j.contains("summary") || !j["summary"].is_string()) bad(n, "expected a string \"summary\" (the reference)");
        eval_item d;
        const bool has_text = j.contains("document"), has_path = j.contains("path");
        if (has_text == has_path) bad(n, "expected either a string \"document\" (the text) or a string \"path\" (a text file)");
        if (has_text) {
            if (!j["document"].is_string()) bad(n, "\"document\" must be a string");
            d.text = j["document"].get<std::string>();
            d.path = path + ":" + std::to_string(n);
        } else {
            if (!j["path"].is_string() || j["path"].get<std::string>().empty()) bad(n, "\"path\" must be a non-empty string");
            d.path = j["path"].get<std::string>();
            if (fs::path(d.path).is_relative() && !base.empty()) d.path = (base / d.path).string();
        }
        if (!j.contains("id")) d.id = std::to_string(n);
        else if (j["id"].is_string()) d.id = j["id"].get<std::string>();
        else if (j["id"].is_number_integer()) d.id = j["id"].dump();
        else bad(n, "\"id\" must be a string or an integer");
        if (!ids.insert(escape_invalid_utf8(d.id)).second) bad(n, "the id '" + io::detail::printable(d.id) + "' is listed twice");
        d.reference = j["summary"].get<std::string>();
        out.push_back(std::move(d));
    }
    if (out.empty()) throw error("eval.bad_data", io::detail::printable(path, 400) + ": holds no documents");
    return out;
}

// One summarized document: the reference, the summary and what its run cost.
struct eval_row {
    std::string id;
    std::string reference, summary;
    double input_tokens = 0, new_tokens = 0, encode_s = 0, decode_s = 0, peak_rss_bytes = 0;
};

struct eval_settings {
    bool use_stemmer = true;
    int bootstrap_samples = 1000;
    std::uint64_t seed = 0;  // the resampling's: the same rows give the same interval
};

// The report as JSON: {"documents", "summarized", "failed", "rouge": {"rouge1": {"fmeasure": {"low",
// "mid", "high"}, "precision": …, "recall": …}, …}, "use_stemmer", "bootstrap_samples", "speed":
// {"input_tokens", "new_tokens", "encode_s", "decode_s", "encode_tokens_per_s",
// "decode_ms_per_token"}, "peak_rss_bytes"}. The rouge values are fractions (0..1), as rouge-score's.
inline nlohmann::json eval_report(const std::vector<eval_row>& rows, std::size_t failed, const eval_settings& s) {
    using nlohmann::json;
    std::vector<eval::rouge_scores> scores;
    for (const auto& r : rows) scores.push_back(eval::rouge(r.reference, r.summary, s.use_stemmer));
    json out = {{"documents", rows.size() + failed}, {"summarized", rows.size()}, {"failed", failed}};
    json rouge = json::object();
    if (!rows.empty()) {
        eval::bootstrap_options o;
        o.n_samples = static_cast<std::size_t>(s.bootstrap_samples);
        o.seed = s.seed;
        const eval::rouge_aggregate agg = eval::bootstrap_aggregate(scores, o);
        const auto interval = [](const eval::rouge_interval& i) { return json{{"low", i.low}, {"mid", i.mid}, {"high", i.high}}; };
        const std::pair<const char*, const eval::rouge_prf_interval*> each[] = {
            {"rouge1", &agg.rouge1}, {"rouge2", &agg.rouge2}, {"rougeL", &agg.rougeL}, {"rougeLsum", &agg.rougeLsum}};
        for (const auto& [name, x] : each)
            rouge[name] = {{"precision", interval(x->precision)}, {"recall", interval(x->recall)}, {"fmeasure", interval(x->fmeasure)}};
    }
    out["rouge"] = rouge;
    out["use_stemmer"] = s.use_stemmer;
    out["bootstrap_samples"] = s.bootstrap_samples;
    double in = 0, newt = 0, enc = 0, dec = 0, peak = 0;
    for (const auto& r : rows) {
        in += r.input_tokens;
        newt += r.new_tokens;
        enc += r.encode_s;
        dec += r.decode_s;
        peak = std::max(peak, r.peak_rss_bytes);
    }
    out["speed"] = {{"input_tokens", static_cast<std::uint64_t>(in)},
                    {"new_tokens", static_cast<std::uint64_t>(newt)},
                    {"encode_s", enc},
                    {"decode_s", dec},
                    {"encode_tokens_per_s", enc > 0 ? in / enc : 0.0},
                    {"decode_ms_per_token", newt > 0 ? 1e3 * dec / newt : 0.0}};
    out["peak_rss_bytes"] = static_cast<std::uint64_t>(peak);
    return out;
}

// The report as the table `locost eval` prints: F-measures ×100 with their intervals, then the
// precision and recall, the speed and the memory.
inline std::string eval_table(const nlohmann::json& r, const std::string& what) {
    char line[256];
    std::string out;
    std::snprintf(line, sizeof line,
                  "%s: %zu documents, %zu summarized, %zu failed; ROUGE x100, %s stemmer, 95%% interval of %d resamples\n", what.c_str(),
                  r["documents"].get<std::size_t>(), r["summarized"].get<std::size_t>(), r["failed"].get<std::size_t>(),
                  r["use_stemmer"].get<bool>() ? "Porter" : "no", r["bootstrap_samples"].get<int>());
    out += line;
    if (r["rouge"].empty()) return out + "no summary to score\n";
    std::snprintf(line, sizeof line, "%-10s %7s %17s %9s %9s\n", "", "F", "(interval)", "P", "R");
    out += line;
    for (const char* k : {"rouge1", "rouge2", "rougeL", "rougeLsum"}) {
        const auto& x = r["rouge"][k];
        const auto mid = [&](const char* p) { return 100 * x[p]["mid"].get<double>(); };
        std::snprintf(line, sizeof line, "%-10s %7.2f  (%6.2f - %6.2f) %9.2f %9.2f\n", k, mid("fmeasure"),
                      100 * x["fmeasure"]["low"].get<double>(), 100 * x["fmeasure"]["high"].get<double>(), mid("precision"), mid("recall"));
        out += line;
    }
    const auto& sp = r["speed"];
    if (sp["encode_s"].get<double>() <= 0 && sp["decode_s"].get<double>() <= 0)
        return out + "speed: not measured (the summaries' lines carry no timings)\n";
    std::snprintf(line, sizeof line,
                  "speed: %.0f input tokens encoded at %.0f tokens/s; %.0f tokens generated at %.2f ms/token; peak memory %.0f MiB\n",
                  sp["input_tokens"].get<double>(), sp["encode_tokens_per_s"].get<double>(), sp["new_tokens"].get<double>(),
                  sp["decode_ms_per_token"].get<double>(), r["peak_rss_bytes"].get<double>() / (1024.0 * 1024.0));
    return out + line;
}

}  // namespace locost::cli
