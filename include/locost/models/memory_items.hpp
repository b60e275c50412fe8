// The vocabulary of the memory estimate (models/memory_estimate.hpp): what a request holds at
// once, as items that say what they grow with, gathered into phases. Families describe their
// encoder's working set in these terms (models/<family>/family.hpp).
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "../backend/device.hpp"
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

// An encoder's working set over (B, L): what it holds while it runs, what it keeps after
// (LOCOST's kernel cache, a position band over the input's length), and the tables the model's
// layers derive from its weights when it loads and hold from then on (position bands of a fixed
// reach, sinusoid frequencies): layers/position_band.hpp, layers/sinusoidal_positions.hpp.
struct encoder_memory {
    std::vector<memory_item> working;
    std::vector<memory_item> kept;
    std::vector<memory_item> tables;
};

// One position band (layers/position_band.hpp) of `heads` rows (0: one row) covering distances
// below `reach`, in elements.
inline double band_elements(index_t heads, index_t reach) {
    return static_cast<double>(std::max<index_t>(heads, 1)) * static_cast<double>(2 * reach - 1);
}

// What an encoder's working set is computed for (models/memory_estimate.hpp).
struct encoder_request {
    index_t batch = 1, length = 1;
    std::size_t element = sizeof(float);
    int threads = 1;
    device_kind device = device_kind::cpu;
    std::string grows_with;    // what the user turns to change the length
    index_t tile_rows = 1024;  // encoder_options::tile_rows
};

// The working set of an encoder_stack (models/encoder_stack.hpp) over the request's rows of width H:
// its output states and one scratch buffer, the larger of the mixer's `mixer_scratch` elements and
// a tile of the feed-forward's `ff_per_row`.
inline encoder_memory stack_memory(index_t H, const encoder_request& r, index_t mixer_scratch, index_t ff_per_row) {
    const double es = static_cast<double>(r.element);
    const index_t rows = r.batch * r.length, tile = std::max<index_t>(1, std::min(r.tile_rows, rows));
    return {{{"encoder states", static_cast<double>(rows) * static_cast<double>(H) * es, r.grows_with},
             {"layer scratch", static_cast<double>(std::max(mixer_scratch, tile * ff_per_row)) * es, r.grows_with}},
            {},
            {}};
}

}  // namespace locost::models
