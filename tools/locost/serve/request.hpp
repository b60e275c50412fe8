// locost serve: a request body, read into what the scheduler runs. Pure (no model, no sockets), so
// that the fuzzer (tests/fuzz/fuzz_serve_request.cpp) runs it alone.
//
// The fields are OpenAI's (model, prompt or messages, max_tokens, temperature, top_p, n, seed,
// stop, stream), vLLM's min_tokens, and the generation options of the option table under the
// Python module's names (num_beams, no_repeat_ngram_size, ...), which reach the same readers as
// the tool's flags (options/readers.hpp), spelled as request fields: an error names
// `field 'num_beams'` with the id server.bad_request.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <locost/config/error.hpp>
#include <locost/io/printable.hpp>
#include <locost/options/given.hpp>

namespace locost::serve {

using json = nlohmann::json;

enum class endpoint { completions, chat };

// Limits on what a body may hold (docs/serving.md lists them with the server's others).
struct request_limits {
    int max_depth = 16;              // JSON nesting
    std::size_t max_documents = 64;  // prompts in one completions request
    std::size_t max_stop = 4;        // stop strings, as OpenAI's
    std::size_t max_stop_bytes = 256;
    std::size_t max_messages = 256;
};

// One request, read and checked. `options` holds the generation options as the option table's
// records (field spelling): the caller reads them over the checkpoint's defaults.
struct parsed_request {
    endpoint kind = endpoint::completions;
    std::string model;                   // as the client named it (checked against the served one later)
    std::vector<std::string> documents;  // one choice set per document
    std::string question;                // put in front of every document (summarize's --prefix)
    std::vector<std::string> stop;
    bool stream = false, include_usage = false;
    std::vector<std::pair<std::string, json>> options;  // table records by name, JSON values
    std::map<std::string, std::string> spelled_as;      // table name -> the OpenAI name the request used
};

namespace detail {

[[noreturn]] inline void bad(const std::string& message) { throw error("server.bad_request", message); }

inline std::string field(std::string_view name) { return "field '" + std::string(name) + "'"; }

// The JSON body, refusing nesting deeper than `max_depth` while it parses (a body of 10^6 '['
// never builds a tree).
inline json parse_body(std::string_view body, int max_depth) {
    if (body.empty()) bad("the request body is empty; expected a JSON object");
    auto depth_guard = [max_depth](int depth, json::parse_event_t, json&) {
        if (depth > max_depth) bad("the request body nests JSON deeper than " + std::to_string(max_depth) + " levels");
        return true;
    };
    try {
        json j = json::parse(body.begin(), body.end(), depth_guard, /*allow_exceptions=*/true, /*ignore_comments=*/false);
        if (!j.is_object()) bad("the request body is JSON but not an object; expected {\"model\": ..., ...}");
        return j;
    } catch (const json::exception& e) { bad(std::string("the request body is not valid JSON: ") + io::detail::printable(e.what(), 200)); }
}

inline std::string text_of(const json& v, std::string_view name) {
    if (!v.is_string()) bad(field(name) + " expects a string, got " + io::detail::printable(v.dump(), 80));
    return v.get<std::string>();
}

// A chat message's content: a string, or OpenAI's list of parts of which only text parts count.
inline std::string content_of(const json& m, std::size_t i) {
    const std::string where = "field 'messages[" + std::to_string(i) + "].content'";
    if (!m.contains("content") || m["content"].is_null()) return {};
    const json& c = m["content"];
    if (c.is_string()) return c.get<std::string>();
    if (!c.is_array()) bad(where + " expects a string or a list of text parts");
    std::string out;
    for (const auto& part : c) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") || !part["text"].is_string())
            bad(where + " holds a part that is not {\"type\": \"text\", \"text\": \"...\"} (only text is read)");
        out += part["text"].get<std::string>();
    }
    return out;
}

// OpenAI fields that have no counterpart here: accepted at their neutral value only, so a client
// that sends its defaults works and one that asks for something else hears it is not done.
inline void neutral_only(const json& body, std::string_view name, const json& neutral, const std::string& instead) {
    if (!body.contains(name) || body[std::string(name)].is_null()) return;
    if (body[std::string(name)] != neutral)
        bad(field(name) + " is not supported (only " + neutral.dump() + " is accepted)" + (instead.empty() ? "" : "; " + instead));
}

}  // namespace detail

// The generation records a request may set: every generation option but those naming a file or a
// task of the checkpoint's (the served model's settings are fixed at start).
inline const std::vector<const options::record*>& request_records() {
    static const auto r = [] {
        std::vector<const options::record*> out;
        for (const auto* x : options::records_of({options::group::generation}))
            if (x->name != "generation_config" && x->name != "task") out.push_back(x);
        return out;
    }();
    return r;
}

