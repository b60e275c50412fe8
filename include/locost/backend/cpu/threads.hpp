// Threads of the CPU backend.
//
// One pool: OpenMP. locost::set_num_threads(n) sets it (default: all hardware threads). GEMMs
// split their work over it too, each slice a single-threaded OpenBLAS call (gemm.hpp says why);
// OpenBLAS's own pool is set to one thread.
#pragma once
#include <omp.h>

#include <Eigen/Core>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <thread>

#include "../../core/interrupt.hpp"

#ifdef LOCOST_USE_OPENBLAS
#include <cblas.h>
#endif

namespace locost {

// Worker threads for everything the CPU backend runs; n <= 0 means all hardware threads.
inline void set_num_threads(int n) {
    if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    omp_set_num_threads(n);
    Eigen::setNbThreads(n);
#ifdef LOCOST_USE_OPENBLAS
    openblas_set_num_threads(1);  // gemm.hpp splits products over the OpenMP threads itself
#endif
}

inline int num_threads() { return omp_get_max_threads(); }

// Denormal numbers (|x| < 2^-126 in float32) take a microcode path on x86 that is tens of times
// slower than normal arithmetic: a checkpoint with denormal weights (or states that decay into
// them) slows an encoder several times over while changing no result that matters (they are 0
// to 37 decimal places). flush_denormals() sets FTZ (results flushed to 0) and DAZ (inputs read
// as 0) in the calling thread and in every thread of the OpenMP pool; threads the pool creates
// later inherit the calling thread's mode. The tool calls it at start; a program that embeds
// locost calls it once before computing (it changes the floating-point mode of those threads).
inline void flush_denormals() {
#if defined(__SSE__) || defined(__x86_64__)
    constexpr unsigned ftz_daz = 0x8040;  // MXCSR bits 15 (FTZ) and 6 (DAZ)
    __builtin_ia32_ldmxcsr(__builtin_ia32_stmxcsr() | ftz_daz);
#pragma omp parallel
    __builtin_ia32_ldmxcsr(__builtin_ia32_stmxcsr() | ftz_daz);
#elif defined(__aarch64__)
    constexpr unsigned long fz = 1ul << 24;  // FPCR.FZ: denormal inputs and results read as 0
    __builtin_aarch64_set_fpcr64(__builtin_aarch64_get_fpcr64() | fz);
#pragma omp parallel
    __builtin_aarch64_set_fpcr64(__builtin_aarch64_get_fpcr64() | fz);
#endif
}

// Whether the calling thread flushes denormals (x86: MXCSR's FTZ and DAZ; aarch64: FPCR.FZ;
// elsewhere false).
inline bool denormals_flushed() {
#if defined(__SSE__) || defined(__x86_64__)
    return (__builtin_ia32_stmxcsr() & 0x8040u) == 0x8040u;
#elif defined(__aarch64__)
    return (__builtin_aarch64_get_fpcr64() & (1ul << 24)) != 0;
#else
    return false;
#endif
}

namespace cpu_detail {

// Runs the calling thread's interrupt_check (core/interrupt.hpp) when it is outside a parallel
// region; inside guarded_loop's region, thread 0 checks between pieces of work instead.
inline void poll_interrupt() {
    if (interrupt_check::installed() && !omp_in_parallel()) interrupt_check::poll();
}

// What a parallel region's threads throw must not leave the region (OpenMP would call
// std::terminate: an allocation failing in one thread's buffer aborted the whole process, and a
// Python interpreter with it). A failure_slot keeps the first exception, tells the other threads
// to skip the work not begun, and rethrows it once every thread has left the region.
class failure_slot {
public:
    bool stopped() const noexcept { return stop_.load(std::memory_order_relaxed); }
    // Runs f(); an exception it throws is kept (the first one) instead of propagating.
    template <class F>
    void run(F&& f) noexcept {
        try {
            f();
        } catch (...) {
            if (!stop_.exchange(true)) failure_ = std::current_exception();
        }
    }
    void rethrow() const {
        if (failure_) std::rethrow_exception(failure_);
    }

private:
    std::atomic<bool> stop_{false};
    std::exception_ptr failure_;
};

// f(i, thread) for i in [0, n) over the OpenMP threads, statically or one at a time; with
// `check`, the calling thread's interrupt_check is run once before the region and then on thread
// 0 (the calling thread) before each of its iterations. (Before the region too: with dynamic
// scheduling the other threads can take every iteration, on a loaded machine or under an
// emulator, and the loop would not have checked at all.) What f or the check throws is rethrown
// after the region (failure_slot), the iterations not begun skipped.
template <class F>
void guarded_loop(std::int64_t n, bool dynamic, bool check, F& f) {
    std::optional<interrupt_check::held> held;  // loops nested in a piece (serial or not) do not check
    if (check) {
        held.emplace();
        held->poll();
    }
    failure_slot failure;
    auto body = [&](std::int64_t i, int t) {
        if (failure.stopped()) return;
        failure.run([&] {
            if (held && t == 0) held->poll();
            f(i, t);
        });
    };
    if (dynamic) {
#pragma omp parallel for schedule(dynamic, 1)
        for (std::int64_t i = 0; i < n; ++i) body(i, omp_get_thread_num());
    } else {
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < n; ++i) body(i, omp_get_thread_num());
    }
    failure.rethrow();
}

// body(thread, threads) once on each of `threads` OpenMP threads; what a thread throws is
// rethrown after the region (failure_slot).
template <class F>
void parallel_region(int threads, F&& body) {
    failure_slot failure;
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        failure.run([&] { body(t, nt); });
    }
    failure.rethrow();
}

