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

class progress_display {
public:
    progress_display(bool forced, std::string what)
        : tty_(::isatty(STDERR_FILENO) == 1), enabled_(forced || tty_), what_(std::move(what)),
          start_(std::chrono::steady_clock::now()) {}

    // `done` of `total` units of work; `detail` says where we are.
    void update(double done, double total, const std::string& detail) {
        if (!enabled_) return;
        const auto now = std::chrono::steady_clock::now();
        if (done < total && now - last_ < std::chrono::milliseconds(tty_ ? 200 : 2000)) return;
        last_ = now;
        const double secs = std::chrono::duration<double>(now - start_).count();
        std::fprintf(stderr, "%s%s: %5.1f%%  %s  %.1fs%s", tty_ ? "\r\033[K" : "", what_.c_str(),
                     total > 0 ? 100.0 * done / total : 100.0, detail.c_str(), secs, tty_ ? "" : "\n");
        std::fflush(stderr);
    }
    void finish() {
        if (enabled_ && tty_) std::fputs("\n", stderr);
    }
    double seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }

private:
    bool tty_, enabled_;
    std::string what_;
    std::chrono::steady_clock::time_point start_, last_{};
};

} // namespace locost::cli
