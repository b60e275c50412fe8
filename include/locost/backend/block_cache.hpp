// A caching allocator for device memory: freed blocks are kept and handed out again instead of
// being returned to the driver. On a GPU this matters twice over: cudaMalloc costs tens of
// microseconds to milliseconds, and cudaFree waits for the whole device, so a model that allocates
// per-step scratch (decoding) or per-layer FFT buffers (the LOCOST encoder) would otherwise stall
// the GPU at every free.
//
// The policy, written without any CUDA type so that the host tests exercise it with an ordinary
// allocator (tests/backend/test_block_cache.cpp); backend/cuda/runtime.cu instantiates it over cudaMalloc:
//  - sizes are rounded up to a class: multiples of 512 bytes up to 4 KiB, above that multiples of
//    1/8 of the size's power of two, so rounding adds at most 12.5 % (the memory estimate counts
//    that much) and there are eight classes per octave;
//  - a freed block goes to the free list of the stream it was allocated on and is reused only by
//    that stream, whose order makes reuse safe without synchronising. Work on another stream that
//    used the block must be finished first: the CUDA backend waits for the freeing thread's stream
//    when it is not the block's (stream_of); other streams are their issuer's to wait for, as with
//    any stream-ordered memory. A block whose stream was destroyed goes back to the driver when
//    freed;
//  - a request takes the smallest free block of its stream that is at least the rounded size and
//    at most 5/4 of it (a larger block would waste memory another request could use);
//  - when the driver refuses, every cached block is released and the request tried once more, so
//    the cache never makes an allocation fail that would have succeeded without it;
//  - caching can be turned off (LOCOST_CUDA_NO_CACHE=1 in the CUDA backend), which makes every
//    free a driver free again: for memory checkers and for measuring the cache's effect.
//
// Raw is a type with `void* allocate(std::size_t) noexcept` (nullptr when the memory is not
// there) and `void release(void*) noexcept`.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace locost::detail {

struct block_cache_stats {
    std::size_t in_use = 0;         // bytes of live blocks (rounded sizes)
    std::size_t peak_in_use = 0;    // most in_use since the last reset
    std::size_t reserved = 0;       // bytes held from the driver: in_use + cached
    std::size_t peak_reserved = 0;  // most reserved since the last reset: what the GPU had to hold
    std::size_t cached = 0;         // bytes of free blocks kept for reuse
    std::size_t reuses = 0;         // requests served from the cache
    std::size_t driver_allocations = 0;
    std::size_t releases = 0;  // times the cache gave its free blocks back (a refusal, release_cached)
};

template <class Raw>
class block_cache {
public:
    explicit block_cache(Raw raw = {}, bool caching = true) : raw_(std::move(raw)), caching_(caching) {}
    block_cache(const block_cache&) = delete;
    block_cache& operator=(const block_cache&) = delete;
    ~block_cache() { release_cached(); }

    // The size a request of `bytes` is served with.
    static constexpr std::size_t rounded(std::size_t bytes) noexcept {
        const std::size_t step = bytes <= 4096 ? 512 : std::bit_floor(bytes) / 8;
        return (bytes + step - 1) / step * step;
    }

    // A block of at least `bytes` for work on `stream`, or nullptr when the driver refuses even
    // with every cached block released. Zero bytes: nullptr, and nothing is held.
    void* allocate(std::size_t bytes, const void* stream) {
        if (bytes == 0) return nullptr;
        const std::size_t size = caching_ ? rounded(bytes) : bytes;
        const std::lock_guard<std::mutex> lock(m_);
        if (caching_) {
            const auto it = free_.lower_bound({key_of(stream), size});
            if (it != free_.end() && it->first.first == key_of(stream) && it->first.second <= size + size / 4) {
                void* p = it->second;
                const std::size_t got = it->first.second;
                free_.erase(it);
                stats_.cached -= got;
                live_.emplace(p, block{got, stream, false});
                stats_.in_use += got;
                ++stats_.reuses;
                note_peaks();
                return p;
            }
        }
        void* p = raw_.allocate(size);
        if (!p && stats_.cached > 0) {
            release_locked();
            p = raw_.allocate(size);
        }
        if (!p) return nullptr;
        ++stats_.driver_allocations;
        live_.emplace(p, block{size, stream, false});
        stats_.in_use += size;
        stats_.reserved += size;
        note_peaks();
        return p;
    }