// Errors: server.bad_request naming the field and what it expects.
inline parsed_request parse_request(std::string_view body, endpoint kind, const request_limits& lim = {}) {
    using detail::bad;
    using detail::field;
    const json j = detail::parse_body(body, lim.max_depth);
    parsed_request r;
    r.kind = kind;
    static const std::set<std::string> openai = {"model",
                                                 "prompt",
                                                 "messages",
                                                 "max_tokens",
                                                 "max_completion_tokens",
                                                 "temperature",
                                                 "top_p",
                                                 "n",
                                                 "seed",
                                                 "stop",
                                                 "stream",
                                                 "stream_options",
                                                 "min_tokens",
                                                 "user",
                                                 "frequency_penalty",
                                                 "presence_penalty",
                                                 "logprobs",
                                                 "top_logprobs",
                                                 "echo",
                                                 "best_of",
                                                 "logit_bias",
                                                 "suffix",
                                                 "prefix"};
    std::set<std::string> table;
    for (const auto* x : request_records()) table.insert(std::string(x->name));
    for (const auto& [k, v] : j.items()) {
        if (openai.count(k) || table.count(k)) continue;
        std::string known = "model, prompt or messages, max_tokens, temperature, top_p, n, seed, stop, stream, min_tokens, prefix";
        bad("unknown " + field(io::detail::printable(k, 64)) + " (this server reads " + known +
            ", and locost's generation options: num_beams, no_repeat_ngram_size, repetition_penalty, length_penalty, ...)");
    }
    if (kind == endpoint::completions && j.contains("messages")) bad(field("messages") + " belongs to /v1/chat/completions; give 'prompt'");
    if (kind == endpoint::chat && j.contains("prompt")) bad(field("prompt") + " belongs to /v1/completions; give 'messages'");
    if (kind == endpoint::chat && j.contains("prefix"))
        bad(field("prefix") + " belongs to /v1/completions; in a chat, the system message and earlier user messages are the question");
    if (j.contains("model") && !j["model"].is_null()) r.model = detail::text_of(j["model"], "model");

    if (kind == endpoint::completions) {
        if (!j.contains("prompt") || j["prompt"].is_null()) bad(field("prompt") + " is required: the document to summarize");
        const json& p = j["prompt"];
        if (p.is_string()) r.documents.push_back(p.get<std::string>());
        else if (p.is_array()) {
            if (p.empty()) bad(field("prompt") + " is an empty list; expected a document or a list of documents");
            if (p.size() > lim.max_documents)
                bad(field("prompt") + " lists " + std::to_string(p.size()) + " documents; one request takes at most " +
                    std::to_string(lim.max_documents));
            for (const auto& d : p) {
                if (!d.is_string()) bad(field("prompt") + " expects a string or a list of strings (token ids are not read)");
                r.documents.push_back(d.get<std::string>());
            }
        } else {
            bad(field("prompt") + " expects a string or a list of strings");
        }
        if (j.contains("prefix") && !j["prefix"].is_null()) r.question = detail::text_of(j["prefix"], "prefix");
    } else {
        if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty())
            bad(field("messages") + " is required: a list of {\"role\", \"content\"} whose last user message is the document");
        const json& ms = j["messages"];
        if (ms.size() > lim.max_messages)
            bad(field("messages") + " holds " + std::to_string(ms.size()) + " messages; at most " + std::to_string(lim.max_messages));
        std::optional<std::size_t> last_user;
        for (std::size_t i = 0; i < ms.size(); ++i) {
            const json& m = ms[i];
            if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
                bad("field 'messages[" + std::to_string(i) + "]' expects an object with a string 'role'");
            const std::string role = m["role"].get<std::string>();
            if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool")
                bad("field 'messages[" + std::to_string(i) + "].role' is '" + io::detail::printable(role, 32) +
                    "'; expected system, developer, user, assistant or tool");
            detail::content_of(m, i);  // checked even where it is not read
            if (role == "user") last_user = i;
        }
        if (!last_user) bad(field("messages") + " has no user message: the last user message is the document");
        r.documents.push_back(detail::content_of(ms[*last_user], *last_user));
        // The question: system (or developer) messages and the user messages before the last, in
        // order, one per line; assistant and tool messages are not read.
        for (std::size_t i = 0; i < *last_user; ++i) {
            const std::string role = ms[i]["role"].get<std::string>();
            if (role == "assistant" || role == "tool") continue;
            const std::string c = detail::content_of(ms[i], i);
            if (c.empty()) continue;
            r.question += (r.question.empty() ? "" : "\n") + c;
        }
    }

    if (j.contains("stream") && !j["stream"].is_null()) {
        if (!j["stream"].is_boolean()) bad(field("stream") + " expects true or false");
        r.stream = j["stream"].get<bool>();
    }
    if (j.contains("stream_options") && !j["stream_options"].is_null()) {
        const json& so = j["stream_options"];
        if (!so.is_object()) bad(field("stream_options") + " expects an object");
        for (const auto& [k, v] : so.items()) {
            if (k != "include_usage") bad("unknown field 'stream_options." + io::detail::printable(k, 64) + "' (it takes include_usage)");
            if (!v.is_boolean()) bad("field 'stream_options.include_usage' expects true or false");
            r.include_usage = v.get<bool>();
        }
        if (!r.stream) bad(field("stream_options") + " applies to streamed responses: give \"stream\": true too");
    }
    if (j.contains("stop") && !j["stop"].is_null()) {
        const json& s = j["stop"];
        std::vector<std::string> stops;
        if (s.is_string()) stops.push_back(s.get<std::string>());
        else if (s.is_array()) {
            for (const auto& x : s) {
                if (!x.is_string()) bad(field("stop") + " expects a string or a list of strings");
                stops.push_back(x.get<std::string>());
            }
        } else {
            bad(field("stop") + " expects a string or a list of strings");
        }
        if (stops.size() > lim.max_stop)
            bad(field("stop") + " lists " + std::to_string(stops.size()) + " strings; at most " + std::to_string(lim.max_stop));
        for (const auto& x : stops) {
            if (x.empty()) bad(field("stop") + " holds an empty string");
            if (x.size() > lim.max_stop_bytes) bad(field("stop") + " holds a string over " + std::to_string(lim.max_stop_bytes) + " bytes");
        }
        r.stop = std::move(stops);
    }
    detail::neutral_only(j, "frequency_penalty", 0, "locost's repetition_penalty and no_repeat_ngram_size are the options");
    detail::neutral_only(j, "presence_penalty", 0, "locost's repetition_penalty and no_repeat_ngram_size are the options");
    detail::neutral_only(j, "logprobs", false, "");
    detail::neutral_only(j, "top_logprobs", 0, "");
    detail::neutral_only(j, "echo", false, "");
    detail::neutral_only(j, "best_of", 1, "use num_beams for beam search");
    detail::neutral_only(j, "logit_bias", json::object(), "use bad_words_ids or suppress_tokens");
    if (j.contains("suffix") && !j["suffix"].is_null()) bad(field("suffix") + " is not supported");
    if (j.contains("user") && !j["user"].is_null()) detail::text_of(j["user"], "user");  // read by nobody, checked

    // OpenAI's names for the table's options. Both names given is one setting given twice.
    auto alias = [&](const char* openai_name, const char* table_name) {
        if (!j.contains(openai_name) || j[openai_name].is_null()) return;
        if (j.contains(table_name) && !j[table_name].is_null())
            bad(field(openai_name) + " and " + field(table_name) + " are one setting: give one of them");
        r.options.emplace_back(table_name, j[openai_name]);
        r.spelled_as[table_name] = openai_name;
    };
    if (j.contains("max_tokens") && j.contains("max_completion_tokens") && !j["max_tokens"].is_null() &&
        !j["max_completion_tokens"].is_null())
        bad(field("max_tokens") + " and " + field("max_completion_tokens") + " are one setting: give one of them");
    alias("max_tokens", "max_new_tokens");
    alias("max_completion_tokens", "max_new_tokens");
    alias("min_tokens", "min_new_tokens");
    alias("n", "num_return_sequences");
    // temperature 0 is OpenAI's greedy decoding; above 0 it samples at that temperature (unless
    // do_sample is given too, which then decides).
    if (j.contains("temperature") && !j["temperature"].is_null()) {
        const json& t = j["temperature"];
        if (!t.is_number()) bad(field("temperature") + " expects a number in [0, 2]");
        const double v = t.get<double>();
        if (!(v >= 0 && v <= 2)) bad(field("temperature") + " expects a number in [0, 2], got " + t.dump());
        const bool explicit_sampling = j.contains("do_sample") && !j["do_sample"].is_null();
        if (v == 0) {
            if (!explicit_sampling) r.options.emplace_back("do_sample", false);
        } else {
            r.options.emplace_back("temperature", t);
            if (!explicit_sampling) r.options.emplace_back("do_sample", true);
        }
    }
    for (const auto& name : table)  // temperature: read above, with OpenAI's meaning of 0
        if (name != "temperature" && j.contains(name) && !j[name].is_null()) r.options.emplace_back(name, j[name]);
    return r;
}

// An error about an option the request gave under OpenAI's name (max_tokens) names that field,
// not the table's (max_new_tokens).
[[noreturn]] inline void rethrow_as_spelled(const error& e, const parsed_request& r) {
    std::string m = e.message();
    for (const auto& [table_name, openai_name] : r.spelled_as) {
        for (const auto& [from, to] : {std::pair{"field '" + table_name + "'", "field '" + openai_name + "'"},
                                       std::pair{"(" + table_name + ")", "(" + openai_name + ")"}})
            for (auto at = m.find(from); at != std::string::npos; at = m.find(from, at + to.size())) m.replace(at, from.size(), to);
    }
    const std::string rethrown_id = e.id();
    throw error(rethrown_id, m);
}

// The options a request set, as the option table's `given` (field spelling): checked by the
// records' own reader, so a bad value names the field with server.bad_request.
inline options::given given_of(const parsed_request& r) {
    try {
        return options::given("request", options::spelling::field, r.options, request_records());
    } catch (const error& e) { rethrow_as_spelled(e, r); }
}

}  // namespace locost::serve
