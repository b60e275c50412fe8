// What the readers may open: regular files only, and inside the directory they were named from.
//
// A checkpoint or tokenizer directory comes from elsewhere (a download, a colleague, an archive),
// so its entries are input like any other:
//  * Only regular files are read. A FIFO would block the reader forever, a device such as
//    /dev/zero feeds it without end, a socket cannot be mapped: each is refused by its type
//    before it is opened (io.not_a_file), and the open itself never waits (mapped_file opens with
//    O_NONBLOCK and checks the type again on the descriptor it got).
//  * Nothing outside the directory is read through it. A file name of the directory, or a path a
//    file of it gives (a shard name, a SLED backbone), that leads through symbolic links to a
//    file outside the directory is refused (io.outside_directory) before a byte is read: a link
//    to /etc/passwd must not reach a parser whose error would quote it. One exception is the
//    layout of the Hugging Face cache, whose snapshots are links into the same repository's
//    blobs: models--ORG--NAME/snapshots/REV/FILE -> ../../blobs/HASH.
//  * An optional file (generation_config.json, tokenizer_config.json, ...) that is present but
//    is not a readable regular file is an error, not a silent default: a broken link or a FIFO
//    under that name means the directory is not what it claims to be.
// Paths the user names (a --config, a --tokenizer) are the user's choice and are not confined.
#pragma once
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "../config/error.hpp"

namespace locost::io {

namespace detail {

inline std::string file_kind(mode_t m) {
    return S_ISDIR(m) ? "a directory"
        : S_ISCHR(m)  ? "a character device"
        : S_ISBLK(m)  ? "a block device"
        : S_ISFIFO(m) ? "a FIFO"
        : S_ISSOCK(m) ? "a socket"
                      : "not a regular file";
}

// Whether `p` (lexically normal, absolute) is `root` or lies under it.
inline bool lies_under(const std::filesystem::path& p, const std::filesystem::path& root) {
    auto r = root.begin(), q = p.begin();
    for (; r != root.end(); ++r, ++q) {
        if (r->empty()) continue;  // a trailing separator
        if (q == p.end() || *q != *r) return false;
    }
    return true;
}

}  // namespace detail

// Refuses `path` unless it is a regular file (after links). Errors: io.open_failed (it cannot be
// looked at: absent, no permission), io.not_a_file (a directory, FIFO, device or socket).
inline void require_regular_file(const std::string& path) {
    struct ::stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        const int e = errno;
        throw error("io.open_failed", path + ": cannot open (" + std::strerror(e) + ")");
    }
    if (!S_ISREG(st.st_mode)) throw error("io.not_a_file", path + ": is " + detail::file_kind(st.st_mode) + ", expected a regular file");
}

// The files of one directory, as the readers may open them (see the top of this file).
class directory_files {
public:
    // `dir` must name an existing directory (callers report a missing one in their own words).
    explicit directory_files(const std::string& dir) : dir_(dir) {
        namespace fs = std::filesystem;
        std::error_code ec;
        root_ = fs::weakly_canonical(fs::absolute(dir, ec), ec);
        if (ec) root_ = fs::absolute(dir).lexically_normal();
        // A Hugging Face cache snapshot: .../models--ORG--NAME/snapshots/REV; its files link into
        // .../models--ORG--NAME/blobs.
        const fs::path snapshots = root_.parent_path();
        const fs::path repo = snapshots.parent_path();
        if (snapshots.filename() == "snapshots" && repo.filename().string().rfind("models--", 0) == 0) blobs_ = repo / "blobs";
    }

    const std::string& dir() const noexcept { return dir_; }

    // DIR/name when something has that name, else nothing. What is there must be a regular file
    // inside the directory. Errors: io.broken_link, io.not_a_file, io.outside_directory,
    // io.open_failed.
    std::optional<std::string> find(std::string_view name) const {
        namespace fs = std::filesystem;
        const fs::path p = fs::path(dir_) / fs::path(std::string(name));
        std::error_code ec;
        const auto link = fs::symlink_status(p, ec);
        if (link.type() == fs::file_type::not_found) return std::nullopt;
        const std::string s = p.string();
        if (fs::is_symlink(link) && !fs::exists(p, ec))
            throw error("io.broken_link", s + ": is a symbolic link to a file that does not exist");
        require_inside(s);
        require_regular_file(s);
        return s;
    }

    // DIR/name, which must be there. Errors: those of find(), and `missing_id` with `missing`
    // (e.g. "tokenizer.not_found", "DIR/vocab.json: not found ...") when nothing has that name.
    std::string require(std::string_view name, const std::string& missing_id, const std::string& missing) const {
        auto f = find(name);
        if (!f) throw error(missing_id, missing);
        return *f;
    }

    // Refuses `path` (a path the directory's own files name, or DIR/something) when it resolves
    // outside the directory and outside its cache blobs. Error: io.outside_directory.
    void require_inside(const std::string& path) const {
        namespace fs = std::filesystem;
        std::error_code ec;
        fs::path target = fs::weakly_canonical(fs::absolute(path, ec), ec);
        if (ec) target = fs::absolute(path).lexically_normal();
        if (detail::lies_under(target, root_) || (!blobs_.empty() && detail::lies_under(target, blobs_))) return;
        throw error("io.outside_directory",
                    path + ": leads outside the directory " + dir_ + " (to " + target.string() +
                        "); files a checkpoint names are read from inside it only");
    }

private:
    std::string dir_;
    std::filesystem::path root_, blobs_;
};

}  // namespace locost::io