    // Gives a block back: kept for its stream, or returned to the driver when caching is off or its
    // stream is gone. A pointer this cache did not hand out (or nullptr) is ignored.
    void free(void* p) noexcept {
        if (!p) return;
        const std::lock_guard<std::mutex> lock(m_);
        const auto it = live_.find(p);
        if (it == live_.end()) return;
        const block b = it->second;
        live_.erase(it);
        stats_.in_use -= b.size;
        if (caching_ && !b.orphan) {
            free_.emplace(std::make_pair(key_of(b.stream), b.size), p);
            stats_.cached += b.size;
        } else {
            raw_.release(p);
            stats_.reserved -= b.size;
        }
    }

    // Returns every free block to the driver (the caller has waited for the work that used them:
    // on a GPU the driver's free waits for the device anyway).
    void release_cached() noexcept {
        const std::lock_guard<std::mutex> lock(m_);
        release_locked();
    }

    // The stream a live block was allocated on (nullptr: not a live block of this cache, or its
    // stream is gone).
    const void* stream_of(void* p) const {
        const std::lock_guard<std::mutex> lock(m_);
        const auto it = live_.find(p);
        return it == live_.end() || it->second.orphan ? nullptr : it->second.stream;
    }

    // A stream is destroyed: its free blocks go back to the driver, and its live blocks will when
    // freed, so that a new stream at the same address never inherits them.
    void release_stream(const void* stream) noexcept {
        const std::lock_guard<std::mutex> lock(m_);
        for (auto& [p, b] : live_)
            if (b.stream == stream) b.orphan = true;
        auto it = free_.lower_bound({key_of(stream), 0});
        while (it != free_.end() && it->first.first == key_of(stream)) {
            raw_.release(it->second);
            stats_.cached -= it->first.second;
            stats_.reserved -= it->first.second;
            it = free_.erase(it);
        }
    }

    block_cache_stats stats() const {
        const std::lock_guard<std::mutex> lock(m_);
        return stats_;
    }

    // The peaks restart from what is held now.
    void reset_peaks() {
        const std::lock_guard<std::mutex> lock(m_);
        stats_.peak_in_use = stats_.in_use;
        stats_.peak_reserved = stats_.reserved;
    }

    bool caching() const noexcept { return caching_; }

private:
    struct block {
        std::size_t size;
        const void* stream;
        bool orphan = false;  // its stream was destroyed
    };

    // Streams are ordered by address as integers (pointers to unrelated objects have no order).
    static std::uintptr_t key_of(const void* stream) noexcept { return reinterpret_cast<std::uintptr_t>(stream); }

    void release_locked() noexcept {
        if (free_.empty()) return;
        for (const auto& [key, p] : free_) {
            raw_.release(p);
            stats_.reserved -= key.second;
        }
        free_.clear();
        stats_.cached = 0;
        ++stats_.releases;
    }

    void note_peaks() noexcept {
        if (stats_.in_use > stats_.peak_in_use) stats_.peak_in_use = stats_.in_use;
        if (stats_.reserved > stats_.peak_reserved) stats_.peak_reserved = stats_.reserved;
    }

    Raw raw_;
    bool caching_;
    mutable std::mutex m_;
    std::unordered_map<void*, block> live_;
    std::multimap<std::pair<std::uintptr_t, std::size_t>, void*> free_;  // (stream, size) → block
    block_cache_stats stats_;
};

}  // namespace locost::detail
