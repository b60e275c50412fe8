// The one doctest main shared by the test executables. The CPU kernels' level is settled first: a
// LOCOST_ISA this CPU or build cannot run (the per-level tests of tests/CMakeLists.txt ask for
// every level) skips the whole run (exit 77, CTest's SKIP_RETURN_CODE) with the reason, and one
// naming no level fails it.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <locost/backend/cpu/isa.hpp>

int main(int argc, char** argv) {
    try {
        const auto level = locost::kernels_isa();
        if (std::getenv("LOCOST_ISA"))
            std::fprintf(stderr, "CPU kernels at level %s\n", std::string(locost::isa_level_name(level)).c_str());
    } catch (const locost::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return e.id() == "isa.unknown_level" ? 1 : 77;
    }
    doctest::Context context(argc, argv);
    return context.run();
}
