// The vocabulary of the memory estimate (models/memory_estimate.hpp): what a request holds at
// once, as items that say what they grow with, gathered into phases. Families describe their
// encoder's working set in these terms (models/<family>/family.hpp).
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "../config/error.hpp"
#include "../core/tensor.hpp"

namespace locost::models {

// "2.68 TB", "812 MB", "4.0 KB": decimal units, three significant digits.
inline std::string format_bytes(double b) {
    const char* unit[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
    int u = 0;
    while (b >= 999.5 && u < 6) b /= 1000.0, ++u;
    char s[48];
    if (u == 0) std::snprintf(s, sizeof s, "%.0f B", b);
    else std::snprintf(s, sizeof s, b >= 99.95 ? "%.0f %s" : b >= 9.995 ? "%.1f %s" : "%.2f %s", b, unit[u]);
    return s;
}

struct memory_item {
    std::string what;
    double bytes = 0;
    std::string grows_with;  // empty: a constant of the model
};

struct memory_phase {
    std::string name;
    std::vector<memory_item> items;
    double bytes() const {
        double b = 0;
        for (const auto& i : items) b += i.bytes;
        return b;
    }
};

// An encoder's working set over (B, L): what it holds while it runs, and what it keeps after
// (LOCOST's kernel cache).
struct encoder_memory {
    std::vector<memory_item> working;
    std::vector<memory_item> kept;
};

// The working set of an encoder_stack (models/encoder_stack.hpp) over `rows` positions of width H:
// its output states and one scratch buffer of `scratch` elements, the largest any block asks for.
inline encoder_memory stack_memory(index_t rows, index_t H, index_t scratch, std::size_t e, const std::string& grows) {
    const double es = static_cast<double>(e);
    return {{{"encoder states", static_cast<double>(rows) * static_cast<double>(H) * es, grows},
             {"layer scratch", static_cast<double>(scratch) * es, grows}},
            {}};
}

} // namespace locost::models
