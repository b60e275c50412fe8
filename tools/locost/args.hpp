// Command-line parsing for the locost tool: `--name value`, `--name=value` and boolean
// `--flag`. Every problem is a locost::error with id cli.* naming the command and option.
#pragma once
#include <locost/locost.hpp>

#include <charconv>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace locost::cli {

// What the command is doing now, for the report of an allocation failure (main.cpp names it:
// "out of memory while loading the weights"). A phase_scope sets it for its lifetime; one left by
// an exception keeps it, so that the report names where the exception came from.
inline std::string& current_phase() {
    static std::string phase = "reading its inputs";
    return phase;
}
class phase_scope {
public:
    explicit phase_scope(std::string phase) : saved_(current_phase()), exceptions_(std::uncaught_exceptions()) { current_phase() = std::move(phase); }
    ~phase_scope() {
        if (std::uncaught_exceptions() == exceptions_) current_phase() = std::move(saved_);
    }
    phase_scope(const phase_scope&) = delete;
    phase_scope& operator=(const phase_scope&) = delete;

private:
    std::string saved_;
    int exceptions_;
};

// FTZ/DAZ in the tool's threads (backend/cpu/threads.hpp says why), unless the environment has
// LOCOST_KEEP_DENORMALS=1: bench/denormals.sh measures what flushing saves.
inline void flush_denormals_unless_kept() {
    const char* keep = std::getenv("LOCOST_KEEP_DENORMALS");
    if (!keep || std::string(keep) != "1") flush_denormals();
}

class args {
public:
    // `valued` options take a value, `flags` do not; anything else is an error.
    args(std::string command, int argc, char** argv, int first,
         const std::set<std::string>& valued, const std::set<std::string>& flags)
        : command_(std::move(command)) {
        for (int i = first; i < argc; ++i) {
            std::string a = argv[i];
            if (a == "-h" || a == "--help") { help_ = true; continue; }
            if (a.rfind("--", 0) != 0 || a.size() == 2)
                throw error("cli.unexpected_argument", command_ + ": unexpected argument '" + a + "' (see 'locost " + command_ + " --help')");
            std::string name = a.substr(2), value;
            bool has_value = false;
            if (const auto eq = name.find('='); eq != std::string::npos) {
                value = name.substr(eq + 1);
                name = name.substr(0, eq);
                has_value = true;
            }
            if (flags.count(name)) {
                if (has_value) throw error("cli.bad_value", command_ + ": option '--" + name + "' takes no value");
                values_[name] = "1";
            } else if (valued.count(name)) {
                if (!has_value) {
                    if (i + 1 >= argc) throw error("cli.missing_value", command_ + ": option '--" + name + "' needs a value");
                    value = argv[++i];
                }
                if (values_.count(name)) throw error("cli.repeated_option", command_ + ": option '--" + name + "' given twice");
                values_[name] = value;
            } else {
                throw error("cli.unknown_option", command_ + ": unknown option '--" + name + "' (see 'locost " + command_ + " --help')");
            }
        }
    }

    bool help() const { return help_; }
    bool has(const std::string& n) const { return values_.count(n) != 0; }
    bool flag(const std::string& n) const { return has(n); }

    std::string required(const std::string& n) const {
        auto it = values_.find(n);
        if (it == values_.end()) throw error("cli.missing_option", command_ + ": option '--" + n + "' is required (see 'locost " + command_ + " --help')");
        return it->second;
    }
    std::string get(const std::string& n, std::string def) const {
        auto it = values_.find(n);
        return it == values_.end() ? def : it->second;
    }
    std::optional<std::string> optional(const std::string& n) const {
        auto it = values_.find(n);
        if (it == values_.end()) return std::nullopt;
        return it->second;
    }

    template <class Int>
    Int integer(const std::string& n, Int def, Int lo, Int hi) const {
        auto it = values_.find(n);
        if (it == values_.end()) return def;
        const std::string& s = it->second;
        Int v{};
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi)
            throw error("cli.bad_value", command_ + ": option '--" + n + "' expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + s + "'");
        return v;
    }

    double real(const std::string& n, double def, double lo, double hi) const {
        auto it = values_.find(n);
        if (it == values_.end()) return def;
        const std::string& s = it->second;
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !(v >= lo && v <= hi))
            throw error("cli.bad_value", command_ + ": option '--" + n + "' expects a number in [" + fmt(lo) + ", " + fmt(hi) + "], got '" + s + "'");
        return v;
    }

private:
    static std::string fmt(double x) {
        char b[32];
        std::snprintf(b, sizeof b, "%g", x);
        return b;
    }
    std::string command_;
    std::map<std::string, std::string> values_;
    bool help_ = false;
};

} // namespace locost::cli
