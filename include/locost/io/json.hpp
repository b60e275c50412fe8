// JSON for the readers: nlohmann::json behind one strict parse function.
//
// Every JSON input of the library (safetensors headers, config.json, generation_config.json,
// model.safetensors.index.json, token-id lists) goes through parse_json(), which adds what
// nlohmann does not check by itself:
//  * a syntax error becomes locost::error "<kind>.invalid_json" with the 0-based byte offset of
//    the offending character in the file (nlohmann's own message follows, made printable);
//  * a key that appears twice in one object is an error ("<kind>.duplicate_key"): nlohmann
//    would silently keep the last one, so that {"w": A, "w": B} could hide a tensor;
//  * nesting deeper than max_json_depth is an error ("<kind>.nesting_too_deep"), so that no
//    input can make later recursive code (or our messages) do unbounded work.
// <kind> is the caller's id prefix ("safetensors", "config", "index", "ids", ...), so an error
// says which reader failed.
//
// json_type_name() spells a value's JSON type the way our messages do ("integer", "number",
// "string", "boolean", "null", "array", "object").
#pragma once
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "../config/error.hpp"
#include "mapped_file.hpp"
#include "printable.hpp"

namespace locost::io {

using json = nlohmann::json;

// The deepest nesting parse_json() accepts (the root value is depth 1). Our formats need 3.
inline constexpr int max_json_depth = 64;

inline std::string json_type_name(const json& v) {
    switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    default: return "value";
    }
}

namespace detail {

// nlohmann's what() is "[json.exception.parse_error.101] parse error at line 1, column 2: <detail>";
// keep <detail>. Its "last read: '<token>'" quotes the file's bytes up to the error: only the last
// 24 of them are kept (escaped), enough to see the mistake, never a file's content.
inline std::string parse_error_detail(const char* what) {
    std::string w = what;
    const auto p = w.find("parse error");
    const auto q = p == std::string::npos ? std::string::npos : w.find(": ", p);
    if (q != std::string::npos) w = w.substr(q + 2);
    constexpr std::size_t keep = 24;
    const std::string mark = "last read: '";
    if (const auto a = w.find(mark); a != std::string::npos) {
        const auto b = a + mark.size();
        auto e = w.find("'; ", b);  // a suffix may follow ("; expected '[', '{', or a literal")
        if (e == std::string::npos) e = w.rfind('\'');
        if (e != std::string::npos && e > b && e - b > keep) w = w.substr(0, b) + "..." + w.substr(e - keep);
    }
    return printable(w);
}

}  // namespace detail

namespace detail {

// nlohmann's DOM builder, driven as a SAX handler, with the checks parse_json() adds. Why not
// json::parse with a callback: its callback parser, at the end of every object or array, scans
// the enclosing container for a discarded element, so n siblings cost O(n²) (200K `{}` in a
// config.json: 23 s); the plain builder is linear.
class strict_sax {
public:
    strict_sax(json& root, const std::string& source, const std::string& kind) : dom_(root, true), source_(source), kind_(kind) {}

    bool null() { return dom_.null(); }
    bool boolean(bool v) { return dom_.boolean(v); }
    bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
    bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
    bool number_float(json::number_float_t v, const json::string_t& s) { return dom_.number_float(v, s); }
    bool string(json::string_t& v) { return dom_.string(v); }
    bool binary(json::binary_t& v) { return dom_.binary(v); }
    bool start_object(std::size_t n) {
        enter();
        keys_.emplace_back();
        return dom_.start_object(n);
    }
    bool key(json::string_t& k) {
        if (!keys_.back().insert(k).second)
            throw error(kind_ + ".duplicate_key", source_ + ": key '" + printable(k) + "' appears more than once in the same JSON object");
        return dom_.key(k);
    }
    bool end_object() {
        keys_.pop_back();
        --depth_;
        return dom_.end_object();
    }
    bool start_array(std::size_t n) {
        enter();
        return dom_.start_array(n);
    }
    bool end_array() {
        --depth_;
        return dom_.end_array();
    }
    template <class Exception>  // (the builder rethrows the exception's own type)
    bool parse_error(std::size_t position, const std::string& last_token, const Exception& e) {
        return dom_.parse_error(position, last_token, e);
    }

private:
    void enter() {
        if (++depth_ > max_json_depth)
            throw error(kind_ + ".nesting_too_deep", source_ + ": JSON nests deeper than " + std::to_string(max_json_depth) + " levels");
    }
    nlohmann::detail::json_sax_dom_parser<json> dom_;
    const std::string& source_;
    const std::string& kind_;
    std::vector<std::unordered_set<std::string>> keys_;  // one set per open object
    int depth_ = 0;
};

}  // namespace detail

// Parses `text` strictly (no comments, no trailing content other than whitespace), in time and
// memory linear in its size. `source` starts every message (a path, or a description such as
// "--ids"); `kind` is the id prefix; `base_offset` is added to reported byte offsets (a
// safetensors header starts at byte 8).
inline json parse_json(std::string_view text, const std::string& source, const std::string& kind, std::size_t base_offset = 0) {
    json out;
    detail::strict_sax sax(out, source, kind);
    try {
        json::sax_parse(text.begin(), text.end(), &sax, nlohmann::detail::input_format_t::json, /*strict=*/true,
                        /*ignore_comments=*/false);
        return out;
    } catch (const json::parse_error& e) {
        const std::size_t at = base_offset + (e.byte > 0 ? e.byte - 1 : 0);
        throw error(kind + ".invalid_json",
                    source + ": invalid JSON at byte " + std::to_string(at) + ": " + detail::parse_error_detail(e.what()));
    } catch (const json::exception& e) {  // out_of_range.406: a number too large for a double
        const std::string w = e.what();
        const auto p = w.find("] ");
        throw error(kind + ".invalid_json", source + ": invalid JSON: " + detail::printable(p == std::string::npos ? w : w.substr(p + 2)));
    }
}

// How large a text file a reader accepts, and what it calls such a file. The limits bound the
// memory a parse can take (nlohmann's tree of a JSON text needs up to ~20 times its size, and
// an allocation failure inside its destructor cannot be caught) far above what real files hold:
// a config.json is a few KiB, a tokenizer's vocabulary a few MiB.
struct text_file_limit {
    std::size_t bytes;
    const char* what;
};
inline constexpr text_file_limit config_file_limit{std::size_t(8) << 20, "a configuration file"};
inline constexpr text_file_limit vocabulary_file_limit{std::size_t(128) << 20, "a tokenizer file"};

namespace detail {
inline std::string mib_text(std::size_t bytes) {
    char b[48];
    if (bytes % (std::size_t(1) << 20) == 0) std::snprintf(b, sizeof b, "%zu MiB", bytes >> 20);
    else std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
    return b;
}
}  // namespace detail

// The whole content of a text file of at most limit.bytes. Errors: io.open_failed,
// io.not_a_file, io.file_too_large.
inline std::string read_text_file(const std::string& path, const text_file_limit& limit = config_file_limit) {
    const mapped_file m(path);
    if (m.size() > limit.bytes)
        throw error("io.file_too_large",
                    path + ": is " + detail::mib_text(m.size()) + ", more than the " + detail::mib_text(limit.bytes) + " " + limit.what +
                        " may hold");
    if (m.size() == 0) return {};
    return std::string(reinterpret_cast<const char*>(m.data()), m.size());
}

}  // namespace locost::io
