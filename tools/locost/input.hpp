// Inputs of the tool's commands: token-id JSON files, text through the checkpoint's tokenizer
// (byte-level BPE or SentencePiece), and the padded (B, L) batch with its mask that the models take.
#pragma once
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace locost::cli {

// Caps on what one input may hold, checked before reading it (a file's size) or while reading
// it (standard input): a whole book is a few MB (War and Peace: 3.2 MB of text, 5 MB of ids).
inline constexpr std::uint64_t max_input_bytes = std::uint64_t{256} << 20;

inline std::string mib(std::uint64_t bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return b;
}

// The bytes of an input file (`-`: standard input). Only regular files are read: a directory, a
// device (/dev/zero would never end), a FIFO or a socket is io.not_a_file; more than
// max_input_bytes is io.input_too_large. Both name the path and the option.
inline std::string read_text_input(const std::string& path, const char* option) {
    const std::string too_large = " is more than the " + mib(max_input_bytes) + " an input may hold (" + option + ")";
    if (path == "-") {
        std::string text;
        char buf[1 << 16];
        while (std::cin.read(buf, sizeof buf) || std::cin.gcount() > 0) {
            text.append(buf, static_cast<std::size_t>(std::cin.gcount()));
            if (text.size() > max_input_bytes) throw error("io.input_too_large", "standard input" + too_large);
        }
        return text;
    }
    struct ::stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        const int e = errno;
        throw error("io.open_failed", path + ": cannot open (" + option + ")" + (e == ENOENT ? "" : std::string(": ") + std::strerror(e)));
    }
    if (!S_ISREG(st.st_mode)) {
        throw error("io.not_a_file", path + ": is " + io::detail::file_kind(st.st_mode) + ", expected a regular file (" + option + ")");
    }
    if (static_cast<std::uint64_t>(st.st_size) > max_input_bytes)
        throw error("io.input_too_large", path + ": " + mib(static_cast<std::uint64_t>(st.st_size)) + too_large);
    std::ifstream f(path, std::ios::binary);
    if (!f) throw error("io.open_failed", path + ": cannot open (" + option + ")");
    std::string text;
    text.resize(static_cast<std::size_t>(st.st_size));
    f.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(f.gcount()));
    if (f.bad()) throw error("io.read_failed", path + ": read error (" + option + ")");
    return text;
}

// A document to encode or summarize must be text: no NUL byte (a binary file), at most a tenth of
// its bytes outside well-formed UTF-8, and something besides whitespace and control characters
// (a blank file would "summarize" to one token). Errors: input.not_text, input.no_text.
inline void check_document_text(const std::string& text, const std::string& source) {
    const auto nul = text.find('\0');
    if (nul != std::string::npos)
        throw error("input.not_text", source + ": not a text file (a NUL byte at offset " + std::to_string(nul) + ")");
    std::size_t bad = 0, visible = 0;
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = n > 0 && i + n <= text.size() && !(n == 2 && c < 0xc2) && !(n == 4 && c > 0xf4);
        for (std::size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
        if (!ok) {
            ++bad;
            ++i;
            continue;
        }
        if (n > 1 || (c > 0x20 && c != 0x7f)) ++visible;
        i += n;
    }
    if (bad * 10 > text.size())
        throw error("input.not_text",
                    source + ": not UTF-8 text (" + std::to_string(bad) + " of its " + std::to_string(text.size()) +
                        " bytes are not well-formed UTF-8)");
    if (visible == 0)
        throw error("input.no_text",
                    source + ": no text to read (" + std::to_string(text.size()) + " bytes, all of them whitespace or control characters)");
}

// Rows of token ids padded into a (B, L) batch with pad_token_id, and the 0/1 mask.
struct batch_input {
    std::vector<std::vector<std::int64_t>> rows;
    tensor<std::int64_t> ids;  // (B, L)
    tensor<float> mask;        // (B, L)
    index_t B = 0, L = 0;
    // Rows encoded one at a time and decoded together (models::encode_each): each row's result
    // is that of its own run. Otherwise the padded batch is encoded at once.
    bool encode_each = false;
};

