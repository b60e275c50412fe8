// --memory-budget and --dry-run: every command that loads a model estimates the memory it will
// need (models/memory_estimate.hpp) once its inputs are read and before the weights are loaded,
// refuses a request over the budget with the estimate and its cause, and with --dry-run prints
// the estimate and the work instead of running.
#pragma once
#include <cmath>
#include <cstdio>
#include <set>
#include <string>

#include "args.hpp"
#include "device.hpp"
#include "input.hpp"

namespace locost::cli {

inline const std::set<std::string> budget_valued = {"memory-budget"};
inline const std::set<std::string> budget_flags = {"dry-run"};

inline std::string budget_help() { return options::help_text_of({options::find("memory_budget"), options::find("dry_run")}); }

inline models::memory_budget read_memory_budget(const args& a, const std::string& /*command*/, device_kind device = device_kind::cpu) {
    if (!a.has("memory-budget")) {
        if (device == device_kind::cpu) return models::available_memory();
        const auto g = cuda_devices().front();
        return {static_cast<double>(g.free_bytes), "free memory of cuda:" + std::to_string(g.index)};
    }
    // (a size checked as it arrived: bytes, or "unlimited")
    const auto& v = a.value("memory-budget");
    if (v.is_string()) return {1.8e19, a.spelled("memory-budget") + " unlimited"};
    return {v.get<double>(), a.spelled("memory-budget")};
}

// The budget of host memory: --memory-budget on the CPU; with --device cuda (where that flag is
// the GPU's) the memory available now.
inline models::memory_budget host_memory_budget(const args& a, const std::string& command) {
    return read_device(a, command) == device_kind::cpu ? read_memory_budget(a, command) : models::available_memory();
}

// --input text, one row: a document (check_document_text), tokenized within the host budget.
inline std::vector<std::int64_t> read_text_ids(const args& a, const std::string& command, index_t vocab, const text::tokenizer& tok,
                                               const std::string& text_prefix = {}) {
    const std::string path = a.required("input");
    const std::string text = text_prefix + read_text_input(path, "--input");
    const std::string name = path == "-" ? "standard input" : path;
    check_document_text(text, name);
    return text_ids(text, vocab, tok, host_memory_budget(a, command), command + ": " + name);
}

// The request's shape as the estimate takes it, with the names the user would change.
inline models::memory_request batch_request(const batch_input& in) {
    models::memory_request r;
    r.batch = in.B;
    r.length = in.L;
    index_t valid = 0;
    for (const auto& row : in.rows) valid += static_cast<index_t>(row.size());
    r.valid_tokens = valid;
    r.documents_alone = in.encode_each;
    r.length_driver = in.B > 1 ? "the input length (longest row: " + std::to_string(in.L) + " tokens)"
                               : "the input length (" + std::to_string(in.L) + " tokens)";
    return r;
}

// The decoding part of a generate/summarize request.
// `defaults`: where the generation defaults came from (read_generation_defaults).
inline void add_generation(models::memory_request& r, const args& a, const generation::generation_options& go,
                           const std::string& defaults) {
    r.decoder = true;
    r.rows_per_document = std::max<index_t>(go.num_beams, go.do_sample ? go.num_return_sequences : 1);
    r.beam_search = go.num_beams > 1;
    r.decoder_positions = go.total_length() - 1;
    r.beams_driver = a.has("num-beams") ? a.spelled("num-beams") + " (" + std::to_string(go.num_beams) + ")"
                                        : "num_beams " + std::to_string(go.num_beams) + " (" + defaults + ")";
    if (a.has("max-new-tokens")) r.positions_driver = a.spelled("max-new-tokens") + " (" + std::to_string(*go.max_new_tokens) + ")";
    else if (a.has("max-length")) r.positions_driver = a.spelled("max-length") + " (" + std::to_string(go.max_length) + ")";
    else r.positions_driver = "the maximum length " + std::to_string(go.total_length()) + " (" + defaults + ")";
}

// Estimates, prints it with --dry-run, and refuses a request over the budget. Returns true when
// the command is to stop here (--dry-run). Error: memory.over_budget.
// With --device cuda the estimate and the budget are the GPU's.
inline bool check_memory(const args& a, const std::string& command, const io::checkpoint& ck, const models::any_config& family_cfg,
                         const models::model_options& mo, models::memory_request r) {
    r.device = read_device(a, command);
    const bool gpu = r.device == device_kind::cuda;
    const auto est = models::estimate_memory(family_cfg, mo, r);
    const models::model_config& cfg = models::common(family_cfg);
    const auto budget = read_memory_budget(a, command, r.device);
    if (a.flag("dry-run")) {
        const double valid = r.valid_tokens ? static_cast<double>(r.valid_tokens) : static_cast<double>(r.batch * r.length);
        const double padded = static_cast<double>(r.batch) * static_cast<double>(r.length);
        std::printf("dry run: locost %s on %s (%s)\n", command.c_str(), ck.dir().c_str(), cfg.model_type.c_str());
        std::printf("input      %lld row%s, longest %lld tokens: %.0f positions, %.0f of them padding\n", static_cast<long long>(r.batch),
                    r.batch == 1 ? "" : "s", static_cast<long long>(r.length), padded, padded - valid);
        if (r.decoder && !r.teacher_forcing)
            std::printf("decoding   up to %lld positions x %lld row%s per document%s\n", static_cast<long long>(r.decoder_positions),
                        static_cast<long long>(r.rows_per_document), r.rows_per_document == 1 ? "" : "s",
                        r.beam_search ? " (beam search)" : "");
        if (r.teacher_forcing)
            std::printf("decoding   %lld teacher-forced positions per row\n", static_cast<long long>(r.decoder_positions));
        if (gpu)
            std::printf("memory     estimated peak %s of GPU memory (float32 compute on cuda:0), by phase:\n%s",
                        models::format_bytes(est.peak()).c_str(), est.table().c_str());
        else
            std::printf("memory     estimated peak %s (float32 compute, %d threads), by phase:\n%s",
                        models::format_bytes(est.peak()).c_str(), r.threads > 0 ? r.threads : num_threads(), est.table().c_str());
        std::printf("budget     %s (%s): %s\n", budget.bytes >= 1e18 ? "none" : models::format_bytes(budget.bytes).c_str(),
                    budget.source.c_str(), est.peak() <= budget.bytes ? "fits" : "over budget, the command would be refused");
        std::fflush(stdout);
    }
    models::check_memory_budget(est, budget, command);
    return a.flag("dry-run");
}

}  // namespace locost::cli
