// Output files that appear whole or not at all, and never where they would destroy something.
//
//   check_output_path(path, inputs, what)   before any costly work: where `path` may be written.
//       A new name in an existing directory, or an existing regular file. A symbolic link is
//       followed to its target, which must be one of those (the link itself stays a link). A
//       directory, a character or block device, a FIFO or a socket is io.bad_output; a file that
//       is one of the command's inputs (the same inode: a hard link or another spelling of the
//       path counts) is io.output_is_input. Returns the path to write: the link's target.
//   atomic_file f(path)   a temporary file `.NAME.locost-tmp.PID.N` beside the target (same
//       directory, so the rename cannot cross file systems), created exclusively; write()
//       checks every write (a full disk, a file-size limit: io.write_failed); commit() flushes
//       it to the disk (fsync), renames it over the target and syncs the directory. Destroyed
//       uncommitted (an exception, an early return), it removes the temporary.
//   remove_pending_temporaries()   async-signal-safe: unlinks every temporary not yet committed
//       or removed. A program calls it from its SIGINT/SIGTERM handlers (the tool does,
//       tools/locost/main.cpp); a library never installs signal handlers itself.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "../config/error.hpp"
#include "file_access.hpp"

namespace locost::io {

namespace detail {

// The temporaries in flight, as fixed-size C strings a signal handler may read: a slot is
// claimed by setting `used` after its path is complete, and released by clearing it.
struct pending_temporary {
    std::atomic<bool> used{false};
    char path[4096] = {};
};
inline constexpr std::size_t max_pending_temporaries = 64;
// Constant-initialised (no guard variable), so a signal handler may read it at any time.
inline pending_temporary pending_slots[max_pending_temporaries];
inline pending_temporary* pending_temporaries() noexcept { return pending_slots; }

inline int claim_temporary(const std::string& path) {
    if (path.size() >= sizeof(pending_temporary::path)) return -1;
    auto* slots = pending_temporaries();
    for (std::size_t i = 0; i < max_pending_temporaries; ++i) {
        if (slots[i].used.load()) continue;
        std::memcpy(slots[i].path, path.c_str(), path.size() + 1);
        bool expected = false;
        if (slots[i].used.compare_exchange_strong(expected, true)) return static_cast<int>(i);
    }
    return -1;  // not tracked for signals; still removed on error
}

inline void release_temporary(int slot) {
    if (slot >= 0) pending_temporaries()[slot].used.store(false);
}

}  // namespace detail

inline void remove_pending_temporaries() noexcept {
    auto* slots = detail::pending_temporaries();
    for (std::size_t i = 0; i < detail::max_pending_temporaries; ++i)
        if (slots[i].used.load()) ::unlink(slots[i].path);
}

inline std::string check_output_path(const std::string& path, const std::vector<std::string>& inputs, const std::string& what) {
    namespace fs = std::filesystem;
    if (path.empty()) throw error("io.bad_output", what + ": the output path is empty");
    std::string target = path;
    struct ::stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
        std::error_code ec;
        const fs::path resolved = fs::weakly_canonical(fs::path(path), ec);  // follows every link, allows a missing last part
        if (ec) throw error("io.bad_output", path + ": cannot resolve the symbolic link (" + ec.message() + ") (" + what + ")");
        target = resolved.string();
    }
    if (::stat(target.c_str(), &st) == 0) {
        if (!S_ISREG(st.st_mode))
            throw error("io.bad_output",
                        path + ": is " + detail::file_kind(st.st_mode) + ", expected a regular file or a new name (" + what + ")");
        for (const auto& in : inputs) {
            struct ::stat is {};
            if (!in.empty() && in != "-" && ::stat(in.c_str(), &is) == 0 && is.st_dev == st.st_dev && is.st_ino == st.st_ino)
                throw error("io.output_is_input",
                            path + ": is " + (in == path ? std::string("an input") : "the same file as the input " + in) +
                                " of this command; refusing to write over it (" + what + ")");
        }
    } else if (errno != ENOENT) {
        throw error("io.bad_output", path + ": cannot use as output (" + std::strerror(errno) + ") (" + what + ")");
    } else {
        const fs::path parent = fs::path(target).parent_path();
        const std::string dir = parent.empty() ? std::string(".") : parent.string();
        if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
            throw error("io.bad_output", path + ": its directory " + dir + " does not exist (" + what + ")");
    }
    return target;
}

class atomic_file {
public:
    explicit atomic_file(std::string path) : path_(std::move(path)) {
        namespace fs = std::filesystem;
        static std::atomic<unsigned> counter{0};
        const fs::path p(path_);
        const fs::path dir = p.parent_path();
        tmp_ =
            (dir / ("." + p.filename().string() + ".locost-tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++))).string();
        slot_ = detail::claim_temporary(tmp_);
        fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd_ < 0) {
            const int e = errno;
            detail::release_temporary(slot_);
            throw error("io.write_failed", tmp_ + ": cannot create the temporary file for " + path_ + " (" + std::strerror(e) + ")");
        }
    }
    atomic_file(const atomic_file&) = delete;
    atomic_file& operator=(const atomic_file&) = delete;
    ~atomic_file() {
        if (fd_ >= 0) ::close(fd_);
        if (!committed_) ::unlink(tmp_.c_str());
        detail::release_temporary(slot_);
    }

    void write(const void* data, std::size_t n) {
        const char* p = static_cast<const char*>(data);
        while (n > 0) {
            const ::ssize_t w = ::write(fd_, p, n);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) fail("cannot write");
            p += w;
            n -= static_cast<std::size_t>(w);
        }
    }
    void write(const std::string& s) { write(s.data(), s.size()); }

    // Durable and in place: the data on the disk, then the name, then the directory entry.
    void commit() {
        if (::fsync(fd_) != 0) fail("cannot flush to the disk");
        const int fd = fd_;
        fd_ = -1;
        if (::close(fd) != 0) fail("cannot close");
        if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
            const int e = errno;
            throw error("io.write_failed", path_ + ": cannot rename " + tmp_ + " to it (" + std::strerror(e) + ")");
        }
        committed_ = true;
        detail::release_temporary(slot_);
        slot_ = -1;
        const std::string dir = std::filesystem::path(path_).parent_path().string();
        const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            ::fsync(dfd);  // best effort: some file systems refuse fsync on directories
            ::close(dfd);
        }
    }

    const std::string& temporary_path() const noexcept { return tmp_; }

private:
    [[noreturn]] void fail(const char* what) {
        const int e = errno;
        throw error("io.write_failed", path_ + ": " + what + " (" + std::strerror(e) + "); nothing was written to it");
    }

    std::string path_, tmp_;
    int fd_ = -1, slot_ = -1;
    bool committed_ = false;
};

// Text (JSON, README) written atomically to a path check_output_path accepted.
inline void write_file_atomically(const std::string& path, const std::string& text) {
    atomic_file f(path);
    f.write(text);
    f.commit();
}

}  // namespace locost::io