// Rows of very different lengths padded to the longest do work and take memory for positions
// that are masked out: a batch whose padding would exceed both its real ids and 2^20 positions is
// refused before it is laid out (one row of 10^6 ids among 1000 short ones would pad to 10^9).
// Error: input.padding_waste naming the source, the longest row and the numbers.
inline void check_padding(const std::vector<std::vector<std::int64_t>>& rows, const std::string& what) {
    double valid = 0;
    std::size_t longest = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
        valid += static_cast<double>(rows[r].size());
        if (rows[r].size() > rows[longest].size()) longest = r;
    }
    if (rows.empty()) return;
    const double padded = static_cast<double>(rows.size()) * static_cast<double>(rows[longest].size()), waste = padded - valid;
    if (waste <= valid || waste <= double(1 << 20)) return;
    char share[32];
    std::snprintf(share, sizeof share, "%.1f%%", 100.0 * waste / padded);
    throw error("input.padding_waste",
                what + ": its " + std::to_string(rows.size()) + " rows padded to the longest (row " + std::to_string(longest) + ", " +
                    std::to_string(rows[longest].size()) + " ids) would be " + std::to_string(static_cast<long long>(padded)) +
                    " positions for " + std::to_string(static_cast<long long>(valid)) + " real ids (" + share +
                    " padding); put rows of similar lengths in one file, or run the longest rows apart");
}

inline batch_input make_batch(std::vector<std::vector<std::int64_t>> rows, index_t pad, const std::string& what = "input") {
    check_padding(rows, what);
    batch_input in;
    in.B = static_cast<index_t>(rows.size());
    for (const auto& r : rows) in.L = std::max<index_t>(in.L, static_cast<index_t>(r.size()));
    in.ids = tensor<std::int64_t>({in.B, in.L}, pad);
    in.mask = tensor<float>({in.B, in.L}, 0.0f);
    for (index_t b = 0; b < in.B; ++b)
        for (index_t l = 0; l < static_cast<index_t>(rows[static_cast<std::size_t>(b)].size()); ++l) {
            in.ids[b * in.L + l] = rows[static_cast<std::size_t>(b)][static_cast<std::size_t>(l)];
            in.mask[b * in.L + l] = 1.0f;
        }
    in.rows = std::move(rows);
    return in;
}

// --max-input-tokens N (Python's max_input_tokens=): a row of more than N ids is cut to its first
// N, its closing eos kept, as transformers' truncation=True keeps the special tokens the tokenizer
// adds (T5's `</s>`; BART's `<s>` is first anyway). A question in front of the document (`prefix`
// ids) counts. Returns the rows' lengths before the cut (equal to after for a row not cut).
// Error: the front end's bad-value id when a question alone leaves no room for the document.
inline std::vector<index_t> cut_rows(const args& a, std::vector<std::vector<std::int64_t>>& rows, const models::model_config& cfg,
                                     index_t prefix, const std::string& what) {
    std::vector<index_t> before;
    for (const auto& r : rows) before.push_back(static_cast<index_t>(r.size()));
    if (!a.has("max_input_tokens")) return before;
    const index_t n = a.integer<index_t>("max_input_tokens", 0, 1, index_t{1} << 40);
    if (prefix >= n)
        throw error(a.bad_value_id(),
                    what + ": the question in front takes " + std::to_string(prefix) + " of the " + std::to_string(n) + " tokens " +
                        a.named("max_input_tokens") + " allows, leaving none for the document");
    for (auto& r : rows) {
        if (static_cast<index_t>(r.size()) <= n) continue;
        const bool closed = std::find(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end(), r.back()) != cfg.eos_token_ids.end();
        const std::int64_t last = r.back();
        r.resize(static_cast<std::size_t>(n));
        if (closed) r.back() = last;
    }
    return before;
}

