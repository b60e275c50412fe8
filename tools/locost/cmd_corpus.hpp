// locost summarize --inputs LIST --out results.jsonl [--shard K/N] [--resume]: a corpus job.
//
// The model is loaded once; each document of the shard is read, checked, estimated against the
// memory budget, summarized, and its result appended to results.jsonl as one JSON line
// (id, path, summary, input tokens, timings, peak memory of that document), or an error line
// (id, path, error id and message) when that document cannot be summarized — the job goes on.
// Lines are written whole: one write() per line, fsync'ed, and a write that fails or comes up
// short is cut back, so a job killed at any moment leaves whole lines (a torn last line from a
// crash of the machine is removed by --resume). The file is locked by the job writing it. --resume skips the ids already summarized in
// results.jsonl (error lines are retried); without it an existing results.jsonl is refused.
//
// Scaling out is the scheduler's: N workers run --shard 0/N … N-1/N (document i goes to shard
// i mod N) into N files, and the results are their concatenation (docs/tool.md, "Corpus jobs").
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "budget.hpp"
#include "input.hpp"
#include "progress.hpp"

namespace locost::cli {

// One document of a list: its id and path as given (any bytes: a file name need not be UTF-8), and
// both as results.jsonl writes them (UTF-8: each byte of an ill-formed sequence as \xNN,
// escape_invalid_utf8), the written id being what --resume matches.
struct corpus_document {
    std::string id, path;
    std::string shown_id, shown_path;
    std::optional<std::string> text;  // the document itself (eval's data file gives it inline); else read from path
};

// LIST: one path per line (blank lines and lines starting with '#' skipped; the id is the path as
// written), or JSON lines {"id": ..., "path": ...} when its first non-blank character is '{'.
// Relative paths are relative to LIST's directory. Two ids that are written alike (the same id
// twice, or a name with a literal \xNN and one with that byte) are an error. Error:
// corpus.bad_list naming the line.
inline std::vector<corpus_document> read_corpus_list(const std::string& list) {
    namespace fs = std::filesystem;
    const std::string text = read_text_input(list, "--inputs");
    const std::size_t first = text.find_first_not_of(" \t\r\n");
    const bool jsonl = first != std::string::npos && text[first] == '{';
    const fs::path base = list == "-" ? fs::path() : fs::path(list).parent_path();
    std::vector<corpus_document> docs;
    std::set<std::string> ids;
    std::istringstream in(text);
    std::string line;
    auto bad = [&](std::size_t n, const std::string& why) {
        throw error("corpus.bad_list", io::detail::printable(list, 400) + ":" + std::to_string(n) + ": " + why);
    };
    for (std::size_t n = 1; std::getline(in, line); ++n) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
        const std::size_t b = line.find_first_not_of(" \t");
        if (b == std::string::npos || (!jsonl && line[b] == '#')) continue;
        corpus_document d;
        if (jsonl) {
            io::json j;
            try {
                j = io::json::parse(line.substr(b));
            } catch (const io::json::exception&) { bad(n, "not a JSON object (expected {\"id\": ..., \"path\": ...})"); }
            if (!j.is_object() || !j.contains("path") || !j["path"].is_string() || j["path"].get<std::string>().empty())
                bad(n, "expected an object with a non-empty string \"path\"");
            d.path = j["path"].get<std::string>();
            if (!j.contains("id")) d.id = d.path;
            else if (j["id"].is_string()) d.id = j["id"].get<std::string>();
            else if (j["id"].is_number_integer()) d.id = j["id"].dump();
            else bad(n, "\"id\" must be a string or an integer");
        } else {
            d.id = d.path = line.substr(b);
        }
        d.shown_id = escape_invalid_utf8(d.id);
        if (!ids.insert(d.shown_id).second) bad(n, "the id '" + io::detail::printable(d.id) + "' is listed twice");
        if (fs::path(d.path).is_relative() && !base.empty()) d.path = (base / d.path).string();
        d.shown_path = escape_invalid_utf8(d.path);
        docs.push_back(std::move(d));
    }
    if (docs.empty()) throw error("corpus.bad_list", list + ": lists no documents");
    return docs;
}

