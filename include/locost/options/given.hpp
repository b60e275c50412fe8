// The options one call was given: from the tool's command line (`--name value`, `--name=value`,
// boolean `--flag`), from Python's keyword arguments or from a JSON request's fields. Options of
// the shared table (options/table.hpp) are checked by their record as they arrive; a front end's
// own options (the tool's --out, --shard, ...) are kept as text for the command to read.
#pragma once
#include <charconv>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "record.hpp"
#include "table.hpp"

namespace locost::options {

class given {
public:
    // The tool: `valued` options take a value, `flags` do not; anything else is an error (cli.*,
    // naming the command and the option). Names are the tool's (--max-new-tokens).
    given(std::string command, int argc, char** argv, int first, const std::set<std::string>& valued, const std::set<std::string>& flags)
        : command_(std::move(command)), style_(spelling::flag) {
        for (int i = first; i < argc; ++i) {
            std::string a = argv[i];
            if (a == "-h" || a == "--help") {
                help_ = true;
                continue;
            }
            if (a.rfind("--", 0) != 0 || a.size() == 2)
                throw error("cli.unexpected_argument",
                            command_ + ": unexpected argument '" + a + "' (see 'locost " + command_ + " --help')");
            std::string name = a.substr(2), value;
            bool has_value = false;
            if (const auto eq = name.find('='); eq != std::string::npos) {
                value = name.substr(eq + 1);
                name = name.substr(0, eq);
                has_value = true;
            }
            if (flags.count(name)) {
                if (has_value) throw error("cli.bad_value", command_ + ": option '--" + name + "' takes no value");
                put(name, nullptr, true);
            } else if (valued.count(name)) {
                if (!has_value) {
                    if (i + 1 >= argc) throw error("cli.missing_value", command_ + ": option '--" + name + "' needs a value");
                    value = argv[++i];
                }
                if (has(name)) throw error("cli.repeated_option", command_ + ": option '--" + name + "' given twice");
                put(name, &value, false);
            } else {
                throw error("cli.unknown_option", command_ + ": unknown option '--" + name + "' (see 'locost " + command_ + " --help')");
            }
        }
    }

    // Python or a JSON request: typed values by name (snake_case), each checked by the table's
    // record among `allowed`; a null value is "not given", a false flag too. Error:
    // python.unknown_argument / server.bad_request naming the argument and the ones it takes.
    given(std::string command, spelling style, const std::vector<std::pair<std::string, json>>& values,
          const std::vector<const record*>& allowed)
        : command_(std::move(command)), style_(style) {
        for (const auto& [name, v] : values) {
            const record* r = nullptr;
            for (const record* a : allowed)
                if (a->name == name) r = a;
            if (!r) {
                std::string known;
                for (const record* a : allowed) known += (known.empty() ? "" : ", ") + std::string(a->name);
                throw error(style == spelling::keyword ? "python.unknown_argument" : "server.bad_request",
                            command_ + ": unknown " + (style == spelling::keyword ? "argument" : "field") + " '" +
                                io::detail::printable(name, 64) + "' (it takes: " + known + ")");
            }
            // (a flag given False is kept: do_sample=False overrides a checkpoint's do_sample)
            if (!v.is_null()) entries_[key(name)] = {r, read_value(*r, nullptr, &v, style_, command_)};
        }
    }

    // A value the front end sets itself (Python's Model(path) is the tool's --model).
    void set(const std::string& name, json value) {
        const record* r = find_record(key(name));
        entries_[key(name)] = {r, std::move(value)};
    }

