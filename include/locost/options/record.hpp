// One option, as every front end spells it: a record (name, value type, allowed values, default,
// help, the setting it fills) that the tool's command line, the Python module's keyword arguments
// and the server's request fields all read through. A value arrives either as text (the tool:
// `--num-beams 4`, `--bad-words-ids '[[5]]'`) or as a typed value (Python's `num_beams=4`, a JSON
// request's `"num_beams": 4`); both are checked against the record and kept as a JSON value of the
// record's type, so that a default, a bound and an error are the same wherever the option came
// from. Only the name in the message follows the front end: "option '--num-beams'", "argument
// 'num_beams'", "field 'num_beams'".
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../config/choice.hpp"
#include "../config/error.hpp"
#include "../core/index.hpp"
#include "../io/printable.hpp"

namespace locost::options {

using json = nlohmann::json;

using locost::choice;

enum class value_type {
    flag,       // present or not (Python: True/False)
    integer,    // within [lo, hi]
    real,       // within [lo, hi]
    choice,     // one of `choices`
    text,       // any string (a path, a name)
    id_or_ids,  // a token id or a non-empty list of ids
    id_list,    // a list of ids, possibly empty
    id_lists,   // a list of lists of ids
    positions,  // positions (integers >= 0); the tool writes them "0,5,50"
    size,       // bytes: 12G, 800M, 1.5GiB, a number, or "unlimited"
};

// Which front end a value came from: it decides how the option is named in a message and the
// error id of a bad value.
enum class spelling {
    flag,     // the tool: --num-beams, error cli.bad_value
    keyword,  // Python: num_beams, error python.bad_argument
    field,    // a JSON request: "num_beams", error server.bad_request
};

inline std::string spelled_name(std::string_view name, spelling s) {
    std::string n(name);
    if (s == spelling::flag) {
        for (auto& c : n)
            if (c == '_') c = '-';
        return "--" + n;
    }
    return n;
}
// "option '--num-beams'", "argument 'num_beams'", "field 'num_beams'"
inline std::string named(std::string_view name, spelling s) {
    switch (s) {
    case spelling::flag: return "option '" + spelled_name(name, s) + "'";
    case spelling::keyword: return "argument '" + spelled_name(name, s) + "'";
    case spelling::field: return "field '" + spelled_name(name, s) + "'";
    }
    return std::string(name);
}
inline const char* bad_value_id(spelling s) {
    return s == spelling::flag ? "cli.bad_value" : s == spelling::keyword ? "python.bad_argument" : "server.bad_request";
}

// What a record's setting is filled into. Readers (options/readers.hpp) point it at the options
// they build; a record fills only its own part.
struct targets;

struct record {
    std::string_view name;  // snake_case; the tool spells it --kebab-case
    value_type type = value_type::text;
    std::string_view metavar;       // the value in --help (N, X, DIR, P); empty for flags
    std::string_view help;          // one paragraph, wrapped by the help renderer
    double lo = 0, hi = 0;          // integer and real bounds
    std::vector<choice> choices;    // value_type::choice
    std::string_view default_text;  // what the option is when not given, for help and docs
    std::string_view section;       // a heading the help puts it under (empty: none)
    bool needs_sled = false;        // meaningful only with SLED (--sled-context or a SLED checkpoint)
    // Fills the setting from a checked value (null: the reader handles it, e.g. --threads sets
    // the pool).
    void (*fill)(targets&, const json& value) = nullptr;
    // The setting's value as --dry-run and generation_settings list it (null: not listed); and
    // where its default comes from when neither an argument nor a file set it.
    std::string (*show)(const targets&) = nullptr;
    std::string_view default_source = "default";

