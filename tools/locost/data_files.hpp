// The data files installed with the tool (demo-checkpoint's default SentencePiece model and
// byte-level BPE vocabulary, under <prefix>/share/locost), found relative to the running
// executable: no source or build path is compiled in, so an installed tool runs from anywhere.
// The build tree lays the same files out the same way (BUILD/bin/locost, BUILD/share/locost;
// tools/CMakeLists.txt), so a tool that is built but not installed finds them too.
#pragma once
#include <locost/locost.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

// The installed data directory relative to the installed executable's directory, which CMake
// computes from CMAKE_INSTALL_BINDIR and CMAKE_INSTALL_DATADIR.
#ifndef LOCOST_TOOL_DATA_FROM_BIN
#define LOCOST_TOOL_DATA_FROM_BIN "../share/locost"
#endif

namespace locost::cli {

// The directories the tool's data may be in, most likely first: the installed layout's and the
// build tree's (../share/locost), relative to `exe` (the resolved executable) and without repeats.
inline std::vector<std::filesystem::path> data_dirs(const std::filesystem::path& exe) {
    namespace fs = std::filesystem;
    std::vector<fs::path> dirs;
    for (const char* rel : {LOCOST_TOOL_DATA_FROM_BIN, "../share/locost"}) {
        const fs::path dir = (exe.parent_path() / rel).lexically_normal();
        if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
    }
    return dirs;
}

// The first data directory that holds every one of `files` (paths relative to it). Otherwise
// throws tool.data_not_found: `what` (e.g. "demo-checkpoint: no --spm given, and the default
// SentencePiece model books-16k.model") followed by where the tool looked and `instead` (the
// option that names the file directly).
inline std::filesystem::path find_data_dir(const std::vector<std::string>& files, const std::string& what, const std::string& instead) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path exe = fs::canonical("/proc/self/exe", ec);
    if (ec)
        throw error("tool.data_not_found",
                    what + " is installed with the tool, but the tool cannot locate its own executable " +
                        "(/proc/self/exe: " + ec.message() + "); pass " + instead);
    std::string looked;
    for (const fs::path& dir : data_dirs(exe)) {
        const bool all = std::all_of(files.begin(), files.end(), [&](const std::string& f) { return fs::is_regular_file(dir / f, ec); });
        if (all) return dir;
        looked += (looked.empty() ? "" : ", ") + dir.string();
    }
    throw error("tool.data_not_found",
                what + " is not where the tool's data is installed: looked in " + looked + " (from the executable " + exe.string() +
                    "); pass " + instead);
}

}  // namespace locost::cli
