// locost serve's request reader (tools/locost/serve/request.hpp): OpenAI's fields mapped onto the
// option table's records, and the messages a client reads, checked exactly. Runs with the parser
// tests, under AddressSanitizer and UBSan; tests/serve/check_serve.py runs the server itself.
#include <doctest/doctest.h>

#include <tools/locost/serve/request.hpp>

#include <string>

using locost::serve::endpoint;
using locost::serve::parse_request;

namespace {

std::string serve_error(const std::string& body, endpoint kind = endpoint::completions) {
    try {
        const auto r = parse_request(body, kind);
        (void)locost::serve::given_of(r);
    } catch (const locost::error& e) { return e.id() + ": " + e.message(); }
    return "(no error)";
}

std::string option_of(const locost::serve::parsed_request& r, const std::string& name) {
    for (const auto& [n, v] : r.options)
        if (n == name) return v.dump();
    return "(absent)";
}

}  // namespace

TEST_CASE("serve request: OpenAI's fields become the option table's") {
    const auto r = parse_request(R"({"model": "m", "prompt": "a document", "max_tokens": 24, "temperature": 0, "n": 1,
                                     "min_tokens": 3, "seed": 5, "top_p": 0.9, "stop": "\n", "num_beams": 4})",
                                 endpoint::completions);
    CHECK(r.model == "m");
    CHECK(r.documents == std::vector<std::string>{"a document"});
    CHECK(r.stop == std::vector<std::string>{"\n"});
    CHECK(option_of(r, "max_new_tokens") == "24");
    CHECK(option_of(r, "min_new_tokens") == "3");
    CHECK(option_of(r, "num_return_sequences") == "1");
    CHECK(option_of(r, "do_sample") == "false");  // temperature 0: greedy
    CHECK(option_of(r, "temperature") == "(absent)");
    CHECK(option_of(r, "seed") == "5");
    CHECK(option_of(r, "num_beams") == "4");
    const auto g = locost::serve::given_of(r);
    CHECK(g.value("num_beams") == 4);
    CHECK(g.named("num_beams") == "field 'num_beams'");

    const auto s = parse_request(R"({"prompt": ["one", "two"], "temperature": 0.7})", endpoint::completions);
    CHECK(s.documents.size() == 2);
    CHECK(option_of(s, "do_sample") == "true");
    CHECK(option_of(s, "temperature") == "0.7");
}

TEST_CASE("serve request: a chat's last user message is the document, earlier ones the question") {
    const auto r = parse_request(R"({"messages": [{"role": "system", "content": "Who?"}, {"role": "user", "content": "Why?"},
                                                  {"role": "assistant", "content": "ignored"},
                                                  {"role": "user", "content": [{"type": "text", "text": "The "}, {"type": "text", "text": "doc."}]}]})",
                                 endpoint::chat);
    CHECK(r.documents == std::vector<std::string>{"The doc."});
    CHECK(r.question == "Who?\nWhy?");
}

TEST_CASE("serve request: bad requests name the field and what it expects") {
    CHECK(serve_error("") == "server.bad_request: the request body is empty; expected a JSON object");
    CHECK(serve_error("[1]") == "server.bad_request: the request body is JSON but not an object; expected {\"model\": ..., ...}");
    CHECK(serve_error(std::string(40, '[')) == "server.bad_request: the request body nests JSON deeper than 16 levels");
    CHECK(serve_error(R"({"prompt": "x", "num_beams": 0})") ==
          "server.bad_request: request: field 'num_beams' expects an integer in [1, 2147483647], got 0");
    CHECK(serve_error(R"({"prompt": "x", "max_tokens": "9"})") ==
          "server.bad_request: request: field 'max_tokens' expects an integer in [1, 2147483647], got '9'");
    CHECK(serve_error(R"({"prompt": "x", "max_tokens": 9, "max_new_tokens": 9})") ==
          "server.bad_request: field 'max_tokens' and field 'max_new_tokens' are one setting: give one of them");
    CHECK(serve_error(R"({"prompt": "x", "temperature": 3})") ==
          "server.bad_request: field 'temperature' expects a number in [0, 2], got 3");
    CHECK(serve_error(R"({"prompt": "x", "frequency_penalty": 0.5})") ==
          "server.bad_request: field 'frequency_penalty' is not supported (only 0 is accepted); locost's repetition_penalty and "
          "no_repeat_ngram_size are the options");
    CHECK(serve_error(R"({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]})") ==
          "server.bad_request: field 'stop' lists 5 strings; at most 4");
    CHECK(serve_error(R"({"prompt": 7})") == "server.bad_request: field 'prompt' expects a string or a list of strings");
    CHECK(serve_error(R"({"messages": [{"role": "user", "content": "x"}]})") ==
          "server.bad_request: field 'messages' belongs to /v1/chat/completions; give 'prompt'");
    CHECK(serve_error(R"({"messages": [{"role": "assistant", "content": "x"}]})", endpoint::chat) ==
          "server.bad_request: field 'messages' has no user message: the last user message is the document");
    CHECK(serve_error(R"({"messages": [{"role": "king", "content": "x"}]})", endpoint::chat) ==
          "server.bad_request: field 'messages[0].role' is 'king'; expected system, developer, user, assistant or tool");
    CHECK(serve_error(R"({"prompt": "x", "generation_config": "/etc/passwd"})")
              .rfind("server.bad_request: unknown field 'generation_config' (this server reads", 0) == 0);
    CHECK(serve_error(R"({"prompt": "x", "stream_options": {"include_usage": true}})") ==
          "server.bad_request: field 'stream_options' applies to streamed responses: give \"stream\": true too");
}