// What the tool says on stderr when cut_rows cut a row ("" when none was): how many rows, and the
// longest's length before the cut.
inline std::string cut_note(const args& a, const std::vector<index_t>& before, const std::vector<std::vector<std::int64_t>>& rows,
                            const std::string& what) {
    std::size_t cut = 0;
    index_t longest = 0;
    for (std::size_t r = 0; r < rows.size(); ++r)
        if (before[r] > static_cast<index_t>(rows[r].size())) {
            ++cut;
            longest = std::max(longest, before[r]);
        }
    if (cut == 0) return {};
    return what + ": " +
        (rows.size() == 1 ? std::string("the input") : std::to_string(cut) + " of " + std::to_string(rows.size()) + " rows") + " cut to " +
        std::to_string(a.integer<index_t>("max_input_tokens", 0, 1, index_t{1} << 40)) + " tokens (" + a.spelled("max_input_tokens") +
        "; " + (cut == 1 ? "it had " : "the longest had ") + std::to_string(longest) + ")";
}

// The rows cut (cut_rows), the tool's note printed, and the batch made.
inline batch_input make_cut_batch(const args& a, std::vector<std::vector<std::int64_t>> rows, const models::model_config& cfg,
                                  index_t prefix, const std::string& what) {
    const auto before = cut_rows(a, rows, cfg, prefix, what);
    if (const auto note = cut_note(a, before, rows, what); !note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
    return make_batch(std::move(rows), cfg.pad_token_id, what);
}

// A token-id JSON file (one array, or an array of arrays), checked against the vocabulary.
inline io::id_batch read_ids_file(const std::string& path, index_t vocab, const char* option = "--ids") {
    auto batch = io::parse_ids_json(read_text_input(path, option), path);
    io::check_ids_vocab(batch, vocab, path);
    return batch;
}

// The Hugging Face cache --cache-dir names (cache_dir= in Python), else the environment's.
inline io::cache_location cache_of(const args& a) {
    if (!a.has("cache-dir")) return {};
    return {a.required("cache-dir"), a.spelled("cache-dir")};
}

// The tokenizer at `path`: a directory's (with its model family's conventions when it holds a
// config.json, models::open_tokenizer), or a SentencePiece model file; a repository id is looked
// up in `cache`.
inline text::tokenizer tokenizer_at(const std::string& path_or_name, const io::cache_location& cache) {
    const std::string path = io::resolve_model_dir(path_or_name, cache);  // org/name[@revision]: the Hugging Face cache
    std::error_code ec;
    return std::filesystem::is_directory(path, ec) ? models::open_tokenizer(path, cache) : text::tokenizer(path);
}

// The tokenizer of --tokenizer (a SentencePiece model or a tokenizer directory), or the checkpoint's own
// (models::open_tokenizer: the family's conventions).
inline text::tokenizer open_tokenizer(const args& a, const io::checkpoint& ck, const std::string& command) {
    if (a.has("tokenizer")) return tokenizer_at(a.required("tokenizer"), cache_of(a));
    try {
        return models::open_tokenizer(ck.dir(), ck.cache());
    } catch (const error& e) {
        if (e.id() != "tokenizer.not_found") throw;
        // (Named as the caller spells it: the tool's flag, Python's keyword.)
        const std::string give = a.spelled("tokenizer") == "tokenizer" ? "tokenizer=SPM|DIR|ORG/NAME to Model"
                                                                       : "'" + a.spelled("tokenizer") + " SPM|DIR|ORG/NAME'";
        throw error("cli.missing_option",
                    command + ": " + ck.dir() + " holds no tokenizer (tokenizer.json, vocab.json + merges.txt, or spiece.model); pass " +
                        give);
    }
}

// Refuses a text whose tokenizing would take more than `budget` (text::tokenizer::working_bytes_of:
// SentencePiece holds ~70 bytes per byte of text; a tokenizer.json whose normalizers lengthen the
// text, that much more). Error: memory.over_budget naming `what`.
inline void check_tokenizing(std::string_view text, const text::tokenizer& tok, const models::memory_budget& budget,
                             const std::string& what) {
    const std::size_t text_bytes = text.size();
    const double need = tok.working_bytes_of(text);
    if (need > budget.bytes)
        throw error("memory.over_budget",
                    what + ": tokenizing " + std::to_string(text_bytes) + " bytes of text needs an estimated " +
                        models::format_bytes(need) + " of memory, more than the budget of " + models::format_bytes(budget.bytes) + " (" +
                        budget.source + "); the tokenizer (" + tok.path() + ") holds about " +
                        models::format_bytes(tok.working_bytes(1 << 20)) + " per MiB of text, which grows with the document's size");
}

// Text tokenized with the tokenizer's conventions (T5: </s> appended), checked against the model
// (and its tokenizing against `budget` first: check_tokenizing).
inline std::vector<std::int64_t> text_ids(const std::string& text, index_t vocab, const text::tokenizer& tok,
                                          const models::memory_budget& budget, const std::string& what) {
    const phase_scope phase("tokenizing the input");
    check_tokenizing(text, tok, budget, what);
    const auto ids = tok.encode(text);
    std::vector<std::vector<std::int64_t>> rows{std::vector<std::int64_t>(ids.begin(), ids.end())};
    io::check_ids_vocab(io::id_batch{rows, false}, vocab, tok.path());
    return rows[0];
}

// The checkpoint --model names (config.json, generation_config.json and the weights' headers): a
// directory or a repository id in the Hugging Face cache; a SLED repository without weights takes
// its backbone's, from --backbone or the repository its underlying_config names.
inline io::checkpoint open_checkpoint(const args& a) {
    const phase_scope phase("reading the checkpoint");
    return models::open_checkpoint(a.required("model"),
                                   a.has("backbone") ? std::optional<std::string>(a.required("backbone")) : std::nullopt, cache_of(a));
}

// The generation defaults of a generate/summarize run and where they come from, with
// transformers' precedence: --generation-config FILE (e.g. generation_config_for_summarization.json),
// else the checkpoint's generation_config.json, else config.json's generation fields
// (GenerationConfig.from_model_config); then, with --task NAME, config.json's
// task_specific_params[NAME] over them (what a transformers pipeline for that task applies).
// `prefix`: the text a summarization pipeline puts in front of the document — the task's
// "prefix", else config.json's — for summarize to apply. Errors: cli.bad_value for an unknown task,
// generation_config.* naming the file.
struct generation_defaults {
    std::optional<io::generation_config> config;
    std::string source;  // "generation_config.json", "config.json", the --generation-config path; "… with task_specific_params['T']"
    std::string file;    // the same without the task
    std::string prefix;
    std::set<std::string> given;      // the fields the source (and the task) set
    std::set<std::string> from_task;  // of those, the ones the task set
    bool default_task = false;        // the task is the command's own (summarize's summarization), not --task
    // Whether the length comes from transformers' bare default (max_length 20): nothing given sets
    // max_length or max_new_tokens.
    bool default_length(const args& a) const {
        return !a.has("max_length") && !a.has("max_new_tokens") && !given.count("max_length") && !given.count("max_new_tokens");
    }
};
inline generation_defaults read_generation_defaults(const args& a, const io::checkpoint& ck, const std::string& command,
                                                    const char* default_task = nullptr) {
    generation_defaults d;
    io::json base;
    if (a.has("generation-config")) {
        d.source = a.required("generation-config");
        io::require_regular_file(d.source);
        base = io::parse_json(io::read_text_file(d.source), d.source, "generation_config");
    } else if (const auto g = io::directory_files(ck.dir()).find("generation_config.json")) {
        d.source = "generation_config.json";
        base = io::parse_json(io::read_text_file(*g), *g, "generation_config");
    } else {
        d.source = "config.json";
        base = ck.config_json();
    }
    d.file = d.source;
    const io::json& cj = ck.config_json();
    // A text prefix (T5's "summarize: ") is a string or absent; anything else is a broken config,
    // not a prefix to leave out quietly. Error: config.wrong_type naming the field.
    auto text_prefix = [&](const io::json& obj, const std::string& field, const std::string& where) -> std::optional<std::string> {
        const auto p = obj.find("prefix");
        if (p == obj.end() || p->is_null()) return std::nullopt;
        if (!p->is_string())
            throw error("config.wrong_type", where + ": field '" + field + "' is a JSON " + io::json_type_name(*p) + ", expected a string");
        return p->get<std::string>();
    };
    const std::string config_path = ck.dir() + "/config.json";
    if (auto p = text_prefix(cj, "prefix", config_path)) d.prefix = *p;
    // A summary's settings: summarize applies task_specific_params["summarization"] when the
    // checkpoint has it and no --task is given, as transformers' summarization pipeline does (its
    // bare generate() defaults stop at 20 tokens).
    std::string task;
    if (a.has("task")) task = a.required("task");
    else if (default_task) {
        const auto tsp = cj.find("task_specific_params");
        if (tsp != cj.end() && tsp->is_object() && tsp->contains(default_task) && (*tsp)[default_task].is_object()) {
            task = default_task;
            d.default_task = true;
        }
    }
    if (!task.empty()) {
        const auto tsp = cj.find("task_specific_params");
        // The tasks the file names, escaped, at most 12 of them (a file may hold thousands).
        std::string known;
        std::size_t count = 0;
        if (tsp != cj.end() && tsp->is_object())
            for (const auto& [k, v] : tsp->items())
                if (++count <= 12) known += (known.empty() ? "" : ", ") + io::detail::printable(k, 64);
        if (count > 12) known += ", and " + std::to_string(count - 12) + " more";
        if (tsp == cj.end() || !tsp->is_object() || !tsp->contains(task) || !(*tsp)[task].is_object())
            throw error(a.bad_value_id(),
                        command + ": " + a.named("task") + " names '" + io::detail::printable(task, 64) +
                            "', which config.json's task_specific_params " +
                            (known.empty() ? std::string("does not have (it has none)") : "does not have (it has: " + known + ")"));
        const io::json& params = (*tsp)[task];
        if (base.is_object())
            for (const auto& [k, v] : params.items())
                if (k != "prefix") {
                    base[k] = v;
                    d.from_task.insert(k);
                }
        if (auto p = text_prefix(params, "task_specific_params." + io::detail::printable(task, 64) + ".prefix", config_path)) d.prefix = *p;
        d.source += " with task_specific_params['" + io::detail::printable(task, 64) + "']";
    }
    const std::string where = a.has("generation-config") ? d.source : ck.dir() + "/" + d.source;
    d.config = io::parse_generation_config(base.dump(), where);
    if (base.is_object())
        for (const auto& [k, v] : base.items()) d.given.insert(k);
    return d;
}

// The files a command reads, for check_output_path: every regular file directly in the checkpoint
// directory (config, weights, shards, tokenizer) and every input option given (a tokenizer
// directory: its files).
inline std::vector<std::string> command_inputs(const args& a) {
    namespace fs = std::filesystem;
    std::vector<std::string> files;
    auto add_dir = [&](const std::string& dir) {
        std::error_code ec;
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
            if (it->is_regular_file(ec)) files.push_back(it->path().string());
    };
    for (const char* opt : {"model", "backbone", "tokenizer", "ids", "input", "inputs", "decoder-ids", "spm", "bpe"}) {
        if (!a.has(opt)) continue;
        const std::string given = a.required(opt);  // a model or tokenizer may be named from the Hugging Face cache
        const std::string v =
            std::string_view(opt) == "model" || std::string_view(opt) == "backbone" || std::string_view(opt) == "tokenizer"
            ? io::resolve_model_dir(given, cache_of(a))
            : given;
        std::error_code ec;
        if (fs::is_directory(v, ec)) add_dir(v);
        else files.push_back(v);
    }
    return files;
}

// --out, checked before any costly work (io::check_output_path): the path to write.
inline std::string checked_output(const args& a, const std::string& command, const char* option = "out") {
    return io::check_output_path(a.required(option), command_inputs(a), command + " --" + option);
}

}  // namespace locost::cli
