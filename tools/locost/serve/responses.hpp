// locost serve: the bodies the server writes, in OpenAI's shapes (completions, chat
// completions, their streamed chunks, errors) and the Prometheus text of /metrics.
#pragma once
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "request.hpp"

namespace locost::serve {

// HTTP status and OpenAI error type for a locost error id. Everything a request can cause is a
// 4xx: a 500 means the server itself failed.
struct status_of_error {
    int status;
    const char* type;
};
inline status_of_error classify(const std::string& id) {
    auto starts = [&](const char* p) { return id.rfind(p, 0) == 0; };
    if (id == "server.unauthorized") return {401, "authentication_error"};
    if (id == "server.not_found" || id == "server.unknown_model") return {404, "not_found_error"};
    if (id == "server.method_not_allowed") return {405, "invalid_request_error"};
    if (id == "server.payload_too_large" || starts("memory.")) return {413, "invalid_request_error"};
    if (id == "server.busy") return {429, "rate_limit_error"};
    if (id == "server.shutting_down" || id == "server.loading") return {503, "service_unavailable"};
    if (id == "server.cancelled") return {499, "cancelled"};
    if (starts("server.internal")) return {500, "server_error"};
    if (starts("server.") || starts("generate.") || starts("cli.") || starts("input.") || starts("text.") || starts("tokenizer.") ||
        starts("ids.") || starts("bpe.") || starts("spm."))
        return {400, "invalid_request_error"};
    return {500, "server_error"};
}

// {"error": {"message", "type", "param", "code"}}: code is the library's stable id; param the
// field a message names ("field 'num_beams'"), if any.
inline std::string error_body(const std::string& id, const std::string& message) {
    json e = {{"message", message}, {"type", classify(id).type}, {"param", nullptr}, {"code", id}};
    const auto at = message.find("field '");
    if (at != std::string::npos) {
        const auto end = message.find('\'', at + 7);
        if (end != std::string::npos) e["param"] = message.substr(at + 7, end - at - 7);
    }
    return json{{"error", e}}.dump();
}

inline std::string random_id(const char* prefix) {
    thread_local std::mt19937_64 g{std::random_device{}()};
    char b[40];
    std::snprintf(b, sizeof b, "%s-%016llx", prefix, static_cast<unsigned long long>(g()));
    return b;
}

inline long long unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One returned sequence as the client sees it.
struct choice_out {
    std::string text;
    std::string finish_reason;  // "stop" | "length"
    std::size_t tokens = 0;
};

struct usage_out {
    std::size_t prompt = 0, completion = 0;
    json to_json() const { return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}}; }
};

inline std::string completion_body(endpoint kind, const std::string& id, long long created, const std::string& model,
                                   const std::vector<choice_out>& choices, const usage_out& usage) {
    json cs = json::array();
    for (std::size_t i = 0; i < choices.size(); ++i) {
        json c = {{"index", i}, {"logprobs", nullptr}, {"finish_reason", choices[i].finish_reason}};
        if (kind == endpoint::chat) c["message"] = {{"role", "assistant"}, {"content", choices[i].text}};
        else c["text"] = choices[i].text;
        cs.push_back(std::move(c));
    }
    return json{{"id", id},           {"object", kind == endpoint::chat ? "chat.completion" : "text_completion"},
                {"created", created}, {"model", model},
                {"choices", cs},      {"usage", usage.to_json()}}
        .dump();
}

// One server-sent event: a chunk carrying `text` for choice `index` (and its finish reason when
// it is the last), or (`usage_only`) the closing usage chunk OpenAI sends with include_usage.
inline std::string chunk_event(endpoint kind, const std::string& id, long long created, const std::string& model, std::size_t index,
                               const std::string& text, const char* finish_reason, bool first) {
    json c = {{"index", index}, {"logprobs", nullptr}, {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)}};
    if (kind == endpoint::chat) {
        json delta = json::object();
        if (first) delta["role"] = "assistant";
        if (!text.empty() || !finish_reason) delta["content"] = text;
        c["delta"] = delta;
    } else {
        c["text"] = text;
    }
    json chunk = {{"id", id},
                  {"object", kind == endpoint::chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", created},
                  {"model", model},
                  {"choices", json::array({c})}};
    return "data: " + chunk.dump() + "\n\n";
}
inline std::string usage_event(endpoint kind, const std::string& id, long long created, const std::string& model, const usage_out& u) {
    json chunk = {{"id", id},
                  {"object", kind == endpoint::chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", created},
                  {"model", model},
                  {"choices", json::array()},
                  {"usage", u.to_json()}};
    return "data: " + chunk.dump() + "\n\n";
}

// Text up to the first of the stop strings (and whether one was found).
inline bool cut_at_stop(std::string& text, const std::vector<std::string>& stop) {
    std::size_t first = std::string::npos;
    for (const auto& s : stop) first = std::min(first, text.find(s));
    if (first == std::string::npos) return false;
    text.resize(first);
    return true;
}

}  // namespace locost::serve
