// Asynchronous signals kept away from the threads that compute.
//
// A signal handler that runs on a thread while that thread is inside oneDNN's JIT-compiled
// float32 GEMM (Debian's libdnnl 2.6) can corrupt the heap: random SIGINTs into 16K-token
// encodes, with a handler that does nothing at all, made glibc abort ("corrupted size vs.
// prev_size") within ten rounds; with the signal blocked on the computing thread, never. A
// program that handles signals (Python does, for Ctrl-C) and calls locost therefore computes
// under a signal_shield: asynchronous signals are blocked on the calling thread and on the
// threads of its OpenMP pool, so the kernel hands them to another thread of the process, whose
// handler runs outside the kernels. The handler should only note the signal (as Python's does);
// the program checks the note at the library's progress points (a callback may throw).
//
// The process must keep a thread that does not block them, or a signal waits until the shield
// ends. Synchronous signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT) are never
// blocked: they belong to the thread that caused them. The pool's threads stay blocked after the
// shield ends: they run only OpenMP work, and threads the pool adds later inherit the calling
// thread's mask, blocked while a shield is up.
#pragma once
#include <omp.h>
#include <pthread.h>

#include <csignal>

namespace locost {

// The signals a signal_shield blocks: every signal but the synchronous ones.
inline sigset_t asynchronous_signals() {
    sigset_t s;
    sigfillset(&s);
    for (int sync : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT}) sigdelset(&s, sync);
    return s;
}

class signal_shield {
public:
    signal_shield() {
        const sigset_t async = asynchronous_signals();
        pthread_sigmask(SIG_BLOCK, &async, &saved_);
        if (!omp_in_parallel()) {
#pragma omp parallel
            pthread_sigmask(SIG_BLOCK, &async, nullptr);
        }
    }
    ~signal_shield() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
    signal_shield(const signal_shield&) = delete;
    signal_shield& operator=(const signal_shield&) = delete;

private:
    sigset_t saved_;
};

}  // namespace locost
