// fork() and the OpenMP pool.
//
// GNU OpenMP keeps the threads of a thread's pool alive between parallel regions and has no
// fork handler: a child process inherits the pool's bookkeeping but not its threads, and its first
// parallel region waits for them for ever. A Python multiprocessing.Pool (fork start method)
// whose parent has run locost therefore hangs at its workers' first call. Releasing the forking
// thread's pool just before fork (omp_pause_resource_all, OpenMP 5.0) leaves the child nothing to
// wait for: parent and child each start a new pool at their next parallel region, which costs
// about a tenth of a millisecond. Pools of other threads need nothing: those threads do not exist
// in the child. (OpenBLAS, which the GEMM may use, has fork handlers of its own; FFTW runs without
// threads here.)
#pragma once
#include <omp.h>
#include <pthread.h>

#include <mutex>

namespace locost {

// Registers the release once per process; a program that forks after computing calls it before
// its first fork (the Python module does at import).
inline void release_openmp_pool_at_fork() {
    static std::once_flag once;
    std::call_once(once, [] {
        // (Inside a parallel region the pause returns nonzero and does nothing: a fork from
        // there was never safe.)
        ::pthread_atfork([] { (void)omp_pause_resource_all(omp_pause_soft); }, nullptr, nullptr);
    });
}

}  // namespace locost