    std::string flag_name() const { return spelled_name(name, spelling::flag); }
};

namespace detail {

inline std::string number_text(double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", x);
    return b;
}
inline std::string integer_text(double x) {
    // Bounds up to 2^64 - 1 (the seed): print them exactly.
    if (x >= 1.8446744073709552e19) return std::to_string(~std::uint64_t{0});
    return std::to_string(static_cast<std::int64_t>(x));
}
// The value as a message quotes it: the tool's text in quotes, a typed value as Python or JSON
// writes it.
inline std::string quoted(const std::string* text, const json* typed, spelling s) {
    if (text) return "'" + io::detail::printable(*text) + "'";
    if (typed->is_string()) return "'" + io::detail::printable(typed->get<std::string>()) + "'";
    if (typed->is_boolean() && s == spelling::keyword) return typed->get<bool>() ? "True" : "False";
    if (typed->is_null()) return s == spelling::keyword ? "None" : "null";
    return io::detail::printable(typed->dump(), 200);
}
inline bool is_id(const json& e) {
    return e.is_number_integer() && (e.is_number_unsigned() || e.get<std::int64_t>() >= 0) &&
        e.get<std::uint64_t>() <= static_cast<std::uint64_t>(2147483647);
}
inline bool all_ids(const json& list) {
    if (!list.is_array()) return false;
    for (const auto& e : list)
        if (!is_id(e)) return false;
    return true;
}

// "12G" → 12e9, "1.5GiB" → 1.5·2^30, "800000" → 800000; -1 when it is no size.
inline double size_of(const std::string& v) {
    std::size_t used = 0;
    double x = -1;
    const bool starts = !v.empty() && v[0] >= '0' && v[0] <= '9';
    try {
        if (starts) x = std::stod(v, &used);
    } catch (const std::exception&) { x = -1; }
    std::string unit = used < v.size() ? v.substr(used) : "";
    if (!unit.empty() && unit[0] == ' ') unit.erase(0, 1);
    double scale = -1;
    const char* names[] = {"", "K", "M", "G", "T"};
    for (int i = 0; i < 5; ++i) {
        const std::string n = names[i];
        if (unit == n || (i > 0 && unit == n + "B")) scale = std::pow(1000.0, i);
        if (i > 0 && unit == n + "iB") scale = std::pow(1024.0, i);
    }
    if (unit == "B") scale = 1;
    if (x <= 0 || !std::isfinite(x) || scale < 0) return -1;
    return x * scale;
}

}  // namespace detail

// The record's value from the tool's text or a typed value (exactly one is given), checked and
// normalized: integers as JSON integers, reals as numbers, choices as their listed name, sizes
// as bytes (or "unlimited"), lists as JSON arrays. Error: bad_value_id(s), "CONTEXT: option
// '--num-beams' expects an integer in [1, 2147483647], got '0'".
inline json read_value(const record& r, const std::string* text, const json* typed, spelling s, const std::string& context) {
    const bool typed_in = typed != nullptr;
    auto fail = [&](const std::string& expects) -> json {
        throw error(bad_value_id(s), context + ": " + named(r.name, s) + " expects " + expects + ", got " + detail::quoted(text, typed, s));
    };
    // Lists arrive as JSON text on the command line.
    auto as_json = [&](json& out) {
        if (typed_in) {
            out = *typed;
            return true;
        }
        try {
            out = json::parse(*text);
            return true;
        } catch (const json::exception&) { return false; }
    };
    const std::string json_word = typed_in ? "" : "JSON ";
    switch (r.type) {
    case value_type::flag:
        if (typed_in && typed->is_boolean()) return *typed;
        if (!typed_in) throw error(bad_value_id(s), context + ": " + named(r.name, s) + " takes no value");
        return fail("True or False");
    case value_type::integer: {
        const std::string range = "an integer in [" + detail::integer_text(r.lo) + ", " + detail::integer_text(r.hi) + "]";
        std::uint64_t v = 0;
        if (typed_in) {
            if (!typed->is_number_integer() || (!typed->is_number_unsigned() && typed->get<std::int64_t>() < 0)) return fail(range);
            v = typed->get<std::uint64_t>();
        } else {
            auto [p, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
            if (ec != std::errc() || p != text->data() + text->size()) return fail(range);
        }
        if (static_cast<double>(v) < r.lo || static_cast<double>(v) > r.hi) return fail(range);
        return json(v);
    }
    case value_type::real: {
        const std::string range = "a number in [" + detail::number_text(r.lo) + ", " + detail::number_text(r.hi) + "]";
        double v = 0;
        if (typed_in) {
            if (!typed->is_number()) return fail(range);
            v = typed->get<double>();
        } else {
            char* end = nullptr;
            v = std::strtod(text->c_str(), &end);
            if (text->empty() || end != text->c_str() + text->size()) return fail(range);
        }
        if (!(v >= r.lo && v <= r.hi)) return fail(range);
        return json(v);
    }
    case value_type::choice: {
        std::string listed;
        std::vector<std::string_view> names;
        for (const auto& c : r.choices)
            if (!c.alias) names.push_back(c.name);
        for (std::size_t i = 0; i < names.size(); ++i)
            listed += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
        std::string v;
        if (!typed_in) v = *text;
        else if (typed->is_string()) v = typed->get<std::string>();
        else if (typed->is_boolean()) v = typed->get<bool>() ? "true" : "false";  // early_stopping=True
        else return fail(listed);
        for (const auto& c : r.choices)
            if (c.name == v)
                for (const auto& listed_one : r.choices)
                    if (!listed_one.alias && listed_one.value == c.value) return json(std::string(listed_one.name));
        return fail(listed);
    }
    case value_type::text:
        if (!typed_in) return json(*text);
        if (typed->is_string()) return *typed;
        return fail("a string");
    case value_type::id_or_ids: {
        json j;
        if (as_json(j)) {
            if (detail::is_id(j)) return json::array({j});
            if (j.is_array() && !j.empty() && detail::all_ids(j)) return j;
        }
        return fail("a token id or a " + json_word + "list of ids");
    }
    case value_type::id_list: {
        json j;
        if (as_json(j) && detail::all_ids(j)) return j;
        return fail("a " + json_word + "list of ids like [5,7]");
    }
    case value_type::id_lists: {
        json j;
        if (as_json(j) && j.is_array()) {
            bool ok = true;
            for (const auto& w : j) ok = ok && detail::all_ids(w);
            if (ok) return j;
        }
        return fail("a " + json_word + "list of lists of ids like [[5],[7,8]]");
    }
    case value_type::positions: {
        if (typed_in) {
            if (detail::all_ids(*typed)) return *typed;
            return fail("a list of positions (integers >= 0)");
        }
        json out = json::array();
        std::size_t at = 0;
        while (at < text->size()) {
            const std::size_t end = std::min(text->find(',', at), text->size());
            const std::string item = text->substr(at, end - at);
            const bool digits = !item.empty() && item.size() <= 10 && item.find_first_not_of("0123456789") == std::string::npos;
            if (!digits || std::stoll(item) > 2147483647) return fail("comma-separated positions (integers >= 0)");
            out.push_back(std::stoll(item));
            at = end + 1;
        }
        return out;
    }
    case value_type::size: {
        const std::string expects = "a size such as 12G, 800M, 1.5GiB or 'unlimited'";
        if (typed_in && typed->is_number() && !typed->is_boolean()) {
            const double v = typed->get<double>();
            if (v > 0 && std::isfinite(v)) return json(v);
            return fail(expects);
        }
        if (typed_in && !typed->is_string()) return fail(expects);
        const std::string v = typed_in ? typed->get<std::string>() : *text;
        if (v == "unlimited") return json("unlimited");
        const double bytes = detail::size_of(v);
        if (bytes < 0) return fail(expects);
        return json(bytes);
    }
    }
    return fail("a value");
}

}  // namespace locost::options
