// Command-line parsing for the locost tool: `--name value`, `--name=value` and boolean
// `--flag` (options::given). Every problem is a locost::error with id cli.* naming the command
// and option. Also what the commands share about the process: the phase an out-of-memory report
// names, and denormals.
#pragma once
#include <locost/locost.hpp>
#include <locost/options/readers.hpp>

#include <cstdlib>
#include <exception>
#include <string>

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
    explicit phase_scope(std::string phase) : saved_(current_phase()), exceptions_(std::uncaught_exceptions()) {
        current_phase() = std::move(phase);
    }
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
// LOCOST_KEEP_DENORMALS=1: bench/robustness/denormals.sh measures what flushing saves.
inline void flush_denormals_unless_kept() {
    const char* keep = std::getenv("LOCOST_KEEP_DENORMALS");
    if (!keep || std::string(keep) != "1") flush_denormals();
}

// The options a command was given: parsed from its command line, options of the shared table
// (locost/options/table.hpp) checked by their records as they arrive.
using args = options::given;

}  // namespace locost::cli
