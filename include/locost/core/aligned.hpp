// Aligned heap storage. 64 bytes: one cache line, and the widest vector register (AVX-512).
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "../backend/backend.hpp"

namespace locost {

inline constexpr std::size_t alignment = 64;

struct aligned_free {
    void operator()(void* p) const noexcept { std::free(p); }
};

template <class T>
using aligned_ptr = std::unique_ptr<T[], aligned_free>;

// Uninitialised storage for n elements of a trivial type.
template <class T>
aligned_ptr<T> aligned_alloc_n(std::size_t n) {
    static_assert(std::is_trivially_copyable_v<T>, "aligned_alloc_n: trivial element types only");
    if (n > (std::size_t(-1) - alignment) / sizeof(T)) throw std::bad_alloc();
    std::size_t bytes = (n * sizeof(T) + alignment - 1) / alignment * alignment;
    if (bytes == 0) bytes = alignment;
    void* p = std::aligned_alloc(alignment, bytes);
    if (!p) throw std::bad_alloc();
    return aligned_ptr<T>(static_cast<T*>(p));
}

// Scratch that a thread keeps from call to call and only grows: a kernel called thousands of
// times with a few MB of scratch would otherwise take fresh pages (and their faults) each time.
template <class T>
struct growing_buffer {
    aligned_ptr<T> data;
    std::size_t size = 0;
    T* at_least(std::size_t n) {
        if (n > size) {
            data = aligned_alloc_n<T>(n);
            size = n;
        }
        return data.get();
    }
};

// Returns the whole pages inside [p, p + bytes) of a heap block to the operating system: their
// contents are gone (they read as zeros) but the block stays valid to free. Used to shrink a
// large buffer while it is consumed front to back (encoder states → cross-attention cache), so
// that the buffer and what replaces it are never both resident.
inline void release_pages(void* p, std::size_t bytes) noexcept {
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    auto b = reinterpret_cast<std::uintptr_t>(p), e = b + bytes;
    b = (b + page - 1) / page * page;
    e = e / page * page;
    if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

// Maps the whole pages inside [p, p + bytes) in one call (MADV_POPULATE_WRITE, Linux 5.14+)
// before a buffer is written whole (weights being loaded): one system call instead of a page
// fault per 4 KiB, which made up a third of a model load (perf). Transparent huge pages were
// measured too: as fast at best, but with this kernel's synchronous compaction some loads took
// twice as long. A hint only; regions under 4 MiB are left to ordinary faults.
inline void prefault_pages(void* p, std::size_t bytes) noexcept {
#ifdef MADV_POPULATE_WRITE
    if (bytes < (std::size_t{4} << 20)) return;
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto b = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
    const auto e = (reinterpret_cast<std::uintptr_t>(p) + bytes) / page * page;
    if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)bytes;
#endif
}

// Host memory of the CPU backend.
template <>
struct memory<cpu> {
    template <class T>
    using pointer = aligned_ptr<T>;
    template <class T>
    static pointer<T> allocate(std::size_t n) {
        return aligned_alloc_n<T>(n);
    }
};

// The host is its own device: every crossing is a plain copy.
template <>
struct transfer<cpu> {
    template <class T>
    static void upload(T* dst, const T* src, std::size_t n) {
        if (n) std::memcpy(dst, src, n * sizeof(T));
    }
    template <class T>
    static void download(T* dst, const T* src, std::size_t n) {
        if (n) std::memcpy(dst, src, n * sizeof(T));
    }
    template <class T>
    static void copy(T* dst, const T* src, std::size_t n) {
        if (n) std::memcpy(dst, src, n * sizeof(T));
    }
    // rows × width elements from rows src_pitch apart to rows dst_pitch apart.
    template <class T>
    static void copy_2d(T* dst, std::int64_t dst_pitch, const T* src, std::int64_t src_pitch, std::int64_t width, std::int64_t rows) {
        for (std::int64_t r = 0; r < rows; ++r)
            std::memcpy(dst + r * dst_pitch, src + r * src_pitch, static_cast<std::size_t>(width) * sizeof(T));
    }
};

}  // namespace locost