// "K/N" with 0 <= K < N. Error: cli.bad_value.
inline std::pair<index_t, index_t> parse_shard(const std::string& v) {
    const std::size_t slash = v.find('/');
    auto number = [](const std::string& s, index_t& out) {
        if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return false;
        out = std::stoll(s);
        return true;
    };
    index_t k = -1, n = -1;
    if (slash == std::string::npos || !number(v.substr(0, slash), k) || !number(v.substr(slash + 1), n) || n < 1 || k >= n)
        throw error("cli.bad_value",
                    "summarize: option '--shard' expects K/N with 0 <= K < N (this worker's index and the number of "
                    "workers), got '" +
                        io::detail::printable(v) + "'");
    return {k, n};
}

// results.jsonl opened for appending whole lines, by this job alone.
//
// The file is locked (a POSIX record lock, which the kernel drops when the process ends in any
// way, SIGKILL included) before anything is read or cut, so that a second job on the same --out is
// refused, with the holder's process id, instead of summarizing every document twice. With
// --resume every complete line must be one this tool writes (an object with a string "id" and
// "path", and a "summary" or an "error"), else the file is refused untouched; only then is a torn
// last line (one that starts as a result line but never ended) cut.
class jsonl_appender {
public:
    jsonl_appender(const std::string& path, bool resume, std::set<std::string>& done, const std::string& command = "summarize")
        : path_(path), command_(command) {
        namespace fs = std::filesystem;
        std::error_code ec;
        const bool existed = fs::exists(path, ec);
        if (existed && !resume)
            throw error("corpus.output_exists",
                        command + ": " + path +
                            " exists; give '--resume' to continue it (documents already summarized "
                            "there are skipped) or remove it");
        fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd_ < 0) throw error("io.open_failed", path + ": cannot open for appending: " + std::strerror(errno));
        lock();
        if (!existed) return;
        const std::string old = read_all();
        std::size_t keep = old.rfind('\n');
        keep = keep == std::string::npos ? 0 : keep + 1;
        std::size_t n = 1;
        for (std::size_t b = 0; b < keep; ++n) {
            const std::size_t e = old.find('\n', b);
            const std::string_view line(old.data() + b, e - b);
            b = e + 1;
            io::json j;
            try {
                j = io::json::parse(line);
            } catch (const io::json::exception&) {}
            if (!is_result_line(j))
                throw error("corpus.bad_results",
                            path + ":" + std::to_string(n) + ": not a result line this tool wrote; refusing to append to it");
            if (j.contains("summary")) done.insert(j["id"].get<std::string>());
        }
        if (keep < old.size()) {
            if (old.compare(keep, 2, "{\"") != 0)
                throw error("corpus.bad_results",
                            path + ":" + std::to_string(n) + ": not a result line this tool wrote; refusing to append to it");
            std::fprintf(stderr, "%s: %s: removing a torn last line (%zu bytes) left by an interrupted run\n", command.c_str(),
                         path.c_str(), old.size() - keep);
            if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0)
                throw error("io.write_failed", path + ": cannot cut the torn last line: " + std::strerror(errno));
        }
    }
    ~jsonl_appender() {
        if (fd_ >= 0) ::close(fd_);
    }
    jsonl_appender(const jsonl_appender&) = delete;
    jsonl_appender& operator=(const jsonl_appender&) = delete;

    void append(const io::json& j) {
        const std::string line = j.dump() + "\n";
        const off_t before = ::lseek(fd_, 0, SEEK_END);
        std::size_t done = 0;
        while (done < line.size()) {
            const ::ssize_t w = ::write(fd_, line.data() + done, line.size() - done);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                const int e = errno;
                if (before >= 0) (void)::ftruncate(fd_, before);  // never leave part of a line
                throw error("io.write_failed", path_ + ": cannot append a result line: " + std::strerror(w < 0 ? e : ENOSPC));
            }
            done += static_cast<std::size_t>(w);
        }
        if (::fsync(fd_) != 0) throw error("io.write_failed", path_ + ": fsync failed: " + std::strerror(errno));
    }

