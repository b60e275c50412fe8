// locost serve: one model behind HTTP, in the OpenAI API's conventions (docs/serving.md).
//
// The HTTP layer is Debian's cpp-httplib (libcpp-httplib-dev): one small, maintained library
// that speaks HTTP/1.1 with keep-alive and chunked responses (what server-sent events need), with
// a thread pool, body and header limits; README.md says why it and not a hand-written server.
// The work runs in serve/scheduler.hpp; requests are read by serve/request.hpp.
#pragma once
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "budget.hpp"
#include "gen_flags.hpp"
#include "input.hpp"
#include "serve/connections.hpp"
#include "serve/request.hpp"
#include "serve/responses.hpp"
#include "serve/scheduler.hpp"

namespace locost::cli {

inline std::set<std::string> serve_valued() {
    return joined({{"model", "tokenizer", "generation-config", "task"},
                   model_valued,
                   budget_valued,
                   options::tool_names({options::group::server}, false)});
}
inline std::set<std::string> serve_flags() { return model_flags; }

inline std::string serve_help() {
    return std::string("usage: locost serve --model DIR|ORG/NAME [--host 127.0.0.1] [--port 8080] [--api-key KEY]\n"
                       "                    [--threads N] [--memory-budget SIZE] [--max-queue N] [--max-batch-tokens N]\n"
                       "                    [model options]\n"
                       "\n"
                       "Loads the checkpoint once and answers HTTP requests in the OpenAI API's conventions: POST\n"
                       "/v1/completions (prompt: the document, or a list of documents), POST /v1/chat/completions (the last\n"
                       "user message is the document; system and earlier user messages are the question put before it),\n"
                       "GET /v1/models, GET /health (503 while loading, 200 when ready), GET /metrics (Prometheus). Each\n"
                       "request takes the generation options under their Python names (num_beams, no_repeat_ngram_size, ...)\n"
                       "beside OpenAI's max_tokens, temperature, top_p, n, seed, stop and stream; what a request leaves out\n"
                       "is the checkpoint's generation_config.json. Requests decode together; each is admitted by its memory\n"
                       "estimate against the budget. Prints where it listens on stderr; SIGTERM or SIGINT stops it (exit 0).\n"
                       "See docs/serving.md.\n"
                       "\n") +
        options::help_text_of(options::records_of({options::group::server})) + "\n" +
        options::help_text_of({options::find("model"), options::find("tokenizer"), options::find("generation_config"),
                               options::find("task"), options::find("memory_budget")}) +
        model_help();  // --backbone, --cache-dir, --threads and the model's options
}

namespace serve_detail {

inline int signal_pipe[2] = {-1, -1};
inline void on_stop_signal(int sig) { (void)!::write(signal_pipe[1], &sig, sizeof sig); }

inline bool same_key(const std::string& a, const std::string& b) {
    // Compared in time that depends on the lengths only, not on where the first difference is.
    unsigned char d = a.size() == b.size() ? 0 : 1;
    const std::size_t n = std::max(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) d |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
    return d == 0;
}

// Requests by endpoint and status, for /metrics.
class request_counts {
public:
    void add(const std::string& path, int status) {
        const std::lock_guard<std::mutex> l(m_);
        ++counts_[{path, status}];
    }
    std::string text() const {
        const std::lock_guard<std::mutex> l(m_);
        std::string out;
        for (const auto& [k, n] : counts_)
            out += "locost_requests_total{endpoint=\"" + k.first + "\",status=\"" + std::to_string(k.second) + "\"} " + std::to_string(n) +
                "\n";
        return out;
    }

private:
    mutable std::mutex m_;
    std::map<std::pair<std::string, int>, std::uint64_t> counts_;
};

// Everything the handlers share.
struct server_state {
    std::string model_id, model_arg;
    std::string api_key;
    std::atomic<bool> ready{false}, shutting_down{false};
    std::unique_ptr<serve::model_type> model, short_model;
    std::shared_ptr<const models::any_config> cfg;
    models::model_options mo;
    std::optional<io::checkpoint> ck;
    std::optional<text::tokenizer> tok;
    generation_defaults defaults;
    std::unique_ptr<serve::scheduler> sched;
    std::unique_ptr<serve::connections> conns;
    double budget_bytes = 0, weights_bytes = 0;
    std::string budget_source;
    bool sled = false;
    request_counts counts;
    std::atomic<std::uint64_t> tokens_out{0};
    serve::request_limits limits;
    const args* given = nullptr;  // the command line (run_serve's, alive while the server is)
};

inline void send_error(httplib::Response& res, const std::string& id, const std::string& message) {
    const auto c = serve::classify(id);
    res.status = c.status;
    if (c.status == 429 || c.status == 503) res.set_header("Retry-After", "1");
    res.set_content(serve::error_body(id, message), "application/json");
}

inline std::string text_of_ids(const server_state& s, const std::vector<std::int64_t>& ids) {
    std::vector<int> v(ids.begin(), ids.end());
    return s.tok->decode(v, static_cast<int>(models::common(*s.cfg).vocab_size));
}

// Tokens a sequence generated (after the start token, through eos, without the pad after it).
inline std::size_t generated_tokens(const std::vector<std::int64_t>& seq, const generation::generation_options& go) {
    std::size_t n = 0;
    for (std::size_t i = 1; i < seq.size(); ++i) {
        ++n;
        if (go.is_eos(seq[i])) break;
    }
    return n;
}
inline bool ended_by_eos(const std::vector<std::int64_t>& seq, const generation::generation_options& go) {
    for (std::size_t i = 1; i < seq.size(); ++i)
        if (go.is_eos(seq[i])) return true;
    return false;
}

// A request read, tokenized, estimated and turned into jobs (not yet submitted).
struct prepared {
    serve::parsed_request req;
    generation::generation_options go;
    std::vector<std::shared_ptr<serve::job>> jobs;
    std::size_t prompt_tokens = 0;
};

inline prepared prepare(server_state& s, const std::string& body, serve::endpoint kind) {
    prepared p;
    p.req = serve::parse_request(body, kind, s.limits);
    if (!p.req.model.empty() && p.req.model != s.model_id && p.req.model != s.model_arg)
        throw error("server.unknown_model",
                    "field 'model' names '" + io::detail::printable(p.req.model, 100) + "'; this server serves '" + s.model_id +
                        "' (GET /v1/models)");
    const auto g = serve::given_of(p.req);
    try {
        p.go = options::read_generation_options(g, *s.cfg, s.defaults.config);
    } catch (const error& e) { serve::rethrow_as_spelled(e, p.req); }
    const auto& cfg = models::common(*s.cfg);
    const models::memory_budget budget{s.budget_bytes, s.budget_source};
    std::vector<std::int64_t> question;
    if (!p.req.question.empty())
        question = text_ids(p.req.question, cfg.vocab_size, *s.tok, budget,
                            kind == serve::endpoint::chat ? "the system and earlier user messages" : "field 'prefix'");
    // Jobs with the same options (as the request gave them, normalized by the table) decode together.
    std::string key;
    for (const auto* r : serve::request_records())
        if (g.has(std::string(r->name))) key += std::string(r->name) + "=" + g.value(std::string(r->name)).dump() + ";";
    // Sampling without a seed draws a fresh one, as OpenAI's API and transformers do (the tool's
    // seed 0 would give every request the same text); the seed it drew is its own batch's.
    if (p.go.do_sample && !g.has("seed")) {
        thread_local std::mt19937_64 fresh{std::random_device{}()};
        p.go.seed = fresh();
        key += "seed=" + std::to_string(p.go.seed) + ";";
    }
    for (std::size_t d = 0; d < p.req.documents.size(); ++d) {
        const std::string what = kind == serve::endpoint::chat ? "the last user message"
            : p.req.documents.size() > 1                       ? "field 'prompt[" + std::to_string(d) + "]'"
                                                               : "field 'prompt'";
        const std::string text = s.defaults.prefix + p.req.documents[d];
        check_document_text(text, what);
        auto ids = text_ids(text, cfg.vocab_size, *s.tok, budget, what);
        ids.insert(ids.begin(), question.begin(), question.end());
        std::vector<std::vector<std::int64_t>> one{std::move(ids)};
        (void)cut_rows(*s.given, one, cfg, static_cast<index_t>(question.size()), what);  // the server's --max-input-tokens
        ids = std::move(one[0]);
        auto j = std::make_shared<serve::job>();
        const auto in = make_batch({ids}, cfg.pad_token_id, what);
        auto request = batch_request(in);
        add_generation(request, g, p.go, s.defaults.source);
        request.joins_running_batch = p.go.num_beams <= 1;  // serve::scheduler::joinable
        const auto est = models::estimate_memory(*s.cfg, s.mo, request);
        double weights = 0;
        for (const auto& item : est.peak_phase().items)
            if (item.what == "weights") weights += item.bytes;
        j->bytes = std::max(0.0, est.peak() - weights);
        j->ids = std::move(ids);
        j->go = p.go;
        j->batch_key = key;
        j->prefix_length = static_cast<index_t>(question.size());
        j->choices = p.go.num_beams > 1 ? p.go.num_return_sequences : (p.go.do_sample ? p.go.num_return_sequences : 1);
        p.prompt_tokens += j->ids.size();
        p.jobs.push_back(std::move(j));
    }
    return p;
}

inline void submit_all(server_state& s, prepared& p) {
    for (std::size_t k = 0; k < p.jobs.size(); ++k) {
        try {
            s.sched->submit(p.jobs[k]);
        } catch (...) {
            for (std::size_t i = 0; i < k; ++i) p.jobs[i]->cancelled = true;
            throw;
        }
    }
}

// The choices of finished jobs, stop strings applied.
inline std::vector<serve::choice_out> choices_of(const server_state& s, const prepared& p) {
    std::vector<serve::choice_out> out;
    for (const auto& j : p.jobs) {
        const std::lock_guard<std::mutex> l(j->m);
        for (const auto& seq : j->sequences) {
            serve::choice_out c;
            c.text = text_of_ids(s, seq);
            const bool stopped = serve::cut_at_stop(c.text, p.req.stop);
            c.finish_reason = stopped || ended_by_eos(seq, p.go) ? "stop" : "length";
            c.tokens = generated_tokens(seq, p.go);
            out.push_back(std::move(c));
        }
    }
    return out;
}

// The first failure among the jobs, if any.
inline std::optional<serve::job_failure> failure_of(const prepared& p) {
    for (const auto& j : p.jobs) {
        const std::lock_guard<std::mutex> l(j->m);
        if (j->ph == serve::job::phase::failed) return j->failure;
    }
    return std::nullopt;
}

inline bool all_finished(const prepared& p) {
    for (const auto& j : p.jobs) {
        const std::lock_guard<std::mutex> l(j->m);
        if (!j->finished()) return false;
    }
    return true;
}

// Waits up to `wait` for any job to change.
inline void wait_for_change(const prepared& p, std::chrono::milliseconds wait) {
    for (const auto& j : p.jobs) {
        std::unique_lock<std::mutex> l(j->m);
        if (j->finished()) continue;
        const auto v = j->version;
        j->changed.wait_for(l, wait, [&] { return j->version != v; });
        return;
    }
}

// A streamed request's progress: what each choice has sent.
struct stream_state {
    std::shared_ptr<prepared> p;
    std::string id;
    long long created = 0;
    std::vector<std::string> sent;  // per choice (document-major)
    std::vector<bool> first, closed;
    bool finished = false;
    std::chrono::steady_clock::time_point last_event = std::chrono::steady_clock::now();
    std::string addr;
    int port = 0;
};

// The text of a choice safe to send now: the decoded ids but the newest (whose piece may still
// join the next), without a trailing incomplete character, and held back by the longest stop
// string less one byte (a stop string may be forming).
inline std::string stable_text(const server_state& s, const std::vector<std::int64_t>& row, const std::vector<std::string>& stop,
                               bool& hit_stop) {
    hit_stop = false;
    if (row.size() < 2) return {};
    std::vector<std::int64_t> head(row.begin(), row.end() - 1);
    std::string t = text_of_ids(s, head);
    if (serve::cut_at_stop(t, stop)) {
        hit_stop = true;
        return t;
    }
    while (t.size() >= 3 && t.compare(t.size() - 3, 3, "\xEF\xBF\xBD") == 0) t.resize(t.size() - 3);
    std::size_t hold = 0;
    for (const auto& x : stop) hold = std::max(hold, x.size() - 1);
    t.resize(t.size() > hold ? t.size() - hold : 0);
    // Never end inside a UTF-8 sequence.
    while (!t.empty() && (static_cast<unsigned char>(t.back()) & 0xC0) == 0x80) t.pop_back();
    if (!t.empty() && static_cast<unsigned char>(t.back()) >= 0xC0) t.pop_back();
    return t;
}

}  // namespace serve_detail

inline int run_serve(const args& a) {
    using namespace serve_detail;
    auto s = std::make_shared<server_state>();
    s->model_arg = a.required("model");
    {
        std::string id = s->model_arg;
        while (id.size() > 1 && id.back() == '/') id.pop_back();
        if (std::filesystem::is_directory(id)) id = std::filesystem::path(id).filename().string();
        s->model_id = id;
    }
    s->api_key = a.has("api-key") ? a.required("api-key") : (std::getenv("LOCOST_API_KEY") ? std::getenv("LOCOST_API_KEY") : "");
    const std::string host = a.get("host", "127.0.0.1");
    const int port = a.integer<int>("port", 8080, 0, 65535);
    const auto max_queue = a.integer<std::size_t>("max-queue", 64, 1, 1000000);
    const auto max_batch_tokens = a.integer<index_t>("max-batch-tokens", 65536, 0, index_t{1} << 40);
    const auto read_timeout = a.integer<int>("read-timeout", 30, 1, 3600);
    const auto grace = a.integer<int>("shutdown-grace", 10, 0, 3600);
    const int encoder_lanes = a.integer<int>("encoder-lanes", 2, 1, 2);
    const double max_body = a.has("max-body") && !a.value("max-body").is_string() ? a.value("max-body").get<double>() : 64e6;
    const auto budget = read_memory_budget(a, "serve");
    s->budget_bytes = budget.bytes;
    s->budget_source = budget.source;
    const int threads = a.integer<int>("threads", 0, 0, 1024);

    // SIGINT and SIGTERM, on whichever thread the kernel picks (OpenMP's threads exist already),
    // write their number to a pipe that one thread reads to stop the server.
    if (::pipe(serve_detail::signal_pipe) != 0) throw error("server.cannot_listen", "serve: cannot make a pipe for signals");
    ::signal(SIGINT, serve_detail::on_stop_signal);
    ::signal(SIGTERM, serve_detail::on_stop_signal);
    ::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not the end of the server

    httplib::Server svr;
    const std::size_t workers = std::min<std::size_t>(max_queue + 16, 4096);
    svr.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
    svr.set_payload_max_length(static_cast<std::size_t>(max_body));
    svr.set_read_timeout(5, 0);
    svr.set_write_timeout(30, 0);
    svr.set_keep_alive_timeout(5);

    auto log_request = [s](const httplib::Request& req, const httplib::Response& res) {
        std::string path = req.path;
        if (path != "/v1/completions" && path != "/v1/chat/completions" && path != "/v1/models" && path != "/health" && path != "/metrics")
            path = "other";
        s->counts.add(path, res.status);
        if (s->conns) s->conns->done(req.remote_addr, req.remote_port);
    };
    svr.set_logger(log_request);
    svr.set_pre_routing_handler([s](const httplib::Request& req, httplib::Response& res) {
        if (s->conns) s->conns->handling(req.remote_addr, req.remote_port);
        if (req.path.rfind("/v1/", 0) == 0) {
            if (!s->api_key.empty()) {
                const std::string h = req.get_header_value("Authorization");
                const std::string want = "Bearer " + s->api_key;
                if (!same_key(h, want)) {
                    send_error(res, "server.unauthorized",
                               h.empty() ? "this server needs an API key: send 'Authorization: Bearer KEY'"
                                         : "the API key is not this server's");
                    res.set_header("WWW-Authenticate", "Bearer");
                    return httplib::Server::HandlerResponse::Handled;
                }
            }
            if (!s->ready) {
                send_error(res, "server.loading", "the model is still loading; retry when GET /health answers 200");
                return httplib::Server::HandlerResponse::Handled;
            }
            if (s->shutting_down) {
                send_error(res, "server.shutting_down", "the server is shutting down and takes no new requests");
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });
    svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        if (res.status == 404)
            send_error(res, "server.not_found", "no such endpoint: " + io::detail::printable(req.method + " " + req.path, 200));
        else if (res.status == 413) send_error(res, "server.payload_too_large", "the request body is over the server's limit (--max-body)");
        else if (res.status == 405)
            send_error(res, "server.method_not_allowed", "method not allowed on " + io::detail::printable(req.path, 200));
        else {
            const int st = res.status;
            send_error(res, "server.bad_request", "the request could not be read as HTTP");
            res.status = st;
        }
    });
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
            std::rethrow_exception(ep);
        } catch (const error& e) { send_error(res, e.id(), e.message()); } catch (const std::bad_alloc&) {
            send_error(res, "memory.allocation_failed", "the server could not allocate memory for this request");
        } catch (const std::exception& e) { send_error(res, "server.internal", e.what()); } catch (...) {
            send_error(res, "server.internal", "unknown failure");
        }
    });

    svr.Get("/health", [s](const httplib::Request&, httplib::Response& res) {
        if (s->shutting_down) return send_error(res, "server.shutting_down", "the server is shutting down");
        if (!s->ready) {
            res.status = 503;
            res.set_header("Retry-After", "1");
            res.set_content(R"({"status":"loading"})", "application/json");
            return;
        }
        res.set_content(R"({"status":"ok"})", "application/json");
    });
    svr.Get("/v1/models", [s](const httplib::Request&, httplib::Response& res) {
        const serve::json body = {{"object", "list"},
                                  {"data",
                                   serve::json::array({{{"id", s->model_id},
                                                        {"object", "model"},
                                                        {"created", serve::unix_now()},
                                                        {"owned_by", "locost"},
                                                        {"model_type", models::common(*s->cfg).model_type}}})}};
        res.set_content(body.dump(), "application/json");
    });
    svr.Get("/metrics", [s](const httplib::Request&, httplib::Response& res) {
        std::string m;
        auto metric = [&](const char* name, const char* type, const char* help, double v) {
            char b[64];
            std::snprintf(b, sizeof b, "%.17g", v);
            m += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + b + "\n";
        };
        m += "# HELP locost_requests_total HTTP requests answered, by endpoint and status.\n# TYPE locost_requests_total counter\n";
        m += s->counts.text();
        metric("locost_ready", "gauge", "1 when the model is loaded.", s->ready ? 1 : 0);
        if (s->sched) {
            const auto st = s->sched->state();
            auto& c = s->sched->counters;
            metric("locost_queue_documents", "gauge", "Documents waiting for memory.", static_cast<double>(st.waiting));
            metric("locost_encoding_documents", "gauge", "Documents admitted and queued or being encoded.",
                   static_cast<double>(st.encoding));
            metric("locost_decoding_documents", "gauge", "Documents encoded and decoding.", static_cast<double>(st.decoding));
            metric("locost_documents_in_total", "counter", "Documents admitted.", static_cast<double>(c.documents_in.load()));
            metric("locost_documents_out_total", "counter", "Documents decoded to the end.", static_cast<double>(c.documents_out.load()));
            metric("locost_documents_cancelled_total", "counter", "Documents cancelled (client gone or shutdown).",
                   static_cast<double>(c.cancelled.load()));
            metric("locost_tokens_in_total", "counter", "Input tokens of admitted documents.", static_cast<double>(c.tokens_in.load()));
            metric("locost_tokens_out_total", "counter", "Tokens generated and returned.", static_cast<double>(s->tokens_out.load()));
            metric("locost_cohorts_total", "counter", "Batches decoded together.", static_cast<double>(c.cohorts.load()));
            metric("locost_encode_seconds_total", "counter", "Seconds spent encoding.", c.encode_seconds.load());
            metric("locost_decode_seconds_total", "counter", "Seconds spent decoding (per batch).", c.decode_seconds.load());
            metric("locost_decode_steps_total", "counter", "Decoding steps run (one per batch per token).",
                   static_cast<double>(c.decode_steps.load()));
            metric("locost_decode_rows_total", "counter", "Rows decoded, summed over the steps (rows / steps: the mean batch).",
                   static_cast<double>(c.decode_rows.load()));
            metric("locost_memory_reserved_bytes", "gauge", "Memory estimated for the documents in flight.", st.reserved_bytes);
        }
        metric("locost_memory_weights_bytes", "gauge", "Memory the model's weights hold.", s->weights_bytes);
        metric("locost_memory_budget_bytes", "gauge", "The server's memory budget.", s->budget_bytes);
        metric("locost_memory_resident_bytes", "gauge", "The process's resident memory now.", static_cast<double>(current_rss_bytes()));
        if (s->conns)
            metric("locost_slow_clients_total", "counter", "Connections closed for sending a request slower than --read-timeout.",
                   static_cast<double>(s->conns->slow_clients()));
        res.set_content(m, "text/plain; version=0.0.4");
    });

    auto generate_handler = [s](serve::endpoint kind) {
        return [s, kind](const httplib::Request& req, httplib::Response& res) {
            auto p = std::make_shared<prepared>(prepare(*s, req.body, kind));
            submit_all(*s, *p);
            const std::string id = serve::random_id(kind == serve::endpoint::chat ? "chatcmpl" : "cmpl");
            const long long created = serve::unix_now();
            if (!p->req.stream) {
                while (!all_finished(*p) && !failure_of(*p)) {
                    wait_for_change(*p, std::chrono::milliseconds(200));
                    if (s->conns->closed(req.remote_addr, req.remote_port)) {
                        for (auto& j : p->jobs) j->cancelled = true;
                        res.status = 499;
                        return;
                    }
                }
                if (auto f = failure_of(*p)) {
                    for (auto& j : p->jobs) j->cancelled = true;
                    return send_error(res, f->id, f->message);
                }
                const auto choices = choices_of(*s, *p);
                serve::usage_out u;
                u.prompt = p->prompt_tokens;
                for (const auto& c : choices) u.completion += c.tokens;
                s->tokens_out += u.completion;
                res.set_content(serve::completion_body(kind, id, created, s->model_id, choices, u), "application/json");
                return;
            }
            auto st = std::make_shared<stream_state>();
            st->p = p;
            st->id = id;
            st->created = created;
            std::size_t n = 0;
            for (const auto& j : p->jobs) n += static_cast<std::size_t>(j->choices);
            st->sent.assign(n, {});
            st->first.assign(n, true);
            st->closed.assign(n, false);
            res.set_header("Cache-Control", "no-cache");
            res.set_header("X-Accel-Buffering", "no");
            res.set_chunked_content_provider(
                "text/event-stream; charset=utf-8",
                [s, st, kind](std::size_t, httplib::DataSink& sink) {
                    auto& p = *st->p;
                    auto send = [&](const std::string& ev) {
                        st->last_event = std::chrono::steady_clock::now();
                        return sink.write(ev.data(), ev.size());
                    };
                    auto cancel = [&] {
                        for (auto& j : p.jobs) j->cancelled = true;
                        return false;
                    };
                    wait_for_change(p, std::chrono::milliseconds(250));
                    // Tokens so far: the stable part of each choice's text.
                    std::size_t c = 0;
                    bool encoding = false;
                    double fraction = 0;
                    std::size_t waiting = 0;
                    for (const auto& j : p.jobs) {
                        std::vector<std::vector<std::int64_t>> rows;
                        bool done = false;
                        {
                            const std::lock_guard<std::mutex> l(j->m);
                            rows = j->rows;
                            done = j->finished();
                            if (j->ph == serve::job::phase::encoding || j->ph == serve::job::phase::waiting) {
                                encoding = true;
                                fraction = j->encoded_fraction;
                                waiting += j->ph == serve::job::phase::waiting;
                            }
                        }
                        for (std::size_t k = 0; k < static_cast<std::size_t>(j->choices); ++k, ++c) {
                            if (done || k >= rows.size() || st->closed[c]) continue;
                            bool hit = false;
                            const std::string t = stable_text(*s, rows[k], p.req.stop, hit);
                            if (t.size() > st->sent[c].size() && t.compare(0, st->sent[c].size(), st->sent[c]) == 0) {
                                if (!send(serve::chunk_event(kind, st->id, st->created, s->model_id, c, t.substr(st->sent[c].size()),
                                                             nullptr, st->first[c])))
                                    return cancel();
                                st->first[c] = false;
                                st->sent[c] = t;
                            }
                        }
                    }
                    if (!all_finished(p)) {
                        // A comment at least every 2 s keeps proxies from closing an idle stream.
                        if (std::chrono::steady_clock::now() - st->last_event > std::chrono::seconds(2)) {
                            char b[64];
                            if (encoding && waiting) std::snprintf(b, sizeof b, ": queued\n\n");
                            else if (encoding) std::snprintf(b, sizeof b, ": encoding %.0f%%\n\n", 100 * fraction);
                            else std::snprintf(b, sizeof b, ": decoding\n\n");
                            if (!send(b)) return cancel();
                        }
                        if (s->conns->closed(st->addr, st->port)) return cancel();
                        return true;
                    }
                    if (auto f = failure_of(p)) {
                        for (auto& j : p.jobs) j->cancelled = true;  // the others' text would not be read
                        send("data: " + serve::error_body(f->id, f->message) + "\n\n");
                        send("data: [DONE]\n\n");
                        sink.done();
                        return true;
                    }
                    // The rest of each choice: its whole text (stop strings applied) beyond what was sent.
                    const auto choices = choices_of(*s, p);
                    serve::usage_out u;
                    u.prompt = p.prompt_tokens;
                    for (std::size_t i = 0; i < choices.size(); ++i) {
                        const auto& ch = choices[i];
                        u.completion += ch.tokens;
                        std::string rest;
                        if (ch.text.compare(0, st->sent[i].size(), st->sent[i]) == 0) rest = ch.text.substr(st->sent[i].size());
                        if (!send(serve::chunk_event(kind, st->id, st->created, s->model_id, i, rest, ch.finish_reason.c_str(),
                                                     st->first[i])))
                            return cancel();
                    }
                    s->tokens_out += u.completion;
                    if (p.req.include_usage && !send(serve::usage_event(kind, st->id, st->created, s->model_id, u))) return cancel();
                    send("data: [DONE]\n\n");
                    sink.done();
                    return true;
                },
                [st](bool success) {
                    if (!success)
                        for (auto& j : st->p->jobs) j->cancelled = true;
                });
            st->addr = req.remote_addr;
            st->port = req.remote_port;
        };
    };
    svr.Post("/v1/completions", generate_handler(serve::endpoint::completions));
    svr.Post("/v1/chat/completions", generate_handler(serve::endpoint::chat));

    // Listen first (GET /health answers 503 while the model loads), then load.
    int bound = port;
    if (port == 0) bound = svr.bind_to_any_port(host);
    else if (!svr.bind_to_port(host, port)) bound = -1;
    if (bound <= 0)
        throw error("server.cannot_listen",
                    "serve: cannot listen on " + host + ":" + std::to_string(port) +
                        " (the port is in use, or the address is not this machine's)");
    s->conns = std::make_unique<serve::connections>(bound, std::chrono::seconds(read_timeout));
    std::fprintf(stderr, "locost serve: listening on http://%s:%d (loading %s)\n",
                 host.find(':') != std::string::npos ? ("[" + host + "]").c_str() : host.c_str(), bound, s->model_arg.c_str());
    std::fflush(stderr);
    std::thread listener([&svr] { svr.listen_after_bind(); });

    std::atomic<bool> stopped{false};
    std::thread signals([&] {
        int sig = 0;
        while (::read(serve_detail::signal_pipe[0], &sig, sizeof sig) < 0 && errno == EINTR) {}
        if (stopped) return;
        std::fprintf(stderr, "locost serve: %s: no new requests; the %s in flight get %d s to finish\n",
                     sig == SIGINT ? "SIGINT" : "SIGTERM", "requests", grace);
        s->shutting_down = true;
        if (s->sched) s->sched->stop(std::chrono::seconds(grace));
        svr.stop();
    });

    int rc = 0;
    try {
        set_num_threads(threads);
        s->ck = open_checkpoint(a);
        s->mo = read_model_options(a, "serve", *s->ck);
        s->given = &a;
        s->cfg = models::read_config(*s->ck);
        models::require_matching_weights(*s->ck, *s->cfg);
        s->defaults = read_generation_defaults(a, *s->ck, "serve", "summarization");
        s->tok = open_tokenizer(a, *s->ck, "serve");
        s->sled = models::sled_settings(*s->ck, s->mo).has_value();
        // The model alone (a one-token request) must fit the budget.
        {
            const auto in = make_batch({{models::common(*s->cfg).pad_token_id}}, models::common(*s->cfg).pad_token_id);
            auto request = batch_request(in);
            request.decoder = true;
            request.decoder_positions = 1;
            const auto est = models::estimate_memory(*s->cfg, s->mo, request);
            for (const auto& item : est.peak_phase().items)
                if (item.what == "weights") s->weights_bytes += item.bytes;
            models::check_memory_budget(est, budget, "serve");
        }
        // A second copy of the model for the short documents' encoder lane (its weights counted
        // against the budget too), unless --encoder-lanes 1 or the budget holds only one copy.
        const double one_copy = s->weights_bytes;
        int lanes = encoder_lanes;
        if (lanes == 2 && 2 * one_copy > 0.5 * s->budget_bytes) {
            lanes = 1;
            std::fprintf(stderr, "locost serve: one encoder lane: two copies of the model (%s) would take over half the budget of %s\n",
                         models::format_bytes(2 * one_copy).c_str(), models::format_bytes(s->budget_bytes).c_str());
        }
        s->model = std::make_unique<serve::model_type>(models::load_model<float, cpu>(*s->ck, s->mo));
        if (lanes == 2) {
            s->short_model = std::make_unique<serve::model_type>(models::load_model<float, cpu>(*s->ck, s->mo));
            s->weights_bytes = 2 * one_copy;
        }
        serve::scheduler_settings ss;
        ss.budget_bytes = s->budget_bytes;
        ss.weights_bytes = s->weights_bytes;
        ss.max_queue = max_queue;
        ss.max_batch_tokens = max_batch_tokens > 0 ? max_batch_tokens : (index_t{1} << 40);
        ss.threads = threads;
        ss.sled = s->sled;
        s->sched = std::make_unique<serve::scheduler>(*s->model, s->short_model.get(), ss);
        s->ready = true;
        std::fprintf(stderr, "locost serve: ready: %s (%s) on http://%s:%d; memory budget %s (%s), weights %s (%d encoder lane%s)\n",
                     s->model_id.c_str(), models::common(*s->cfg).model_type.c_str(), host.c_str(), bound,
                     models::format_bytes(s->budget_bytes).c_str(), s->budget_source.c_str(),
                     models::format_bytes(s->weights_bytes).c_str(), lanes, lanes == 1 ? "" : "s");
        std::fflush(stderr);
    } catch (...) {
        stopped = true;
        svr.stop();
        const int none = 0;
        (void)!::write(serve_detail::signal_pipe[1], &none, sizeof none);
        listener.join();
        signals.join();
        throw;
    }
    listener.join();
    stopped = true;
    const int none = 0;
    (void)!::write(serve_detail::signal_pipe[1], &none, sizeof none);
    signals.join();
    if (s->sched) s->sched->stop(std::chrono::seconds(0));
    std::fprintf(stderr, "locost serve: stopped\n");
    return rc;
}

}  // namespace locost::cli
