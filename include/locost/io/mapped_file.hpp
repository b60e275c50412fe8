// A read-only memory mapping of a whole file (RAII). Checkpoints are mapped rather than read
// so that loading touches each byte once and the page cache is shared between processes.
#pragma once
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

#include "../config/error.hpp"
#include "file_access.hpp"

namespace locost::io {

class mapped_file {
public:
    explicit mapped_file(const std::string& path) : path_(path) {
        // The type is checked before the open (a FIFO's open would wait for a writer) and again on
        // the descriptor (the name may have been replaced in between); O_NONBLOCK makes the open
        // itself return at once whatever the name has become.
        require_regular_file(path);
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) throw error("io.open_failed", path + ": cannot open (" + std::strerror(errno) + ")");
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            const mode_t m = st.st_mode;
            ::close(fd);
            throw error("io.not_a_file", path + ": is " + detail::file_kind(m) + ", expected a regular file");
        }
        size_ = static_cast<std::size_t>(st.st_size);
        if (size_ > 0) {
            void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
            if (p == MAP_FAILED) {
                const int e = errno;
                ::close(fd);
                throw error("io.open_failed", path + ": cannot map (" + std::strerror(e) + ")");
            }
            data_ = static_cast<const std::byte*>(p);
        }
        ::close(fd);
    }
    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;
    ~mapped_file() {
        if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
    }

    const std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    const std::string& path() const noexcept { return path_; }

    // Tell the kernel a range will not be needed again (after it was converted/copied), so
    // that loading a checkpoint does not keep both the mapping and the copy resident.
    void release(const std::byte* p, std::size_t n) const noexcept {
        if (!data_ || n == 0) return;
        const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
        auto b = reinterpret_cast<std::uintptr_t>(p);
        auto e = b + n;
        b = (b + page - 1) / page * page;
        e = e / page * page;
        if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
    }

private:
    std::string path_;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace locost::io