private:
    static bool is_result_line(const io::json& j) {
        if (!j.is_object() || !j.contains("id") || !j["id"].is_string() || !j.contains("path") || !j["path"].is_string()) return false;
        return (j.contains("summary") && j["summary"].is_string()) || (j.contains("error") && j["error"].is_object());
    }

    // Error: corpus.output_locked naming the process that holds the file.
    void lock() {
        struct ::flock l {};
        l.l_type = F_WRLCK;
        l.l_whence = SEEK_SET;
        if (::fcntl(fd_, F_SETLK, &l) == 0) return;
        const int e = errno;
        if (e != EACCES && e != EAGAIN) {
            ::close(fd_);
            fd_ = -1;
            throw error("io.open_failed", path_ + ": cannot lock for appending: " + std::strerror(e));
        }
        struct ::flock holder {};
        holder.l_type = F_WRLCK;
        holder.l_whence = SEEK_SET;
        const bool known = ::fcntl(fd_, F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK;
        ::close(fd_);
        fd_ = -1;
        throw error("corpus.output_locked",
                    command_ + ": " + path_ + " is being written by another job" +
                        (known ? " (process " + std::to_string(holder.l_pid) + ")" : std::string()) +
                        "; wait for it to end or give another '--out'");
    }

    // The file's content, read through the locked descriptor (closing another descriptor of the
    // same file would drop a POSIX lock).
    std::string read_all() const {
        std::string s;
        char buf[1 << 16];
        for (off_t at = 0;;) {
            const ::ssize_t r = ::pread(fd_, buf, sizeof buf, at);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) throw error("io.read_failed", path_ + ": cannot read: " + std::strerror(errno));
            if (r == 0) return s;
            s.append(buf, static_cast<std::size_t>(r));
            at += r;
        }
    }

    std::string path_;
    std::string command_;
    int fd_ = -1;
};

// Resets the process's peak RSS (Linux: clear_refs 5) so each document reports its own.
inline void reset_peak_rss() {
    const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    (void)!::write(fd, "5", 1);
    ::close(fd);
}

// What a corpus run did with the documents of its shard.
struct corpus_tally {
    std::size_t mine = 0, ran = 0, failed = 0, skipped = 0;
};

