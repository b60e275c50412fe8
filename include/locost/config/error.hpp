// Error reporting.
//
// Three kinds of failure, three mechanisms (docs/errors.md):
//  * misuse the compiler can see      -> concepts / static_assert
//  * broken internal invariants       -> LOCOST_ASSERT (aborts with file:line; never user input)
//  * user and environment failures    -> locost::error, an exception with a stable id.
//
// what() is "[locost.<id>] <message>"; the message names the file, tensor, field or
// argument and what was expected. Ids are stable: tools and tests match on them, and the
// docs/errors.md keeps the table of every id. Messages are tested exactly too, so change them
// deliberately.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

namespace locost {

class error : public std::runtime_error {
public:
    error(std::string id, const std::string& message) : std::runtime_error("[locost." + id + "] " + message), id_(std::move(id)) {}

    // The stable id, e.g. "safetensors.offsets_overlap" (without the "locost." prefix).
    const std::string& id() const noexcept { return id_; }

    // The message without the "[locost.<id>] " prefix.
    std::string message() const { return std::string(what()).substr(id_.size() + 10); }

private:
    std::string id_;
};

namespace detail {
[[noreturn]] inline void assert_fail(const char* expr, const char* file, int line) {
    std::fprintf(stderr, "locost: internal assertion failed: %s (%s:%d)\n", expr, file, line);
    std::abort();
}
}  // namespace detail

}  // namespace locost

// Internal invariants only; user input is validated with locost::error.
#define LOCOST_ASSERT(expr) ((expr) ? static_cast<void>(0) : ::locost::detail::assert_fail(#expr, __FILE__, __LINE__))
