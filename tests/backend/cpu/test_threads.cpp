// The CPU backend's threads (backend/cpu/threads.hpp, backend/cpu/signal_shield.hpp,
// core/interrupt.hpp): denormals flushed on every thread of the pool, asynchronous signals
// blocked on them, and an interrupt_check that stops a parallel loop between its pieces.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <locost/locost.hpp>
#include <string>
#include <thread>
#include <vector>

#include "helpers.hpp"

TEST_CASE("threads: flush_denormals sets FTZ/DAZ in the calling thread and every thread of the OpenMP pool") {
    locost::flush_denormals();
    CHECK(locost::denormals_flushed());
    int flushed = 0, threads = 0;
    volatile float tiny = 1e-39f;  // a denormal: read as 0 under DAZ
#pragma omp parallel reduction(+ : flushed, threads)
    {
        ++threads;
        flushed += locost::denormals_flushed() ? 1 : 0;
        flushed += tiny * 1.0f == 0.0f ? 0 : 100;  // DAZ: the denormal input counts as 0
    }
    CHECK(threads == locost::num_threads());
    CHECK(flushed == threads);
}

TEST_CASE(
    "threads: signal_shield blocks the asynchronous signals on the calling thread and the OpenMP pool, never the synchronous ones, and restores the caller") {
    auto blocked = [](int sig) {
        sigset_t now;
        pthread_sigmask(SIG_BLOCK, nullptr, &now);
        return sigismember(&now, sig) == 1;
    };
    REQUIRE_FALSE(blocked(SIGINT));
    {
        const locost::signal_shield shield;
        CHECK(blocked(SIGINT));
        CHECK(blocked(SIGTERM));
        CHECK(blocked(SIGALRM));
        CHECK_FALSE(blocked(SIGSEGV));
        CHECK_FALSE(blocked(SIGFPE));
        int shielded = 0, threads = 0;
#pragma omp parallel reduction(+ : shielded, threads)
        {
            ++threads;
            shielded += blocked(SIGINT) && blocked(SIGCHLD) && !blocked(SIGBUS) ? 1 : 0;
        }
        CHECK(threads == locost::num_threads());
        CHECK(shielded == threads);
    }
    CHECK_FALSE(blocked(SIGINT));
}

TEST_CASE("threads: an interrupt_check stops a parallel loop between pieces, on 1 and 2 threads, and nests") {
    struct stop_now {};
    const int saved = locost::num_threads();
    for (int threads : {1, 2}) {
        CAPTURE(threads);
        locost::set_num_threads(threads);
        for (bool dynamic : {false, true}) {
            CAPTURE(dynamic);
            auto loop = [&](std::int64_t n, auto&& f) {
                if (dynamic) locost::cpu_detail::parallel_for_dynamic(n, [&](std::int64_t i, int) { f(i); });
                else locost::cpu_detail::parallel_for(n, f);
            };
            // A check that never throws: every iteration runs once, and the check ran once before
            // the region and then on thread 0 before each iteration it took (dynamic: the other
            // thread may take them all, on a loaded machine or under qemu).
            std::vector<std::atomic<int>> runs(1000);
            int checks = 0;
            {
                const locost::interrupt_check count([&] { ++checks; });
                loop(1000, [&](std::int64_t i) { ++runs[static_cast<std::size_t>(i)]; });
            }
            CHECK(std::all_of(runs.begin(), runs.end(), [](const auto& r) { return r.load() == 1; }));
            if (dynamic) CHECK(checks >= 1);
            else CHECK(checks == 1 + 1000 / threads);  // thread 0's share of a static split
            // A check that throws on its 10th call (the one before thread 0's 9th iteration): the
            // exception leaves the loop on the calling thread and the iterations not begun are
            // skipped.
            std::atomic<int> done{0};
            checks = 0;
            {
                const locost::interrupt_check stop([&] {
                    if (++checks == 10) throw stop_now{};
                });
                CHECK_THROWS_AS(loop(1000,
                                     [&](std::int64_t) {
                                         std::this_thread::sleep_for(std::chrono::microseconds(200));
                                         ++done;
                                     }),
                                stop_now);
            }
            CHECK(checks == 10);
            CHECK(done.load() < 1000);
            CHECK(done.load() >= 8);
            // Loops inside a loop's body run serially and do not check (an exception must not
            // leave a parallel region); the outer loop still stops. (Each iteration takes a while:
            // with dynamic scheduling, a body of nothing let the other thread take nearly every
            // iteration before thread 0, the one that checks, had taken 5.)
            checks = 0;
            std::atomic<int> inner{0};
            {
                const locost::interrupt_check stop([&] {
                    if (++checks == 5) throw stop_now{};
                });
                CHECK_THROWS_AS(loop(1000,
                                     [&](std::int64_t) {
                                         std::this_thread::sleep_for(std::chrono::microseconds(100));
                                         locost::cpu_detail::parallel_for(10, [&](std::int64_t) { ++inner; });
                                     }),
                                stop_now);
            }
            CHECK(inner.load() % 10 == 0);
            // Without a check, and once the check is gone, nothing is polled.
            CHECK_FALSE(locost::interrupt_check::installed());
            loop(10, [&](std::int64_t) {});
        }
    }
    // Checks nest: the inner one is in force until it goes, then the outer one again.
    std::string seen;
    {
        const locost::interrupt_check outer([&] { seen += 'o'; });
        {
            const locost::interrupt_check inner([&] { seen += 'i'; });
            locost::interrupt_check::poll();
        }
        locost::interrupt_check::poll();
    }
    locost::interrupt_check::poll();
    CHECK(seen == "io");
    locost::set_num_threads(saved);
}