// Summarizes `docs` (this worker's shard of them: --shard) into results file `out` (checked by the
// caller), one line per document, as a corpus job does; `command` names the run in messages
// (summarize, eval). The checkpoint's summarization settings apply (prepare_summarize).
inline corpus_tally summarize_corpus(const args& a, const std::vector<corpus_document>& docs, const std::string& out,
                                     const std::string& command) {
    const auto [shard, shards] = a.has("shard") ? parse_shard(a.required("shard")) : std::pair<index_t, index_t>{0, 1};

    const auto setup = prepare_summarize(a, command);
    const auto& [ck, mo, cfg_ptr, go, tok, prefix, defaults] = setup;
    const auto& cfg = models::common(*cfg_ptr);
    std::set<std::string> done;
    jsonl_appender results(out, a.flag("resume"), done, command);
    const auto host_budget = host_memory_budget(a, command);

    // --max-batch-tokens N: documents are read a window at a time, sorted by length and run in
    // batches of at most N padded tokens (generation::length_batches); 0, the default, runs each
    // document alone, in list order.
    const index_t batch_tokens = a.integer<index_t>("max-batch-tokens", 0, 0, index_t{1} << 40);
    std::optional<generator> model;  // loaded at the first document to run, on --device
    corpus_tally tally;
    auto& [mine, ran, failed, skipped] = tally;
    struct pending {
        const corpus_document* doc;
        std::vector<std::int64_t> ids;
        index_t uncut = 0;  // the ids before --max-input-tokens cut them
    };
    auto fail = [&](const corpus_document& d, const error& e) {
        if (e.id().rfind("io.write", 0) == 0 && e.message().find(out) != std::string::npos) throw e;
        io::json line = {{"id", d.shown_id}, {"path", d.shown_path}};
        line["error"] = {{"id", "locost." + e.id()}, {"message", escape_invalid_utf8(e.message())}};
        std::fprintf(stderr, "%s: %s: [locost.%s] %s\n", command.c_str(), io::detail::printable(d.id).c_str(), e.id().c_str(),
                     io::detail::printable(e.message(), 2000).c_str());
        ++failed;
        results.append(line);
    };
    // Whatever a document's run throws is that document's error line: a library error as it is,
    // an allocation failure as system.out_of_memory naming the phase, anything else as
    // system.unexpected (the job goes on with the next document).
    auto as_error = [&](const std::exception& e) {
        if (const auto* le = dynamic_cast<const error*>(&e)) return *le;
        if (dynamic_cast<const std::bad_alloc*>(&e))
            return error("system.out_of_memory", command + ": out of memory while " + current_phase());
        return error("system.unexpected", command + ": " + e.what());
    };
    // One batch: estimated, run, one line per document. A batch over the memory budget is split
    // in halves; a batch that fails otherwise is run again a document at a time, so that one
    // document's error is that document's line only.
    std::function<void(std::vector<pending>&)> run_batch = [&](std::vector<pending>& batch) {
        std::vector<std::vector<std::int64_t>> rows;
        for (const auto& p : batch) rows.push_back(p.ids);
        try {
            auto in = make_batch(std::move(rows), cfg.pad_token_id, command + ": a batch of documents");
            in.encode_each = true;
            auto request = batch_request(in);
            add_generation(request, a, go, defaults.source);
            (void)check_memory(a,
                               command + ": " + (batch.size() == 1 ? batch.front().doc->path : std::to_string(batch.size()) + " documents"),
                               ck, *cfg_ptr, mo, request);
            if (!model) model.emplace(make_generator(a, ck, mo, go, command));
            reset_peak_rss();
            const auto run = (*model)(in, command.c_str());
            const std::size_t per = run.result.sequences.size() / batch.size();
            index_t valid = 0;
            for (const auto& p : batch) valid += static_cast<index_t>(p.ids.size());
            for (std::size_t k = 0; k < batch.size(); ++k) {
                const auto& d = *batch[k].doc;
                io::json line = {{"id", d.shown_id}, {"path", d.shown_path}};
                std::vector<std::string> texts;
                index_t steps = 0;  // this document's new tokens: up to its eos, or all the batch's steps
                for (std::size_t j = 0; j < per; ++j) {
                    const auto& seq = run.result.sequences[k * per + j];
                    texts.push_back(tok.decode(std::vector<int>(seq.begin(), seq.end()), static_cast<int>(cfg.vocab_size)));
                    index_t n = run.result.steps;
                    for (std::size_t t = 1; t < seq.size(); ++t)
                        if (go.is_eos(seq[t])) {
                            n = static_cast<index_t>(t);
                            break;
                        }
                    steps = std::max(steps, std::min(n, run.result.steps));
                }
                line["summary"] = texts.front();
                if (texts.size() > 1) line["summaries"] = texts;
                line["input_tokens"] = static_cast<index_t>(batch[k].ids.size());
                if (batch[k].uncut > static_cast<index_t>(batch[k].ids.size())) line["truncated_from"] = batch[k].uncut;
                line["new_tokens"] = steps;
                // A batch's time shared out: the encode by tokens, the decode evenly.
                const double share = static_cast<double>(batch[k].ids.size()) / static_cast<double>(std::max<index_t>(valid, 1));
                line["encode_s"] = run.encode_s * share;
                line["decode_s"] = run.decode_s / static_cast<double>(batch.size());
                line["peak_rss_bytes"] = peak_rss_bytes();
                if (batch.size() > 1) line["batch_documents"] = batch.size();
                results.append(line);
                ++ran;
            }
        } catch (const std::exception& x) {
            const error e = as_error(x);
            if (batch.size() == 1) return fail(*batch.front().doc, e);
            if (e.id().rfind("io.write", 0) == 0 && e.message().find(out) != std::string::npos) throw;
            const std::size_t half = e.id() == "memory.over_budget" ? batch.size() / 2 : 1;
            for (std::size_t i = 0; i < batch.size(); i += half) {
                std::vector<pending> part(
                    std::make_move_iterator(batch.begin() + static_cast<std::ptrdiff_t>(i)),
                    std::make_move_iterator(batch.begin() + static_cast<std::ptrdiff_t>(std::min(batch.size(), i + half))));
                run_batch(part);
            }
        }
    };
    // A window of read documents: up to 256, or 64 batches' worth of tokens.
    std::vector<pending> window;
    index_t window_tokens = 0;
    auto flush = [&] {
        std::vector<index_t> lengths;
        for (const auto& p : window) lengths.push_back(static_cast<index_t>(p.ids.size()));
        for (const auto& group : generation::length_batches(lengths, batch_tokens)) {
            std::vector<pending> batch;
            for (std::size_t i : group) batch.push_back(std::move(window[i]));
            run_batch(batch);
        }
        window.clear();
        window_tokens = 0;
    };
    for (std::size_t i = 0; i < docs.size(); ++i) {
        if (static_cast<index_t>(i % static_cast<std::size_t>(shards)) != shard) continue;
        ++mine;
        const auto& d = docs[i];
        if (done.count(d.shown_id)) {
            ++skipped;
            continue;
        }
        try {
            const phase_scope phase("reading and tokenizing " + io::detail::printable(d.path));
            const std::string text = defaults.prefix + (d.text ? *d.text : read_text_input(d.path, "--inputs"));
            check_document_text(text, d.path);
            std::vector<std::int64_t> ids = text_ids(text, cfg.vocab_size, tok, host_budget, command + ": " + d.path);
            ids.insert(ids.begin(), prefix.begin(), prefix.end());
            std::vector<std::vector<std::int64_t>> one{std::move(ids)};
            const index_t uncut = cut_rows(a, one, cfg, static_cast<index_t>(prefix.size()), command + ": " + d.path).front();
            window_tokens += static_cast<index_t>(one[0].size());
            window.push_back({&d, std::move(one[0]), uncut});
        } catch (const std::exception& e) { fail(d, as_error(e)); }
        if (batch_tokens <= 0 || window.size() >= 256 || window_tokens >= 64 * batch_tokens) flush();
    }
    flush();
    std::fprintf(stderr, "%s: shard %lld/%lld: %zu of %zu documents are this shard's; %zu summarized, %zu failed, %zu already in %s\n",
                 command.c_str(), static_cast<long long>(shard), static_cast<long long>(shards), mine, docs.size(), ran, failed, skipped,
                 out.c_str());
    return tally;
}

inline int run_summarize_corpus(const args& a) {
    if (a.has("input")) throw error("cli.bad_value", "summarize: give either '--input' or '--inputs', not both");
    if (a.flag("dry-run")) throw error("cli.bad_value", "summarize: '--dry-run' estimates one document: use it with '--input'");
    const std::string list = a.required("inputs");
    const auto docs = read_corpus_list(list);
    std::vector<std::string> inputs = command_inputs(a);
    for (const auto& d : docs) inputs.push_back(d.path);
    const std::string out = io::check_output_path(a.required("out"), inputs, "summarize --out");
    return summarize_corpus(a, docs, out, "summarize").failed ? 1 : 0;
}

}  // namespace locost::cli
