// Threads of the CPU backend.
//
// One setting, locost::set_num_threads(n), governs both pools the CPU backend uses: OpenMP (our
// own parallel loops: per-channel convolution groups, kernel generation, row-wise elementwise
// work) and OpenBLAS's (inside GEMMs, when OpenBLAS is the GEMM). The two never run at the same
// time: a GEMM is always called from outside our parallel regions, and GEMMs issued from inside a
// parallel region (small per-channel products) go to Eigen's kernels, which run serially there.
#pragma once
#include <omp.h>

#include <Eigen/Core>

#include <algorithm>
#include <cstdint>
#include <thread>

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
    openblas_set_num_threads(n);
#endif
}

inline int num_threads() { return omp_get_max_threads(); }

namespace cpu_detail {

// f(i) for i in [0, n), split statically over the OpenMP threads (even work).
template <class F>
void parallel_for(std::int64_t n, F&& f) {
    if (n <= 1 || omp_in_parallel()) {
        for (std::int64_t i = 0; i < n; ++i) f(i);
        return;
    }
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) f(i);
}

// f(i, thread) for i in [0, n), handed out one at a time (uneven work); `thread` indexes
// per-thread scratch in [0, num_threads()).
template <class F>
void parallel_for_dynamic(std::int64_t n, F&& f) {
    if (n <= 1 || omp_in_parallel()) {
        for (std::int64_t i = 0; i < n; ++i) f(i, 0);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < n; ++i) f(i, omp_get_thread_num());
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

} // namespace cpu_detail
} // namespace locost
