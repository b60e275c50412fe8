// Progress display on stderr for long work, and the closing statistics line.
// Shown when stderr is a terminal, or always with --progress (then one line per update
// without carriage returns, so logs stay readable).
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

namespace locost::cli {

// Peak resident memory of this process in bytes (VmHWM), 0 if unknown.
inline std::size_t peak_rss_bytes() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
    return 0;
}

// Resident memory of this process now in bytes (VmRSS), 0 if unknown.
inline std::size_t current_rss_bytes() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
    return 0;
}

class progress_display {
public:
    progress_display(bool forced, std::string what)
        : tty_(::isatty(STDERR_FILENO) == 1), enabled_(forced || tty_), what_(std::move(what)), start_(std::chrono::steady_clock::now()) {}

    // `done` of `total` units of work; `detail` says where we are.
    void update(double done, double total, const std::string& detail) {
        if (!enabled_) return;
        const auto now = std::chrono::steady_clock::now();
        if (done < total && now - last_ < std::chrono::milliseconds(tty_ ? 200 : 2000)) return;
        last_ = now;
        const double secs = std::chrono::duration<double>(now - start_).count();
        std::fprintf(stderr, "%s%s: %5.1f%%  %s  %.1fs%s", tty_ ? "\r\033[K" : "", what_.c_str(), total > 0 ? 100.0 * done / total : 100.0,
                     detail.c_str(), secs, tty_ ? "" : "\n");
        std::fflush(stderr);
    }
    void finish() {
        if (enabled_ && tty_) std::fputs("\n", stderr);
    }
    double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

private:
    bool tty_, enabled_;
    std::string what_;
    std::chrono::steady_clock::time_point start_, last_{};
};

// Progress of an encode: the encoder's layers (or SLED's chunks), then the cross-attention cache.
inline models::progress_callback encode_progress(progress_display& p) {
    return [&p](const models::encode_progress& e) {
        const double total = static_cast<double>(std::max<index_t>(e.tokens, 1));
        if (e.chunks > 0)
            p.update(static_cast<double>(e.chunk), static_cast<double>(e.chunks),
                     "SLED chunk " + std::to_string(e.chunk) + "/" + std::to_string(e.chunks));
        else if (e.cross_cache)
            p.update(static_cast<double>(e.layers) + static_cast<double>(e.tokens_done) / total, static_cast<double>(e.layers + 1),
                     "cross-attention cache");
        else
            p.update(static_cast<double>(e.layer) + static_cast<double>(e.tokens_done) / total, static_cast<double>(e.layers + 1),
                     "encoder layer " + std::to_string(e.layer + 1) + "/" + std::to_string(e.layers));
    };
}

}  // namespace locost::cli