    const std::string& command() const { return command_; }
    spelling style() const { return style_; }
    bool help() const { return help_; }
    // Names in either spelling: "max-new-tokens" and "max_new_tokens" are one option.
    bool has(const std::string& n) const { return entries_.count(key(n)) != 0; }
    // A flag given and true (Python's False is given, and false).
    bool flag(const std::string& n) const {
        auto it = entries_.find(key(n));
        return it != entries_.end() && (!it->second.value.is_boolean() || it->second.value.get<bool>());
    }
    const json& value(const std::string& n) const { return entries_.at(key(n)).value; }
    // "option '--num-beams'" / "argument 'num_beams'": how messages name the option here.
    std::string named(const std::string& n) const { return options::named(key(n), style_); }
    std::string spelled(const std::string& n) const { return spelled_name(key(n), style_); }
    const char* bad_value_id() const { return options::bad_value_id(style_); }

    std::string required(const std::string& n) const {
        auto it = entries_.find(key(n));
        if (it == entries_.end())
            throw error(style_ == spelling::flag ? "cli.missing_option" : bad_value_id(),
                        command_ + ": " + named(n) + " is required" +
                            (style_ == spelling::flag ? " (see 'locost " + command_ + " --help')" : ""));
        return text_of(it->second.value);
    }
    std::string get(const std::string& n, std::string def) const {
        auto it = entries_.find(key(n));
        return it == entries_.end() ? def : text_of(it->second.value);
    }
    std::optional<std::string> optional(const std::string& n) const {
        auto it = entries_.find(key(n));
        if (it == entries_.end()) return std::nullopt;
        return text_of(it->second.value);
    }

    // A front end's own integer option (checked here), or a table option (checked on arrival).
    template <class Int>
    Int integer(const std::string& n, Int def, Int lo, Int hi) const {
        auto it = entries_.find(key(n));
        if (it == entries_.end()) return def;
        const json& v = it->second.value;
        auto fail = [&] {
            throw error(bad_value_id(),
                        command_ + ": " + named(n) + " expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                            "], got '" + io::detail::printable(text_of(v)) + "'");
        };
        Int out{};
        if (v.is_string()) {
            const std::string& s = v.get_ref<const std::string&>();
            auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
            if (ec != std::errc() || p != s.data() + s.size()) fail();
        } else if (v.is_number_integer()) {
            if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<Int>::max())
                                       : v.get<std::int64_t>() < static_cast<std::int64_t>(std::numeric_limits<Int>::min()))
                fail();
            out = v.get<Int>();
        } else {
            fail();
        }
        if (out < lo || out > hi) fail();
        return out;
    }
    double real(const std::string& n, double def, double lo, double hi) const {
        auto it = entries_.find(key(n));
        if (it == entries_.end()) return def;
        const json& v = it->second.value;
        double x = 0;
        bool ok = v.is_number();
        if (ok) x = v.get<double>();
        else if (v.is_string()) {
            const std::string& s = v.get_ref<const std::string&>();
            char* end = nullptr;
            x = std::strtod(s.c_str(), &end);
            ok = !s.empty() && end == s.c_str() + s.size();
        }
        if (!ok || !(x >= lo && x <= hi))
            throw error(bad_value_id(),
                        command_ + ": " + named(n) + " expects a number in [" + detail::number_text(lo) + ", " + detail::number_text(hi) +
                            "], got '" + io::detail::printable(text_of(v)) + "'");
        return x;
    }


private:
    struct entry {
        const record* rec = nullptr;
        json value;
    };
    static std::string key(std::string n) {
        for (auto& c : n)
            if (c == '-') c = '_';
        return n;
    }
    static const record* find_record(const std::string& snake) {
        for (const record& r : table())
            if (r.name == snake) return &r;
        return nullptr;
    }
    static std::string text_of(const json& v) {
        if (v.is_string()) return v.get<std::string>();
        return v.dump();
    }
    void put(const std::string& tool_name, const std::string* text, bool is_flag) {
        const std::string k = key(tool_name);
        const record* r = find_record(k);
        if (is_flag) entries_[k] = {r, json(true)};
        else entries_[k] = {r, r ? read_value(*r, text, nullptr, style_, command_) : json(*text)};
    }

    std::string command_;
    spelling style_;
    std::map<std::string, entry> entries_;
    bool help_ = false;
};

}  // namespace locost::options
