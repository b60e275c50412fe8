// Fuzzes the Hugging Face cache resolver (io/hub_cache.hpp). Every input: the name parser and the
// ref-content rules on its bytes, and the escaping of quoted text (io/printable.hpp) must hold
// their invariants. One input in 256 (a first byte 0xFF) also becomes a layout a
// copied or hostile cache folder can have: the revision asked for, the bytes of the ref file,
// and whether the ref, the snapshot or the repository folder is a link (to a file or folder
// outside the cache holding a secret); the resolver must refuse with a locost::error whose
// message holds no control character and never the secret, or return a real snapshot directory
// of the repository. (Files cost a millisecond an input; the pure parts keep the run at 10^7.)
#include <locost/io/hub_cache.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace {

const fs::path& root() {
    static const fs::path r = [] {
        const fs::path p = fs::temp_directory_path() / ("locost_fuzz_hub_" + std::to_string(::getpid()));
        fs::create_directories(p);
        setenv("HF_HUB_CACHE", (p / "cache").c_str(), 1);
        return p;
    }();
    return r;
}

// (with a control byte: a message may quote a ref's own bytes, escaped, never these raw)
const std::string secret = "hf_SECRET\x01TOKEN";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 3) return 0;
    const std::string_view all(reinterpret_cast<const char*>(data), size);
    if (const auto n = locost::io::parse_hub_name(all)) {
        if (n->repo.empty() || n->revision.empty() || n->revision.find("..") != std::string::npos) std::abort();
    }
    (void)locost::io::detail::is_commit_hash(all);
    if (locost::io::detail::is_snapshot_name(all) && (all == "." || all == ".." || all.find('/') != std::string_view::npos)) std::abort();
    for (const char c : locost::io::detail::printable(all))
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) std::abort();
    for (const char c : locost::io::detail::terminal_safe(all))
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) std::abort();
    if (data[0] != 0xFF) return 0;
    const fs::path& r = root();
    std::error_code ec;
    fs::remove_all(r / "cache", ec);
    fs::create_directories(r / "outside");
    std::ofstream(r / "outside" / "token") << secret;
    std::ofstream(r / "outside" / "config.json") << secret;
    const std::uint8_t flags = data[1];
    const std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
    const auto cut = rest.find('\n');
    const std::string revision(rest.substr(0, std::min<std::size_t>(cut, 200)));
    const std::string ref_bytes(cut == std::string_view::npos ? std::string_view() : rest.substr(cut + 1));
    const fs::path repo = r / "cache" / "models--org--m";
    const std::string commit = "0123456789abcdef0123456789abcdef01234567";
    if (flags & 1) {
        fs::create_directories(r / "cache");
        fs::create_directory_symlink(r / "outside", repo, ec);
    } else {
        fs::create_directories(repo / "refs", ec);
        fs::create_directories(repo / "snapshots", ec);
        if (flags & 2) fs::create_directory_symlink(r / "outside", repo / "snapshots" / commit, ec);
        else fs::create_directories(repo / "snapshots" / commit, ec);
        const fs::path ref = repo / "refs" / "main";
        if (flags & 4) fs::create_symlink(r / "outside" / "token", ref, ec);
        else std::ofstream(ref, std::ios::binary) << ref_bytes;
    }
    const std::string name = "org/m" + ((flags & 8) ? "@" + revision : std::string());
    try {
        const std::string dir = locost::io::cache_snapshot_dir(name);
        // A result is a real folder of the repository's snapshots.
        if (fs::is_symlink(dir) || !fs::is_directory(dir) || fs::path(dir).parent_path() != repo / "snapshots") std::abort();
    } catch (const locost::error& e) {
        const std::string w = e.what();
        if (w.find(secret) != std::string::npos) std::abort();
        for (const char c : w)
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) std::abort();
    }
    return 0;
}
