// The caching allocator the device backends share (backend/block_cache.hpp), over a counting
// driver: size classes, reuse per stream, the waste limit, release on refusal, peaks.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <locost/backend/block_cache.hpp>
#include <locost/locost.hpp>
#include <map>

#include "helpers.hpp"

namespace {
// The driver side of the caching allocator's tests: malloc under a capacity, with the live
// blocks known so that a leak or a double release shows.
struct counted_driver {
    struct state {
        std::size_t capacity = 0, held = 0, refusals = 0;
        std::map<void*, std::size_t> live;
    };
    state* s = nullptr;
    void* allocate(std::size_t bytes) noexcept {
        if (s->held + bytes > s->capacity) {
            ++s->refusals;
            return nullptr;
        }
        void* p = std::malloc(bytes);
        s->live[p] = bytes;
        s->held += bytes;
        return p;
    }
    void release(void* p) noexcept {
        const auto it = s->live.find(p);
        CHECK(it != s->live.end());  // never a pointer the driver did not give, nor one twice
        if (it == s->live.end()) return;
        s->held -= it->second;
        s->live.erase(it);
        std::free(p);
    }
};
}  // namespace

TEST_CASE("block_cache: rounding, reuse per stream, the waste limit, release on refusal, peaks, caching off") {
    using cache_t = locost::detail::block_cache<counted_driver>;
    constexpr std::size_t MiB = std::size_t{1} << 20;
    CHECK(cache_t::rounded(1) == 512);
    CHECK(cache_t::rounded(512) == 512);
    CHECK(cache_t::rounded(513) == 1024);
    CHECK(cache_t::rounded(MiB) == MiB);
    CHECK(cache_t::rounded(4097) == 4608);
    CHECK(cache_t::rounded(MiB + 1) == MiB + MiB / 8);      // eight classes per octave
    CHECK(cache_t::rounded(17 * MiB) == 18 * MiB);          // 2 MiB steps from 16 MiB to 32 MiB
    CHECK(cache_t::rounded(100'000'000) == 12 * 8 * MiB);   // 64 MiB / 8 = 8 MiB steps
    for (std::size_t b = 1; b < 64 * MiB; b = b * 3 + 7) {  // never more than 1/8 (or 511 bytes) added
        CHECK(cache_t::rounded(b) >= b);
        CHECK(cache_t::rounded(b) <= b + std::max<std::size_t>(b / 8, 511));
    }
    CHECK(cache_t::rounded(3 * (std::size_t{1} << 30)) == 3 * (std::size_t{1} << 30));  // a multiple of 256 MiB stays

    counted_driver::state d;
    d.capacity = 64 * MiB;
    int stream_a = 0, stream_b = 0;
    {
        cache_t cache(counted_driver{&d});
        void* p = cache.allocate(1000, &stream_a);
        REQUIRE(p != nullptr);
        CHECK(d.held == 1024);
        cache.free(p);
        CHECK(d.held == 1024);  // kept
        CHECK(cache.stats().cached == 1024);
        CHECK(cache.allocate(900, &stream_a) == p);  // same stream, same class: reused
        CHECK(cache.stats().reuses == 1);
        void* q = cache.allocate(900, &stream_b);  // another stream never gets a block in use or cached by a
        CHECK(q != p);
        cache.free(p);
        void* r = cache.allocate(600, &stream_b);  // stream_a's free block is not stream_b's
        CHECK(r != p);
        CHECK(cache.stats().driver_allocations == 3);
        cache.free(q);
        cache.free(r);

        // The waste limit: a free 10 MiB block does not serve 2 MiB, but serves 9 MiB.
        void* big = cache.allocate(10 * MiB, &stream_a);
        cache.free(big);
        void* small = cache.allocate(2 * MiB, &stream_a);
        CHECK(small != big);
        CHECK(cache.allocate(9 * MiB, &stream_a) == big);
        cache.free(small);
        cache.free(big);
        const auto before = cache.stats();
        CHECK(before.in_use == 0);
        CHECK(before.reserved == d.held);
        CHECK(before.cached == d.held);
        CHECK(before.peak_reserved == 3 * 1024 + 12 * MiB);

        // A request the driver refuses while blocks are cached: they go back and it is tried again.
        cache.reset_peaks();
        void* huge = cache.allocate(60 * MiB, &stream_b);
        REQUIRE(huge != nullptr);
        CHECK(d.refusals == 1);
        CHECK(cache.stats().releases == 1);
        CHECK(cache.stats().cached == 0);
        CHECK(d.held == 60 * MiB);
        CHECK(cache.stats().peak_reserved == 60 * MiB);
        // One the driver refuses with nothing cached: nullptr, and nothing changes.
        CHECK(cache.allocate(8 * MiB, &stream_b) == nullptr);
        CHECK(cache.stats().in_use == 60 * MiB);
        cache.free(huge);

        // A destroyed stream's blocks go back; other streams' stay.
        void* a1 = cache.allocate(4096, &stream_a);
        void* b1 = cache.allocate(4096, &stream_b);
        cache.free(a1);
        cache.free(b1);
        cache.release_stream(&stream_b);
        CHECK(cache.stats().cached == 4096);
        CHECK(d.held == 4096);
        CHECK(d.live.count(a1) == 1);
        // A live block of a destroyed stream goes back to the driver when freed, not to a list a
        // new stream at the same address would take from.
        void* b2 = cache.allocate(4096, &stream_b);
        void* a2 = cache.allocate(8192, &stream_a);
        CHECK(cache.stream_of(b2) == &stream_b);
        CHECK(cache.stream_of(a2) == &stream_a);
        CHECK(cache.stream_of(&stream_a) == nullptr);
        cache.release_stream(&stream_b);
        CHECK(d.live.count(b2) == 1);  // live: still the caller's
        CHECK(cache.stream_of(b2) == nullptr);
        cache.free(b2);
        CHECK(d.live.count(b2) == 0);
        CHECK(cache.stats().cached == 4096);
        cache.free(a2);
        CHECK(cache.stats().cached == 4096 + 8192);
        CHECK(cache.stats().reserved == d.held);
        cache.free(nullptr);
        int foreign = 0;
        cache.free(&foreign);  // not the cache's: ignored, not given to the driver
        CHECK(cache.allocate(0, &stream_a) == nullptr);
    }
    CHECK(d.live.empty());  // the cache's destructor gave back what it kept

    // Caching off: every free is the driver's free, sizes are not rounded.
    {
        cache_t plain(counted_driver{&d}, false);
        void* p = plain.allocate(1000, &stream_a);
        CHECK(d.held == 1000);
        plain.free(p);
        CHECK(d.live.empty());
        CHECK(plain.stats().reserved == 0);
        CHECK(plain.stats().peak_reserved == 1000);
    }
}
