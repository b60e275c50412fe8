// Time taken by the inputs that made parsing and tokenizing quadratic before issue 60, at the
// sizes a hostile file can reach within locost's caps. One program for both sides: build it
// against today's headers (the bench target) and against an older checkout's include/ (the
// command in RESULTS.md), and run each with the same cases.
//
//   hostile_inputs [CASE=SIZE ...]     (default: every case at every size below)
//
// Cases (SIZE in units of the case):
//   added=N     an added token 'a'×N + 'b' against a text of N 'a's (the matcher's worst case)
//   unigram=N   a Unigram piece 'a'×N + 'b' against a word of N 'a's
//   objects=B   a config.json of B bytes of sibling empty objects: {"a": [{},{},...]}
//   keys=B      a config.json of B bytes of keys each holding an object (task_specific_params)
//   tensors=B   a safetensors header of B bytes of one-element tensors
// Each line: the case, its size, the seconds, and the rate (MB/s of input) to compare sides by.
#include <locost/io/json.hpp>
#include <locost/io/safetensors.hpp>
#include <locost/text/added_tokens.hpp>
#include <locost/text/unigram_model.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

void report(const char* name, std::size_t size, std::size_t bytes, double s, const char* what) {
    std::printf("%-8s %10zu %-8s %9.3f s  %9.2f MB/s\n", name, size, what, s, bytes / s / 1e6);
    std::fflush(stdout);
}

void added(std::size_t n) {
    using namespace locost::text;
    added_token token;
    token.content = std::string(n, 'a') + "b";
    token.id = 5;
    token.normalized = true;
    const added_token_matcher matcher({token}, true);
    const std::string text(n, 'a');
    auto md = detail::gpt2_pattern::get().new_match_data();
    std::size_t pieces = 0;
    const auto t0 = clock_type::now();
    matcher.split(text, md.get(), [&](std::string_view, int) { ++pieces; });
    report("added", n, n, seconds_since(t0), "bytes");
    if (pieces != 1) std::printf("  (unexpected: %zu pieces)\n", pieces);
}

void unigram(std::size_t n) {
    using namespace locost::text;
    const std::vector<std::pair<std::string, double>> vocab = {{"<unk>", 0}, {"a", -1.0}, {std::string(n, 'a') + "b", -3.0}};
    const unigram_model model(vocab, 0, false, "bench");
    const std::string word(n, 'a');
    std::vector<int> ids;
    const auto t0 = clock_type::now();
    model.encode(word, ids);
    report("unigram", n, n, seconds_since(t0), "bytes");
    if (ids.size() != n) std::printf("  (unexpected: %zu ids)\n", ids.size());
}

void json_text(const char* name, const std::string& text) {
    const auto t0 = clock_type::now();
    const auto j = locost::io::parse_json(text, "bench.json", "config");
    report(name, text.size(), text.size(), seconds_since(t0), "bytes");
    if (!j.is_object()) std::printf("  (unexpected: not an object)\n");
}

void objects(std::size_t bytes) {
    std::string s = "{\"a\": [{}";
    while (s.size() + 3 < bytes) s += ",{}";
    s += "]}";
    json_text("objects", s);
}

void keys(std::size_t bytes) {
    std::string s = "{\"k0\": {\"max_length\": 3}";
    for (std::size_t i = 1; s.size() + 40 < bytes; ++i) s += ", \"k" + std::to_string(i) + "\": {\"max_length\": 3}";
    s += "}";
    json_text("keys", s);
}

void tensors(std::size_t bytes) {
    std::string header = "{";
    std::size_t count = 0;
    while (header.size() + 96 < bytes) {
        if (count) header += ',';
        header += "\"t" + std::to_string(count) + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" + std::to_string(4 * count) +
            "," + std::to_string(4 * count + 4) + "]}";
        ++count;
    }
    header += '}';
    while (header.size() % 8) header += ' ';
    std::string image(8, '\0');
    std::uint64_t n = header.size();
    std::memcpy(image.data(), &n, 8);  // little-endian machines only, as the format
    image += header;
    image.append(4 * count, '\0');
    const auto t0 = clock_type::now();
    const auto f =
        locost::io::safetensors_file::parse(reinterpret_cast<const std::byte*>(image.data()), image.size(), "bench.safetensors", nullptr);
    report("tensors", header.size(), header.size(), seconds_since(t0), "bytes");
    (void)f;
}

void run(const std::string& name, std::size_t size) {
    if (name == "added") added(size);
    else if (name == "unigram") unigram(size);
    else if (name == "objects") objects(size);
    else if (name == "keys") keys(size);
    else if (name == "tensors") tensors(size);
    else std::printf("unknown case '%s'\n", name.c_str());
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 1) {
        for (std::size_t n : {10'000u, 100'000u, 1'000'000u}) run("added", n);
        for (std::size_t n : {10'000u, 100'000u, 1'000'000u}) run("unigram", n);
        for (std::size_t b : {1u << 20, 8u << 20}) run("objects", b);
        for (std::size_t b : {1u << 20, 8u << 20}) run("keys", b);
        for (std::size_t b : {10'000'000u, 99'000'000u}) run("tensors", b);
        return 0;
    }
    for (int k = 1; k < argc; ++k) {
        const std::string arg = argv[k];
        const auto eq = arg.find('=');
        if (eq == std::string::npos) {
            std::printf("expected CASE=SIZE, got '%s'\n", arg.c_str());
            return 2;
        }
        run(arg.substr(0, eq), std::stoull(arg.substr(eq + 1)));
    }
}