// f(i) for i in [0, n), split statically over the OpenMP threads (even work).
template <class F>
void parallel_for(std::int64_t n, F&& f) {
    if (n <= 1 || omp_in_parallel()) {
        poll_interrupt();
        for (std::int64_t i = 0; i < n; ++i) f(i);
        return;
    }
    auto g = [&](std::int64_t i, int) { f(i); };
    guarded_loop(n, false, interrupt_check::installed(), g);
}

// f(i, thread) for i in [0, n), handed out one at a time (uneven work); `thread` indexes
// per-thread scratch in [0, num_threads()).
template <class F>
void parallel_for_dynamic(std::int64_t n, F&& f) {
    if (n <= 1 || omp_in_parallel()) {
        poll_interrupt();
        for (std::int64_t i = 0; i < n; ++i) f(i, 0);
        return;
    }
    guarded_loop(n, true, interrupt_check::installed(), f);
}

// Row ranges [begin, end) of about `grain` rows each, split statically.
template <class F>
void parallel_rows(std::int64_t rows, std::int64_t grain, F&& f) {
    const std::int64_t chunks = std::max<std::int64_t>(1, (rows + grain - 1) / grain);
    parallel_for(chunks, [&](std::int64_t c) {
        const std::int64_t b = rows * c / chunks, e = rows * (c + 1) / chunks;
        if (b < e) f(b, e);
    });
}

}  // namespace cpu_detail
}  // namespace locost

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace locost::cpu_detail {

// Flushes denormal floats to zero on this thread while it lives (x86 MXCSR FTZ + DAZ), and
// restores the previous mode. Used around work whose values decay through the denormal range
// (S4D kernels e^(dt·A·l), their spectra; aarch64: FPCR.FZ): on x86 each denormal operand costs a microcode assist
// of ~100 cycles, which made kernel generation 5–10× slower. Values below 1.2e-38 do not
// matter to results held to 1e-5 relative.
class flush_denormals {
public:
#if defined(__SSE__) || defined(__x86_64__)
    flush_denormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
    ~flush_denormals() { _mm_setcsr(saved_); }

private:
    unsigned saved_;
#elif defined(__aarch64__)
    flush_denormals() : saved_(__builtin_aarch64_get_fpcr64()) { __builtin_aarch64_set_fpcr64(saved_ | (1ul << 24)); }
    ~flush_denormals() { __builtin_aarch64_set_fpcr64(saved_); }

private:
    unsigned long saved_;
#else
    flush_denormals() {}  // (user-provided: a variable of this type is not "unused")
#endif
};

}  // namespace locost::cpu_detail
